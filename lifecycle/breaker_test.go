package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// breakerLog records what the breakers release and tell.
type breakerLog struct {
	released []string
	changes  []string
}

func (l *breakerLog) release(p string, clock *fakeClock) func(time.Time) {
	return func(at time.Time) { l.released = append(l.released, fmt.Sprintf("%s+%s", p, at.Sub(clock.Now()))) }
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
			clock := newFakeClock()
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
