package lifecycle

import (
	"reflect"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// stepFault decides about a fault from the state alone: the table covers
// the decision's inputs it reads from the state (fail count, the open
// episode and its rule counts, the last recovery for flapping, the record
// failing again) and checks that the state it was given is left as it was.
func TestStepFault(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pos := []byte("rec-7")
	transient := ErrorInfo{At: now, Code: 503, Class: "transient", Source: "code", Message: "unavailable", Component: "src", ComponentKind: "source"}
	onRecord := transient
	onRecord.Record = pos
	quarantineAfter3 := mustPolicy(config.ErrorRecoveryOverride{QuarantineAfter: ptr(3)})
	retry429 := mustPolicy(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "slow-down", Action: config.ActionRetry,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}}, Policy: config.ErrorRecoveryOverride{MaxRetries: ptr(2)}}}})
	open := &Episode{StartedAt: now.Add(-time.Minute), RuleCounts: map[string]int{"slow-down": 2}}

	tests := []struct {
		name  string
		state State
		info  ErrorInfo
		class cerrors.Class
		p     Policy
		check func(t *testing.T, s faultStep)
	}{{
		name: "a first fault starts an episode and restarts after min-delay", state: State{Status: StatusRunning},
		info: transient, class: cerrors.ClassTransient, p: defaultPolicy(),
		check: func(t *testing.T, s faultStep) {
			if s.decision.Action != ActionRestart || s.decision.Attempt != 1 || s.decision.Delay != time.Second || !s.episodeStart.IsZero() {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "a fault in an open episode continues its count", state: State{Status: StatusRecovering, FailCount: 3, Episode: &Episode{StartedAt: now.Add(-time.Minute)}},
		info: transient, class: cerrors.ClassTransient, p: defaultPolicy(),
		check: func(t *testing.T, s faultStep) {
			if s.decision.Attempt != 4 || s.decision.Delay != 8*time.Second || !s.episodeStart.Equal(now.Add(-time.Minute)) {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "a fatal error degrades", state: State{Status: StatusRunning},
		info: ErrorInfo{At: now, Code: 422, Class: "fatal", Message: "bad"}, class: cerrors.ClassFatal, p: defaultPolicy(),
		check: func(t *testing.T, s faultStep) {
			if s.decision.Action != ActionDegrade || s.decision.Reason != ReasonFatal {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "a failure soon after recovering is a flap", state: State{Status: StatusRunning, LastRecoveredAt: now.Add(-time.Second), LastEpisodeAttempts: 4, Flaps: 1},
		info: transient, class: cerrors.ClassTransient, p: defaultPolicy(),
		check: func(t *testing.T, s faultStep) {
			if !s.decision.Flapping || s.decision.Flaps != 2 || s.decision.Attempt != 5 {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "a rule decides and its count comes from the episode", state: State{Status: StatusRecovering, FailCount: 2, Episode: open},
		info: transient, class: cerrors.ClassTransient, p: retry429,
		check: func(t *testing.T, s faultStep) {
			d := s.decision
			if d.Rule == nil || d.Rule.Name != "slow-down" || d.RuleAttempt != 3 || d.Action != ActionDegrade || d.Reason != ReasonRetriesExhausted {
				t.Errorf("%+v", d)
			}
			if s.info.Rule != "slow-down" || s.info.Source != "rule" || s.info.Class != "transient" {
				t.Errorf("recorded error %+v, want the rule's decision", s.info)
			}
		},
	}, {
		name: "the third run failing on a record quarantines it", state: State{Status: StatusRecovering, FailCount: 2, Episode: &Episode{StartedAt: now},
			Poison: &PoisonRecord{Position: pos, Error: onRecord, Runs: 2}},
		info: onRecord, class: cerrors.ClassTransient, p: quarantineAfter3,
		check: func(t *testing.T, s faultStep) {
			if !s.quarantined || s.poison == nil || s.poison.Runs != 3 || !s.poison.Quarantined {
				t.Errorf("%+v %+v", s, s.poison)
			}
		},
	}, {
		name: "a fault naming no record forgets the poison", state: State{Status: StatusRecovering, Poison: &PoisonRecord{Position: pos, Error: onRecord, Runs: 2}},
		info: transient, class: cerrors.ClassTransient, p: quarantineAfter3,
		check: func(t *testing.T, s faultStep) {
			if s.poison != nil || s.quarantined {
				t.Errorf("%+v", s)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.state.Clone()
			f := Fault{Pipeline: "p", Class: tt.class, Code: tt.info.Code, Message: tt.info.Message, Component: tt.info.Component}
			tt.check(t, stepFault(&tt.state, tt.info, f, &tt.p, tt.p.RuleSet(), now, 0.5))
			if !reflect.DeepEqual(before, tt.state) {
				t.Errorf("stepFault changed the state it was given:\nbefore %+v\nafter  %+v", before, tt.state)
			}
		})
	}
}

// decide is Decide with the policy's rules as they are now.
func decide(p Policy, h History, f Fault, now time.Time, random float64) Decision {
	return Decide(p, p.RuleSet(), h, f, now, random)
}
