package lifecycle

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"

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

// faultOutcome works out what a decided fault changes and the events that
// record it, without I/O: the table gives it a state and a decision and
// reads the state after record and apply, and the two events.
func TestFaultOutcome(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	info := ErrorInfo{At: now, Code: 503, Class: "transient", Message: "unavailable", Component: "src", ComponentKind: "source", Dependency: "db"}
	p := defaultPolicy()
	restart := Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second, Strategy: "exponential", Flaps: 2, Flapping: true}
	open := func() *Episode { return &Episode{StartedAt: now.Add(-time.Minute)} }

	tests := []struct {
		name    string
		state   State
		step    faultStep
		held    string
		check   func(t *testing.T, st State, c faultChange)
		fault   auditlog.Kind
		after   auditlog.Kind
		afterTo Status
	}{{
		name: "a first fault starts an episode and schedules the restart", state: State{Status: StatusRunning},
		step: faultStep{decision: restart, info: info}, after: auditlog.KindRecovering, afterTo: StatusRecovering,
		check: func(t *testing.T, st State, c faultChange) {
			if st.Episode == nil || !st.Episode.StartedAt.Equal(now) || len(st.Episode.Attempts) != 1 || st.FailCount != 1 || !st.NextAttemptAt.Equal(now.Add(time.Second)) {
				t.Errorf("state %+v", st)
			}
			if st.Flaps != 2 || st.LastError == nil || st.LastError.Code != 503 {
				t.Errorf("recorded flaps %d, error %+v", st.Flaps, st.LastError)
			}
			if !c.next.Equal(now.Add(time.Second)) || c.after.Reason != string(ReasonFlapping) || c.fault.Delay != time.Second {
				t.Errorf("next %v, recovering reason %q, fault delay %v", c.next, c.after.Reason, c.fault.Delay)
			}
		},
	}, {
		name: "a breaker holds the restart: nothing is scheduled", state: State{Status: StatusRecovering, FailCount: 1, Episode: open()},
		step: faultStep{decision: Decision{Action: ActionRestart, Attempt: 2, Delay: 2 * time.Second}, info: info, episodeStart: now.Add(-time.Minute)},
		held: "db", after: auditlog.KindRecovering, afterTo: StatusRecovering,
		check: func(t *testing.T, st State, c faultChange) {
			if !c.next.IsZero() || !st.NextAttemptAt.IsZero() || st.FailCount != 2 || c.after.Reason != "breaker" {
				t.Errorf("next %v, state next %v, fails %d, reason %q", c.next, st.NextAttemptAt, st.FailCount, c.after.Reason)
			}
			if st.Flaps != 0 {
				t.Errorf("a fault within an episode changed the flaps to %d", st.Flaps)
			}
		},
	}, {
		name: "a quarantined record is said in the fault", state: State{Status: StatusRecovering, Episode: open()},
		step: faultStep{decision: restart, info: info, episodeStart: now.Add(-time.Minute), quarantined: true,
			poison: &PoisonRecord{Runs: 3, Quarantined: true}}, after: auditlog.KindRecovering, afterTo: StatusRecovering,
		check: func(t *testing.T, st State, c faultChange) {
			if st.Poison == nil || st.Poison.Runs != 3 || !strings.Contains(c.fault.Message, "record quarantined: 3 runs") {
				t.Errorf("poison %+v, fault %q", st.Poison, c.fault.Message)
			}
		},
	}, {
		name: "a degrade ends the episode and schedules nothing", state: State{Status: StatusRecovering, FailCount: 4, NextAttemptAt: now, Episode: open()},
		step:  faultStep{decision: Decision{Action: ActionDegrade, Attempt: 5, Reason: ReasonRetriesExhausted}, info: info, episodeStart: now.Add(-time.Minute)},
		after: auditlog.KindDegraded, afterTo: StatusDegraded,
		check: func(t *testing.T, st State, c faultChange) {
			if !c.degrade || !c.next.IsZero() || !st.NextAttemptAt.IsZero() || st.DegradedReason != ReasonRetriesExhausted {
				t.Errorf("change %+v, state %+v", c, st)
			}
			if e := st.Episode; !e.EndedAt.Equal(now) || e.Outcome != "degraded ("+string(ReasonRetriesExhausted)+")" || len(e.Attempts) != 1 {
				t.Errorf("episode %+v", e)
			}
			if st.FailCount != 4 {
				t.Errorf("a degrade changed the fail count to %d", st.FailCount)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.state.Clone()
			c := faultOutcome(&tt.step, tt.state.Status, now, tt.held, &p)
			c.record(&st)
			c.apply(&st)
			if st.Status != tt.state.Status {
				t.Errorf("the status changed to %s: the state machine owns it", st.Status)
			}
			if c.fault.Kind != auditlog.KindFault || c.fault.StatusBefore != tt.state.Status || c.fault.StatusAfter != tt.state.Status || c.fault.ErrorCode != 503 {
				t.Errorf("fault event %+v", c.fault)
			}
			if c.after.Kind != tt.after || c.after.StatusBefore != tt.state.Status || c.after.StatusAfter != tt.afterTo || c.after.Component != "src" {
				t.Errorf("second event %+v, want %s to %s", c.after, tt.after, tt.afterTo)
			}
			tt.check(t, st, c)
		})
	}
}

// Applying a managed rule to a pipeline decides from its state alone:
// the pipeline must be degraded by an error (not shutting down, not
// force-stopped by a user), the rule must be the policy's, match the
// error with its plugin and retry; then the pipeline waits for a restart
// on the rule's schedule in a new episode, its error reclassified by the
// rule. A force-stopped pipeline whose run is still ending is not taken.
func TestRuleApplication(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	failed := ErrorInfo{At: now.Add(-time.Hour), Code: 503, Class: "fatal", Source: "rule", Message: "unavailable", Component: "src", ComponentKind: "source", Rule: "give-up"}
	rule := func(action string, plugins ...string) *Rule {
		p := mustPolicy(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "retry-503", Action: action,
			Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}, Plugins: plugins},
			Policy: config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(30 * time.Second)}}}})
		for _, rules := range p.RuleSet() {
			for i := range rules {
				if rules[i].Name == "retry-503" {
					return &rules[i]
				}
			}
		}
		panic("the rule did not compile into the policy")
	}
	degraded := State{Status: StatusDegraded, DegradedReason: ReasonFatal, FailCount: 3, LastError: &failed}
	forced := degraded
	forced.DegradedReason = ReasonForceStop
	noError := degraded
	noError.LastError = nil
	tests := []struct {
		name         string
		state        State
		current      phase
		shuttingDown bool
		rule         *Rule
		why          string
	}{
		{"shutting down", degraded, phaseDegraded, true, rule(config.ActionRetry), "conduit is shutting down"},
		{"not degraded", degraded, phaseWaiting, false, rule(config.ActionRetry), "not degraded (recovering)"},
		{"force-stopped", forced, phaseDegraded, false, rule(config.ActionRetry), "force-stopped by a user: start it to run it again"},
		{"force-stopped, its run still ending", degraded, phaseForceStopping, false, rule(config.ActionRetry), "force-stopped by a user: start it to run it again"},
		{"no error", noError, phaseDegraded, false, rule(config.ActionRetry), "no error recorded"},
		{"not the policy's", degraded, phaseDegraded, false, nil, "the rule does not apply to this pipeline's policy"},
		{"another plugin", degraded, phaseDegraded, false, rule(config.ActionRetry, "builtin:kafka"), "its last error does not match the rule"},
		{"a rule that degrades", degraded, phaseDegraded, false, rule(config.ActionDegrade), "the rule degrades: it would decide the same"},
		{"a rule that retries", degraded, phaseDegraded, false, rule(config.ActionRetry), "restart in 30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.state
			a := ruleApplicationOf(&tt.state, tt.current, tt.shuttingDown, tt.rule,
				func(f *Fault) { f.Pipeline, f.Plugin = "orders", "builtin:postgres" },
				auditlog.ActorUser, now, 0.5)
			if a.outcome.Why != tt.why {
				t.Fatalf("why %q, want %q", a.outcome.Why, tt.why)
			}
			if !reflect.DeepEqual(tt.state, before) {
				t.Fatalf("the state given changed: %+v", tt.state)
			}
			if !a.outcome.Restarted {
				return
			}
			next := now.Add(30 * time.Second)
			if !a.outcome.NextAttemptAt.Equal(next) {
				t.Fatalf("next attempt %v, want %v", a.outcome.NextAttemptAt, next)
			}
			e := a.event
			if e.Kind != auditlog.KindRecovering || e.StatusBefore != StatusDegraded || e.StatusAfter != StatusRecovering || e.Actor != auditlog.ActorUser ||
				e.Attempt != 1 || e.Delay != 30*time.Second || !e.NextAttemptAt.Equal(next) || e.ErrorRule != "retry-503" || e.ErrorClass != cerrors.ClassTransient ||
				!strings.Contains(e.Message, `rule "retry-503" applied by user`) {
				t.Errorf("event %+v", e)
			}
			st := tt.state
			a.apply(&st)
			if st.DegradedReason != "" || st.FailCount != 1 || !st.NextAttemptAt.Equal(next) || st.LastError.Rule != "retry-503" ||
				st.LastError.Source != cerrors.SourceRule || st.LastError.Class != cerrors.ClassTransient || failed.Rule != "give-up" {
				t.Errorf("state after %+v (error %+v)", st, st.LastError)
			}
			if ep := st.Episode; ep == nil || !ep.StartedAt.Equal(now) || len(ep.Attempts) != 1 || ep.Attempts[0].Number != 1 ||
				!ep.Attempts[0].FailedAt.Equal(failed.At) || ep.RuleCounts["retry-503"] != 1 {
				t.Errorf("episode %+v", st.Episode)
			}
		})
	}
}
