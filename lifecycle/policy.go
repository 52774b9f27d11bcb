package lifecycle

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// Policy is a pipeline's resolved error-recovery configuration
// (pipelines.error-recovery, overridden per pipeline).
type Policy struct {
	MinDelay      time.Duration
	MaxDelay      time.Duration
	BackoffFactor float64
	// MaxRetries is how many restarts an episode may use; -1 is unlimited
	// and 0 degrades at the first transient error.
	MaxRetries int
	// HealthyWindow (max-retries-window) is how long a restarted pipeline
	// must run without an error to count as recovered.
	HealthyWindow time.Duration
	// Jitter spreads each delay by up to ±Jitter of itself (0..1).
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

// Delay returns the wait before restart number attempt (1-based): min-delay
// multiplied by backoff-factor for each earlier attempt, capped at
// max-delay, then spread by jitter using random in [0,1). The default
// schedule is 1s, 2s, 4s, 8s, 16s, 32s, 1m, 1m, ...
func Delay(p Policy, attempt int, random float64) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval: p.MinDelay,
		Multiplier:      p.BackoffFactor,
		MaxInterval:     p.MaxDelay,
		// Jitter is applied below from the caller's random number, so the
		// schedule itself stays a pure function of the attempt.
		RandomizationFactor: 0,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	var d time.Duration
	for i := 0; i < attempt; i++ {
		d = b.NextBackOff()
		if d >= p.MaxDelay {
			// Capped: every later attempt waits the same.
			d = p.MaxDelay
			break
		}
	}
	if p.Jitter > 0 {
		spread := p.Jitter * float64(d)
		d = time.Duration(float64(d) - spread + 2*spread*random)
	}
	return max(d, 0)
}
