//go:build unix

package fdlimit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestLimitIsTheSoftRlimit(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	got, err := Limit()
	if err != nil || got != uint64(rl.Cur) {
		t.Fatalf("Limit() = %d, %v; want %d", got, err, rl.Cur)
	}
}

func TestOpenCountsDescriptors(t *testing.T) {
	before, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for i := range n {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	after, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines of the test binary may open or close a descriptor
	// meanwhile; the files opened here must show.
	if after-before < n {
		t.Fatalf("open descriptors went from %d to %d after opening %d files", before, after, n)
	}
	left, err := Left()
	lim, _ := Limit()
	if err != nil || left <= 0 || uint64(left) > lim {
		t.Fatalf("Left() = %d, %v with a limit of %d", left, err, lim)
	}
}

func TestAPIConnections(t *testing.T) {
	tests := []struct {
		limit uint64
		want  int
	}{
		{16, MinAPIConnections},
		{256, 64},
		{1024, 256},
		{1 << 20, MaxAPIConnections},
		{^uint64(0), MaxAPIConnections}, // RLIM_INFINITY
	}
	for _, tt := range tests {
		if got := APIConnections(tt.limit); got != tt.want {
			t.Errorf("APIConnections(%d) = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestBudget(t *testing.T) {
	if got := Needed(10, 64); got != BaseReserve+10*PerPipeline+64 {
		t.Fatalf("Needed(10, 64) = %d", got)
	}
	// ulimit -n 256 with 10 pipelines and the automatic API cap of 64:
	// 64 + 160 + 64 = 288 > 256.
	b := Budget{Limit: 256, Needed: Needed(10, APIConnections(256))}
	if !b.Low() {
		t.Fatalf("%+v is not low", b)
	}
	b = Budget{Limit: 1024, Needed: Needed(10, APIConnections(1024))}
	if b.Low() {
		t.Fatalf("%+v is low", b)
	}
	got, err := Check(3, 20)
	if err != nil || got.Needed != Needed(3, 20) || got.Limit == 0 || got.Pipelines != 3 || got.APIConnections != 20 {
		t.Fatalf("Check(3, 20) = %+v, %v", got, err)
	}
}

func TestGaugeCountsAtMostOncePerInterval(t *testing.T) {
	counts := 0
	g := NewGauge(time.Second, func() (int, error) { counts++; return 100 - counts, nil })
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	for range 50 {
		if left, err := g.Left(); err != nil || left != 99 {
			t.Fatalf("Left() = %d, %v; want the first count, 99", left, err)
		}
	}
	now = now.Add(time.Second)
	if left, _ := g.Left(); left != 98 || counts != 2 {
		t.Fatalf("after the interval: left %d after %d counts, want 98 after 2", left, counts)
	}
}

// Many takers within one count are not all told yes, and what they hold
// is taken off later counts until they release it.
func TestGaugeTakeCountsWhatItHandedOut(t *testing.T) {
	free := 100
	g := NewGauge(time.Second, func() (int, error) { return free, nil })
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	var releases []func()
	for range 10 {
		if release, _, ok := g.Take(16, 32); ok {
			releases = append(releases, release)
		}
	}
	if len(releases) != 4 {
		t.Fatalf("granted %d takes of 16 keeping 32 out of 100, want 4", len(releases))
	}
	// A fresh count that does not see the holders' descriptors yet still
	// takes them off.
	now = now.Add(time.Second)
	if left, _ := g.Left(); left != 100-64 {
		t.Fatalf("left %d with 4 holds of 16 open, want 36", left)
	}
	// The holders opened their descriptors and released; the next count
	// sees them.
	for _, r := range releases {
		r()
		r() // twice is once
	}
	free = 100 - 4*3
	now = now.Add(time.Second)
	if left, _ := g.Left(); left != 88 {
		t.Fatalf("left %d after the releases, want the count, 88", left)
	}
	// A refusal is decided on a fresh count: descriptors closed since the
	// last one are seen.
	for {
		if _, _, ok := g.Take(16, 32); !ok {
			break
		}
	}
	free = 1000
	now = now.Add(recountShort)
	if _, _, ok := g.Take(16, 32); !ok {
		t.Fatal("refused on a stale count although descriptors were closed since")
	}
}

// Holders that opened their descriptors before they released them are in
// the count and in what is held both; the gauge never says fewer than
// none are left (it said "-159 left" with 50 runs opening at once).
func TestGaugeNeverReportsFewerThanNoneLeft(t *testing.T) {
	free := 300
	g := NewGauge(time.Second, func() (int, error) { return free, nil })
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	for i := range 50 {
		if _, _, ok := g.Take(4, 32); !ok {
			t.Fatalf("take %d of 4 refused with 300 free", i+1)
		}
	}
	// The 50 holders opened their 200 descriptors and did not release
	// yet; others took 59 more.
	free = 41
	now = now.Add(time.Second)
	_, left, ok := g.Take(4, 32)
	if ok || left != 0 {
		t.Errorf("Take with 41 free and 200 held = left %d, ok %v; want refused with 0 left", left, ok)
	}
	if left, err := g.Left(); err != nil || left != 0 {
		t.Errorf("Left() = %d, %v; want 0", left, err)
	}
}

// When counting itself fails for want of a descriptor, none is left: the
// guards must refuse, not take it for a platform that cannot count.
func TestLeftIsZeroWhenCountingFindsNoDescriptor(t *testing.T) {
	got, err := left(func() (uint64, error) { return 1024, nil },
		func() (int, error) { return 0, &os.PathError{Op: "open", Path: "/proc/self/fd", Err: unix.EMFILE} })
	if err != nil || got != 0 {
		t.Fatalf("left = %d, %v; want 0, nil", got, err)
	}
}
