package config

import (
	"errors"
	"fmt"
	"time"
)

// ErrorRecovery is the restart policy for pipelines that fail with a
// transient error: exponential backoff between restarts, and limits after
// which the pipeline is given up on (degraded).
type ErrorRecovery struct {
	// MinDelay is the delay before the first restart.
	MinDelay time.Duration
	// MaxDelay caps the delay between restarts.
	MaxDelay time.Duration
	// BackoffFactor multiplies the delay after each failed restart (>= 1).
	BackoffFactor float64
	// MaxRetries is how many restarts are attempted before the pipeline is
	// degraded; -1 means forever.
	MaxRetries int
	// MaxRetriesWindow is how long a restarted pipeline must stay healthy
	// for its fail count to reset.
	MaxRetriesWindow time.Duration
	// Jitter randomises each delay by up to this fraction (0..1), so many
	// pipelines failing together do not restart in lockstep.
	Jitter float64
	// MaxDuration limits the total time spent recovering; 0 means no limit.
	MaxDuration time.Duration
}

// ErrorRecoveryOverride is a pipeline's `error-recovery` block: each field
// that is set replaces the global value, each nil field keeps it.
type ErrorRecoveryOverride struct {
	MinDelay         *time.Duration
	MaxDelay         *time.Duration
	BackoffFactor    *float64
	MaxRetries       *int
	MaxRetriesWindow *time.Duration
	Jitter           *float64
	MaxDuration      *time.Duration
}

// erField is one error-recovery setting. The table below serves both the
// global keys (pipelines.error-recovery.<name>) and the per-pipeline
// error-recovery block, so the two cannot drift apart.
type erField struct {
	name  string
	kind  Kind
	def   any
	doc   string
	get   func(*ErrorRecovery) any
	set   func(*ErrorRecovery, any)
	isSet func(*ErrorRecoveryOverride) bool
	over  func(*ErrorRecoveryOverride) any // the override's value; only when isSet
	setOv func(*ErrorRecoveryOverride, any)
	check func(any) error
}

func newERField[T value](name string, def T, doc string, field func(*ErrorRecovery) *T, override func(*ErrorRecoveryOverride) **T, check func(T) error) erField {
	return erField{
		name:  name,
		kind:  kindOf(def),
		def:   def,
		doc:   doc,
		get:   func(e *ErrorRecovery) any { return *field(e) },
		set:   func(e *ErrorRecovery, v any) { *field(e) = v.(T) },
		isSet: func(o *ErrorRecoveryOverride) bool { return *override(o) != nil },
		over:  func(o *ErrorRecoveryOverride) any { return **override(o) },
		setOv: func(o *ErrorRecoveryOverride, v any) { t := v.(T); *override(o) = &t },
		check: func(v any) error { return check(v.(T)) },
	}
}

func (f erField) globalKey() key {
	return key{
		name:  errorRecoveryPrefix + f.name,
		kind:  f.kind,
		def:   f.def,
		doc:   f.doc,
		get:   func(c *Config) any { return f.get(&c.Pipelines.ErrorRecovery) },
		set:   func(c *Config, v any) { f.set(&c.Pipelines.ErrorRecovery, v) },
		check: f.check,
	}
}

const errorRecoveryPrefix = "pipelines.error-recovery."

var errorRecoveryFields = []erField{
	newERField("min-delay", 1*time.Second,
		"Delay before the first restart after a transient error.",
		func(e *ErrorRecovery) *time.Duration { return &e.MinDelay },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.MinDelay },
		nonNegativeDuration),
	newERField("max-delay", 1*time.Minute,
		"Upper bound of the delay between restarts; must not be less than min-delay.",
		func(e *ErrorRecovery) *time.Duration { return &e.MaxDelay },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.MaxDelay },
		nonNegativeDuration),
	newERField("backoff-factor", 2.0,
		"Factor the delay grows by after each failed restart; at least 1.",
		func(e *ErrorRecovery) *float64 { return &e.BackoffFactor },
		func(o *ErrorRecoveryOverride) **float64 { return &o.BackoffFactor },
		backoffFactor),
	newERField("max-retries", -1,
		"Restarts attempted before the pipeline is degraded; -1 retries forever.",
		func(e *ErrorRecovery) *int { return &e.MaxRetries },
		func(o *ErrorRecoveryOverride) **int { return &o.MaxRetries },
		maxRetries),
	newERField("max-retries-window", 5*time.Minute,
		"How long a restarted pipeline must run healthy for its fail count to reset; greater than 0.",
		func(e *ErrorRecovery) *time.Duration { return &e.MaxRetriesWindow },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.MaxRetriesWindow },
		positiveDuration),
	newERField("jitter", 0.0,
		"Random spread added to each delay, as a fraction between 0 and 1.",
		func(e *ErrorRecovery) *float64 { return &e.Jitter },
		func(o *ErrorRecoveryOverride) **float64 { return &o.Jitter },
		jitter),
	newERField("max-duration", time.Duration(0),
		"Longest time a pipeline may spend recovering before it is degraded; 0 means no limit.",
		func(e *ErrorRecovery) *time.Duration { return &e.MaxDuration },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.MaxDuration },
		nonNegativeDuration),
}

func errorRecoveryFieldNames() []string {
	names := make([]string, len(errorRecoveryFields))
	for i, f := range errorRecoveryFields {
		names[i] = f.name
	}
	return names
}

// FieldError is returned by ErrorRecoveryOverride.Resolve and
// ErrorRecovery.Validate: Field is the error-recovery field at fault (e.g.
// "min-delay"), so callers can point at its line.
type FieldError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + errString(e.Err) }

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks every field and that MinDelay <= MaxDelay. Load and
// Resolve already do this; it is exported for policies built in code.
func (e ErrorRecovery) Validate() error {
	for _, f := range errorRecoveryFields {
		if err := f.check(f.get(&e)); err != nil {
			return &FieldError{Field: f.name, Err: err}
		}
	}
	if e.MinDelay > e.MaxDelay {
		return &FieldError{Field: "min-delay", Err: delayOrderError(e.MinDelay, e.MaxDelay, "")}
	}
	return nil
}

func delayOrderError(minDelay, maxDelay time.Duration, maxFrom string) error {
	msg := fmt.Sprintf("%s must not be greater than max-delay %s", formatDuration(minDelay), formatDuration(maxDelay))
	if maxFrom != "" {
		msg += " (max-delay " + maxFrom + ")"
	}
	return errors.New(msg)
}

func delayOrderErrorOnMax(minDelay, maxDelay time.Duration, minFrom string) error {
	msg := fmt.Sprintf("%s must not be less than min-delay %s", formatDuration(maxDelay), formatDuration(minDelay))
	if minFrom != "" {
		msg += " (min-delay " + minFrom + ")"
	}
	return errors.New(msg)
}

// Resolve returns the policy for one pipeline: each field set in o, else the
// field of global. global is normally Config.Pipelines.ErrorRecovery, which
// already holds the built-in default for every key conduit.yml does not set,
// so the order is pipeline > global > default.
//
// The result is validated as a whole, because a pipeline can be valid on its
// own and still clash with the global config (min-delay 2m against a global
// max-delay of 1m). The error is a *FieldError naming the pipeline's field;
// Pipeline.ResolveErrorRecovery turns it into a *PipelineError with a line.
func (o ErrorRecoveryOverride) Resolve(global ErrorRecovery) (ErrorRecovery, error) {
	r := global
	for _, f := range errorRecoveryFields {
		if f.isSet(&o) {
			v := f.over(&o)
			if err := f.check(v); err != nil {
				return ErrorRecovery{}, &FieldError{Field: f.name, Err: err}
			}
			f.set(&r, v)
		}
	}
	if r.MinDelay > r.MaxDelay {
		// Blame the value the pipeline set: that is the one its author can
		// change, and the message says where the other one came from.
		switch {
		case o.MinDelay != nil && o.MaxDelay == nil:
			return ErrorRecovery{}, &FieldError{Field: "min-delay", Err: delayOrderError(r.MinDelay, r.MaxDelay, "comes from the global configuration")}
		case o.MaxDelay != nil && o.MinDelay == nil:
			return ErrorRecovery{}, &FieldError{Field: "max-delay", Err: delayOrderErrorOnMax(r.MinDelay, r.MaxDelay, "comes from the global configuration")}
		default:
			return ErrorRecovery{}, &FieldError{Field: "min-delay", Err: delayOrderError(r.MinDelay, r.MaxDelay, "")}
		}
	}
	if err := r.Validate(); err != nil {
		return ErrorRecovery{}, err
	}
	return r, nil
}
