package lifecycle

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

func defaultPolicy() Policy {
	return mustPolicy(config.ErrorRecoveryOverride{})
}

// mustPolicy resolves a pipeline's error-recovery block against the
// default global configuration, as provisioning does.
func mustPolicy(o config.ErrorRecoveryOverride) Policy {
	r, err := o.Resolve(config.Default().Pipelines.ErrorRecovery)
	if err != nil {
		panic(err)
	}
	p, err := PolicyFrom(r)
	if err != nil {
		panic(err)
	}
	return p
}

func TestDefaultSchedule(t *testing.T) {
	p := defaultPolicy()
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	for i, w := range want {
		if got := Delay(p, i+1, 0.5); got != w {
			t.Errorf("attempt %d: delay %s, want %s", i+1, got, w)
		}
	}
	if got := Delay(p, 100000, 0.5); got != time.Minute {
		t.Errorf("attempt 100000: delay %s, want the 1m cap", got)
	}
}

func TestJitterBounds(t *testing.T) {
	p := defaultPolicy()
	p.Jitter = 0.2
	tests := []struct {
		name   string
		random float64
		want   time.Duration
	}{
		{name: "lowest", random: 0, want: 8 * time.Second},
		{name: "middle", random: 0.5, want: 10 * time.Second},
		{name: "highest", random: 0.999999, want: 12 * time.Second},
	}
	p.MinDelay, p.MaxDelay = 10*time.Second, time.Minute
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Delay(p, 1, tt.random)
			if diff := got - tt.want; diff < -time.Millisecond || diff > time.Millisecond {
				t.Fatalf("delay %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	base := defaultPolicy()
	with := func(f func(*Policy)) Policy { p := base; f(&p); return p }
	transient := Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 503, Message: "connection refused"}
	fatal := Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 400, Message: "bad request"}
	tests := []struct {
		name string
		p    Policy
		h    History
		f    Fault
		want Decision
	}{
		{name: "first transient error restarts after min-delay", p: base, f: transient,
			want: Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second}},
		{name: "fourth failure waits 8s", p: base, h: History{FailCount: 3, EpisodeStart: now.Add(-7 * time.Second)},
			f: transient, want: Decision{Action: ActionRestart, Attempt: 4, Delay: 8 * time.Second}},
		{name: "fatal degrades at once", p: base, f: fatal,
			want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonFatal}},
		{name: "fatal in an episode degrades too", p: base, h: History{FailCount: 5, EpisodeStart: now.Add(-time.Minute)},
			f: fatal, want: Decision{Action: ActionDegrade, Attempt: 6, Reason: ReasonFatal}},
		{name: "max-retries 0 degrades at the first transient error", p: with(func(p *Policy) { p.MaxRetries = 0 }),
			f: transient, want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonRetriesExhausted}},
		{name: "max-retries 3 allows the third restart", p: with(func(p *Policy) { p.MaxRetries = 3 }),
			h: History{FailCount: 2, EpisodeStart: now}, f: transient,
			want: Decision{Action: ActionRestart, Attempt: 3, Delay: 4 * time.Second}},
		{name: "max-retries 3 degrades at the fourth failure", p: with(func(p *Policy) { p.MaxRetries = 3 }),
			h: History{FailCount: 3, EpisodeStart: now}, f: transient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonRetriesExhausted}},
		{name: "unlimited retries never exhaust", p: base, h: History{FailCount: 1_000_000, EpisodeStart: now},
			f: transient, want: Decision{Action: ActionRestart, Attempt: 1_000_001, Delay: time.Minute}},
		{name: "max-duration reached degrades", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 3, EpisodeStart: now.Add(-10 * time.Second)}, f: transient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonMaxDuration}},
		{name: "next attempt past max-duration degrades now", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 3, EpisodeStart: now.Add(-5 * time.Second)}, f: transient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonMaxDuration}},
		{name: "attempt within max-duration restarts", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 1, EpisodeStart: now.Add(-time.Second)}, f: transient,
			want: Decision{Action: ActionRestart, Attempt: 2, Delay: 2 * time.Second}},
		{name: "unclassified counts as fatal, never restarted blindly", p: base, f: Fault{},
			want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonFatal}},

		// Strategies.
		{name: "fixed waits min-delay every time", p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(2 * time.Second)}),
			h: History{FailCount: 6, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 7, Delay: 2 * time.Second}},
		{name: "linear grows by min-delay x factor", p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("linear"), MinDelay: ptr(time.Second), BackoffFactor: ptr(1.0)}),
			h: History{FailCount: 2, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 3, Delay: 3 * time.Second}},
		{name: "linear is capped at max-delay", p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("linear")}),
			h: History{FailCount: 99, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 100, Delay: time.Minute}},
		{name: "random lies between min-delay and max-delay", p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("random"), MinDelay: ptr(10 * time.Second), MaxDelay: ptr(20 * time.Second)}),
			f: transient, want: Decision{Action: ActionRestart, Attempt: 1, Delay: 15 * time.Second}},
		{name: "schedule takes the n-th entry, days included",
			p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("schedule"), Schedule: ptr([]time.Duration{time.Minute, 24 * time.Hour, 168 * time.Hour})}),
			h: History{FailCount: 1, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 2, Delay: 24 * time.Hour}},
		{name: "schedule repeats its last entry, past max-delay",
			p: mustPolicy(config.ErrorRecoveryOverride{Strategy: ptr("schedule"), Schedule: ptr([]time.Duration{time.Minute, 168 * time.Hour})}),
			h: History{FailCount: 40, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 41, Delay: 168 * time.Hour}},

		// Presets.
		{name: "preset standard degrades after 5 restarts", p: mustPolicy(config.ErrorRecoveryOverride{Preset: ptr("standard")}),
			h: History{FailCount: 5, EpisodeStart: now}, f: transient, want: Decision{Action: ActionDegrade, Attempt: 6, Reason: ReasonRetriesExhausted}},
		{name: "preset aggressive starts at 100ms x1.5", p: mustPolicy(config.ErrorRecoveryOverride{Preset: ptr("aggressive")}),
			h: History{FailCount: 1, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 2, Delay: 150 * time.Millisecond}},
		{name: "a key beside the preset overrides it", p: mustPolicy(config.ErrorRecoveryOverride{Preset: ptr("conservative"), MaxRetries: ptr(8)}),
			h: History{FailCount: 5, EpisodeStart: now}, f: transient, want: Decision{Action: ActionRestart, Attempt: 6, Delay: 160 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.p, tt.h, tt.f, now, 0.5)
			if got.Action != tt.want.Action || got.Attempt != tt.want.Attempt || got.Delay != tt.want.Delay || got.Reason != tt.want.Reason {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Rules decide before the code does: a pipeline's own before the global
// ones, each list by priority, then in order.
func TestDecideWithRules(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	rule := func(name string, m config.RuleMatch, action string, policy config.ErrorRecoveryOverride) config.Rule {
		return config.Rule{Name: name, Match: m, Action: action, Priority: m.Specificity(), Policy: policy}
	}
	global := config.Default().Pipelines.ErrorRecovery
	global.Rules = []config.Rule{
		rule("global-429", config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}, config.ActionRetry,
			config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(30 * time.Second)}),
		rule("our-404", config.RuleMatch{Codes: []config.CodeRange{{From: 404, To: 404}}, Plugins: []string{"standalone:partner"}},
			config.ActionRetry, config.ErrorRecoveryOverride{}),
		rule("partner-feed", config.RuleMatch{Pipelines: []string{"partner-*"}}, config.ActionRetry,
			config.ErrorRecoveryOverride{Strategy: ptr("schedule"), Schedule: ptr([]time.Duration{24 * time.Hour, 168 * time.Hour})}),
	}
	own := config.ErrorRecoveryOverride{Rules: []config.Rule{
		rule("rate-limits", config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}, config.ActionRetry,
			config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(2 * time.Second), MaxRetries: ptr(10)}),
		rule("bad-password", config.RuleMatch{Message: "password authentication failed"}, config.ActionDegrade, config.ErrorRecoveryOverride{}),
		rule("timeouts", config.RuleMatch{Message: "timeout"}, config.ActionDegrade, config.ErrorRecoveryOverride{}),
		rule("pg-timeouts", config.RuleMatch{Message: "statement timeout", Components: []string{"pg-*"}}, config.ActionRetry, config.ErrorRecoveryOverride{}),
		rule("poison", config.RuleMatch{Codes: []config.CodeRange{{From: 422, To: 422}}}, config.ActionDeadLetter, config.ErrorRecoveryOverride{}),
	}}
	r, err := own.Resolve(global)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PolicyFrom(r)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		h          History
		f          Fault
		wantRule   string
		wantAction Action
		wantDelay  time.Duration
		wantReason DegradeReason
	}{
		{name: "a pipeline rule beats a global one for the same code", f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 429},
			wantRule: "rate-limits", wantAction: ActionRestart, wantDelay: 2 * time.Second},
		{name: "a rule's max-retries counts its own failures", h: History{FailCount: 12, EpisodeStart: now, RuleCounts: map[string]int{"rate-limits": 10}},
			f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 429}, wantRule: "rate-limits", wantAction: ActionDegrade, wantReason: ReasonRetriesExhausted},
		{name: "a message rule makes an uncoded error fatal", f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Message: `FATAL: Password Authentication Failed for user "app"`},
			wantRule: "bad-password", wantAction: ActionDegrade, wantReason: ReasonRule},
		{name: "a more specific rule is tried first", f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Component: "pg-source", Message: "canceling statement due to statement timeout"},
			wantRule: "pg-timeouts", wantAction: ActionRestart, wantDelay: time.Second},
		{name: "the less specific rule takes the rest", f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Component: "http", Message: "i/o timeout"},
			wantRule: "timeouts", wantAction: ActionDegrade, wantReason: ReasonRule},
		{name: "retry makes a fatal code transient", f: Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 404, Plugin: "standalone:partner"},
			wantRule: "our-404", wantAction: ActionRestart, wantDelay: time.Second},
		{name: "a plugin glob that does not match leaves the code to decide", f: Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 404, Plugin: "builtin:file"},
			wantAction: ActionDegrade, wantReason: ReasonFatal},
		{name: "a pipeline glob picks a day-long schedule", h: History{FailCount: 1, EpisodeStart: now, RuleCounts: map[string]int{"partner-feed": 1}},
			f: Fault{Pipeline: "partner-eu", Class: cerrors.ClassTransient, Code: 503}, wantRule: "partner-feed", wantAction: ActionRestart, wantDelay: 168 * time.Hour},
		{name: "a dead-letter rule does not match an error that names no record", f: Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 422},
			wantAction: ActionDegrade, wantReason: ReasonFatal},
		{name: "no rule: the code decides", f: Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 503},
			wantAction: ActionRestart, wantDelay: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(p, tt.h, tt.f, now, 0.5)
			rule := ""
			if got.Rule != nil {
				rule = got.Rule.Name
			}
			if rule != tt.wantRule || got.Action != tt.wantAction || got.Delay != tt.wantDelay || got.Reason != tt.wantReason {
				t.Fatalf("got rule %q %+v, want rule %q action %s delay %s reason %q", rule, got, tt.wantRule, tt.wantAction, tt.wantDelay, tt.wantReason)
			}
		})
	}
	if m := p.Match(Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 422, NamesRecord: true}); m == nil || m.Name != "poison" {
		t.Errorf("a dead-letter rule should match an error that names its record, got %v", m)
	}
	// An explicit priority beats specificity.
	low := rule("low", config.RuleMatch{Message: "a very long and specific message substring"}, config.ActionDegrade, config.ErrorRecoveryOverride{})
	high := rule("high", config.RuleMatch{Pipelines: []string{"*"}}, config.ActionRetry, config.ErrorRecoveryOverride{})
	high.Priority, high.PrioritySet = 1000, true
	r, err = config.ErrorRecoveryOverride{Rules: []config.Rule{low, high}}.Resolve(config.Default().Pipelines.ErrorRecovery)
	if err != nil {
		t.Fatal(err)
	}
	p, _ = PolicyFrom(r)
	if m := p.Match(Fault{Pipeline: "x", Message: "a very long and specific message substring"}); m == nil || m.Name != "high" {
		t.Errorf("priority 1000 should be tried first, got %v", m)
	}
}

// A pipeline that fails again within flap-window of recovering continues
// the backoff, and degrades after max-flaps such episodes in a row.
func TestDecideFlapping(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	p := mustPolicy(config.ErrorRecoveryOverride{MaxFlaps: ptr(2), FlapWindow: ptr(time.Minute)})
	f := Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 503}

	// Recovered 10 s ago after 3 attempts: the backoff continues at 4.
	d := decide(p, History{LastRecoveredAt: now.Add(-10 * time.Second), LastEpisodeAttempts: 3}, f, now, 0.5)
	if !d.Flapping || d.Flaps != 1 || d.Attempt != 4 || d.Delay != 8*time.Second || d.Action != ActionRestart {
		t.Errorf("first flap: %+v", d)
	}
	d = decide(p, History{LastRecoveredAt: now.Add(-10 * time.Second), LastEpisodeAttempts: 4, Flaps: 1}, f, now, 0.5)
	if d.Flaps != 2 || d.Action != ActionRestart {
		t.Errorf("second flap: %+v", d)
	}
	d = decide(p, History{LastRecoveredAt: now.Add(-10 * time.Second), LastEpisodeAttempts: 5, Flaps: 2}, f, now, 0.5)
	if d.Action != ActionDegrade || d.Reason != ReasonFlapping || d.Flaps != 3 {
		t.Errorf("third flap with max-flaps 2: %+v", d)
	}
	// Outside the window the episode starts over and the flaps reset.
	d = decide(p, History{LastRecoveredAt: now.Add(-2 * time.Minute), LastEpisodeAttempts: 5, Flaps: 2}, f, now, 0.5)
	if d.Flapping || d.Flaps != 0 || d.Attempt != 1 || d.Delay != time.Second {
		t.Errorf("failure after the flap window: %+v", d)
	}
	// A failure within an episode is not a flap.
	d = decide(p, History{FailCount: 2, EpisodeStart: now.Add(-time.Second), LastRecoveredAt: now.Add(-10 * time.Second), Flaps: 2}, f, now, 0.5)
	if d.Flapping || d.Action != ActionRestart || d.Attempt != 3 {
		t.Errorf("failure inside an episode: %+v", d)
	}
	// max-flaps -1 never degrades.
	never := mustPolicy(config.ErrorRecoveryOverride{FlapWindow: ptr(time.Minute)})
	if d := decide(never, History{LastRecoveredAt: now.Add(-time.Second), LastEpisodeAttempts: 9, Flaps: 1000}, f, now, 0.5); d.Action != ActionRestart || d.Delay != time.Minute {
		t.Errorf("max-flaps -1: %+v", d)
	}
}

func ptr[T any](v T) *T { return &v }

// steppedDelay is Delay as it was before the closed form: it stepped a
// backoff generator once per attempt. It is the reference the closed form
// must match.
func steppedDelay(p Policy, attempt int, random float64) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.MinDelay,
		Multiplier:          p.BackoffFactor,
		MaxInterval:         p.MaxDelay,
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
			d = p.MaxDelay
			break
		}
	}
	if p.Jitter > 0 {
		spread := p.Jitter * float64(d)
		d = time.Duration(float64(d) - spread + 2*spread*random)
	}
	// The floor applies to whatever the strategy gives.
	return max(d, config.RestartDelayFloor)
}

func TestDelayMatchesSteppedSchedule(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		// exact is false for factors that are not whole numbers: stepping
		// truncated to the nanosecond at every step, the closed form once.
		exact bool
	}{
		{name: "default", p: defaultPolicy(), exact: true},
		{name: "tight loop", p: Policy{MinDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond, BackoffFactor: 2}, exact: true},
		{name: "factor 1", p: Policy{MinDelay: 10 * time.Millisecond, MaxDelay: time.Second, BackoffFactor: 1}, exact: true},
		{name: "factor 3 to an hour", p: Policy{MinDelay: time.Millisecond, MaxDelay: time.Hour, BackoffFactor: 3}, exact: true},
		{name: "factor 2 to a week", p: Policy{MinDelay: 7 * time.Millisecond, MaxDelay: 168 * time.Hour, BackoffFactor: 2}, exact: true},
		{name: "min-delay 0", p: Policy{MinDelay: 0, MaxDelay: time.Minute, BackoffFactor: 2}, exact: true},
		{name: "min equals max", p: Policy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second, BackoffFactor: 2}, exact: true},
		{name: "aggressive 1.5", p: Policy{MinDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second, BackoffFactor: 1.5}},
		{name: "slow 1.1", p: Policy{MinDelay: 250 * time.Millisecond, MaxDelay: 5 * time.Minute, BackoffFactor: 1.1}},
		{name: "very slow 1.01 to a day", p: Policy{MinDelay: time.Second, MaxDelay: 24 * time.Hour, BackoffFactor: 1.01}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for n := 1; n <= 200; n++ {
				got, want := Delay(tt.p, n, 0.5), steppedDelay(tt.p, n, 0.5)
				if tt.exact && got != want || !nearly(got, want) {
					t.Fatalf("attempt %d: %v, stepping gave %v", n, got, want)
				}
			}
		})
		// Jitter below the cap spreads exactly as it did.
		t.Run(tt.name+" jittered", func(t *testing.T) {
			p := tt.p
			p.Jitter = 0.3
			for n := 1; n <= 200; n++ {
				if steppedDelay(p, n, 1) > p.MaxDelay {
					// Stepping jittered past the cap here; see
					// TestJitterNeverPassesMaxDelay.
					break
				}
				for _, r := range []float64{0, 0.25, 0.5, 0.999} {
					got, want := Delay(p, n, r), steppedDelay(p, n, r)
					if tt.exact && got != want || !nearly(got, want) {
						t.Fatalf("attempt %d random %v: %v, stepping gave %v", n, r, got, want)
					}
				}
			}
		})
	}
}

// nearly reports whether a closed-form delay is within rounding of the
// stepped one: stepping truncated to the nanosecond at every step, and each
// step multiplied the error of the steps before, so for factors that are
// not whole numbers the two drift apart by up to a ten-millionth.
func nearly(got, want time.Duration) bool {
	diff := got - want
	if diff < 0 {
		diff = -diff
	}
	return diff <= max(time.Nanosecond, want/10_000_000)
}

// TestDelayOfHugeAttemptsIsConstantWork checks attempts a stepping
// schedule could not reach in the lifetime of the process (factor 1 or a
// min-delay of 0 never reach the cap, so stepping loops attempt times):
// each call must return at once, without allocating.
func TestDelayOfHugeAttemptsIsConstantWork(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want time.Duration
	}{
		{name: "default", p: defaultPolicy(), want: time.Minute},
		{name: "factor barely above 1", p: Policy{MinDelay: time.Millisecond, MaxDelay: time.Hour, BackoffFactor: 1.000001}, want: time.Hour},
		{name: "factor 1 holds min-delay", p: Policy{MinDelay: 10 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 1}, want: config.RestartDelayFloor},
		{name: "factor 1 holds min-delay above the floor", p: Policy{MinDelay: 200 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 1}, want: 200 * time.Millisecond},
		{name: "factor below 1 holds min-delay", p: Policy{MinDelay: 200 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 0.5}, want: 200 * time.Millisecond},
		{name: "min-delay 0 is held at the floor", p: Policy{MinDelay: 0, MaxDelay: time.Minute, BackoffFactor: 2}, want: config.RestartDelayFloor},
		{name: "huge factor", p: Policy{MinDelay: time.Second, MaxDelay: math.MaxInt64, BackoffFactor: 1e300}, want: math.MaxInt64},
		{name: "max-delay at the largest duration", p: Policy{MinDelay: time.Second, MaxDelay: math.MaxInt64, BackoffFactor: 2}, want: math.MaxInt64},
	}
	for _, tt := range tests {
		for _, n := range []int{1e9, math.MaxInt} {
			t.Run(fmt.Sprintf("%s attempt %d", tt.name, n), func(t *testing.T) {
				var got time.Duration
				allocs := testing.AllocsPerRun(100, func() { got = Delay(tt.p, n, 0.5) })
				if got != tt.want {
					t.Fatalf("delay %v, want %v", got, tt.want)
				}
				if allocs != 0 {
					t.Fatalf("%v allocations per call, want none", allocs)
				}
			})
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	p := Policy{MinDelay: 10 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 1, Jitter: 0.2}
	for b.Loop() {
		Delay(p, 1e8, 0.5)
	}
}

func TestJitterNeverPassesMaxDelay(t *testing.T) {
	p := Policy{MinDelay: 10 * time.Second, MaxDelay: time.Minute, BackoffFactor: 2}
	tests := []struct {
		name    string
		jitter  float64
		attempt int
		random  float64
		want    time.Duration
	}{
		{name: "below the cap, lowest", jitter: 0.2, attempt: 1, random: 0, want: 8 * time.Second},
		{name: "below the cap, middle", jitter: 0.2, attempt: 1, random: 0.5, want: 10 * time.Second},
		{name: "below the cap, highest", jitter: 0.2, attempt: 1, random: 1, want: 12 * time.Second},
		{name: "40s spread 8s, highest", jitter: 0.2, attempt: 3, random: 1, want: 48 * time.Second},
		{name: "40s spread 20s is cut at the cap", jitter: 0.5, attempt: 3, random: 1, want: time.Minute},
		{name: "40s spread 20s, lowest", jitter: 0.5, attempt: 3, random: 0, want: 20 * time.Second},
		{name: "at the cap, lowest", jitter: 0.2, attempt: 4, random: 0, want: 48 * time.Second},
		{name: "at the cap, middle", jitter: 0.2, attempt: 4, random: 0.5, want: 54 * time.Second},
		{name: "at the cap, highest", jitter: 0.2, attempt: 4, random: 1, want: time.Minute},
		{name: "full jitter at the cap, lowest is the floor", jitter: 1, attempt: 50, random: 0, want: config.RestartDelayFloor},
		{name: "full jitter at the cap, middle", jitter: 1, attempt: 50, random: 0.5, want: 30 * time.Second},
		{name: "full jitter at the cap, highest", jitter: 1, attempt: 50, random: 1, want: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := p
			p.Jitter = tt.jitter
			got := Delay(p, tt.attempt, tt.random)
			if got > p.MaxDelay || got < 0 {
				t.Fatalf("delay %v outside [0, max-delay %v]", got, p.MaxDelay)
			}
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("delay %v, want %v", got, tt.want)
			}
		})
	}
	// Everywhere, not only in the table.
	for _, j := range []float64{0.1, 0.5, 1} {
		for n := 1; n <= 20; n++ {
			for r := 0.0; r <= 1; r += 0.125 {
				p := p
				p.Jitter = j
				if d := Delay(p, n, r); d > p.MaxDelay || d < 0 {
					t.Fatalf("jitter %v attempt %d random %v: delay %v outside [0, %v]", j, n, r, d, p.MaxDelay)
				}
			}
		}
	}
}

func TestCapResumeWait(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	base := defaultPolicy() // 1s x2 to 1m
	jittered := base
	jittered.Jitter = 0.2
	tests := []struct {
		name      string
		p         Policy
		failCount int
		saved     time.Time
		want      time.Time
	}{
		{name: "a year ahead is cut to the attempt's delay", p: base, failCount: 3,
			saved: now.AddDate(1, 0, 0), want: now.Add(4 * time.Second)},
		{name: "a year ahead late in an episode is cut to max-delay", p: base, failCount: 1_000_000,
			saved: now.AddDate(1, 0, 0), want: now.Add(time.Minute)},
		{name: "within the delay is kept", p: base, failCount: 3,
			saved: now.Add(2 * time.Second), want: now.Add(2 * time.Second)},
		{name: "exactly the delay is kept", p: base, failCount: 3,
			saved: now.Add(4 * time.Second), want: now.Add(4 * time.Second)},
		{name: "past is now", p: base, failCount: 3, saved: now.Add(-time.Hour), want: now},
		{name: "zero is now", p: base, failCount: 3, saved: time.Time{}, want: now},
		{name: "no failure counted yet allows min-delay", p: base, failCount: 0,
			saved: now.Add(time.Hour), want: now.Add(time.Second)},
		{name: "jitter may have lengthened the delay", p: jittered, failCount: 3,
			saved: now.Add(4500 * time.Millisecond), want: now.Add(4500 * time.Millisecond)},
		{name: "but not by more than jitter allows", p: jittered, failCount: 3,
			saved: now.Add(10 * time.Second), want: now.Add(4800 * time.Millisecond)},
		{name: "jitter never allows more than max-delay", p: jittered, failCount: 50,
			saved: now.Add(2 * time.Minute), want: now.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CapResumeWait(tt.p, tt.failCount, tt.saved, now); !got.Equal(tt.want) {
				t.Fatalf("next attempt at %s, want %s", got.Format(time.RFC3339Nano), tt.want.Format(time.RFC3339Nano))
			}
		})
	}
}

// Pipelines whose policies are the same share one compiled copy of the
// global rules; a different policy gets its own, with the rules' keys over
// it.
func TestPoliciesShareTheGlobalRules(t *testing.T) {
	global := config.Default().Pipelines.ErrorRecovery
	global.Rules = []config.Rule{{Name: "rate-limits", Action: config.ActionRetry,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}, Policy: config.ErrorRecoveryOverride{MaxRetries: ptr(10)}}}
	resolve := func(o config.ErrorRecoveryOverride) config.ErrorRecovery {
		r, err := o.Resolve(global)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ps := NewPolicies()
	a, errA := ps.From(resolve(config.ErrorRecoveryOverride{}))
	b, errB := ps.From(resolve(config.ErrorRecoveryOverride{}))
	c, errC := ps.From(resolve(config.ErrorRecoveryOverride{Preset: ptr("aggressive")}))
	if errA != nil || errB != nil || errC != nil {
		t.Fatal(errA, errB, errC)
	}
	if &a.GlobalRules[0] != &b.GlobalRules[0] {
		t.Error("two pipelines with the same policy hold two copies of the global rules")
	}
	if &a.GlobalRules[0] == &c.GlobalRules[0] {
		t.Error("a pipeline with another policy shares rules compiled over the first one")
	}
	if a.GlobalRules[0].Policy.MinDelay != time.Second || c.GlobalRules[0].Policy.MinDelay != 100*time.Millisecond ||
		c.GlobalRules[0].Policy.MaxRetries != 10 {
		t.Errorf("rule policies: %+v and %+v, want the rule's max-retries over each pipeline's policy", a.GlobalRules[0].Policy, c.GlobalRules[0].Policy)
	}
	// The same decisions as an uncached policy.
	plain, _ := PolicyFrom(resolve(config.ErrorRecoveryOverride{}))
	f := Fault{Pipeline: "x", Class: cerrors.ClassTransient, Code: 429}
	if got, want := decide(a, History{}, f, time.Now(), 0.5), decide(plain, History{}, f, time.Now(), 0.5); got.Rule.Name != want.Rule.Name || got.Delay != want.Delay {
		t.Errorf("cached %+v, uncached %+v", got, want)
	}
}

// The key of the compiled-rules caches tells apart any two policies that
// differ in a field other than their rules: a field added to Policy and
// forgotten in policyKey would make pipelines share rules compiled over
// another policy.
func TestPolicyKeyCoversEveryField(t *testing.T) {
	notInKey := map[string]bool{"Rules": true, "GlobalRules": true, "Builtin": true,
		"managed": true, "base": true, "baseKey": true}
	var zero Policy
	typ := reflect.TypeOf(zero)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if notInKey[f.Name] {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			var p Policy
			v := reflect.ValueOf(&p).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString("x")
			case reflect.Int, reflect.Int64:
				v.SetInt(3)
			case reflect.Float64:
				v.SetFloat(1.5)
			case reflect.Slice:
				v.Set(reflect.ValueOf([]time.Duration{time.Second}))
			default:
				t.Fatalf("field %s of kind %s: teach this test (and policyKey) about it", f.Name, v.Kind())
			}
			if p.key() == zero.key() {
				t.Errorf("policies that differ in %s have the same key", f.Name)
			}
		})
	}
	a := Policy{Schedule: []time.Duration{time.Second, time.Minute}}
	b := Policy{Schedule: []time.Duration{time.Second, time.Minute}}
	c := Policy{Schedule: []time.Duration{time.Second}}
	if a.key() != b.key() || a.key() == c.key() {
		t.Errorf("schedule keys: %+v, %+v, %+v", a.key(), b.key(), c.key())
	}
}

// Managed rules take effect for every pipeline at the next fault, after
// the pipeline's own rules and before the global ones, compiled over each
// pipeline's policy.
func TestManagedRulesApplyAtOnce(t *testing.T) {
	global := config.Default().Pipelines.ErrorRecovery
	global.Rules = []config.Rule{{Name: "global-503", Action: config.ActionRetry,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}}}}
	resolve := func(o config.ErrorRecoveryOverride) config.ErrorRecovery {
		r, err := o.Resolve(global)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	managed := NewManagedRules()
	ps := NewPolicies().WithManaged(managed)
	own := config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "own-429", Action: config.ActionDegrade,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}}}}
	p, err := ps.From(resolve(own))
	if err != nil {
		t.Fatal(err)
	}
	aggressive, err := ps.From(resolve(config.ErrorRecoveryOverride{Preset: ptr("aggressive")}))
	if err != nil {
		t.Fatal(err)
	}
	match := func(p Policy, code int) string {
		if r := p.Match(Fault{Pipeline: "x", Class: cerrors.ClassTransient, Code: code}); r != nil {
			return r.Name
		}
		return ""
	}
	if got := match(p, 503); got != "global-503" {
		t.Fatalf("before any managed rule: %q", got)
	}
	managed.Set([]config.Rule{
		{Name: "managed-5xx", Action: config.ActionRetry, Match: config.RuleMatch{Codes: []config.CodeRange{{From: 500, To: 599}}},
			Policy: config.ErrorRecoveryOverride{MaxRetries: ptr(3)}},
		{Name: "managed-429", Action: config.ActionRetry, Match: config.RuleMatch{Codes: []config.CodeRange{{From: 429, To: 429}}}},
	})
	if got := match(p, 503); got != "managed-5xx" {
		t.Errorf("503 after the set: %q, want the managed rule before the global one", got)
	}
	if got := match(p, 429); got != "own-429" {
		t.Errorf("429: %q, want the pipeline's own rule first", got)
	}
	r := aggressive.Match(Fault{Pipeline: "x", Code: 503})
	if r == nil || r.Policy.MinDelay != 100*time.Millisecond || r.Policy.MaxRetries != 3 {
		t.Errorf("the managed rule over another policy: %+v, want its max-retries over that policy", r)
	}
	managed.Set(nil)
	if got := match(p, 503); got != "global-503" {
		t.Errorf("after clearing: %q", got)
	}
}

// A managed rule that cannot apply over a pipeline's policy is left out for
// that pipeline only, and said so: ManagedClashes names it with why, for the
// runtime to report; the other rules still apply.
func TestManagedRuleThatClashesIsReportedNotDropped(t *testing.T) {
	scheduled := config.Default().Pipelines.ErrorRecovery
	scheduled.Schedule = []time.Duration{time.Minute}
	plain := config.Default().Pipelines.ErrorRecovery
	managed := NewManagedRules()
	ps := NewPolicies().WithManaged(managed)
	withSchedule, err := ps.From(scheduled)
	if err != nil {
		t.Fatal(err)
	}
	without, err := ps.From(plain)
	if err != nil {
		t.Fatal(err)
	}
	rules := []config.Rule{
		// strategy schedule needs a schedule, which only one policy has.
		{Name: "on-schedule", Priority: 20, Action: config.ActionRetry, File: "rules.yml", Line: 1,
			Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}},
			Policy: config.ErrorRecoveryOverride{Strategy: ptr(config.StrategySchedule)}},
		{Name: "any-5xx", Action: config.ActionRetry, Match: config.RuleMatch{Codes: []config.CodeRange{{From: 500, To: 599}}}},
	}
	if clashes := without.RuleClashes(rules); len(clashes) != 1 || clashes[0].Rule != "on-schedule" ||
		!strings.Contains(clashes[0].String(), "rules.yml:1") || !strings.Contains(clashes[0].String(), "schedule") {
		t.Fatalf("RuleClashes before loading: %v", clashes)
	}
	if clashes := withSchedule.RuleClashes(rules); len(clashes) != 0 {
		t.Fatalf("RuleClashes over a policy with a schedule: %v", clashes)
	}
	managed.Set(rules)
	if clashes := without.ManagedClashes(); len(clashes) != 1 || clashes[0].Rule != "on-schedule" {
		t.Fatalf("ManagedClashes: %v", clashes)
	}
	if clashes := withSchedule.ManagedClashes(); len(clashes) != 0 {
		t.Fatalf("ManagedClashes over a policy with a schedule: %v", clashes)
	}
	f := Fault{Pipeline: "x", Class: cerrors.ClassTransient, Code: 503}
	if r := withSchedule.Match(f); r == nil || r.Name != "on-schedule" {
		t.Errorf("with a schedule: %v, want on-schedule", r)
	}
	if r := without.Match(f); r == nil || r.Name != "any-5xx" {
		t.Errorf("without a schedule: %v, want the next rule, any-5xx", r)
	}
}

// No strategy, jitter or rule restarts a pipeline sooner than the floor:
// a rule with min-delay 0 once restarted pipelines 1,300 times a second.
func TestDelayNeverBelowTheFloor(t *testing.T) {
	floor := config.RestartDelayFloor
	tests := []struct {
		name   string
		p      Policy
		random float64
		want   time.Duration
	}{
		{name: "fixed 0", p: Policy{Strategy: config.StrategyFixed, MinDelay: 0, MaxDelay: time.Minute}, want: floor},
		{name: "fixed 0 with max-delay 0", p: Policy{Strategy: config.StrategyFixed}, want: floor},
		{name: "fixed 50ms", p: Policy{Strategy: config.StrategyFixed, MinDelay: 50 * time.Millisecond, MaxDelay: time.Minute}, want: floor},
		{name: "fixed 150ms keeps its delay", p: Policy{Strategy: config.StrategyFixed, MinDelay: 150 * time.Millisecond, MaxDelay: time.Minute}, want: 150 * time.Millisecond},
		{name: "exponential from 0", p: Policy{Strategy: config.StrategyExponential, MaxDelay: time.Minute, BackoffFactor: 2}, want: floor},
		{name: "linear from 0", p: Policy{Strategy: config.StrategyLinear, MaxDelay: time.Minute, BackoffFactor: 2}, want: floor},
		{name: "linear 1ms", p: Policy{Strategy: config.StrategyLinear, MinDelay: time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 1}, want: floor},
		{name: "random below the floor", p: Policy{Strategy: config.StrategyRandom, MaxDelay: 50 * time.Millisecond}, random: 0.9, want: floor},
		{name: "random reaching below the floor, lowest", p: Policy{Strategy: config.StrategyRandom, MaxDelay: 1100 * time.Millisecond}, random: 0, want: floor},
		{name: "random reaching below the floor, middle", p: Policy{Strategy: config.StrategyRandom, MaxDelay: 1100 * time.Millisecond}, random: 0.5, want: 600 * time.Millisecond},
		{name: "schedule of zeros", p: Policy{Strategy: config.StrategySchedule, Schedule: []time.Duration{0, 0}}, want: floor},
		{name: "empty schedule", p: Policy{Strategy: config.StrategySchedule}, want: floor},
		{name: "schedule 10ms", p: Policy{Strategy: config.StrategySchedule, Schedule: []time.Duration{10 * time.Millisecond}}, want: floor},
		{name: "full jitter at 100ms, lowest", p: Policy{Strategy: config.StrategyFixed, MinDelay: floor, MaxDelay: time.Minute, Jitter: 1}, random: 0, want: floor},
		{name: "jitter at 1s, lowest", p: Policy{Strategy: config.StrategyFixed, MinDelay: time.Second, MaxDelay: time.Minute, Jitter: 0.95}, random: 0, want: floor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, attempt := range []int{1, 2, 10, math.MaxInt} {
				got := Delay(tt.p, attempt, tt.random)
				if got < floor {
					t.Fatalf("attempt %d: delay %v below the floor %v", attempt, got, floor)
				}
				if attempt == 1 && got != tt.want {
					t.Fatalf("attempt 1: delay %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// Conduit's built-in rules degrade the known-permanent errors of its
// PostgreSQL connector, after every rule of the user's.
func TestBuiltinRulesComeLast(t *testing.T) {
	walLevel := Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Component: "pg", Plugin: "builtin:postgres",
		Message: "ERROR: logical decoding requires wal_level >= logical (SQLSTATE 55000)"}
	for _, ps := range []*Policies{nil, NewPolicies()} {
		from := func(o config.ErrorRecoveryOverride) Policy {
			r, err := o.Resolve(config.Default().Pipelines.ErrorRecovery)
			if err != nil {
				t.Fatal(err)
			}
			var p Policy
			if ps == nil {
				p, err = PolicyFrom(r)
			} else {
				p, err = ps.From(r)
			}
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		d := decide(from(config.ErrorRecoveryOverride{}), History{}, walLevel, time.Now(), 0)
		if d.Action != ActionDegrade || d.Rule == nil || d.Rule.Name != "postgres-wal-level" || d.Reason != ReasonRule {
			t.Fatalf("decision %+v, want degraded by the built-in rule postgres-wal-level", d)
		}
		// Another plugin's error of the same text is not PostgreSQL's.
		other := walLevel
		other.Plugin = "builtin:generator"
		if d := decide(from(config.ErrorRecoveryOverride{}), History{}, other, time.Now(), 0); d.Rule != nil || d.Action != ActionRestart {
			t.Fatalf("decision %+v for another plugin, want a restart without a rule", d)
		}
		// A rule of the user's that matches decides first.
		own := from(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "wait-for-dba", Action: config.ActionRetry,
			Match: config.RuleMatch{Message: "(sqlstate 55000)"}}}})
		if d := decide(own, History{}, walLevel, time.Now(), 0); d.Rule == nil || d.Rule.Name != "wait-for-dba" || d.Action != ActionRestart {
			t.Fatalf("decision %+v, want a restart by the user's rule", d)
		}
	}
}

// The engine's question about an error that names its record is decided
// by the matcher faults are decided by: the first rule that matches, and
// only a dead-letter rule takes the record; a rule tried before it that
// matches too keeps the record in the pipeline.
func TestDeadLetterRule(t *testing.T) {
	rules := []config.Rule{
		{Name: "poison-rows", Match: config.RuleMatch{Codes: []config.CodeRange{{From: 422, To: 422}}}, Action: config.ActionDeadLetter},
		{Name: "partner-422", Match: config.RuleMatch{Codes: []config.CodeRange{{From: 422, To: 422}}, Components: []string{"partner-*"}},
			Action: config.ActionRetry, Priority: 500, PrioritySet: true},
		{Name: "slow-503", Match: config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}}, Action: config.ActionRetry},
	}
	p := mustPolicy(config.ErrorRecoveryOverride{Rules: rules})
	for _, tt := range []struct {
		name string
		f    Fault
		want string
	}{
		{"a dead-letter rule matches", Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 422, Component: "pg-out"}, "poison-rows"},
		{"a retry rule tried first matches too", Fault{Pipeline: "orders", Class: cerrors.ClassFatal, Code: 422, Component: "partner-out"}, ""},
		{"only a retry rule matches", Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 503, Component: "pg-out"}, ""},
		{"no rule matches", Fault{Pipeline: "orders", Class: cerrors.ClassTransient, Code: 500, Component: "pg-out"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := p.DeadLetterRule(tt.f)
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("DeadLetterRule = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}
