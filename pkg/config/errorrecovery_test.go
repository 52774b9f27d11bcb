package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// Resolution order: pipeline > global (conduit.yml, env, flags) > built-in
// default. The global layer comes from a real Load so the test covers the
// path the runtime takes.
func TestResolveOrder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "conduit.yml", `
pipelines:
  error-recovery:
    max-delay: 2m
    max-retries: 10
    jitter: 0.2
`)
	cfg, _, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	global := cfg.Pipelines.ErrorRecovery

	tests := []struct {
		name     string
		override ErrorRecoveryOverride
		want     ErrorRecovery
	}{
		{
			name:     "no override: global, and defaults where global is silent",
			override: ErrorRecoveryOverride{},
			want: ErrorRecovery{
				MinDelay: time.Second, MaxDelay: 2 * time.Minute, BackoffFactor: 2, MaxRetries: 10,
				MaxRetriesWindow: 5 * time.Minute, Jitter: 0.2, MaxDuration: 0,
			},
		},
		{
			name: "pipeline over global and over default",
			override: ErrorRecoveryOverride{
				MaxRetries:    ptr(3),               // over global 10
				MinDelay:      ptr(5 * time.Second), // over default 1s
				BackoffFactor: ptr(1.5),             // over default 2
				MaxDuration:   ptr(time.Hour),       // over default 0
			},
			want: ErrorRecovery{
				MinDelay: 5 * time.Second, MaxDelay: 2 * time.Minute, BackoffFactor: 1.5, MaxRetries: 3,
				MaxRetriesWindow: 5 * time.Minute, Jitter: 0.2, MaxDuration: time.Hour,
			},
		},
		{
			name: "zero values in the override are real values, not 'unset'",
			override: ErrorRecoveryOverride{
				Jitter:     ptr(0.0),
				MaxRetries: ptr(0),
				MinDelay:   ptr(time.Duration(0)),
			},
			want: ErrorRecovery{
				MinDelay: 0, MaxDelay: 2 * time.Minute, BackoffFactor: 2, MaxRetries: 0,
				MaxRetriesWindow: 5 * time.Minute, Jitter: 0, MaxDuration: 0,
			},
		},
		{
			name: "every field overridden",
			override: ErrorRecoveryOverride{
				MinDelay: ptr(time.Millisecond), MaxDelay: ptr(time.Second), BackoffFactor: ptr(3.0),
				MaxRetries: ptr(-1), MaxRetriesWindow: ptr(time.Second), Jitter: ptr(1.0), MaxDuration: ptr(time.Minute),
			},
			want: ErrorRecovery{
				MinDelay: time.Millisecond, MaxDelay: time.Second, BackoffFactor: 3, MaxRetries: -1,
				MaxRetriesWindow: time.Second, Jitter: 1, MaxDuration: time.Minute,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.override.Resolve(global)
			if err != nil {
				t.Fatal(err)
			}
			got.sources = [maxERFields]valueSource{}
			if want := withNewDefaults(tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Resolve:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// withNewDefaults fills in the keys the cases above leave at their
// default.
func withNewDefaults(e ErrorRecovery) ErrorRecovery {
	e.Preset, e.Strategy, e.Schedule = PresetConduit, StrategyExponential, []time.Duration{}
	e.MaxFlaps, e.FlapWindow = -1, 5*time.Minute
	if e.Probation == 0 {
		e.Probation = 30 * time.Second
	}
	return e
}

func TestResolveValidation(t *testing.T) {
	global := Default().Pipelines.ErrorRecovery // min 1s, max 1m
	tests := []struct {
		name     string
		override ErrorRecoveryOverride
		field    string
		want     string
	}{
		{
			name:     "pipeline min-delay above global max-delay",
			override: ErrorRecoveryOverride{MinDelay: ptr(2 * time.Minute)},
			field:    "min-delay",
			want:     "2m must not be greater than max-delay 1m (max-delay comes from the built-in default)",
		},
		{
			name:     "pipeline max-delay below global min-delay",
			override: ErrorRecoveryOverride{MaxDelay: ptr(500 * time.Millisecond)},
			field:    "max-delay",
			want:     "500ms must not be less than min-delay 1s (min-delay comes from the built-in default)",
		},
		{
			name:     "both in the pipeline",
			override: ErrorRecoveryOverride{MinDelay: ptr(time.Minute), MaxDelay: ptr(time.Second)},
			field:    "min-delay",
			want:     "1m must not be greater than max-delay 1s",
		},
		{
			name:     "jitter built in code",
			override: ErrorRecoveryOverride{Jitter: ptr(1.5)},
			field:    "jitter",
			want:     "must be between 0 and 1, got 1.5",
		},
		{
			name:     "backoff factor built in code",
			override: ErrorRecoveryOverride{BackoffFactor: ptr(0.0)},
			field:    "backoff-factor",
			want:     "must be at least 1, got 0",
		},
		{
			name:     "negative max-duration",
			override: ErrorRecoveryOverride{MaxDuration: ptr(-time.Second)},
			field:    "max-duration",
			want:     "must not be negative, got -1s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.override.Resolve(global)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			eq(t, "Field", fe.Field, tc.field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q does not contain %q", err, tc.want)
			}
		})
	}

	t.Run("an invalid global is reported too", func(t *testing.T) {
		bad := global
		bad.MaxRetriesWindow = 0
		_, err := ErrorRecoveryOverride{}.Resolve(bad)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "max-retries-window" {
			t.Errorf("got %v, want a max-retries-window FieldError", err)
		}
	})
}

// A pipeline that is valid on its own can clash with the global config;
// ResolveErrorRecovery must point at the pipeline's line.
func TestPipelineResolveErrorRecovery(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "p.yml", `version: 2.2
pipelines:
  - id: slow
    connectors:
      - {id: src, type: source, plugin: builtin:generator}
      - {id: dst, type: destination, plugin: builtin:log}
    error-recovery:
      jitter: 0.5
      min-delay: 90s
`)
	ps := loadOK(t, dir)
	if len(ps) != 1 {
		t.Fatalf("got %d pipelines", len(ps))
	}
	p := ps[0]

	global := Default().Pipelines.ErrorRecovery
	global.MaxDelay, global.MaxRetriesWindow = 5*time.Minute, time.Minute
	got, err := p.ResolveErrorRecovery(global)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "MinDelay", got.MinDelay, 90*time.Second)
	eq(t, "Jitter", got.Jitter, 0.5)
	eq(t, "MaxDelay from global", got.MaxDelay, 5*time.Minute)

	_, err = p.ResolveErrorRecovery(Default().Pipelines.ErrorRecovery) // max-delay 1m
	wantPipelineError(t, err, path, 9, "slow", "error-recovery.min-delay",
		"90s must not be greater than max-delay 1m (max-delay comes from the built-in default)")
}
