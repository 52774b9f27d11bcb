package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/config"
)

// recordingTarget records what Apply asks of it; elsewhere lists the
// pipelines another instance carries out, failing the ones whose create
// or update fails.
type recordingTarget struct {
	calls     []string
	elsewhere map[string]bool
	failing   map[string]bool
}

func (t *recordingTarget) AppliesHere(c Change) bool { return !t.elsewhere[c.ID] }

func (t *recordingTarget) Create(_ context.Context, d Desired, actor auditlog.Actor) error {
	t.calls = append(t.calls, fmt.Sprintf("create %s by %s", d.Pipeline.ID, actor))
	if t.failing[d.Pipeline.ID] {
		return errors.New("cannot build")
	}
	return nil
}

func (t *recordingTarget) Update(_ context.Context, c Change, actor auditlog.Actor) error {
	t.calls = append(t.calls, fmt.Sprintf("update %s by %s", c.ID, actor))
	if t.failing[c.ID] {
		return errors.New("cannot build")
	}
	return nil
}

func (t *recordingTarget) Delete(_ context.Context, id string, actor auditlog.Actor) {
	t.calls = append(t.calls, fmt.Sprintf("delete %s by %s", id, actor))
}

func (t *recordingTarget) Keep(id string, origin Origin) {
	t.calls = append(t.calls, fmt.Sprintf("keep %s at %s", id, origin))
}

func TestApply(t *testing.T) {
	fromFile := func(id string) *Desired {
		d := want(pipe(id, "p.yml", 10, "1"))
		return &d
	}
	fromAPI := func(id string) *Desired {
		d := api(pipe(id, "", 0, "1"))
		return &d
	}
	ranFromFile := func(id string) *Running {
		r := running(pipe(id, "p.yml", 10, "1"))
		return &r
	}
	second := Problem{PipelineID: "a", File: "copy.yml", Line: 3, Err: errors.New("duplicate pipeline id a")}
	broken := Problem{PipelineID: "bad", File: "bad.yml", Line: 7, Err: errors.New("unknown plugin")}
	unreadable := Problem{File: "garbled.yml", Err: errors.New("cannot parse")}

	tests := []struct {
		name        string
		plan        Plan
		asked       auditlog.Actor
		elsewhere   []string
		failing     []string
		wantCalls   []string
		wantInvalid []string // id@file:line kept?
	}{{
		name: "every action, in the plan's order, by whoever the source says",
		plan: Plan{Changes: []Change{
			{Action: Delete, ID: "gone", Before: ranFromFile("gone")},
			{Action: Update, ID: "u", Desired: fromAPI("u")},
			{Action: Create, ID: "a", Desired: fromFile("a")},
			{Action: Unchanged, ID: "same", Desired: fromFile("same")},
			{Action: Unchanged, ID: "known-elsewhere"}, // no desired entry: nothing to record
		}},
		asked:     auditlog.ActorUser,
		wantCalls: []string{"delete gone by config", "update u by user", "create a by config", "keep same at p.yml:10"},
	}, {
		name: "invalid entries, second definitions and problems naming no pipeline are listed once each",
		plan: Plan{Changes: []Change{
			{Action: Create, ID: "a", Desired: fromFile("a"), Problems: []Problem{second}},
			{Action: Invalid, ID: "bad", Problems: []Problem{broken}},
			{Action: Invalid, ID: "kept", Before: ranFromFile("kept"), Kept: true, Problems: []Problem{{PipelineID: "kept", File: "p.yml", Line: 10, Err: errors.New("bad rate")}}},
		}, Problems: []Problem{unreadable}},
		asked:       auditlog.ActorConfig,
		wantCalls:   []string{"create a by config"},
		wantInvalid: []string{"a@copy.yml:3", "bad@bad.yml:7", "kept@p.yml:10 kept", "@garbled.yml:0"},
	}, {
		name: "a failed create or update makes the entry invalid",
		plan: Plan{Changes: []Change{
			{Action: Update, ID: "u", Desired: fromFile("u")},
			{Action: Create, ID: "c", Desired: fromAPI("c")},
		}},
		asked:       auditlog.ActorUser,
		failing:     []string{"u", "c"},
		wantCalls:   []string{"update u by config", "create c by user"},
		wantInvalid: []string{"u@p.yml:10", "c@:0"},
	}, {
		name: "changes another instance carries out are left to it",
		plan: Plan{Changes: []Change{
			{Action: Delete, ID: "gone", Before: ranFromFile("gone")},
			{Action: Update, ID: "u", Desired: fromFile("u"), Problems: []Problem{{PipelineID: "u", File: "u-copy.yml", Line: 1, Err: errors.New("duplicate pipeline id u")}}},
			{Action: Create, ID: "a", Desired: fromFile("a"), Problems: []Problem{second}},
		}},
		asked:     auditlog.ActorConfig,
		elsewhere: []string{"gone", "u", "a"},
		// An update run elsewhere still lists its second definition here;
		// a create taken up elsewhere is listed by that instance.
		wantInvalid: []string{"u@u-copy.yml:1"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := &recordingTarget{elsewhere: map[string]bool{}, failing: map[string]bool{}}
			for _, id := range tt.elsewhere {
				target.elsewhere[id] = true
			}
			for _, id := range tt.failing {
				target.failing[id] = true
			}
			core, logs := observer.New(zap.ErrorLevel)
			invalid, err := Apply(context.Background(), tt.plan, target, tt.asked, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(target.calls, tt.wantCalls) {
				t.Errorf("calls\n got %q\nwant %q", target.calls, tt.wantCalls)
			}
			var got []string
			for _, e := range invalid {
				s := fmt.Sprintf("%s@%s:%d", e.Pipeline.ID, e.Pipeline.File, e.Pipeline.Line)
				if e.Kept {
					s += " kept"
				}
				got = append(got, s)
				if e.Err == nil {
					t.Errorf("%s: no error", s)
				}
			}
			if !slices.Equal(got, tt.wantInvalid) {
				t.Errorf("invalid\n got %q\nwant %q", got, tt.wantInvalid)
			}
			if logs.Len() != len(tt.wantInvalid) {
				t.Errorf("%d error lines logged, want one per invalid entry (%d)", logs.Len(), len(tt.wantInvalid))
			}
		})
	}
}

func TestApplyStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	target := &recordingTarget{}
	d := want(pipe("a", "p.yml", 1, "1"))
	_, err := Apply(ctx, Plan{Changes: []Change{{Action: Create, ID: "a", Desired: &d}}}, target, auditlog.ActorConfig, zap.NewNop())
	if !errors.Is(err, ErrNotApplied) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with an ended context: %v, want ErrNotApplied and context.Canceled", err)
	}
	if len(target.calls) > 0 {
		t.Fatalf("changes carried out after the context ended: %q", target.calls)
	}
}

func TestApplyWarnsOfAPipelineTakenUp(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := pipe("a", "p.yml", 1, "1")
	p.Warnings = []config.Warning{{Source: "p.yml:4", Message: "${RATE} is not set"}}
	d := want(p)
	plan := Plan{Changes: []Change{{Action: Create, ID: "a", Desired: &d}, {Action: Unchanged, ID: "a2", Desired: &d}}}
	if _, err := Apply(context.Background(), plan, &recordingTarget{}, auditlog.ActorConfig, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	got := logs.FilterMessageSnippet("${RATE} is not set").All()
	if len(got) != 1 || !strings.Contains(got[0].ContextMap()["at"].(string), "p.yml:4") {
		t.Fatalf("warnings logged: %v, want one for the create, naming p.yml:4 (none for an unchanged pipeline)", got)
	}
}
