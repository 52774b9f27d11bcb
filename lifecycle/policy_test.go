package lifecycle

import (
	"testing"
	"time"

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
