// Package clock is the time the runtime runs on. The supervisors' backoff
// and healthy windows, the restart scheduler, the breakers and the
// notifier's throttle read it, and the runtime hands its one Clock
// (conduit.Options.Clock) to each of them, so that a test moves time
// (pkg/clocktest) instead of sleeping for it.
package clock

import "time"

// Clock is a source of time and timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the runtime uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
