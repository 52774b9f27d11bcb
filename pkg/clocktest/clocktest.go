// Package clocktest is time for tests: a Clock that moves only when the
// test moves it, and Eventually, which waits for a condition another
// goroutine makes true. Tests that inject time use the one, tests that
// watch a concurrent effect use the other, so that no test sleeps to get
// its timing right.
//
// It is for tests only; no production code imports it.
package clocktest

import (
	"sync"
	"testing"
	"time"
)

// Start is where a Clock made by New starts: a fixed time, so that what a
// test persists is the same at every run.
var Start = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// Clock is a time that moves only when Set or Advance moves it. Its Now is
// the func() time.Time that options take. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
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

// Set moves the clock to t, backwards too.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
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
	deadline := time.Now().Add(Timeout)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			msg := "condition not met"
			if failure != nil {
				msg = failure()
			}
			t.Fatalf("after %s: %s", Timeout, msg)
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}
