package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

func TestBadgerDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "created", "by", "open")

	s := openTestBadger(t, dir)
	mustSet(t, s, "kept", "v1")
	mustSet(t, s, "deleted", "v")
	if err := del(ctx, s, []byte("deleted")); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, []Op{{Key: []byte("txn"), Value: []byte("v2"), Expect: &Expect{Absent: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTestBadger(t, dir)
	wantValue(t, s, "kept", "v1")
	wantValue(t, s, "txn", "v2")
	wantMissing(t, s, "deleted")
}

func TestBadgerSecondOpenIsInUse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := openTestBadger(t, dir)

	second, err := OpenBadger(ctx, dir, zaptest.NewLogger(t))
	if err == nil {
		_ = second.Close()
		t.Fatal("second OpenBadger on the same path succeeded, want ErrInUse")
	}
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("got %v, want an error wrapping ErrInUse", err)
	}
	msg := err.Error()
	for _, want := range []string{"database " + dir + " is in use by another conduit process", fmt.Sprintf("(pid %d)", os.Getpid())} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "Cannot acquire") || strings.Contains(msg, "Badger database") {
		t.Errorf("error %q leaks Badger's message", msg)
	}

	// The failed open must not have disturbed the first one.
	mustSet(t, first, "k", "v")

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openTestBadger(t, dir)
	wantValue(t, third, "k", "v")
}

func TestBadgerOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name    string
		ctx     context.Context
		path    string
		wantIs  error
		wantMsg string
	}{
		{name: "path is a file", ctx: context.Background(), path: file, wantMsg: "open badger database at " + file + ": "},
		{name: "empty path", ctx: context.Background(), path: "", wantMsg: "path is empty"},
		{name: "cancelled context", ctx: cancelled, path: t.TempDir(), wantIs: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenBadger(tt.ctx, tt.path, zaptest.NewLogger(t))
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenBadger succeeded, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantMsg)
			}
			if errors.Is(err, ErrInUse) {
				t.Errorf("got %v, which wrongly wraps ErrInUse", err)
			}
		})
	}
}

func TestBadgerCommitTooBig(t *testing.T) {
	ctx := context.Background()
	s := openTestBadger(t, t.TempDir())
	val := make([]byte, 16)
	key := func(i int) []byte { return fmt.Appendf(nil, "%sp/d/%020d", PrefixDedup, i) }
	sets := func(from, to int) []Op {
		ops := make([]Op, 0, to-from)
		for i := from; i < to; i++ {
			ops = append(ops, Op{Key: key(i), Value: val})
		}
		return ops
	}

	// The documented capacity: 10k dedup-sized entries fit in one commit.
	if err := s.Commit(ctx, sets(0, 10_000)); err != nil {
		t.Fatalf("Commit of 10k entries: %v", err)
	}

	// Well beyond what one transaction holds (about 13k entries).
	if err := s.Commit(ctx, sets(10_000, 60_000)); !errors.Is(err, ErrTxnTooBig) {
		t.Fatalf("Commit of 50k entries: got %v, want ErrTxnTooBig", err)
	}
	wantMissing(t, s, string(key(10_000)))
}

// TestBadgerWritesNothingToTheValueLog pins that values of every size the
// store takes stay in the write-ahead log and the tables: Badger writes the
// value log through a mapping that cannot be allocated ahead, so a disk
// filled at once would end the process with SIGBUS there.
func TestBadgerWritesNothingToTheValueLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestBadger(t, dir)
	values := map[string][]byte{
		"conduit/api-pipeline-file/description": bytes.Repeat([]byte("d"), 200<<10),
		"conduit/api-pipeline-file/longest":     bytes.Repeat([]byte("l"), MaxValueBytes),
		"conduit/position/p/s":                  []byte("small"),
	}
	for k, v := range values {
		if err := s.Commit(ctx, []Op{{Key: []byte(k), Value: v}}); err != nil {
			t.Fatalf("Commit %s (%d bytes): %v", k, len(v), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	for _, vlog := range vlogs {
		info, err := os.Stat(vlog)
		if err != nil {
			t.Fatal(err)
		}
		// A clean close cuts a value log file to what it holds: its header
		// only.
		if info.Size() > logHeaderSize {
			t.Errorf("%s holds %d bytes: values were written to the value log", filepath.Base(vlog), info.Size())
		}
	}
	s = openTestBadger(t, dir)
	for k, v := range values {
		got, err := s.Get(ctx, []byte(k))
		if err != nil || !bytes.Equal(got, v) {
			t.Errorf("after reopening, %s: %d bytes, %v; want %d bytes", k, len(got), err, len(v))
		}
	}
}

func TestIsLockHeld(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "unix", err: errors.New(`Cannot acquire directory lock on "/x".  Another process is using this Badger database. err: resource temporarily unavailable`), want: true},
		{name: "windows", err: errors.New(`Cannot create lock file "/x/LOCK".  Another process is using this Badger database err: ...`), want: true},
		{name: "errno wrapped", err: fmt.Errorf("lock: %w", syscall.EWOULDBLOCK), want: true},
		{name: "other", err: errors.New("Manifest has bad magic"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isLockHeld(tt.err); got != tt.want {
				t.Fatalf("isLockHeld(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestBadgerLogsThroughZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := OpenBadger(context.Background(), t.TempDir(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Fatal("Badger logged nothing through zap")
	}
	for _, e := range logs.All() {
		if e.LoggerName != "store" {
			t.Errorf("entry %q logged by %q, want \"store\"", e.Message, e.LoggerName)
		}
		if strings.HasSuffix(e.Message, "\n") {
			t.Errorf("entry %q ends in a newline", e.Message)
		}
	}

	// The level mapping, on the adapter itself.
	core, logs = observer.New(zapcore.DebugLevel)
	l := badgerLogger{zap.New(core).Sugar()}
	l.Debugf("d %d\n", 1)
	l.Infof("i %d\n", 2)
	l.Warningf("w %d\n", 3)
	l.Errorf("e %d\n", 4)
	want := []struct {
		level zapcore.Level
		msg   string
	}{{zapcore.DebugLevel, "d 1"}, {zapcore.DebugLevel, "i 2"}, {zapcore.WarnLevel, "w 3"}, {zapcore.ErrorLevel, "e 4"}}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("entry %d: got %v %q, want %v %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}

// TestBadgerGCStopsOnClose runs the GC loop flat out against writes of the
// largest values, so the race detector sees GC, writers and Close
// together. (No value lands in the value log any more, but a store written
// by an earlier version may hold some there, so GC still runs.)
func TestBadgerGCStopsOnClose(t *testing.T) {
	ctx := context.Background()
	s, err := openBadger(ctx, t.TempDir(), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), openConfig{gcInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, MaxValueBytes)
	for i := range 20 {
		key := fmt.Appendf(nil, "big/%d", i%5)
		if err := put(ctx, s, key, big); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.gcDone:
	default:
		t.Fatal("GC goroutine still running after Close")
	}
}

// The benchmarks measure what a synced write costs on the disk holding
// $TMPDIR; that cost, not Badger, bounds how often the engine may persist.

func BenchmarkBadgerSetSynced(b *testing.B) {
	s := openTestBadger(b, b.TempDir())
	ctx := context.Background()
	key := []byte(PrefixPosition + "pipeline/source")
	val := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		val[0] = byte(i)
		if err := put(ctx, s, key, val); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBadgerSetSyncedParallel shows Badger's group commit: concurrent
// synced writes share fsyncs.
func BenchmarkBadgerSetSyncedParallel(b *testing.B) {
	s := openTestBadger(b, b.TempDir())
	ctx := context.Background()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Appendf(nil, "%s%p", PrefixPosition, pb)
		val := make([]byte, 64)
		for pb.Next() {
			if err := put(ctx, s, key, val); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkBadgerCommitBatch100(b *testing.B) {
	s := openTestBadger(b, b.TempDir())
	ctx := context.Background()
	val := make([]byte, 64)
	keys := make([][]byte, 100)
	b.ReportAllocs()
	n := 0
	for ; b.Loop(); n++ {
		for j := range keys {
			keys[j] = fmt.Appendf(keys[j][:0], "%spipeline/dest/%08d", PrefixDedup, n*100+j)
		}
		ops := make([]Op, 0, len(keys))
		for _, k := range keys {
			ops = append(ops, Op{Key: k, Value: val})
		}
		if err := s.Commit(ctx, ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*100), "ns/key")
}

// crashChildDir names, in a child test process, the directory the child
// commits to before it kills itself.
const crashChildDir = "CONDUIT_TEST_STORE_CRASH_DIR"

// TestBadgerUnsyncedCommitSurvivesAProcessCrash: a commit without a sync
// is in the operating system when it returns, so the SIGKILL of the
// process loses none of it, small values and the largest alike.
func TestBadgerUnsyncedCommitSurvivesAProcessCrash(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("b", MaxValueBytes)
	if dir := os.Getenv(crashChildDir); dir != "" {
		s, err := OpenBadger(ctx, dir, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if err := s.CommitUnsynced(ctx, []Op{set(fmt.Sprint("intent/", i), fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CommitUnsynced(ctx, []Op{set("big", big)}); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadgerUnsyncedCommitSurvivesAProcessCrash$")
	cmd.Env = append(os.Environ(), crashChildDir+"="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not kill itself after its commits (%v):\n%s", err, out)
	}
	s := openTestBadger(t, dir)
	for i := range 100 {
		wantValue(t, s, fmt.Sprint("intent/", i), fmt.Sprint(i))
	}
	wantValue(t, s, "big", big)
}

// TestBadgerFollowsItsWriteAheadLog: a synced commit syncs the
// write-ahead log Badger wrote it to, so the store must follow Badger to
// each new log as memtables fill.
func TestBadgerFollowsItsWriteAheadLog(t *testing.T) {
	ctx := context.Background()
	s := openTestBadger(t, t.TempDir())
	start := s.wal
	value := strings.Repeat("v", 32<<10) // in the write-ahead log, not the value log
	for i := range 600 {                 // about 19 MiB: two memtables fill
		if err := s.Commit(ctx, []Op{set(fmt.Sprint("k", i), value)}); err != nil {
			t.Fatal(err)
		}
	}
	files, err := listStoreFiles(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if s.wal <= start || s.wal != files.highestWAL() {
		t.Fatalf("the store syncs log %d (started at %d), Badger writes to %d", s.wal, start, files.highestWAL())
	}
}
