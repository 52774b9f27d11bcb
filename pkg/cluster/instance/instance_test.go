package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

func knownIDs(known []reconciler.Running) []string {
	ids := make([]string, len(known))
	for i, k := range known {
		ids[i] = k.Pipeline.ID + "@" + k.Fingerprint
	}
	return ids
}

// An instance's known pipelines follow each plan: in file order, updated
// in place, deleted ones gone, created ones last, an invalid version
// keeps the known one only when the plan keeps it.
func TestKnownAfterAPlan(t *testing.T) {
	running := func(id, fp string) reconciler.Running {
		return reconciler.Running{Pipeline: config.Pipeline{ID: id}, Fingerprint: fp}
	}
	desired := func(id string) *reconciler.Desired { return &reconciler.Desired{Pipeline: config.Pipeline{ID: id}} }
	known := []reconciler.Running{running("a", "1"), running("b", "1"), running("c", "1"), running("d", "1"), running("e", "1")}
	plan := reconciler.Plan{Changes: []reconciler.Change{
		{Action: reconciler.Delete, ID: "b"},
		{Action: reconciler.Update, ID: "c", Desired: desired("c"), Fingerprint: "2"},
		{Action: reconciler.Create, ID: "f", Desired: desired("f"), Fingerprint: "1"},
		{Action: reconciler.Invalid, ID: "d", Kept: true},
		{Action: reconciler.Invalid, ID: "e"},
		{Action: reconciler.Unchanged, ID: "a", Desired: desired("a"), Fingerprint: "1"},
	}}
	got := knownIDs(knownAfter(known, plan))
	if want := []string{"a@1", "c@2", "d@1", "f@1"}; !slices.Equal(got, want) {
		t.Fatalf("known after the plan: %v, want %v", got, want)
	}
	// A pipeline the plan does not name is no longer desired.
	if got := knownAfter(known, reconciler.Plan{}); len(got) != 0 {
		t.Fatalf("known after an empty plan: %v", knownIDs(got))
	}
}

// Writes of a pipeline carry the token of the lease this instance holds,
// and token 0 (never current) when it holds none; keys of no pipeline
// are not fenced. Destination writes stop once the lease may have
// expired by this instance's clock.
func TestFenceAndWriteGuard(t *testing.T) {
	f := newFleet(nil, Options{Log: zap.NewNop()}, &cluster.Membership{}, nil)
	t.Cleanup(f.keeper.close)
	f.ttl = time.Minute
	f.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: "mine", Token: 7}) })
	key := func(prefix, id string) []byte { return []byte(prefix + store.KeyPart(id) + "/x") }
	cases := []struct {
		key  []byte
		want *store.Fence
	}{
		{key(store.PrefixPosition, "mine"), &store.Fence{Pipeline: "mine", Token: 7}},
		{[]byte(store.PrefixPipelineState + "mine"), &store.Fence{Pipeline: "mine", Token: 7}},
		{key(store.PrefixAuditLog, "theirs"), &store.Fence{Pipeline: "theirs", Token: 0}},
		{[]byte(store.PrefixManagedRule + "r"), nil},
	}
	for _, tc := range cases {
		got := f.fenceOf(tc.key)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("fence of %s: %v, want %v", tc.key, got, tc.want)
		}
	}

	// Never renewed: nothing may be written.
	if err := f.mayWrite("mine"); !errors.Is(err, errLeaseExpired) {
		t.Fatalf("before any renewal: %v", err)
	}
	f.update(func(d *draft) { d.renewedAt(f.sinceEpoch(), nil) })
	if err := f.mayWrite("mine"); err != nil {
		t.Fatalf("just renewed: %v", err)
	}
	if err := f.mayWrite("theirs"); !errors.Is(err, errLeaseExpired) {
		t.Fatalf("a pipeline this instance does not hold: %v", err)
	}
	// Renewed longer ago than three quarters of the TTL: the lease may be
	// gone by the database's clock.
	f.update(func(d *draft) { d.renewedAt(f.sinceEpoch()-f.ttl*writePercent/100-time.Millisecond, nil) })
	if err := f.mayWrite("mine"); !errors.Is(err, errLeaseExpired) {
		t.Fatalf("renewed %s ago: %v", f.ttl*writePercent/100, err)
	}
}

// supervising is a Host that supervises the given pipelines and does
// nothing else.
type supervising map[string]bool

func (s supervising) Supervised(id string) (api.Supervised, bool) {
	if s[id] {
		return nopSupervised{}, false
	}
	return nil, false
}
func (supervising) TakeUp(context.Context, reconciler.Running, lifecycle.Takeover, string) error {
	return nil
}
func (supervising) Retire(context.Context, string, lifecycle.Retirement, time.Duration) {}
func (supervising) Forget(context.Context, config.Pipeline, lifecycle.Actor) error      { return nil }
func (supervising) SavedState(context.Context, string) (lifecycle.State, bool, error) {
	return lifecycle.State{}, false, nil
}
func (supervising) Reload()                           {}
func (supervising) ReloadRules(context.Context) error { return nil }
func (supervising) BetweenPlans(fn func())            { fn() }
func (supervising) Audit() *auditlog.Log              { return nil }

type nopSupervised struct{}

func (nopSupervised) Info() api.PipelineInfo                         { return api.PipelineInfo{} }
func (nopSupervised) State(context.Context) (lifecycle.State, error) { return lifecycle.State{}, nil }
func (nopSupervised) Start(context.Context) error                    { return nil }
func (nopSupervised) Stop(context.Context, bool) error               { return nil }

// What a plan's changes mean for an instance of a cluster: it leaves
// creations to the instance each pipeline belongs to, updates to the
// instance that runs it, and does not delete a pipeline it hands over to
// the instances that still know it.
func TestWhatAPlanMeansInACluster(t *testing.T) {
	f := newFleet(supervising{"here": true}, Options{Log: zap.NewNop()}, &cluster.Membership{}, nil)
	t.Cleanup(f.keeper.close)
	inCluster := fleetPlan{f: f, handedOff: map[string][]string{"handed": {"i2"}}}
	changes := map[string]reconciler.Change{
		"create":        {Action: reconciler.Create, ID: "new"},
		"update here":   {Action: reconciler.Update, ID: "here"},
		"update there":  {Action: reconciler.Update, ID: "there"},
		"delete":        {Action: reconciler.Delete, ID: "gone"},
		"delete handed": {Action: reconciler.Delete, ID: "handed"},
		"unchanged":     {Action: reconciler.Unchanged, ID: "here"},
		"invalid":       {Action: reconciler.Invalid, ID: "broken"},
	}
	want := map[string]bool{"create": false, "update here": true, "update there": false, "delete": true,
		"delete handed": false, "unchanged": true, "invalid": true}
	for name, c := range changes {
		if got := inCluster.AppliesHere(c); got != want[name] {
			t.Errorf("%s: applied here %v, want %v", name, got, want[name])
		}
	}
	if f.Alone() {
		t.Error("an instance of a cluster is alone on its store")
	}
	if g := f.Guards(); g.FenceOf == nil || g.Owns == nil || g.MayWrite == nil {
		t.Error("an instance of a cluster leaves writes unguarded")
	}
}
