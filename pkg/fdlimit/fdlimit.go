// Package fdlimit reads the process's open file limit (RLIMIT_NOFILE) and
// says how it should be shared: a reserve for the store and the pipelines,
// and the rest, in part, for API connections.
//
// Every socket, pipe, file and store table takes a descriptor from one
// budget. When it runs out, whatever asks next fails - an accept, a
// connector's dial, or the store opening a memtable. The API is the only
// consumer an outsider controls, so it is the one that gets a cap; the
// reserve is what the rest is assumed to need.
package fdlimit

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrUnknown is returned where the platform has no descriptor limit to
// read.
var ErrUnknown = errors.New("the open file limit is unknown on this platform")

// What the process needs besides API connections: the store (Badger keeps
// its value log, memtables, manifest and tables open), the log, the
// listener, plus each pipeline's connectors (files, sockets, plugin pipes).
const (
	BaseReserve = 64
	PerPipeline = 16
)

// API connection cap when api.http.max-connections is 0: a quarter of the
// limit, at least MinAPIConnections and at most MaxAPIConnections.
const (
	MinAPIConnections = 8
	MaxAPIConnections = 1024
)

// Limit returns the soft RLIMIT_NOFILE now in effect. (On Linux the Go
// runtime raises the soft limit to the hard one at start, so this is the
// hard limit the process was started with.)
func Limit() (uint64, error) { return limit() }

// Open counts the descriptors the process has open.
func Open() (int, error) {
	if fdDir == "" {
		return 0, ErrUnknown
	}
	dir, err := os.Open(fdDir)
	if err != nil {
		return 0, fmt.Errorf("count open descriptors in %s: %w", fdDir, err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("count open descriptors in %s: %w", fdDir, err)
	}
	// The directory being read is one of them.
	return len(names) - 1, nil
}

// Left returns how many more descriptors the process may open: Limit - Open.
func Left() (int, error) { return left(Limit, Open) }

func left(limit func() (uint64, error), count func() (int, error)) (int, error) {
	lim, err := limit()
	if err != nil {
		return 0, err
	}
	open, err := count()
	if err != nil {
		if outOfDescriptors(err) {
			// Counting needs one descriptor itself: none is left.
			return 0, nil
		}
		return 0, err
	}
	if lim > uint64(open) {
		return int(min(lim-uint64(open), 1<<31-1)), nil
	}
	return 0, nil
}

// APIConnections returns the default cap on API connections for a
// descriptor limit: a quarter of it, within [MinAPIConnections,
// MaxAPIConnections], so the store and the pipelines keep the larger part
// however many clients connect.
func APIConnections(limit uint64) int {
	return int(min(max(limit/4, MinAPIConnections), MaxAPIConnections))
}

// Needed returns how many descriptors a process with the given number of
// pipelines and API connection cap should be allowed:
// BaseReserve + PerPipeline per pipeline + the API cap.
func Needed(pipelines, apiConnections int) uint64 {
	return BaseReserve + PerPipeline*uint64(max(pipelines, 0)) + uint64(max(apiConnections, 0))
}

// Budget compares the descriptor limit with what a process needs.
type Budget struct {
	// Limit is the soft RLIMIT_NOFILE.
	Limit uint64
	// Needed is what Needed returned for Pipelines and APIConnections.
	Needed         uint64
	Pipelines      int
	APIConnections int
}

// Low reports whether the limit is below what is needed.
func (b Budget) Low() bool { return b.Limit < b.Needed }

// Check reads the limit and compares it with what the pipelines and the API
// connection cap need. Callers warn when the Budget is Low; an error means
// the limit could not be read (ErrUnknown on platforms without one).
func Check(pipelines, apiConnections int) (Budget, error) {
	lim, err := Limit()
	if err != nil {
		return Budget{}, err
	}
	return Budget{
		Limit:          lim,
		Needed:         Needed(pipelines, apiConnections),
		Pipelines:      pipelines,
		APIConnections: apiConnections,
	}, nil
}

// Gauge answers how many descriptors are left from a count at most
// interval old, and hands descriptors out to callers about to open some
// (Take). Counting reads the whole descriptor table, so it is not done for
// every caller of a restart storm; and between counts, what was handed out
// is taken off, so that many callers at once cannot all be told yes by one
// count while none of them has opened anything yet.
type Gauge struct {
	interval time.Duration
	left     func() (int, error)
	now      func() time.Time

	mu sync.Mutex
	at time.Time
	// value is the last count less what was handed out since.
	value int
	err   error
	// holds are what was handed out and not yet opened (Take's release
	// not called); a count does not see them yet, so they are taken off
	// it. A hold older than holdTimeout is let go: by then the count sees
	// what its taker opened.
	holds map[*hold]struct{}
	held  int
}

type hold struct {
	n  int
	at time.Time
}

// Gauge timings: a refusal is decided on a count at most recountShort old;
// a hold not released after holdTimeout stops counting.
const (
	recountShort = 10 * time.Millisecond
	holdTimeout  = 30 * time.Second
)

// NewGauge returns a Gauge over left (Left when nil).
func NewGauge(interval time.Duration, left func() (int, error)) *Gauge {
	if left == nil {
		left = Left
	}
	return &Gauge{interval: interval, left: left, now: time.Now, holds: map[*hold]struct{}{}}
}

// Left returns the descriptors left by the latest count, less what was
// handed out since.
func (g *Gauge) Left() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refresh(g.now(), false)
	return g.value, g.err
}

// Take hands out n descriptors when at least keep would be left after
// them. release must be called once the caller has opened what it needed
// (or given up); until then, counts are lowered by n. When the platform
// cannot count, every Take succeeds.
func (g *Gauge) Take(n, keep int) (release func(), left int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.refresh(now, false)
	if g.err != nil {
		return func() {}, 0, true
	}
	if g.value-n < keep && now.Sub(g.at) >= recountShort {
		// Refuse only on a fresh count: the last one may predate
		// descriptors that were closed since.
		g.refresh(now, true)
	}
	if g.value-n < keep {
		return nil, g.value, false
	}
	h := &hold{n: n, at: now}
	g.holds[h] = struct{}{}
	g.held += n
	g.value -= n
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if _, ok := g.holds[h]; ok {
				delete(g.holds, h)
				g.held -= n
			}
		})
	}, g.value, true
}

// refresh counts again when the count is stale (or force); g.mu is held.
func (g *Gauge) refresh(now time.Time, force bool) {
	if !force && !g.at.IsZero() && now.Sub(g.at) < g.interval {
		return
	}
	g.at = now
	for h := range g.holds {
		if now.Sub(h.at) >= holdTimeout {
			delete(g.holds, h)
			g.held -= h.n
		}
	}
	var left int
	left, g.err = g.left()
	// A holder that has opened some of its descriptors but not released
	// yet is in the count and in held both, so the difference can go
	// below zero ("-159 left" with many runs opening at once). No fewer
	// than none are left: the refusal stands, and its message says 0.
	g.value = max(left-g.held, 0)
}
