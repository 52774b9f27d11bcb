package reconciler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/auditlog"
)

func TestHoldMassDeletion(t *testing.T) {
	a, b := pipe("a", "/p/a.yml", 3, "10"), pipe("b", "/p/team/b.yml", 3, "10")
	fromAPI := running(pipe("x", "", 0, "10"))
	held := "held: the pipeline files under /p (pipelines.path) define no pipeline any more, where they defined 2 (a, b)"
	for _, tc := range []struct {
		name     string
		running  []Running
		desired  []Desired
		problems []Problem
		// want: the plan's summary, with a held deletion's problem
		// shortened to "held: <its first words>".
		want string
	}{
		{
			name:    "the files define nothing any more: nothing deleted",
			running: []Running{running(a), running(b)},
			want:    "unchanged a (kept) !" + held + "\nunchanged b (kept) !" + held + "\nproblem /p: " + held,
		},
		{
			name:    "one file removed, another left: its pipeline is deleted",
			running: []Running{running(a), running(b)},
			desired: []Desired{want(b)},
			want:    "delete a\nunchanged b",
		},
		{
			name:     "the files hold only an invalid entry: not empty, the others are deleted",
			running:  []Running{running(a), running(b)},
			problems: []Problem{{PipelineID: "c", File: "/p/c.yml", Line: 2, Err: errors.New("bad")}},
			want:     "delete a\ndelete b\ninvalid c !bad",
		},
		{
			name:    "a pipeline of the API deleted while the files define nothing: deleted; the files' are held",
			running: []Running{running(a), running(b), fromAPI},
			want:    "delete x\nunchanged a (kept) !" + held + "\nunchanged b (kept) !" + held + "\nproblem /p: " + held,
		},
		{
			name:    "the files define nothing and nothing of theirs runs",
			running: []Running{fromAPI},
			desired: []Desired{{Pipeline: fromAPI.Pipeline}},
			want:    "unchanged x",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Make(tc.running, tc.desired, tc.problems)
			if err != nil {
				t.Fatal(err)
			}
			got := summary(HoldMassDeletion(plan, "/p"))
			got = shortenHeld(got)
			if got != tc.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// shortenHeld cuts each held deletion's message after its list of ids.
func shortenHeld(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "the pipeline files under"); j >= 0 {
			rest := l[j:]
			if k := strings.Index(rest, ": deleting all"); k >= 0 {
				rest = rest[:k]
			}
			lines[i] = l[:j] + "held: " + rest
		}
	}
	return strings.Join(lines, "\n")
}

// A held deletion deletes nothing, is logged as an error and is listed
// once, as an entry that keeps its pipelines running.
func TestApplyHoldsAMassDeletion(t *testing.T) {
	a, b := pipe("a", "/p/a.yml", 3, "10"), pipe("b", "/p/b.yml", 3, "10")
	plan, err := Make([]Running{running(a), running(b)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	target := &recordingTarget{}
	invalid, err := Apply(context.Background(), HoldMassDeletion(plan, "/p"), target, auditlog.ActorConfig, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if len(target.calls) != 0 {
		t.Errorf("the target was asked to %v", target.calls)
	}
	var he *DeletionHeldError
	if len(invalid) != 1 || !invalid[0].Kept || !errors.As(invalid[0].Err, &he) || strings.Join(he.IDs, ",") != "a,b" {
		t.Fatalf("invalid entries: %+v", invalid)
	}
	for _, want := range []string{"/p", "pipelines.allow-delete-all"} {
		if !strings.Contains(invalid[0].Err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, invalid[0].Err)
		}
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("not deleted").Len(); n != 1 {
		t.Errorf("%d errors logged about the held deletion, want 1: %v", n, logs.All())
	}
}
