package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrorRecovery is the restart policy for pipelines that fail with a
// transient error: the delays between restarts (a strategy), limits after
// which the pipeline is given up on (degraded), and rules that decide for
// the errors they match (DESIGN 5.1, 5.2).
type ErrorRecovery struct {
	// Preset names the policy whose values apply where neither the
	// pipeline nor the global configuration sets a key (see Presets).
	Preset string
	// Strategy computes the delay of restart n: exponential, fixed,
	// linear, random or schedule (see the Strategy constants).
	Strategy string
	// Schedule lists the delays of the schedule strategy; the last one
	// repeats.
	Schedule []time.Duration
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
	// Probation is how long a restarted pipeline must stay up, its
	// connectors open, to be running again when no record made it end to
	// end meanwhile (an idle source). Its fail count resets only after
	// MaxRetriesWindow.
	Probation time.Duration
	// Jitter randomises each delay by up to this fraction (0..1), so many
	// pipelines failing together do not restart in lockstep.
	Jitter float64
	// MaxDuration limits the total time spent recovering; 0 means no limit.
	MaxDuration time.Duration
	// MaxFlaps is how many episodes in a row may start within FlapWindow
	// of the previous recovery before the pipeline is degraded (reason
	// flapping); -1 never degrades for flapping.
	MaxFlaps int
	// FlapWindow is how soon after a recovery a new failure counts as the
	// same trouble coming back: its episode continues the backoff.
	FlapWindow time.Duration
	// QuarantineAfter dead-letters a record that failed the same way on
	// this many runs in a row; 0 is off.
	QuarantineAfter int
	// Rules decide for the errors they match (see Rule): in the global
	// configuration the global rules, after Resolve the pipeline's own.
	Rules []Rule
	// GlobalRules are, after Resolve, the global rules, tried after the
	// pipeline's own. The slice is shared by every pipeline: not to be
	// changed.
	GlobalRules []Rule
	// sources says, after Resolve, where each key's value came from, by
	// the key's index in errorRecoveryFields (see Source). An array, not a
	// map: every pipeline keeps its resolved policy.
	sources [maxERFields]valueSource
}

// valueSource is where a resolved value came from.
type valueSource uint8

const (
	fromDefault valueSource = iota
	fromPreset
	fromGlobal
	fromPipeline
)

// maxERFields bounds the number of error-recovery keys (a test checks it).
const maxERFields = 16

// Source says where the resolved value of key came from: "pipeline",
// "global", "preset <name>" or "default".
func (e ErrorRecovery) Source(key string) string {
	for i, f := range errorRecoveryFields {
		if f.name != key {
			continue
		}
		switch e.sources[i] {
		case fromPipeline:
			return "pipeline"
		case fromGlobal:
			return "global"
		case fromPreset:
			return "preset " + e.Preset
		}
		return "default"
	}
	return ""
}

// Sources is Source for every key.
func (e ErrorRecovery) Sources() map[string]string {
	m := make(map[string]string, len(errorRecoveryFields))
	for _, f := range errorRecoveryFields {
		m[f.name] = e.Source(f.name)
	}
	return m
}

// Strategies of the delay between restarts.
const (
	StrategyExponential = "exponential"
	StrategyFixed       = "fixed"
	StrategyLinear      = "linear"
	StrategyRandom      = "random"
	StrategySchedule    = "schedule"
)

// Strategies lists every strategy.
func Strategies() []string {
	return []string{StrategyExponential, StrategyFixed, StrategyLinear, StrategyRandom, StrategySchedule}
}

// PresetConduit is the default preset: the built-in defaults.
const PresetConduit = "conduit"

// Presets returns the named policies `preset:` chooses from (DESIGN 5.1).
// Each sets the keys it names; the built-in default holds for the rest.
func Presets() map[string]ErrorRecoveryOverride {
	return map[string]ErrorRecoveryOverride{
		PresetConduit: {},
		"standard": {MaxRetries: ptrTo(5), MinDelay: ptrTo(time.Second), BackoffFactor: ptrTo(2.0),
			MaxDelay: ptrTo(time.Minute), MaxDuration: ptrTo(5 * time.Minute)},
		"aggressive": {MaxRetries: ptrTo(10), MinDelay: ptrTo(100 * time.Millisecond), BackoffFactor: ptrTo(1.5),
			MaxDelay: ptrTo(10 * time.Second), MaxDuration: ptrTo(time.Minute), Probation: ptrTo(10 * time.Second)},
		"conservative": {MaxRetries: ptrTo(3), MinDelay: ptrTo(5 * time.Second), BackoffFactor: ptrTo(2.0),
			MaxDelay: ptrTo(5 * time.Minute), MaxDuration: ptrTo(15 * time.Minute), Probation: ptrTo(time.Minute)},
		"infinite": {MaxRetries: ptrTo(-1), MinDelay: ptrTo(time.Second), BackoffFactor: ptrTo(2.0),
			MaxDelay: ptrTo(time.Minute), MaxDuration: ptrTo(time.Duration(0))},
	}
}

// PresetNames lists the presets in the order the documentation gives them.
func PresetNames() []string {
	return []string{PresetConduit, "standard", "aggressive", "conservative", "infinite"}
}

func ptrTo[T any](v T) *T { return &v }

// ErrorRecoveryOverride is a pipeline's `error-recovery` block: each field
// that is set replaces the global value, each nil field keeps it.
type ErrorRecoveryOverride struct {
	Preset           *string
	Strategy         *string
	Schedule         *[]time.Duration
	MinDelay         *time.Duration
	MaxDelay         *time.Duration
	BackoffFactor    *float64
	MaxRetries       *int
	MaxRetriesWindow *time.Duration
	Probation        *time.Duration
	Jitter           *float64
	MaxDuration      *time.Duration
	MaxFlaps         *int
	FlapWindow       *time.Duration
	QuarantineAfter  *int
	// Rules are the pipeline's own rules; they come before the global ones.
	Rules []Rule
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
	newERField("preset", PresetConduit,
		"Named policy whose values apply where neither the pipeline nor the global configuration sets a key: conduit, standard, aggressive, conservative or infinite.",
		func(e *ErrorRecovery) *string { return &e.Preset },
		func(o *ErrorRecoveryOverride) **string { return &o.Preset },
		oneOf(PresetNames()...)),
	newERField("strategy", StrategyExponential,
		"How the delay of restart n is computed: exponential, fixed, linear, random or schedule.",
		func(e *ErrorRecovery) *string { return &e.Strategy },
		func(o *ErrorRecoveryOverride) **string { return &o.Strategy },
		oneOf(Strategies()...)),
	newERField("schedule", []time.Duration{},
		"Delays of the schedule strategy, in order; the last one repeats. Durations may be days (168h).",
		func(e *ErrorRecovery) *[]time.Duration { return &e.Schedule },
		func(o *ErrorRecoveryOverride) **[]time.Duration { return &o.Schedule },
		positiveDurations),
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
	newERField("probation", 30*time.Second,
		"How long a restarted pipeline must stay up to be running again when no record made it end to end (an idle source); its fail count still resets only after max-retries-window. Greater than 0.",
		func(e *ErrorRecovery) *time.Duration { return &e.Probation },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.Probation },
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
	newERField("max-flaps", -1,
		"Episodes in a row that may start within flap-window of the last recovery before the pipeline is degraded as flapping; -1 never.",
		func(e *ErrorRecovery) *int { return &e.MaxFlaps },
		func(o *ErrorRecoveryOverride) **int { return &o.MaxFlaps },
		maxRetries),
	newERField("flap-window", 5*time.Minute,
		"A failure this soon after a recovery continues the last episode's backoff instead of starting over; greater than 0.",
		func(e *ErrorRecovery) *time.Duration { return &e.FlapWindow },
		func(o *ErrorRecoveryOverride) **time.Duration { return &o.FlapWindow },
		positiveDuration),
	newERField("quarantine-after", 0,
		"Dead-letter a record that failed the same way on this many runs in a row instead of restarting again; 0 is off.",
		func(e *ErrorRecovery) *int { return &e.QuarantineAfter },
		func(o *ErrorRecoveryOverride) **int { return &o.QuarantineAfter },
		nonNegativeInt),
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
	if e.Strategy == StrategySchedule && len(e.Schedule) == 0 {
		return &FieldError{Field: "schedule", Err: errors.New("strategy schedule needs at least one delay (schedule: [1m, 1h, 24h])")}
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

// Resolve returns the policy for one pipeline, each key from the first of:
// the pipeline's block (o), the global block, the preset, the built-in
// default (DESIGN 5.1). The preset is the pipeline's, else the global one,
// else conduit. global is normally Config.Pipelines.ErrorRecovery, which
// holds the built-in default for every key conduit.yml does not set; a
// global key that keeps its default value does not override a preset (the
// conduit.yml `conduit init` writes spells every default out). The rules
// are the pipeline's, then the global ones. Sources tells where each value
// came from.
//
// The result is validated as a whole, because a pipeline can be valid on its
// own and still clash with the global config (min-delay 2m against a global
// max-delay of 1m). The error is a *FieldError naming the pipeline's field;
// Pipeline.ResolveErrorRecovery turns it into a *PipelineError with a line.
func (o ErrorRecoveryOverride) Resolve(global ErrorRecovery) (ErrorRecovery, error) {
	preset, presetFrom := PresetConduit, fromDefault
	if global.Preset != "" && global.Preset != PresetConduit {
		preset, presetFrom = global.Preset, fromGlobal
	}
	if o.Preset != nil {
		preset, presetFrom = *o.Preset, fromPipeline
	}
	presetValues, ok := Presets()[preset]
	if !ok {
		return ErrorRecovery{}, &FieldError{Field: "preset", Err: oneOf(PresetNames()...)(preset)}
	}
	r := defaultErrorRecovery()
	for i, f := range errorRecoveryFields {
		switch {
		case f.name == "preset":
			r.sources[i] = presetFrom
		case f.isSet(&o):
			v := f.over(&o)
			if err := f.check(v); err != nil {
				return ErrorRecovery{}, &FieldError{Field: f.name, Err: err}
			}
			f.set(&r, v)
			r.sources[i] = fromPipeline
		case !sameValue(f.get(&global), f.def):
			f.set(&r, f.get(&global))
			r.sources[i] = fromGlobal
		case f.isSet(&presetValues):
			f.set(&r, f.over(&presetValues))
			r.sources[i] = fromPreset
		}
	}
	r.Preset = preset
	r.Rules, r.GlobalRules = o.Rules, global.Rules
	if r.MinDelay > r.MaxDelay {
		// Blame the value the pipeline set: that is the one its author can
		// change, and the message says where the other one came from.
		switch {
		case o.MinDelay != nil && o.MaxDelay == nil:
			return ErrorRecovery{}, &FieldError{Field: "min-delay", Err: delayOrderError(r.MinDelay, r.MaxDelay, "comes from "+sourceText(r.Source("max-delay")))}
		case o.MaxDelay != nil && o.MinDelay == nil:
			return ErrorRecovery{}, &FieldError{Field: "max-delay", Err: delayOrderErrorOnMax(r.MinDelay, r.MaxDelay, "comes from "+sourceText(r.Source("min-delay")))}
		default:
			return ErrorRecovery{}, &FieldError{Field: "min-delay", Err: delayOrderError(r.MinDelay, r.MaxDelay, "")}
		}
	}
	if err := r.Validate(); err != nil {
		return ErrorRecovery{}, err
	}
	return r, nil
}

// ForRule returns the policy for the errors rule matches: this one with
// the rule's preset, then the rule's own keys, on top.
func (e ErrorRecovery) ForRule(rule Rule) (ErrorRecovery, error) {
	r := e
	r.Rules, r.GlobalRules, r.sources = nil, nil, [maxERFields]valueSource{}
	if rule.Policy.Preset != nil {
		presetValues, ok := Presets()[*rule.Policy.Preset]
		if !ok {
			return ErrorRecovery{}, &FieldError{Field: "preset", Err: oneOf(PresetNames()...)(*rule.Policy.Preset)}
		}
		r.Preset = *rule.Policy.Preset
		for _, f := range errorRecoveryFields {
			if f.name != "preset" && f.isSet(&presetValues) {
				f.set(&r, f.over(&presetValues))
			}
		}
	}
	for _, f := range errorRecoveryFields {
		if f.name != "preset" && f.isSet(&rule.Policy) {
			f.set(&r, f.over(&rule.Policy))
		}
	}
	// A rule that says "wait 30s" means 30s, also for a pipeline whose
	// max-delay is 10s: a bound the rule sets moves the other one it does
	// not set. Only bounds the rule sets itself can clash.
	switch {
	case rule.Policy.MinDelay != nil && rule.Policy.MaxDelay == nil && r.MinDelay > r.MaxDelay:
		r.MaxDelay = r.MinDelay
	case rule.Policy.MaxDelay != nil && rule.Policy.MinDelay == nil && r.MaxDelay < r.MinDelay:
		r.MinDelay = r.MaxDelay
	}
	if err := r.Validate(); err != nil {
		return ErrorRecovery{}, err
	}
	return r, nil
}

// sourceText says in words where a resolved value came from.
func sourceText(source string) string {
	switch source {
	case "global":
		return "the global configuration"
	case "default":
		return "the built-in default"
	}
	return "the " + source
}

// defaultErrorRecovery is the built-in default of every key.
func defaultErrorRecovery() ErrorRecovery {
	var r ErrorRecovery
	for _, f := range errorRecoveryFields {
		f.set(&r, f.def)
	}
	return r
}

// sameValue compares two values of a key; empty lists are equal whether
// nil or not.
func sameValue(a, b any) bool {
	if x, ok := a.([]time.Duration); ok {
		return slices.Equal(x, b.([]time.Duration))
	}
	return a == b
}

// RestartDelayFloor is the shortest wait before a restart. A policy or a
// rule that asks for less (a min-delay of 0, a schedule entry of 10ms)
// waits this long instead: a pipeline that fails at once on every start
// would otherwise restart in a hot loop, thousands of times a second,
// flooding the log and the audit log and growing memory. It is the
// aggressive preset's min-delay.
const RestartDelayFloor = 100 * time.Millisecond

// BelowFloor lists, for people, the delays the block sets below
// RestartDelayFloor ("min-delay 0s"), each raised to the floor when it is
// used; none when every delay it sets is at least the floor.
func (o ErrorRecoveryOverride) BelowFloor() []string {
	var out []string
	if o.MinDelay != nil && *o.MinDelay < RestartDelayFloor {
		out = append(out, "min-delay "+formatDuration(*o.MinDelay))
	}
	if o.MaxDelay != nil && *o.MaxDelay < RestartDelayFloor {
		out = append(out, "max-delay "+formatDuration(*o.MaxDelay))
	}
	if o.Schedule != nil {
		for i, d := range *o.Schedule {
			if d < RestartDelayFloor {
				out = append(out, fmt.Sprintf("schedule[%d] %s", i, formatDuration(d)))
			}
		}
	}
	return out
}

// BelowFloor is ErrorRecoveryOverride.BelowFloor for a resolved policy:
// the delays its strategy uses that are below RestartDelayFloor.
func (e ErrorRecovery) BelowFloor() []string {
	o := ErrorRecoveryOverride{}
	if e.Strategy == StrategySchedule {
		o.Schedule = &e.Schedule
	} else {
		o.MinDelay, o.MaxDelay = &e.MinDelay, &e.MaxDelay
	}
	return o.BelowFloor()
}

// FloorWarning says, for people, that the delays below were raised to
// RestartDelayFloor; empty when below is.
func FloorWarning(below []string) string {
	if len(below) == 0 {
		return ""
	}
	return strings.Join(below, ", ") + " below the restart delay floor: restarts wait at least " +
		formatDuration(RestartDelayFloor) + " (no policy or rule restarts a pipeline in a hot loop)"
}
