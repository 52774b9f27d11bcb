package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
)

// fakeDisk is a filesystem whose free space the test sets, with a clock the
// test moves; it counts how often it was measured.
type fakeDisk struct {
	*clocktest.Clock
	mu    sync.Mutex
	free  uint64
	calls int
}

func newFakeDisk(free uint64) *fakeDisk {
	return &fakeDisk{Clock: clocktest.New(), free: free}
}

func (d *fakeDisk) freeSpace(string) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return d.free, nil
}

func (d *fakeDisk) set(free uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free = free
}

func (d *fakeDisk) measured() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

const testReserve = 64 << 20

func openOnFakeDisk(t *testing.T, dir string, disk *fakeDisk) (*Badger, error) {
	t.Helper()
	s, err := openBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		openConfig{freeSpace: disk.freeSpace, now: disk.Now, reserve: testReserve})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func wantNoSpace(t *testing.T, err error, dir string) {
	t.Helper()
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("got %v, want an error wrapping ErrNoSpace", err)
	}
	for _, want := range []string{dir, "no space left on device"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := cerrors.Classify(err); got.Code != cerrors.CodeInsufficientSpace || got.Class != cerrors.ClassTransient {
		t.Errorf("classified as %d %v, want 507 transient", got.Code, got.Class)
	}
}

func TestBadgerOpenRefusedOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	disk := newFakeDisk(testReserve - 1)
	if _, err := openOnFakeDisk(t, dir, disk); err == nil {
		t.Fatal("OpenBadger on a full disk succeeded")
	} else {
		wantNoSpace(t, err, dir)
	}
	// The refusal touched nothing: once space is freed the store opens.
	disk.set(testReserve)
	if _, err := openOnFakeDisk(t, dir, disk); err != nil {
		t.Fatalf("OpenBadger after space was freed: %v", err)
	}
}

func TestBadgerWritesRefusedWhileDiskFull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	disk := newFakeDisk(1 << 40)
	s, err := openOnFakeDisk(t, dir, disk)
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, s, "before", "v")

	disk.set(testReserve - 1)
	disk.Advance(spaceCheckInterval)
	wantNoSpace(t, put(ctx, s, []byte("during"), []byte("v")), dir)
	wantNoSpace(t, del(ctx, s, []byte("before")), dir)
	err = s.Commit(ctx, []Op{{Key: []byte("during"), Value: []byte("v"), Expect: &Expect{Absent: true}}})
	wantNoSpace(t, err, dir)
	// Reads go on.
	wantValue(t, s, "before", "v")

	// Refused writes do not measure again until the interval has passed.
	calls := disk.measured()
	for range 100 {
		_ = put(ctx, s, []byte("during"), []byte("v"))
	}
	if got := disk.measured(); got != calls {
		t.Errorf("100 refused writes measured free space %d times, want 0", got-calls)
	}

	disk.set(testReserve + 10<<20)
	disk.Advance(spaceCheckInterval)
	mustSet(t, s, "after", "v")
	wantMissing(t, s, "during")
	wantValue(t, s, "before", "v")
}

func TestSpaceGuardMeasuresRarely(t *testing.T) {
	disk := newFakeDisk(1 << 40)
	g := &spaceGuard{path: "db", reserve: testReserve, free: disk.freeSpace, now: disk.Now, logger: zap.NewNop()}

	// 1,000 small writes within the interval: one measurement.
	for range 1000 {
		if err := g.admit(100); err != nil {
			t.Fatal(err)
		}
	}
	if got := disk.measured(); got != 1 {
		t.Errorf("1000 small writes measured %d times, want 1", got)
	}
	// Past spaceCheckBytes the guard measures again, so a burst cannot
	// outrun the last reading.
	if err := g.admit(spaceCheckBytes); err != nil {
		t.Fatal(err)
	}
	if got := disk.measured(); got != 2 {
		t.Errorf("after a burst of %d bytes: %d measurements, want 2", spaceCheckBytes, got)
	}
	// Past the interval, too.
	disk.Advance(spaceCheckInterval)
	if err := g.admit(1); err != nil {
		t.Fatal(err)
	}
	if got := disk.measured(); got != 3 {
		t.Errorf("after the interval: %d measurements, want 3", got)
	}
}

func TestSpaceGuardKeepsTheReserve(t *testing.T) {
	tests := []struct {
		name   string
		free   uint64
		writes []uint64
		wantOK []bool
	}{
		{name: "under the reserve", free: testReserve - 1, writes: []uint64{1}, wantOK: []bool{false}},
		{name: "at the reserve", free: testReserve, writes: []uint64{0, 1}, wantOK: []bool{true, false}},
		{name: "headroom is used up, not overdrawn", free: testReserve + 1000, writes: []uint64{600, 600, 400}, wantOK: []bool{true, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := newFakeDisk(tt.free)
			g := &spaceGuard{path: "db", reserve: testReserve, free: disk.freeSpace, now: disk.Now, logger: zap.NewNop()}
			for i, n := range tt.writes {
				err := g.admit(n)
				if (err == nil) != tt.wantOK[i] {
					t.Errorf("write %d of %d bytes: got %v, want ok=%v", i, n, err, tt.wantOK[i])
				}
				if err != nil && !errors.Is(err, ErrNoSpace) {
					t.Errorf("write %d: got %v, want ErrNoSpace", i, err)
				}
			}
		})
	}
}

func TestBadgerTranslatesNoSpaceFromBadger(t *testing.T) {
	b := &Badger{path: "/data/db"}
	// Badger flattens the errno into text.
	err := b.translate("set", []byte("k"), errors.New("while writing to file: write /data/db/MANIFEST: no space left on device"))
	wantNoSpace(t, err, "/data/db")
}

func TestBadgerOpenNotWritable(t *testing.T) {
	dir := t.TempDir()
	// A directory where the probe file goes cannot be opened for writing,
	// whoever runs the test (root ignores permission bits).
	if err := os.MkdirAll(filepath.Join(dir, probeFile, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := OpenBadger(context.Background(), dir, zaptest.NewLogger(t))
	if err == nil {
		t.Fatal("OpenBadger succeeded, want an error")
	}
	if want := "database directory " + dir + " is not writable"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
}
