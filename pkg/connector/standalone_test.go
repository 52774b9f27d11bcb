//go:build unix

package connector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// pluginDir holds the test plugin (testdata/plugin), built once by
// TestMain, as "testplugin" and under the aliases that select its
// misbehaviours.
var pluginDir string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "conduit-connector-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "testplugin")
	build := exec.Command("go", "build", "-o", bin, "./testdata/plugin")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test plugin: %v\n%s", err, out)
		return 1
	}
	for _, alias := range []string{"hang", "crash", "proto2", "sourceonly", "stubborn", "conduitv1"} {
		if err := os.Symlink(bin, filepath.Join(dir, alias)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	pluginDir = dir
	return m.Run()
}

// standaloneHarness builds standalone connectors whose log the test reads.
type standaloneHarness struct {
	t    *testing.T
	reg  *Registry
	logs *observer.ObservedLogs
	log  *zap.Logger
}

func newStandaloneHarness(t *testing.T, cfg StandaloneConfig) *standaloneHarness {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = pluginDir
	}
	core, logs := observer.New(zapcore.DebugLevel)
	return &standaloneHarness{
		t:    t,
		reg:  NewRegistry(Builtin()...).WithStandalone(NewStandaloneHost(cfg)),
		logs: logs,
		log:  zap.New(core),
	}
}

// config is a connector config whose logger carries the ids, as the
// runtime's does.
func (h *standaloneHarness) config(id string, settings map[string]string) Config {
	return Config{
		PipelineID:  "p1",
		ConnectorID: id,
		Settings:    settings,
		Logger:      h.log.With(zap.String("pipeline_id", "p1"), zap.String("connector_id", id)),
	}
}

func (h *standaloneHarness) source(name string, settings map[string]string) *standaloneSource {
	h.t.Helper()
	src, err := h.reg.NewSource("standalone:"+name, h.config("src", settings))
	if err != nil {
		h.t.Fatalf("NewSource: %v", err)
	}
	return src.(*standaloneSource)
}

func (h *standaloneHarness) destination(name string, settings map[string]string) *standaloneDestination {
	h.t.Helper()
	dst, err := h.reg.NewDestination("standalone:"+name, h.config("dst", settings))
	if err != nil {
		h.t.Fatalf("NewDestination: %v", err)
	}
	return dst.(*standaloneDestination)
}

// waitLog waits until the plugin wrote line to stream and returns the entry.
func (h *standaloneHarness) waitLog(stream, line string) observer.LoggedEntry {
	h.t.Helper()
	var found observer.LoggedEntry
	clocktest.Eventually(h.t, func() bool {
		for _, e := range h.logs.FilterMessage(line).All() {
			if e.ContextMap()["stream"] == stream {
				found = e
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("the plugin did not write %q to %s; log:\n%s", line, stream, h.dump())
	})
	return found
}

func (h *standaloneHarness) dump() string {
	var b strings.Builder
	for _, e := range h.logs.All() {
		fmt.Fprintf(&b, "  %s %s %v\n", e.Level, e.Message, e.ContextMap())
	}
	return b.String()
}

// assertGone fails unless the process of p was reaped and no longer exists.
func assertGone(t *testing.T, p *pluginProcess) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	if err := syscall.Kill(p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("plugin process %d still exists (kill 0: %v)", p.cmd.Process.Pid, err)
	}
	if p.dir != "" {
		if _, err := os.Stat(p.dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("private directory %s still exists (%v)", p.dir, err)
		}
	}
}

// result runs f in a goroutine and returns its error within 10s.
func result(t *testing.T, f func() error) <-chan error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func wait(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

func TestStandaloneSourceRoundTrip(t *testing.T) {
	h := newStandaloneHarness(t, StandaloneConfig{})
	ctx := context.Background()
	goroutines := runtime.NumGoroutine()
	src := h.source("testplugin@v0.0.1", map[string]string{"records": "3"})
	if err := src.Open(ctx, record.Position("10")); err != nil {
		t.Fatalf("Open: %v\nlog:\n%s", err, h.dump())
	}
	p := src.p

	fi, err := os.Stat(p.dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("private directory %s: mode %v, %v; want 0700", p.dir, fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Join(p.dir, "plugin.sock")); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Errorf("socket: %v, %v", fi, err)
	}
	h.waitLog("stdout", "configure pipeline=p1 connector=src")

	batch := make([]record.Record, 10)
	n, err := src.Read(ctx, batch)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 records", n, err)
	}
	// The test plugin has no ReadStream (like one built with an older
	// SDK): the records above came through the fallback to Read.
	if got := h.logs.FilterMessageSnippet("has no ReadStream").Len(); got != 1 {
		t.Errorf("%d log lines about the fallback to Read, want 1; log:\n%s", got, h.dump())
	}
	var positions []record.Position
	for i, r := range batch[:n] {
		id := int64(11 + i)
		if string(r.Position) != fmt.Sprint(id) || r.Operation != record.OperationCreate ||
			string(r.Key.Bytes()) != fmt.Sprint("k", id) || r.Metadata["test"] != "yes" {
			t.Errorf("record %d = %+v", i, r)
		}
		after, ok := r.Payload.After.(record.StructuredData)
		if !ok || after["id"] != id || after["name"] != fmt.Sprint("rec", id) {
			t.Errorf("record %d payload.after = %#v", i, r.Payload.After)
		}
		positions = append(positions, r.Position)
	}
	if err := src.Ack(ctx, positions); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	e := h.waitLog("stdout", "ack 11,12,13")
	if f := e.ContextMap(); f["pipeline_id"] != "p1" || f["connector_id"] != "src" {
		t.Errorf("plugin output logged with fields %v, want pipeline_id and connector_id", f)
	}

	if err := src.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	h.waitLog("stdout", "teardown source")
	assertGone(t, p)
	if err := src.Teardown(ctx); err != nil {
		t.Errorf("second Teardown: %v", err)
	}

	clocktest.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines }, func() string {
		buf := make([]byte, 1<<20)
		return fmt.Sprintf("%d goroutines after Teardown, %d before Open:\n%s",
			runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
	})
}

func TestStandaloneDestinationWrite(t *testing.T) {
	ctx := context.Background()
	recs := func(n int) []record.Record {
		out := make([]record.Record, n)
		for i := range out {
			out[i] = record.Record{
				Position:  record.Position(fmt.Sprint(i + 1)),
				Operation: record.OperationCreate,
				Payload:   record.Change{After: record.StructuredData{"id": int64(i + 1)}},
			}
		}
		return out
	}

	t.Run("all written", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		dst := h.destination("testplugin", nil)
		if err := dst.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		if n, err := dst.Write(ctx, recs(3)); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v; want 3, nil", n, err)
		}
		// The encoding buffer is reused: a second, smaller batch.
		if n, err := dst.Write(ctx, recs(1)); n != 1 || err != nil {
			t.Fatalf("second Write = %d, %v; want 1, nil", n, err)
		}
		for _, line := range []string{`write 1 {"id":1}`, `write 2 {"id":2}`, `write 3 {"id":3}`} {
			h.waitLog("stdout", line)
		}
		if err := dst.Teardown(ctx); err != nil {
			t.Fatalf("Teardown: %v", err)
		}
		h.waitLog("stdout", "teardown destination")
		assertGone(t, dst.p)
	})

	t.Run("partial write with a fatal error", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		dst := h.destination("testplugin", map[string]string{
			"write.fail-at": "1",
			"write.error":   `{"code":422,"message":"record 2 does not fit the table"}`,
		})
		if err := dst.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer dst.Teardown(ctx)
		n, err := dst.Write(ctx, recs(3))
		c := cerrors.Classify(err)
		if n != 1 || c.Class != cerrors.ClassFatal || c.Code != 422 || c.Source != cerrors.SourceJSON ||
			c.Message != `standalone connector "testplugin": write: record 2 does not fit the table` {
			t.Fatalf("Write = %d, %v (%+v); want 1 and the plugin's 422", n, err, c)
		}
	})

	t.Run("a record the encoding cannot carry", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		dst := h.destination("testplugin", nil)
		if err := dst.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer dst.Teardown(ctx)
		batch := recs(3)
		batch[1].Payload.After = record.StructuredData{"ch": make(chan int)}
		n, err := dst.Write(ctx, batch)
		if n != 1 || cerrors.Classify(err).Class != cerrors.ClassFatal || !strings.Contains(err.Error(), "unsupported value type chan int") {
			t.Fatalf("Write = %d, %v; want 1 and a fatal encoding error", n, err)
		}
		h.waitLog("stdout", `write 1 {"id":1}`)
	})

	t.Run("a write guard that refuses after the encoding", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		dst := h.destination("testplugin", nil)
		if err := dst.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer dst.Teardown(ctx)
		lost := errors.New("the lease may have expired")
		refused := writeguard.With(ctx, func() error { return lost })
		refusedBatch := recs(3)[2:]
		n, err := dst.Write(refused, refusedBatch)
		if n != 0 || !errors.Is(err, lost) || cerrors.Classify(err).Class != cerrors.ClassTransient {
			t.Fatalf("Write = %d, %v; want 0 and the guard's error, transient", n, err)
		}
		// The plugin answers in order: once the allowed batch is in its
		// log, the refused one would be there before it.
		if n, err := dst.Write(ctx, recs(1)); n != 1 || err != nil {
			t.Fatalf("allowed Write = %d, %v", n, err)
		}
		h.waitLog("stdout", `write 1 {"id":1}`)
		if got := h.logs.FilterMessage(`write 3 {"id":3}`).Len(); got != 0 {
			t.Fatalf("the plugin wrote the refused record; log:\n%s", h.dump())
		}
	})
}

func TestStandaloneStartFailures(t *testing.T) {
	// Relative connectors.path, as users write it.
	work := t.TempDir()
	t.Chdir(work)
	local := filepath.Join(work, "connectors")
	if err := os.MkdirAll(filepath.Join(local, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"notexec": {"#!/bin/sh\nexit 0\n", 0o644},
		"garbage": {"this is not a program\n", 0o755},
	} {
		if err := os.WriteFile(filepath.Join(local, name), []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name        string
		cfg         StandaloneConfig
		plugin      string
		destination bool
		want        string // the whole message, or a prefix when wantPrefix
		wantPrefix  bool
	}{
		{name: "missing", cfg: StandaloneConfig{Dir: "./connectors"}, plugin: "flaky",
			want: fmt.Sprintf(`standalone connector "flaky": executable %s not found, and no executable in connectors.path (./connectors) is a Conduit connector named "flaky"`,
				filepath.Join(local, "flaky"))},
		{name: "not executable", cfg: StandaloneConfig{Dir: "./connectors"}, plugin: "notexec",
			want: fmt.Sprintf(`standalone connector "notexec": executable %s is not executable (connectors.path is ./connectors)`,
				filepath.Join(local, "notexec"))},
		{name: "a directory", cfg: StandaloneConfig{Dir: "./connectors"}, plugin: "adir",
			want: fmt.Sprintf(`standalone connector "adir": executable %s is not executable (connectors.path is ./connectors)`,
				filepath.Join(local, "adir"))},
		{name: "not a program", cfg: StandaloneConfig{Dir: "./connectors"}, plugin: "garbage", wantPrefix: true,
			want: fmt.Sprintf(`standalone connector "garbage": starting %s: `, filepath.Join(local, "garbage"))},
		{name: "never listens", cfg: StandaloneConfig{Dir: pluginDir, StartTimeout: 300 * time.Millisecond}, plugin: "hang",
			wantPrefix: true,
			want: fmt.Sprintf(`standalone connector "hang": executable %s did not answer the handshake within 300ms (connectors.start-timeout)`,
				filepath.Join(pluginDir, "hang"))},
		{name: "exits at once", cfg: StandaloneConfig{Dir: pluginDir}, plugin: "crash",
			want: fmt.Sprintf(`standalone connector "crash": executable %s exited before the handshake: exit status 2; `+
				`last stderr lines: loading config | boom: missing license key`, filepath.Join(pluginDir, "crash"))},
		{name: "other protocol", cfg: StandaloneConfig{Dir: pluginDir}, plugin: "proto2",
			want: fmt.Sprintf(`standalone connector "proto2": executable %s speaks plugin protocol version 2; this runtime speaks version 1`,
				filepath.Join(pluginDir, "proto2"))},
		{name: "wrong role", cfg: StandaloneConfig{Dir: pluginDir}, plugin: "sourceonly", destination: true,
			want: `standalone connector "sourceonly": plugin test-plugin v0.0.1 cannot be a destination`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newStandaloneHarness(t, tt.cfg)
			ctx := context.Background()
			// Building does no I/O, so it succeeds whatever the file is.
			var open, teardown func() error
			var p *pluginProcess
			if tt.destination {
				dst := h.destination(tt.plugin, nil)
				open, teardown, p = func() error { return dst.Open(ctx) }, func() error { return dst.Teardown(ctx) }, dst.p
			} else {
				src := h.source(tt.plugin, nil)
				open, teardown, p = func() error { return src.Open(ctx, nil) }, func() error { return src.Teardown(ctx) }, src.p
			}
			start := time.Now()
			err := open()
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if got := err.Error(); got != tt.want && !(tt.wantPrefix && strings.HasPrefix(got, tt.want)) {
				t.Errorf("Open error:\n got %s\nwant %s", got, tt.want)
			}
			if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal {
				t.Errorf("classified %+v, want fatal", c)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Open took %s", d)
			}
			// A failed start leaves nothing behind, and Teardown is still safe.
			assertGone(t, p)
			if err := teardown(); err != nil {
				t.Errorf("Teardown after a failed Open: %v", err)
			}
		})
	}
}

func TestStandaloneErrorClassification(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		setting   string
		value     string
		wantClass cerrors.Class
		wantCode  int
		wantSrc   cerrors.Source
		wantMsg   string
	}{
		{name: "fatal code in JSON", setting: "read.error", value: `{"code":422,"message":"record 7 is invalid"}`,
			wantClass: cerrors.ClassFatal, wantCode: 422, wantSrc: cerrors.SourceJSON,
			wantMsg: `standalone connector "testplugin": read: record 7 is invalid`},
		{name: "transient code in JSON", setting: "read.error", value: `{"code":503,"message":"upstream is down"}`,
			wantClass: cerrors.ClassTransient, wantCode: 503, wantSrc: cerrors.SourceJSON,
			wantMsg: `standalone connector "testplugin": read: upstream is down`},
		{name: "plain text", setting: "read.error", value: "disk on fire",
			wantClass: cerrors.ClassTransient, wantSrc: cerrors.SourceDefault,
			wantMsg: `standalone connector "testplugin": read: disk on fire`},
		{name: "bad setting at configure", setting: "configure.error", value: `{"code":400,"message":"setting \"table\" is required"}`,
			wantClass: cerrors.ClassFatal, wantCode: 400, wantSrc: cerrors.SourceJSON,
			wantMsg: `standalone connector "testplugin": configure: setting "table" is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newStandaloneHarness(t, StandaloneConfig{})
			src := h.source("testplugin", map[string]string{tt.setting: tt.value, "records": "1"})
			defer src.Teardown(ctx)
			err := src.Open(ctx, nil)
			if err == nil {
				_, err = src.Read(ctx, make([]record.Record, 4))
			}
			// The engine wraps it; the classification must survive.
			c := cerrors.Classify(fmt.Errorf("source %q: read: %w", "src", err))
			if c.Class != tt.wantClass || c.Code != tt.wantCode || c.Source != tt.wantSrc ||
				c.Message != `source "src": read: `+tt.wantMsg {
				t.Errorf("error %v classified %+v; want %v, code %d, %v, message %q",
					err, c, tt.wantClass, tt.wantCode, tt.wantSrc, tt.wantMsg)
			}
		})
	}
}

func TestStandaloneProcessDeath(t *testing.T) {
	ctx := context.Background()

	t.Run("killed during a read", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		src := h.source("testplugin", nil)
		if err := src.Open(ctx, nil); err != nil {
			t.Fatalf("Open: %v", err)
		}
		read := result(t, func() error { _, err := src.Read(ctx, make([]record.Record, 4)); return err })
		h.waitLog("stdout", "read waiting")
		if err := syscall.Kill(src.p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := wait(t, read, "Read")
		c := cerrors.Classify(err)
		if c.Class != cerrors.ClassTransient || !strings.HasPrefix(err.Error(), `standalone connector "testplugin" exited: signal: killed; last stderr lines: listening on `) {
			t.Errorf("Read error %v, classified %+v; want a transient exit naming the signal", err, c)
		}
		if err := src.Teardown(ctx); err != nil {
			t.Errorf("Teardown: %v", err)
		}
		assertGone(t, src.p)
	})

	t.Run("killed between calls", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		src := h.source("testplugin", map[string]string{"records": "1"})
		if err := src.Open(ctx, nil); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer src.Teardown(ctx)
		if _, err := src.Read(ctx, make([]record.Record, 4)); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(src.p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := src.Ack(ctx, []record.Position{record.Position("1")})
		if c := cerrors.Classify(err); c.Class != cerrors.ClassTransient || !strings.Contains(err.Error(), `exited: signal: killed`) {
			t.Errorf("Ack error %v, classified %+v; want a transient exit", err, c)
		}
	})

	t.Run("exits with a status", func(t *testing.T) {
		h := newStandaloneHarness(t, StandaloneConfig{})
		dst := h.destination("testplugin", map[string]string{"crash.on": "write"})
		if err := dst.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer dst.Teardown(ctx)
		n, err := dst.Write(ctx, []record.Record{{Position: record.Position("1"), Operation: record.OperationCreate}})
		if c := cerrors.Classify(err); n != 0 || c.Class != cerrors.ClassTransient ||
			!strings.HasPrefix(err.Error(), `standalone connector "testplugin" exited: exit status 3; last stderr lines: `) ||
			!strings.HasSuffix(err.Error(), " | dying") {
			t.Errorf("Write = %d, %v (%+v); want a transient exit with the last stderr line", n, err, c)
		}
	})
}

func TestStandaloneReadCancelled(t *testing.T) {
	h := newStandaloneHarness(t, StandaloneConfig{})
	src := h.source("testplugin", nil)
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	read := result(t, func() error { _, err := src.Read(ctx, make([]record.Record, 4)); return err })
	h.waitLog("stdout", "read waiting")
	start := time.Now()
	cancel()
	if err := wait(t, read, "Read"); err != context.Canceled {
		t.Errorf("Read after cancel = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Read took %s to return after the cancel", d)
	}
	// The plugin is still fine and gets its Teardown.
	if err := src.Teardown(context.Background()); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	h.waitLog("stdout", "teardown source")
	assertGone(t, src.p)
}

func TestStandaloneTeardownKillsAPluginThatIgnoresSIGTERM(t *testing.T) {
	h := newStandaloneHarness(t, StandaloneConfig{StopTimeout: 200 * time.Millisecond})
	src := h.source("stubborn", nil)
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatalf("Open: %v", err)
	}
	start := time.Now()
	if err := src.Teardown(context.Background()); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Teardown took %s", d)
	}
	h.waitLog("stderr", "got SIGTERM, ignoring it")
	if got := src.p.cmd.ProcessState.String(); got != "signal: killed" {
		t.Errorf("the plugin ended with %q, want signal: killed", got)
	}
	assertGone(t, src.p)
}

func TestStandaloneTeardownWithoutOpen(t *testing.T) {
	h := newStandaloneHarness(t, StandaloneConfig{})
	src := h.source("testplugin", nil)
	dst := h.destination("testplugin", nil)
	for range 2 {
		if err := src.Teardown(context.Background()); err != nil {
			t.Errorf("source Teardown: %v", err)
		}
		if err := dst.Teardown(context.Background()); err != nil {
			t.Errorf("destination Teardown: %v", err)
		}
	}
	if _, err := src.Read(context.Background(), make([]record.Record, 1)); !errors.Is(err, errReadBeforeOpen) {
		t.Errorf("Read without Open: %v", err)
	}
}

func TestStandaloneRegistry(t *testing.T) {
	with := NewRegistry(Builtin()...).WithStandalone(NewStandaloneHost(StandaloneConfig{Dir: "./connectors"}))
	without := NewRegistry(Builtin()...)
	tests := []struct {
		name     string
		reg      *Registry
		ref      string
		wantName string
		wantErr  string
	}{
		{name: "standalone", reg: with, ref: "standalone:flaky", wantName: "flaky"},
		{name: "version ignored", reg: with, ref: "standalone:flaky@v1.2.3", wantName: "flaky"},
		{name: "builtin still works", reg: with, ref: "builtin:file", wantName: "file"},
		{name: "path separator", reg: with, ref: "standalone:bin/flaky", wantErr: `no path separators, no ".."`},
		{name: "parent directory", reg: with, ref: "standalone:..", wantErr: `no path separators, no ".."`},
		{name: "escape", reg: with, ref: "standalone:..flaky", wantErr: `must be the name of a file in connectors.path`},
		{name: "no name", reg: with, ref: "standalone:", wantErr: "no plugin name"},
		{name: "no host", reg: without, ref: "standalone:flaky", wantErr: "standalone connectors are not supported yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.reg.Lookup(tt.ref)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrUnknownPlugin) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Lookup(%q) = %v, want an ErrUnknownPlugin containing %q", tt.ref, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Name != tt.wantName {
				t.Fatalf("Lookup(%q) = %+v, %v", tt.ref, p, err)
			}
		})
	}
	// Building a connector for a file that does not exist succeeds: the
	// constructors do no I/O (they also validate pipeline files).
	if _, err := with.NewSource("standalone:nope", Config{}); err != nil {
		t.Errorf("NewSource: %v", err)
	}
	if _, err := with.NewDestination("standalone:nope", Config{}); err != nil {
		t.Errorf("NewDestination: %v", err)
	}
}

// A plugin that does not know the call (built before it existed) does not
// report what it holds: the engine then remembers each batch after
// writing it.
func TestStandaloneDestinationWithoutTheAbilityDoesNotReport(t *testing.T) {
	ctx := context.Background()
	h := newStandaloneHarness(t, StandaloneConfig{})
	dst := h.destination("testplugin", nil)
	if _, _, err := dst.LastPosition(ctx); err == nil {
		t.Fatal("LastPosition before Open returned no error")
	}
	if err := dst.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer dst.Teardown(ctx)
	if last, ok, err := dst.LastPosition(ctx); last != nil || ok || err != nil {
		t.Fatalf("LastPosition = %q, %v, %v; want not known", last, ok, err)
	}
}
