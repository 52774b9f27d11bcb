// Package clocktest is time for tests: a Clock that moves only when the
// test moves it, and Eventually, which waits for a condition another
// goroutine makes true. Tests that inject time use the one, tests that
// watch a concurrent effect use the other, so that no test sleeps to get
// its timing right.
//
// A Clock is a clock.Clock: its timers fire when Set or Advance moves the
// time past them. Code that waits with a func(time.Duration) <-chan
// time.Time (a rate limiter) gets Clock.After, whose waits take no time:
// each moves the clock by its duration and fires at once, and Waits lists
// them.
//
// It is for tests only; no production code imports it.
package clocktest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clock"
)

// Start is where a Clock made by New starts: a fixed time, so that what a
// test persists is the same at every run.
var Start = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// Clock is a time that moves only when Set or Advance moves it. Its Now is
// the func() time.Time that options take. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
	waits  []time.Duration
}

// New returns a Clock at Start.
func New() *Clock { return NewAt(Start) }

// NewAt returns a Clock at t.
func NewAt(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards too, and fires the timers due then.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.fire()
}

// Advance moves the clock forward by d and fires the timers due then.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// fire fires the timers that are due; c.mu is held.
func (c *Clock) fire() {
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.c <- c.now
			delete(c.timers, t)
		}
	}
}

// TimerAt implements clock.Clock: the timer fires when the clock reaches
// at (at once when it has).
func (c *Clock) TimerAt(at time.Time) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, at: at, c: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.c <- c.now
		return t
	}
	if c.timers == nil {
		c.timers = map[*timer]struct{}{}
	}
	c.timers[t] = struct{}{}
	return t
}

// Pending returns how many timers wait to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// After is a wait that takes no time: it moves the clock by d, records
// the wait and returns a channel that has fired.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	c.fire()
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// Waits returns the durations After was asked for, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

type timer struct {
	clock *Clock
	at    time.Time
	c     chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.c }

func (t *timer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	_, ok := t.clock.timers[t]
	delete(t.clock.timers, t)
	return ok
}

// Timeout is how long Eventually waits before it fails the test. It only
// guards against a hang: the conditions tests wait for come true in
// milliseconds, also on a loaded machine.
const Timeout = 30 * time.Second

// Eventually returns once cond is true, polling it with a pause that grows
// from a millisecond to ten. After Timeout it fails the test with the
// text of failure (nil: a generic one), called then so that it can say
// what the test saw.
func Eventually(t testing.TB, cond func() bool, failure func() string) {
	t.Helper()
	Wait{Timeout: Timeout, MaxPause: 10 * time.Millisecond}.Until(t, cond, failure)
}

// Wait is Eventually with a bound and a longest pause of its own: a test
// of a whole process (reading the files it writes between polls) pauses
// longer, one of a slow operation under the race detector waits longer.
type Wait struct {
	// Timeout fails the test; MaxPause is where the pause between polls
	// stops growing (from a millisecond), ten milliseconds when zero.
	Timeout, MaxPause time.Duration
}

// Until returns once cond is true; after w.Timeout it fails the test with
// the text of failure (nil: a generic one).
func (w Wait) Until(t testing.TB, cond func() bool, failure func() string) {
	t.Helper()
	if w.MaxPause <= 0 {
		w.MaxPause = 10 * time.Millisecond // a zero pause would spin
	}
	deadline := time.Now().Add(w.Timeout)
	pause := min(time.Millisecond, w.MaxPause)
	for !cond() {
		if time.Now().After(deadline) {
			msg := "condition not met"
			if failure != nil {
				msg = failure()
			}
			t.Fatalf("after %s: %s", w.Timeout, msg)
		}
		time.Sleep(pause)
		pause = min(2*pause, w.MaxPause)
	}
}
