package auditlog

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conduitry/conduit/pkg/store"
)

// TestSyncTakesUpAnotherInstancesEvents: two Logs on one store are two
// processes; b takes over pipeline p after a appended to it.
func TestSyncTakesUpAnotherInstancesEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		db := bk.open(t, "")
		a := openLog(t, db, Options{})
		b := openLog(t, db, Options{})
		w, err := b.Watch(ctx, "p", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			mustAppend(t, a, "p", KindRunning)
		}
		if got := b.LastSequence("p"); got != 0 {
			t.Fatalf("b sees sequence %d before Sync, want 0", got)
		}

		n, err := b.Sync(ctx, "p")
		if err != nil || n != 3 {
			t.Fatalf("Sync = %d, %v, want 3", n, err)
		}
		if got := receive(t, w, 3); !equalSeqs(got, seqRange(1, 3)) {
			t.Fatalf("watcher got %v, want 1..3", seqs(got))
		}
		if got := b.LastSequence("p"); got != 3 {
			t.Fatalf("LastSequence = %d after Sync, want 3", got)
		}
		if n, err := b.Sync(ctx, "p"); err != nil || n != 0 {
			t.Fatalf("second Sync = %d, %v, want 0", n, err)
		}

		// b continues the numbering, and the watcher gets the next event,
		// nothing twice.
		if e := mustAppend(t, b, "p", KindStopped); e.Sequence != 4 {
			t.Fatalf("b's append got sequence %d, want 4", e.Sequence)
		}
		if e := receive(t, w, 1)[0]; e.Sequence != 4 || e.Kind != KindStopped {
			t.Fatalf("watcher got %d %s, want 4 stopped", e.Sequence, e.Kind)
		}
		if got := mustList(t, b, "p", Query{}); !equalSeqs(got, seqRange(1, 4)) {
			t.Fatalf("b lists %v, want 1..4", seqs(got))
		}
	})
}

// TestSyncOfAPipelineNeverSeen: b was opened before p had events; a
// pipeline without events stays unknown.
func TestSyncOfAPipelineNeverSeen(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	a := openLog(t, db, Options{MaxEventsPerPipeline: 300})
	b := openLog(t, db, Options{MaxEventsPerPipeline: 300})

	if n, err := b.Sync(ctx, "none"); err != nil || n != 0 {
		t.Fatalf("Sync of a pipeline without events = %d, %v, want 0", n, err)
	}
	if ids := b.PipelineIDs(); len(ids) != 0 {
		t.Fatalf("PipelineIDs = %v after a Sync of a pipeline without events, want none", ids)
	}

	// More than a page, and trimmed by a: p starts above 1.
	for range 600 {
		mustAppend(t, a, "p", KindRunning)
	}
	first := stored(t, db, "p")[0]
	if first == 1 {
		t.Fatal("a did not trim p; the test needs it to")
	}
	n, err := b.Sync(ctx, "p")
	if err != nil || n != 600-int(first)+1 {
		t.Fatalf("Sync = %d, %v, want %d (the events stored)", n, err, 600-first+1)
	}
	if got := mustList(t, b, "p", Query{}); !equalSeqs(got, seqRange(first, 600)) {
		t.Fatalf("b lists %d events, want %d..600", len(got), first)
	}
	b.pipelines["p"].mu.Lock()
	oldest := b.pipelines["p"].oldest
	b.pipelines["p"].mu.Unlock()
	if oldest != first {
		t.Fatalf("oldest = %d, want the first stored, %d", oldest, first)
	}
	if e := mustAppend(t, b, "p", KindStopped); e.Sequence != 601 {
		t.Fatalf("b's append got sequence %d, want 601", e.Sequence)
	}
}

// TestSyncWhileWritingDoesNothing: a Log with writes of the pipeline in
// flight is its writer, and Sync leaves it alone.
func TestSyncWhileWritingDoesNothing(t *testing.T) {
	ctx := context.Background()
	shared := store.NewInMemory()
	a := openLog(t, shared, Options{})
	held := &holdingStore{Store: shared, hold: make(chan struct{})}
	b := openLog(t, held, Options{})
	defer close(held.hold)

	for range 3 {
		mustAppend(t, a, "p", KindRunning)
	}
	if err := b.Record(Event{PipelineID: "p", Kind: KindFault}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Sync(ctx, "p"); err != nil || n != 0 {
		t.Fatalf("Sync with a write in flight = %d, %v, want 0", n, err)
	}
	if got := b.LastSequence("p"); got != 0 {
		t.Fatalf("LastSequence = %d, want 0: Sync must not move it", got)
	}
}

// TestSyncConcurrently: syncs race each other and the other process's
// appends; the watcher gets every event once, in order.
func TestSyncConcurrently(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	a := openLog(t, db, Options{})
	b := openLog(t, db, Options{})
	w, err := b.Watch(ctx, "p", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const total = 500
	stop := make(chan struct{})
	var published atomic.Int64 // what every Sync returned: each event once
	var syncs sync.WaitGroup
	for range 4 {
		syncs.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := b.Sync(ctx, "p")
				if err != nil {
					t.Error(err)
					return
				}
				published.Add(int64(n))
			}
		})
	}
	for range total {
		mustAppend(t, a, "p", KindRunning)
	}
	close(stop)
	syncs.Wait()
	n, err := b.Sync(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := published.Load() + int64(n); got != total {
		t.Fatalf("the syncs published %d events, want %d", got, total)
	}
	if got := b.LastSequence("p"); got != total {
		t.Fatalf("LastSequence = %d after the last Sync, want %d", got, total)
	}
	if got := receive(t, w, total); !equalSeqs(got, seqRange(1, total)) {
		t.Fatalf("watcher got %d events, not 1..%d once each in order", len(got), total)
	}
	if e := mustAppend(t, b, "p", KindStopped); e.Sequence != total+1 {
		t.Fatalf("b's append got sequence %d, want %d", e.Sequence, total+1)
	}
}

// TestCatchUpIsHistoryToWatchersOfEveryPipeline: what b catches up of
// another process's events reaches the watchers of the pipeline (which
// replay history) but not the watchers of every pipeline, which follow
// only what happens from their start; what is synced afterwards is news
// to both.
func TestCatchUpIsHistoryToWatchersOfEveryPipeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		db := bk.open(t, "")
		a := openLog(t, db, Options{})
		b := openLog(t, db, Options{})
		for range 3 {
			mustAppend(t, a, "quiet", KindRunning)
			mustAppend(t, a, "watched", KindRunning)
		}
		if err := b.CatchUp(ctx, "empty"); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(b.PipelineIDs(), "empty") {
			t.Fatalf("a pipeline without events was registered: %v", b.PipelineIDs())
		}
		own, err := b.Watch(ctx, "watched", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		every, err := b.WatchEvery(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"quiet", "watched"} {
			if err := b.CatchUp(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := b.LastSequence(id); got != 3 {
				t.Fatalf("LastSequence(%s) = %d after CatchUp, want 3", id, got)
			}
		}
		if got := mustList(t, b, "quiet", Query{}); !equalSeqs(got, seqRange(1, 3)) {
			t.Fatalf("b lists %v of quiet, want 1..3", seqs(got))
		}

		mustAppend(t, a, "quiet", KindStopped)
		mustAppend(t, a, "watched", KindStopped)
		for _, id := range []string{"quiet", "watched"} {
			if n, err := b.Sync(ctx, id); err != nil || n != 1 {
				t.Fatalf("Sync(%s) = %d, %v, want 1", id, n, err)
			}
		}
		got := receive(t, every, 2)
		for _, e := range got {
			if e.Sequence != 4 || e.Kind != KindStopped {
				t.Fatalf("the watcher of every pipeline got %s, want only the two events after the catch-up", describeEvents(got))
			}
		}
		if got := receive(t, own, 4); !equalSeqs(got, seqRange(1, 4)) {
			t.Fatalf("the watcher of the pipeline got %v, want 1..4", seqs(got))
		}
		// b continues the numbering of a pipeline it caught up with.
		if e := mustAppend(t, b, "quiet", KindRunning); e.Sequence != 5 {
			t.Fatalf("b's append got sequence %d, want 5", e.Sequence)
		}
	})
}
