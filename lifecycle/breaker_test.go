package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
)

// breakerLog records what the breakers release and tell.
type breakerLog struct {
	released []string
	changes  []string
}

func (l *breakerLog) release(p string, _ *clocktest.Clock) func(time.Duration) {
	return func(after time.Duration) { l.released = append(l.released, fmt.Sprintf("%s+%s", p, after)) }
}

func TestBreakerStateMachine(t *testing.T) {
	type step struct {
		op       string // fault, success, leave, advance
		dep, p   string
		d        time.Duration
		wantHold bool
	}
	for _, tc := range []struct {
		name         string
		steps        []step
		wantReleased string
		wantChanges  string
		wantOpen     []string
	}{
		{
			name: "below the threshold nothing is held",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"},
				{op: "fault", dep: "pg", p: "a"},
			},
			wantOpen: []string{},
		},
		{
			name: "failures outside the window do not count",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"},
				{op: "advance", d: 61 * time.Second},
				{op: "fault", dep: "pg", p: "c"},
			},
			wantOpen: []string{},
		},
		{
			name: "the third pipeline opens it and is the canary; the others wait",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"},
				{op: "fault", dep: "pg", p: "c"},
				{op: "fault", dep: "pg", p: "a", wantHold: true}, {op: "fault", dep: "pg", p: "b", wantHold: true},
				{op: "fault", dep: "pg", p: "c"}, // the canary keeps retrying
				{op: "fault", dep: "other", p: "d"},
			},
			wantChanges: "open pg canary c failed [a b c]",
			wantOpen:    []string{"pg c [a b]"},
		},
		{
			name: "the canary's success closes it and releases the others, spread",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"}, {op: "fault", dep: "pg", p: "c"},
				{op: "fault", dep: "pg", p: "a", wantHold: true}, {op: "fault", dep: "pg", p: "b", wantHold: true},
				{op: "fault", dep: "pg", p: "d", wantHold: true},
				{op: "success", dep: "pg", p: "a"}, // not the canary: nothing
				{op: "success", dep: "pg", p: "c"},
			},
			wantReleased: "a+0s b+1.666666666s d+3.333333333s",
			wantChanges:  "open pg canary c failed [a b c]; closed pg canary c released [a b d]",
			wantOpen:     []string{},
		},
		{
			name: "a canary that leaves hands over to a held pipeline",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"}, {op: "fault", dep: "pg", p: "c"},
				{op: "fault", dep: "pg", p: "a", wantHold: true}, {op: "fault", dep: "pg", p: "b", wantHold: true},
				{op: "leave", dep: "pg", p: "c"},
				{op: "fault", dep: "pg", p: "a"}, // the new canary retries
				{op: "leave", dep: "pg", p: "b"},
				{op: "success", dep: "pg", p: "a"},
			},
			wantReleased: "a+0s",
			wantChanges:  "open pg canary c failed [a b c]; closed pg canary a released []",
			wantOpen:     []string{},
		},
		{
			name: "the last one leaving closes it",
			steps: []step{
				{op: "fault", dep: "pg", p: "a"}, {op: "fault", dep: "pg", p: "b"}, {op: "fault", dep: "pg", p: "c"},
				{op: "leave", dep: "pg", p: "c"},
			},
			wantChanges: "open pg canary c failed [a b c]; closed pg canary c released []",
			wantOpen:    []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New()
			log := &breakerLog{}
			b := NewBreakers(BreakerConfig{Threshold: 3, Window: time.Minute, Stagger: 5 * time.Second}, clock, func(c BreakerChange) {
				s := fmt.Sprintf("closed %s canary %s released %v", c.Dependency, c.Canary, c.Released)
				if c.Open {
					s = fmt.Sprintf("open %s canary %s failed %v", c.Dependency, c.Canary, c.Failed)
				}
				log.changes = append(log.changes, s)
			})
			for i, s := range tc.steps {
				switch s.op {
				case "fault":
					if hold := b.Fault(s.dep, s.p, log.release(s.p, clock)); hold != s.wantHold {
						t.Fatalf("step %d: fault of %s held %v, want %v", i, s.p, hold, s.wantHold)
					}
				case "success":
					b.Success(s.dep, s.p)
				case "leave":
					b.Leave(s.dep, s.p)
				case "advance":
					clock.Advance(s.d)
				}
			}
			if got := strings.Join(log.released, " "); got != tc.wantReleased {
				t.Errorf("released %q, want %q", got, tc.wantReleased)
			}
			if got := strings.Join(log.changes, "; "); got != tc.wantChanges {
				t.Errorf("changes %q, want %q", got, tc.wantChanges)
			}
			open := []string{}
			for _, st := range b.States() {
				if st.Open {
					open = append(open, fmt.Sprintf("%s %s %v", st.Dependency, st.Canary, st.Held))
				}
			}
			if !slices.Equal(open, tc.wantOpen) {
				t.Errorf("open breakers %v, want %v", open, tc.wantOpen)
			}
		})
	}
}

// Three supervisors sharing a breaker: the pipelines after the one that
// opened it wait without restarting; the canary's first record releases
// them, spread out; a pipeline whose rule degrades still degrades.
func TestSupervisorsShareABreaker(t *testing.T) {
	clock := clocktest.New()
	b := NewBreakers(BreakerConfig{Threshold: 2, Window: time.Minute, Stagger: 10 * time.Second}, clock, nil)
	withBreaker := func(id string) func(*Config) {
		return func(c *Config) {
			c.PipelineID, c.Breakers = id, b
			c.DependencyOf = func(component string) string {
				if component == "pg" {
					return "orders-db"
				}
				return ""
			}
		}
	}
	p := mustPolicy(config.ErrorRecoveryOverride{MinDelay: ptr(time.Second), MaxDelay: ptr(time.Second)})
	h1 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("a"))
	h2 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("b"))
	h3 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("c"))
	for _, h := range []*harness{h1, h2, h3} {
		h.expect(auditlog.KindRunning)
	}
	h1.nextRun().fail(transientErr())
	if e := h1.expect(auditlog.KindRecovering); e.Reason == "breaker" || e.NextAttemptAt.IsZero() {
		t.Fatalf("the first failure is held: %+v", e)
	}
	h2.nextRun().fail(transientErr()) // opens the breaker: b is the canary
	if e := h2.expect(auditlog.KindRecovering); e.Reason == "breaker" {
		t.Fatalf("the canary is held: %+v", e)
	}
	h3.nextRun().fail(transientErr())
	e := h3.expect(auditlog.KindRecovering)
	if e.Reason != "breaker" || !strings.Contains(e.Message, `"orders-db"`) || !e.NextAttemptAt.IsZero() {
		t.Fatalf("c is not held: %+v", e)
	}
	if st := h3.state(); st.HeldBy != "orders-db" || st.LastError.Dependency != "orders-db" {
		t.Fatalf("c's state %+v", st)
	}
	h3.advance(time.Hour)
	h3.noRun()
	// a restarts on its schedule, fails again: now it waits too.
	h1.advance(time.Second)
	h1.nextRun().fail(transientErr())
	h1.expect(auditlog.KindRestarted)
	if e := h1.expect(auditlog.KindRecovering); e.Reason != "breaker" {
		t.Fatalf("a's second failure is not held: %+v", e)
	}
	if st := b.States(); len(st) != 1 || !st[0].Open || st[0].Canary != "b" || len(st[0].Held) != 2 {
		t.Fatalf("breakers %+v", st)
	}
	// The canary gets through: a and c are released, 0s and 5s apart.
	h2.advance(time.Second)
	h2.nextRun().ack()
	h2.expect(auditlog.KindRestarted)
	h2.expect(auditlog.KindRecovered)
	for i, h := range []*harness{h1, h3} {
		e := h.expect(auditlog.KindRecovering)
		if e.Reason != "breaker" || !strings.Contains(e.Message, "is back") {
			t.Fatalf("pipeline %d released with %+v", i, e)
		}
		if want := time.Duration(i) * 5 * time.Second; e.Delay != want {
			t.Errorf("pipeline %d restarts in %s, want %s", i, e.Delay, want)
		}
		h.advance(5 * time.Second)
		h.nextRun()
	}
	if st := b.States(); len(st) != 0 {
		t.Errorf("breakers after closing: %+v", st)
	}
}

// A standalone connector names the dependency in its error's details.
func TestDependencyFromTheErrorsDetails(t *testing.T) {
	err := cerrors.FromWire(`{"code":503,"message":"insert: connection refused","details":{"dependency":"orders-db"}}`)
	if info := describeError(err, time.Now()); info.Dependency != "orders-db" || info.Code != 503 {
		t.Fatalf("%+v", info)
	}
	if info := describeError(errors.New("plain"), time.Now()); info.Dependency != "" {
		t.Fatalf("a plain error names %q", info.Dependency)
	}
}

// A pipeline whose own rule degrades it degrades, breaker or not, and
// leaves the breaker.
func TestARuleThatDegradesWinsOverTheBreaker(t *testing.T) {
	b := NewBreakers(BreakerConfig{Threshold: 1, Window: time.Minute, Stagger: time.Second}, clocktest.New(), nil)
	dep := func(id string) func(*Config) {
		return func(c *Config) {
			c.PipelineID, c.Breakers = id, b
			c.DependencyOf = func(string) string { return "orders-db" }
		}
	}
	canary := newHarnessWith(t, defaultPolicy(), State{Status: StatusRunning}, dep("canary"))
	canary.expect(auditlog.KindRunning)
	canary.nextRun().fail(transientErr())
	canary.expect(auditlog.KindRecovering)

	strict := mustPolicy(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "no-503", Action: config.ActionDegrade,
		Match: config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}}}}})
	h := newHarnessWith(t, strict, State{Status: StatusRunning}, dep("strict"))
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	if e := h.expect(auditlog.KindDegraded); e.Reason != string(ReasonRule) {
		t.Fatalf("degraded for %q, want its rule", e.Reason)
	}
	if st := b.States(); len(st) != 1 || len(st[0].Held) != 0 {
		t.Fatalf("breakers %+v, want the degraded pipeline not held", st)
	}
}

// Dependencies named once and never again are forgotten once they are
// many: an error that puts a request id in its dependency cannot grow the
// breakers without end.
func TestBreakersForgetOldDependencies(t *testing.T) {
	clock := clocktest.New()
	b := NewBreakers(BreakerConfig{Threshold: 3, Window: time.Minute}, clock, nil)
	for i := range 5000 {
		b.Fault(fmt.Sprintf("db-%d", i), "p", func(time.Duration) {})
		if i%1000 == 999 {
			clock.Advance(2 * time.Minute)
		}
	}
	b.mu.Lock()
	n := len(b.deps)
	b.mu.Unlock()
	if n > 2*pruneBreakersAt {
		t.Fatalf("%d dependencies tracked after 5,000 named once", n)
	}
}

// An idle canary that reconnected and stayed up for its probation closes
// its breaker: the dependency is back without a record going through.
func TestIdleCanaryClosesTheBreakerAfterItsProbation(t *testing.T) {
	clock := clocktest.New()
	b := NewBreakers(BreakerConfig{Threshold: 2, Window: time.Minute, Stagger: 10 * time.Second}, clock, nil)
	withBreaker := func(id string) func(*Config) {
		return func(c *Config) {
			c.PipelineID, c.Breakers = id, b
			c.DependencyOf = func(string) string { return "orders-db" }
		}
	}
	p := mustPolicy(config.ErrorRecoveryOverride{MinDelay: ptr(time.Second), MaxDelay: ptr(time.Second), Probation: ptr(10 * time.Second)})
	h1 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("a"))
	h2 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("b"))
	h3 := newHarnessWith(t, p, State{Status: StatusRunning}, withBreaker("c"))
	for _, h := range []*harness{h1, h2, h3} {
		h.expect(auditlog.KindRunning)
	}
	h1.nextRun().fail(transientErr())
	h1.expect(auditlog.KindRecovering)
	h2.nextRun().fail(transientErr()) // opens the breaker: b is the canary
	h2.expect(auditlog.KindRecovering)
	h3.nextRun().fail(transientErr())
	if e := h3.expect(auditlog.KindRecovering); e.Reason != "breaker" {
		t.Fatalf("c is not held: %+v", e)
	}
	h2.advance(time.Second)
	h2.expect(auditlog.KindRestarted)
	h2.nextRun().open()
	h2.advance(10 * time.Second)
	if e := h2.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByProbation) {
		t.Fatalf("canary: %+v", e)
	}
	if e := h3.expect(auditlog.KindRecovering); e.Reason != "breaker" || !strings.Contains(e.Message, "is back") {
		t.Fatalf("c released with %+v", e)
	}
	if st := b.States(); len(st) != 0 {
		t.Errorf("breakers after the canary's probation: %+v", st)
	}
}
