package instance

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/cluster"
)

// Changes sent to the keeper at once are all applied, each caller sees
// its own change published when update returns, and a state published
// before is never changed afterwards: readers hold it without a lock.
func TestKeeperAppliesEveryChangeAndNeverChangesWhatItPublished(t *testing.T) {
	k := newKeeper(initialState())
	t.Cleanup(k.close)
	before := k.state()
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint("p", i)
			k.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: id, Token: int64(i + 1)}) })
			if l, ok := k.state().lease(id); !ok || l.Token != int64(i+1) {
				t.Errorf("%s: not held once update returned (%v, %v)", id, l, ok)
			}
		})
	}
	wg.Wait()
	if got := k.state().leases.len(); got != n {
		t.Fatalf("leases held: %d, want %d", got, n)
	}
	if before.leases.len() != 0 {
		t.Fatalf("the state published before the changes was changed: %d leases", before.leases.len())
	}

	held := k.state()
	k.update(func(d *draft) {
		d.unhold("p0")
		d.addDeletion(pendingDeletion{})
		d.watch("p1", 1)
	})
	if _, ok := held.lease("p0"); !ok || len(held.undeleted) != 0 || held.watchedHere("p1") {
		t.Fatal("a published state was changed by a later change")
	}
	if _, ok := k.state().lease("p0"); ok {
		t.Fatal("p0 still held after unhold")
	}
}

// Once the keeper has ended, a change is not applied and its sender does
// not wait; the last state stays readable.
func TestKeeperAfterClose(t *testing.T) {
	k := newKeeper(initialState())
	k.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: "a", Token: 1}) })
	k.close()
	applied := false
	k.update(func(d *draft) { applied = true })
	if applied {
		t.Fatal("a change was applied after close")
	}
	if _, ok := k.state().lease("a"); !ok {
		t.Fatal("the last state is not readable after close")
	}
}

// A renewal that finds leases taken over revokes those still held as
// they were (an older lease of a pipeline acquired again is not), in the
// same state as the renewal time, and queues them once for the balance
// loop.
func TestRenewalRevokesLostLeases(t *testing.T) {
	d := newDraft(initialState())
	d.hold(cluster.Lease{PipelineID: "a", Token: 1})
	d.hold(cluster.Lease{PipelineID: "b", Token: 5})
	d.hold(cluster.Lease{PipelineID: "c", Token: 2})
	lost := []cluster.Lease{{PipelineID: "a", Token: 1}, {PipelineID: "b", Token: 4}}
	d.renewedAt(3*time.Second, lost)
	s := d.publish()
	if s.renewed != 3*time.Second {
		t.Fatalf("renewed %s", s.renewed)
	}
	if s.writable("a") || !s.writable("b") || !s.writable("c") {
		t.Fatalf("writable a, b, c: %v %v %v; want false true true", s.writable("a"), s.writable("b"), s.writable("c"))
	}
	if _, held := s.lease("a"); !held || s.leases.len() != 3 {
		t.Fatalf("a revoked lease is held until its pipeline is stopped: held %d", s.leases.len())
	}
	if _, ok := d.unhold("nothing"); ok || d.leases.len() != 3 {
		t.Fatalf("unhold of a lease not held: %v, %d held", ok, d.leases.len())
	}
	if got := d.takeLost(); !slices.Equal(got, lost) {
		t.Fatalf("lost: %v", got)
	}
	if got := d.takeLost(); len(got) != 0 {
		t.Fatalf("lost twice: %v", got)
	}
}

// The first watcher of every pipeline's events catches up itself; those
// after it wait until it did.
func TestWatchersOfEveryPipelineWaitForTheFirstToCatchUp(t *testing.T) {
	d := newDraft(initialState())
	first, mine := d.watchEvery()
	if !first || mine == nil {
		t.Fatalf("first watcher: first %v", first)
	}
	second, wait := d.watchEvery()
	if second || wait != mine {
		t.Fatal("the second watcher does not wait for the first")
	}
	select {
	case <-wait:
		t.Fatal("the second watcher starts before the first caught up")
	default:
	}
	d.caughtUpWith(mine)
	d.caughtUpWith(mine) // a second call must not panic
	select {
	case <-wait:
	default:
		t.Fatal("the second watcher still waits after the first caught up")
	}
	if !d.publish().watchedHere("any") {
		t.Fatal("every pipeline is watched while watchers of every pipeline are counted")
	}
}

// The balance round says once that the live instances' views differ,
// after they have differed for the grace, and once that they agree again.
func TestRoundReportsDifferingViewsOnce(t *testing.T) {
	d := newDraft(initialState())
	d.known = &knownPipelines{view: "mine", ids: []string{"a"}}
	differ := roundRead{instances: cluster.LiveInstances{IDs: []string{"i1", "i2"}, Views: map[string]string{"i1": "mine", "i2": "other"}},
		views: map[string]cluster.KnownPipelines{"i2": {View: "other", IDs: []string{"a", "b"}}}}
	start := time.Unix(1000, 0)
	grace := 10 * time.Second
	var said []viewsNews
	for _, at := range []time.Duration{0, 5 * time.Second, 10 * time.Second, 20 * time.Second} {
		out := d.newRound(differ, start.Add(at), grace)
		said = append(said, out.views)
		if !slices.Equal(out.all, []string{"a", "b"}) || !out.knows("i2", "b") || out.knows("i1", "b") {
			t.Fatalf("knowledge at %s: all %v", at, out.all)
		}
	}
	if want := []viewsNews{viewsNothingNew, viewsNothingNew, viewsNowDiffer, viewsNothingNew}; !slices.Equal(said, want) {
		t.Fatalf("said %v, want %v", said, want)
	}
	if s := d.publish(); !s.viewsDiffer || !slices.Equal(s.round.foreign["b"], []string{"i2"}) {
		t.Fatalf("published: views differ %v, foreign %v", s.viewsDiffer, s.round.foreign)
	}
	agree := roundRead{instances: cluster.LiveInstances{IDs: []string{"i1", "i2"}, Views: map[string]string{"i1": "mine", "i2": "mine"}}}
	if out := d.newRound(agree, start.Add(30*time.Second), grace); out.views != viewsAgreeAgain {
		t.Fatalf("views agree again: said %v", out.views)
	}
	if s := d.publish(); s.viewsDiffer || len(s.viewSets) != 1 {
		// The pipelines of a view read are kept until a round whose views
		// differ finds no instance with it.
		t.Fatalf("after agreeing: views differ %v, view sets %d", s.viewsDiffer, len(s.viewSets))
	}
}
