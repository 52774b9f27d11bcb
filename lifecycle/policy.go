package lifecycle

import (
	"math"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// Policy is a pipeline's resolved error-recovery configuration
// (pipelines.error-recovery, overridden per pipeline).
type Policy struct {
	MinDelay time.Duration
	// MaxDelay caps every delay, jitter included.
	MaxDelay time.Duration
	// BackoffFactor multiplies the delay after each attempt; at least 1.
	BackoffFactor float64
	// MaxRetries is how many restarts an episode may use; -1 is unlimited
	// and 0 degrades at the first transient error.
	MaxRetries int
	// HealthyWindow (max-retries-window) is how long a restarted pipeline
	// must run without an error to count as recovered.
	HealthyWindow time.Duration
	// Jitter spreads each delay by up to ±Jitter of itself (0..1), never
	// past MaxDelay.
	Jitter float64
	// MaxDuration bounds the time an episode may take; 0 is unlimited.
	MaxDuration time.Duration
}

// PolicyFrom converts the configuration.
func PolicyFrom(c config.ErrorRecovery) Policy {
	return Policy{
		MinDelay:      c.MinDelay,
		MaxDelay:      c.MaxDelay,
		BackoffFactor: c.BackoffFactor,
		MaxRetries:    c.MaxRetries,
		HealthyWindow: c.MaxRetriesWindow,
		Jitter:        c.Jitter,
		MaxDuration:   c.MaxDuration,
	}
}

// History is what Decide needs to know about the past.
type History struct {
	// FailCount is the number of transient failures in the current episode
	// before this one.
	FailCount int
	// EpisodeStart is when the current episode began, zero when the
	// pipeline was running (this failure starts one).
	EpisodeStart time.Time
}

// Action is what the supervisor does next.
type Action int

// Actions.
const (
	ActionRestart Action = iota + 1
	ActionDegrade
)

func (a Action) String() string {
	switch a {
	case ActionRestart:
		return "restart"
	case ActionDegrade:
		return "degrade"
	default:
		return "Action(?)"
	}
}

// Decision is Decide's verdict.
type Decision struct {
	Action Action
	// Attempt is the fail count including this failure; the restart that
	// follows is attempt number Attempt.
	Attempt int
	// Delay is how long to wait before the restart (ActionRestart).
	Delay time.Duration
	// Reason says why (ActionDegrade).
	Reason DegradeReason
}

// Decide is the restart policy as a pure function: given the policy, the
// history of the episode, the class of the error that just ended a run, the
// time now and a uniformly random number in [0,1) (for jitter), it says
// whether to restart and after how long, or to degrade and why.
//
//   - a fatal error degrades at once;
//   - a transient error that brings the fail count above max-retries (when
//     that is not -1) degrades with "retries exhausted";
//   - when the episode has lasted max-duration, or the next attempt would
//     fall after it, the pipeline degrades with "max duration" instead of
//     waiting for an attempt it may not make;
//   - otherwise it restarts after the backoff delay of the attempt.
func Decide(p Policy, h History, class cerrors.Class, now time.Time, random float64) Decision {
	attempt := h.FailCount + 1
	if class != cerrors.ClassTransient {
		return Decision{Action: ActionDegrade, Attempt: attempt, Reason: ReasonFatal}
	}
	if p.MaxRetries >= 0 && attempt > p.MaxRetries {
		return Decision{Action: ActionDegrade, Attempt: attempt, Reason: ReasonRetriesExhausted}
	}
	delay := Delay(p, attempt, random)
	if p.MaxDuration > 0 {
		start := h.EpisodeStart
		if start.IsZero() {
			start = now
		}
		if now.Add(delay).Sub(start) > p.MaxDuration {
			return Decision{Action: ActionDegrade, Attempt: attempt, Reason: ReasonMaxDuration}
		}
	}
	return Decision{Action: ActionRestart, Attempt: attempt, Delay: delay}
}

// Delay returns the wait before restart number attempt (1-based):
// min-delay x backoff-factor^(attempt-1), capped at max-delay, then spread
// by jitter using random in [0,1). The default schedule is 1s, 2s, 4s, 8s,
// 16s, 32s, 1m, 1m, ...
//
// It costs the same for every attempt: a pipeline that failed a hundred
// million times gets its delay as fast as one that failed once. Jitter
// spreads the delay d over [d - jitter*d, d + jitter*d] but never past
// max-delay: near the cap the upper end is cut, so the spread stays
// uniform below the cap instead of piling restarts up at it.
func Delay(p Policy, attempt int, random float64) time.Duration {
	d := backoffDelay(p, attempt)
	if p.Jitter <= 0 || d <= 0 {
		return d
	}
	lo, width := jitterRange(p, d)
	x := lo + width*random
	if x >= float64(p.MaxDelay) {
		return p.MaxDelay
	}
	return max(time.Duration(x), 0)
}

// jitterRange is where jitter may move delay d: from lo, width wide
// (2*spread, centred on d), cut at max-delay.
func jitterRange(p Policy, d time.Duration) (lo, width float64) {
	spread := p.Jitter * float64(d)
	lo, width = float64(d)-spread, 2*spread
	if lo+width > float64(p.MaxDelay) {
		width = max(float64(p.MaxDelay)-lo, 0)
	}
	return lo, width
}

// backoffDelay is the un-jittered delay of an attempt in closed form.
func backoffDelay(p Policy, attempt int) time.Duration {
	switch {
	case p.MinDelay <= 0 || p.MaxDelay <= 0:
		return 0
	case p.MinDelay >= p.MaxDelay:
		return p.MaxDelay
	case attempt <= 1 || !(p.BackoffFactor > 1):
		// A factor below 1 (which configuration refuses) would shrink the
		// delay towards zero, a hot restart loop: hold at min-delay.
		return p.MinDelay
	}
	// math.Pow is +Inf for huge attempts, and a NaN or +Inf product fails
	// the comparison: both land on the cap, before any conversion to
	// Duration could overflow.
	x := float64(p.MinDelay) * math.Pow(p.BackoffFactor, float64(attempt-1))
	if !(x < float64(p.MaxDelay)) {
		return p.MaxDelay
	}
	return time.Duration(x)
}

// CapResumeWait returns when a pipeline that was recovering when the
// process stopped should make its next attempt: at the persisted
// savedNext, but never later than the longest wait the policy gives
// restart number failCount (its delay with the most jitter can add) from
// now, and never earlier than now. A saved time a year ahead, written by a
// clock that ran fast, is cut to that wait; a zero or past one is now.
func CapResumeWait(p Policy, failCount int, savedNext, now time.Time) time.Time {
	longest := backoffDelay(p, failCount)
	if p.Jitter > 0 && longest > 0 {
		lo, width := jitterRange(p, longest)
		if x := lo + width; x >= float64(p.MaxDelay) {
			longest = p.MaxDelay
		} else {
			longest = max(longest, time.Duration(x))
		}
	}
	if latest := now.Add(longest); savedNext.After(latest) {
		return latest
	}
	if savedNext.Before(now) {
		return now
	}
	return savedNext
}
