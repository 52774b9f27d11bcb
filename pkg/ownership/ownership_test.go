package ownership

import (
	"context"
	"slices"
	"testing"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// A process alone applies every change of a plan itself, is alone on its
// store, guards none of its writes, and knows what it supervises.
func TestSoloOwnsEverything(t *testing.T) {
	known := []reconciler.Running{{Pipeline: config.Pipeline{ID: "a"}}, {Pipeline: config.Pipeline{ID: "b"}}}
	s := Solo{Known: func() []reconciler.Running { return known }}
	plan := s.Plan(context.Background(), reconciler.Plan{})
	for _, action := range []reconciler.Action{reconciler.Create, reconciler.Update, reconciler.Delete, reconciler.Unchanged, reconciler.Invalid} {
		if !plan.AppliesHere(reconciler.Change{Action: action, ID: "x"}) {
			t.Errorf("%v: not applied here", action)
		}
	}
	if !s.Alone() {
		t.Error("a process alone is not alone on its store")
	}
	if g := s.Guards(); g.FenceOf != nil || g.Owns != nil || g.MayWrite != nil {
		t.Error("a process alone guards its writes")
	}
	if got := s.KnownPipelines(); !slices.EqualFunc(got, known, func(a, b reconciler.Running) bool { return a.Pipeline.ID == b.Pipeline.ID }) {
		t.Errorf("known: %v", got)
	}
	ids, err := s.EventsOfOthers(context.Background(), []string{"a"})
	if err != nil || !slices.Equal(ids, []string{"a"}) {
		t.Errorf("events of others: %v, %v", ids, err)
	}
	ready := false
	s.Run(context.Background(), context.Background(), func() { ready = true }, nil)
	if !ready {
		t.Error("a process alone is not ready once it runs")
	}
}
