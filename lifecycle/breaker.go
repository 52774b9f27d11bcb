package lifecycle

import (
	"github.com/conduitry/conduit/pkg/clock"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// BreakerConfig configures the dependency breakers
// (pipelines.breakers.*).
type BreakerConfig struct {
	// Threshold is how many pipelines must fail on one dependency within
	// Window for its breaker to open.
	Threshold int
	Window    time.Duration
	// Stagger spreads the restarts of the pipelines a closing breaker
	// releases.
	Stagger time.Duration
}

// Breakers hold the pipelines that fail on a shared dependency (a
// database many pipelines write to) while it is down, so that they do not
// all retry it: when Threshold pipelines fail on the same dependency within
// Window, its breaker opens; the pipeline whose failure opened it is the
// canary and keeps restarting on its schedule, and every other pipeline
// that fails on the dependency waits. When the canary gets a record
// through, the breaker closes and the waiting pipelines restart, spread
// over Stagger. DESIGN 5.3. Safe for concurrent use by every supervisor.
type Breakers struct {
	cfg   BreakerConfig
	clock clock.Clock
	// observe is told every change of a breaker, outside the lock.
	observe func(BreakerChange)

	mu   sync.Mutex
	deps map[string]*breaker
}

// BreakerChange is a breaker opening or closing, for logs and metrics.
type BreakerChange struct {
	Dependency string
	Open       bool
	Canary     string
	// Failed are the pipelines whose failures opened it; Released those
	// its closing releases.
	Failed, Released []string
}

// BreakerState is a breaker as the API shows it.
type BreakerState struct {
	Dependency string
	Open       bool
	OpenedAt   time.Time
	Canary     string
	// Held are the pipelines waiting for it to close.
	Held []string
	// RecentFailures are the pipelines that failed on it within the window.
	RecentFailures []string
}

type breaker struct {
	open     bool
	openedAt time.Time
	canary   string
	// failures are the last failure of each pipeline, for the window.
	failures map[string]time.Time
	held     map[string]func(after time.Duration)
}

// NewBreakers returns breakers with cfg; observe may be nil.
func NewBreakers(cfg BreakerConfig, clk clock.Clock, observe func(BreakerChange)) *Breakers {
	if cfg.Threshold < 1 {
		cfg.Threshold = 1
	}
	return &Breakers{cfg: cfg, clock: clk, observe: observe, deps: map[string]*breaker{}}
}

func (b *Breakers) get(dep string) *breaker {
	br := b.deps[dep]
	if br == nil {
		br = &breaker{failures: map[string]time.Time{}, held: map[string]func(time.Duration){}}
		b.deps[dep] = br
	}
	return br
}

// Fault records that pipeline failed with a transient error on dep and
// says whether it must wait for dep's breaker (hold) instead of
// restarting; release is how the breaker lets it restart, after a delay,
// once it closes. release is called with the breakers' lock released and
// must not block.
func (b *Breakers) Fault(dep, pipeline string, release func(after time.Duration)) (hold bool) {
	now := b.clock.Now()
	var change *BreakerChange
	b.mu.Lock()
	if len(b.deps) >= pruneBreakersAt {
		b.prune(now)
	}
	br := b.get(dep)
	br.failures[pipeline] = now
	for p, at := range br.failures {
		if now.Sub(at) > b.cfg.Window {
			delete(br.failures, p)
		}
	}
	switch {
	case br.open && pipeline == br.canary:
	case br.open:
		br.held[pipeline] = release
		hold = true
	case len(br.failures) >= b.cfg.Threshold:
		br.open, br.openedAt, br.canary = true, now, pipeline
		change = &BreakerChange{Dependency: dep, Open: true, Canary: pipeline, Failed: slices.Sorted(maps.Keys(br.failures))}
	}
	b.mu.Unlock()
	if change != nil && b.observe != nil {
		b.observe(*change)
	}
	return hold
}

// pruneBreakersAt is how many dependencies the breakers track before the
// closed ones whose failures all left the window are forgotten: errors
// name their dependencies, and a connector that puts a request id in the
// name must not grow the map without end.
const pruneBreakersAt = 1024

// prune forgets closed breakers with no failure in the window; the caller
// holds mu.
func (b *Breakers) prune(now time.Time) {
	for dep, br := range b.deps {
		if br.open {
			continue
		}
		recent := false
		for _, at := range br.failures {
			if now.Sub(at) <= b.cfg.Window {
				recent = true
				break
			}
		}
		if !recent {
			delete(b.deps, dep)
		}
	}
}

// Success records that pipeline got a record through after failing on
// dep: when it is the canary of dep's open breaker, the breaker closes and
// releases the pipelines it held, spread over Stagger. Any success also
// clears the pipeline's failure from the window.
func (b *Breakers) Success(dep, pipeline string) {
	b.mu.Lock()
	br := b.deps[dep]
	if br == nil {
		b.mu.Unlock()
		return
	}
	delete(br.failures, pipeline)
	if !br.open || br.canary != pipeline {
		b.mu.Unlock()
		return
	}
	releases, released := b.close(dep, br)
	b.mu.Unlock()
	b.release(releases)
	if b.observe != nil {
		b.observe(BreakerChange{Dependency: dep, Canary: pipeline, Released: released})
	}
}

// close closes br and returns what to release; the caller holds mu and
// calls release after unlocking.
func (b *Breakers) close(dep string, br *breaker) ([]func(), []string) {
	ids := slices.Sorted(maps.Keys(br.held))
	releases := make([]func(), len(ids))
	for i, p := range ids {
		var after time.Duration
		if len(ids) > 1 {
			after = b.cfg.Stagger * time.Duration(i) / time.Duration(len(ids))
		}
		fn := br.held[p]
		releases[i] = func() { fn(after) }
	}
	delete(b.deps, dep)
	return releases, ids
}

func (b *Breakers) release(releases []func()) {
	for _, r := range releases {
		r()
	}
}

// Leave records that pipeline no longer waits on dep nor retries it (it
// was stopped, degraded or deleted). A canary that leaves hands its part
// to a held pipeline, released at once; a breaker with nobody left closes.
func (b *Breakers) Leave(dep, pipeline string) {
	b.mu.Lock()
	br := b.deps[dep]
	if br == nil {
		b.mu.Unlock()
		return
	}
	delete(br.held, pipeline)
	delete(br.failures, pipeline)
	var next func(time.Duration)
	var change *BreakerChange
	if br.open && br.canary == pipeline {
		if len(br.held) == 0 {
			delete(b.deps, dep)
			change = &BreakerChange{Dependency: dep, Canary: pipeline}
		} else {
			ids := slices.Sorted(maps.Keys(br.held))
			br.canary, next = ids[0], br.held[ids[0]]
			delete(br.held, ids[0])
		}
	}
	b.mu.Unlock()
	if next != nil {
		next(0)
	}
	if change != nil && b.observe != nil {
		b.observe(*change)
	}
}

// States returns every breaker that is open or counting failures, by
// dependency.
func (b *Breakers) States() []BreakerState {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BreakerState, 0, len(b.deps))
	for dep, br := range b.deps {
		st := BreakerState{Dependency: dep, Open: br.open, OpenedAt: br.openedAt, Canary: br.canary}
		if len(br.held) > 0 {
			st.Held = slices.Sorted(maps.Keys(br.held))
		}
		for p, at := range br.failures {
			if now.Sub(at) <= b.cfg.Window {
				st.RecentFailures = append(st.RecentFailures, p)
			}
		}
		if !st.Open && len(st.RecentFailures) == 0 {
			continue
		}
		slices.Sort(st.RecentFailures)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b BreakerState) int { return strings.Compare(a.Dependency, b.Dependency) })
	return out
}
