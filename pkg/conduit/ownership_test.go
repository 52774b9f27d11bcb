package conduit

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// What a plan's changes mean here: a process alone applies every one; an
// instance of a cluster leaves creations to the instance each pipeline
// belongs to, updates to the instance that runs it, and does not delete a
// pipeline it hands over to the instances that still know it.
func TestWhatAPlanMeansForOwnership(t *testing.T) {
	r := &Runtime{log: zap.NewNop(), byID: map[string]*managedPipeline{"here": {cfg: config.Pipeline{ID: "here"}}}}
	changes := map[string]reconciler.Change{
		"create":        {Action: reconciler.Create, ID: "new"},
		"update here":   {Action: reconciler.Update, ID: "here"},
		"update there":  {Action: reconciler.Update, ID: "there"},
		"delete":        {Action: reconciler.Delete, ID: "gone"},
		"delete handed": {Action: reconciler.Delete, ID: "handed"},
		"unchanged":     {Action: reconciler.Unchanged, ID: "here"},
		"invalid":       {Action: reconciler.Invalid, ID: "broken"},
	}
	alone := solo{r}.plan(context.Background(), reconciler.Plan{})
	inCluster := fleetPlan{f: newFleet(r, &cluster.Membership{}, nil), handedOff: map[string][]string{"handed": {"i2"}}}
	want := map[string]bool{"create": false, "update here": true, "update there": false, "delete": true,
		"delete handed": false, "unchanged": true, "invalid": true}
	for name, c := range changes {
		if !alone.appliesHere(c) {
			t.Errorf("alone, %s: not applied here", name)
		}
		if got := inCluster.appliesHere(c); got != want[name] {
			t.Errorf("in a cluster, %s: applied here %v, want %v", name, got, want[name])
		}
	}
	if !(solo{r}).alone() || (&fleet{}).alone() {
		t.Error("only a process alone is alone on its store")
	}
	if g := (solo{r}).guards(); g.fenceOf != nil || g.owns != nil || g.mayWrite != nil {
		t.Error("a process alone guards its writes")
	}
}
