package lifecycle

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

func defaultPolicy() Policy {
	return PolicyFrom(config.Default().Pipelines.ErrorRecovery)
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
	tests := []struct {
		name  string
		p     Policy
		h     History
		class cerrors.Class
		want  Decision
	}{
		{name: "first transient error restarts after min-delay", p: base, class: cerrors.ClassTransient,
			want: Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second}},
		{name: "fourth failure waits 8s", p: base, h: History{FailCount: 3, EpisodeStart: now.Add(-7 * time.Second)},
			class: cerrors.ClassTransient, want: Decision{Action: ActionRestart, Attempt: 4, Delay: 8 * time.Second}},
		{name: "fatal degrades at once", p: base, class: cerrors.ClassFatal,
			want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonFatal}},
		{name: "fatal in an episode degrades too", p: base, h: History{FailCount: 5, EpisodeStart: now.Add(-time.Minute)},
			class: cerrors.ClassFatal, want: Decision{Action: ActionDegrade, Attempt: 6, Reason: ReasonFatal}},
		{name: "max-retries 0 degrades at the first transient error", p: with(func(p *Policy) { p.MaxRetries = 0 }),
			class: cerrors.ClassTransient, want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonRetriesExhausted}},
		{name: "max-retries 3 allows the third restart", p: with(func(p *Policy) { p.MaxRetries = 3 }),
			h: History{FailCount: 2, EpisodeStart: now}, class: cerrors.ClassTransient,
			want: Decision{Action: ActionRestart, Attempt: 3, Delay: 4 * time.Second}},
		{name: "max-retries 3 degrades at the fourth failure", p: with(func(p *Policy) { p.MaxRetries = 3 }),
			h: History{FailCount: 3, EpisodeStart: now}, class: cerrors.ClassTransient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonRetriesExhausted}},
		{name: "unlimited retries never exhaust", p: base, h: History{FailCount: 1_000_000, EpisodeStart: now},
			class: cerrors.ClassTransient, want: Decision{Action: ActionRestart, Attempt: 1_000_001, Delay: time.Minute}},
		{name: "max-duration reached degrades", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 3, EpisodeStart: now.Add(-10 * time.Second)}, class: cerrors.ClassTransient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonMaxDuration}},
		{name: "next attempt past max-duration degrades now", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 3, EpisodeStart: now.Add(-5 * time.Second)}, class: cerrors.ClassTransient,
			want: Decision{Action: ActionDegrade, Attempt: 4, Reason: ReasonMaxDuration}},
		{name: "attempt within max-duration restarts", p: with(func(p *Policy) { p.MaxDuration = 10 * time.Second }),
			h: History{FailCount: 1, EpisodeStart: now.Add(-time.Second)}, class: cerrors.ClassTransient,
			want: Decision{Action: ActionRestart, Attempt: 2, Delay: 2 * time.Second}},
		{name: "unclassified counts as fatal, never restarted blindly", p: base, class: 0,
			want: Decision{Action: ActionDegrade, Attempt: 1, Reason: ReasonFatal}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.p, tt.h, tt.class, now, 0.5); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

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
	return max(d, 0)
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
		{name: "factor 1 holds min-delay", p: Policy{MinDelay: 10 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 1}, want: 10 * time.Millisecond},
		{name: "factor below 1 holds min-delay", p: Policy{MinDelay: 10 * time.Millisecond, MaxDelay: time.Minute, BackoffFactor: 0.5}, want: 10 * time.Millisecond},
		{name: "min-delay 0", p: Policy{MinDelay: 0, MaxDelay: time.Minute, BackoffFactor: 2}, want: 0},
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
		{name: "full jitter at the cap, lowest", jitter: 1, attempt: 50, random: 0, want: 0},
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
