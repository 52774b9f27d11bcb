package gctuning

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
)

// Why a headroom besides the percentage: runtime.gc-percent 400 lets the
// heap grow to five times what is live, which suits ten thousand idle
// pipelines whose restarts come in bursts, but a source that keeps large
// reads in flight pays it in full. Conduit's PostgreSQL connector holds
// about three fetches of 50,000 rows while it snapshots a table, some
// 150-250 MB live: at 400 the process peaked near 1 GiB, twice a process
// at Go's default. The headroom caps the growth in bytes instead: a small
// heap still grows by gc-percent, a large one by the headroom, and never
// by less than what is live (Go's default).

// HeadroomOff turns the headroom off: the heap grows by gc-percent
// whatever its size.
const HeadroomOff = "off"

// HeadroomAuto scales the headroom with the work the process holds: at
// least autoHeadroomMin, and autoHeadroomPerGoroutine for each goroutine
// it ran at most in the last autoHeadroomMemory (a pipeline runs about
// five). Ten thousand pipelines then keep gc-percent - a fault storm
// restarts them all at once, and a collection then makes every restarting
// goroutine help mark; the runs are down meanwhile, hence the memory -
// while a few pipelines that keep large reads in flight grow their heap
// by autoHeadroomMin, not by five times what they hold.
const HeadroomAuto = "auto"

const (
	autoHeadroomMin          = 128 << 20
	autoHeadroomPerGoroutine = 48 << 10
	autoHeadroomMemory       = 5 * time.Minute
	// autoFloor lets a process of few goroutines and a large heap (a
	// snapshot's reads in flight) grow it by half between collections
	// rather than double it: it collects more often (a snapshot takes
	// about 10% more CPU, still a fifth of Conduit's for the same rows).
	autoFloor = 50
)

// goroutinePeak is the most goroutines seen in about the last
// autoHeadroomMemory.
type goroutinePeak struct {
	count func() int
	now   func() time.Time
	peak  int
	at    time.Time
}

func (g *goroutinePeak) headroom() uint64 {
	n, now := g.count(), g.now()
	if n >= g.peak || now.Sub(g.at) > autoHeadroomMemory {
		g.peak, g.at = n, now
	}
	return autoHeadroom(g.peak)
}

// autoHeadroom is HeadroomAuto's headroom for goroutines goroutines.
func autoHeadroom(goroutines int) uint64 {
	return max(autoHeadroomMin, uint64(goroutines)*autoHeadroomPerGoroutine)
}

// minHeadroom rejects a headroom typed in the wrong unit.
const minHeadroom = 16 << 20

// ParseHeadroom checks a runtime.gc-headroom value and returns it in bytes,
// 0 for HeadroomOff.
func ParseHeadroom(s string) (uint64, error) {
	if s == HeadroomOff {
		return 0, nil
	}
	if s == HeadroomAuto {
		return autoHeadroomMin, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("must be %s, %s or a size such as 256MiB, got %q", HeadroomAuto, HeadroomOff, s)
	}
	if n < minHeadroom {
		return 0, fmt.Errorf("must be at least 16MiB, got %q (%s); write the unit, e.g. 256MiB", s, humanize.IBytes(n))
	}
	return n, nil
}

// Percent is the collector's percentage for a live heap of live bytes:
// gcPercent, unless that would let the heap grow by more than headroom;
// then the percentage that grows it by headroom, but at least 100 (the
// heap may always double, as under Go's default). A headroom of 0 is off.
func Percent(live, headroom uint64, gcPercent int) int {
	return percent(live, headroom, gcPercent, 100)
}

// percent is Percent with the least percentage given.
func percent(live, headroom uint64, gcPercent, floor int) int {
	if headroom == 0 || live == 0 || gcPercent <= floor {
		return gcPercent
	}
	p := float64(headroom) * 100 / float64(live)
	return int(min(max(p, float64(floor)), float64(gcPercent)))
}

// tuner sets the collector's percentage after every collection from the
// live heap that collection found. It runs on the runtime's finalizer
// goroutine: a sentinel object becomes unreachable in every cycle, and
// its finalizer adjusts the percentage and arms a new sentinel, until
// stop.
type tuner struct {
	gcPercent int
	// floor is the least percentage: 100 (the heap may always double, as
	// under Go's default), autoFloor for HeadroomAuto.
	floor    int
	headroom func() uint64
	set      func(int) int
	live     func() uint64
	current  int // only the finalizer goroutine (and start, before it) touch it
	stopped  atomic.Bool
}

// sentinel is large enough to stay out of the tiny allocator, whose
// objects may never be finalized.
type sentinel struct{ _ [32]byte }

// startTuner applies the percentage for the heap live now and keeps it
// up to date after each collection; the function it returns stops that.
func startTuner(gcPercent, floor int, headroom func() uint64, set func(int) int, live func() uint64) func() {
	t := &tuner{gcPercent: gcPercent, floor: floor, headroom: headroom, set: set, live: live, current: gcPercent}
	t.adjust()
	t.arm()
	return func() { t.stopped.Store(true) }
}

func (t *tuner) arm() {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	})
}

func (t *tuner) adjust() {
	if p := percent(t.live(), t.headroom(), t.gcPercent, t.floor); p != t.current {
		t.set(p)
		t.current = p
	}
}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
