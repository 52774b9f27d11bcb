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
	// TimerAt returns a timer that fires once when the clock reaches at
	// (at once when it has). A time, not a wait: a wait computed from one
	// reading of the clock and armed after another would fire late by
	// the time between them.
	TimerAt(at time.Time) Timer
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

// TimerAt wraps time.NewTimer.
func (Real) TimerAt(at time.Time) Timer { return realTimer{time.NewTimer(time.Until(at))} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
