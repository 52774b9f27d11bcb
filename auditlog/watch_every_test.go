package auditlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/conduitry/conduit/pkg/store"
)

// TestWatchEveryFollowsAllPipelines: events stored before the watch are not
// replayed; later ones of every pipeline arrive, also of a pipeline that
// first appears after the watch began, each pipeline's in its order, and
// the kinds filter applies.
func TestWatchEveryFollowsAllPipelines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mustAppend(t, l, "a", KindRunning)
		mustAppend(t, l, "b", KindRunning)

		all, err := l.WatchEvery(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		faults, err := l.WatchEvery(ctx, []Kind{KindFault})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, "a", KindFault)   // a 2
		mustAppend(t, l, "new", KindFault) // new 1: unknown when the watch began
		mustAppend(t, l, "b", KindStopped) // b 2

		got := receive(t, all, 3)
		if want := "a#2 fault, new#1 fault, b#2 stopped"; describeEvents(got) != want {
			t.Fatalf("every watcher got %s, want %s", describeEvents(got), want)
		}
		if got := receive(t, faults, 2); describeEvents(got) != "a#2 fault, new#1 fault" {
			t.Fatalf("fault watcher got %s", describeEvents(got))
		}
		// The one of every kind got nothing more: the next event is next.
		mustAppend(t, l, "b", KindRunning)
		if got := receive(t, all, 1); describeEvents(got) != "b#3 running" {
			t.Fatalf("every watcher then got %s, want b#3 running", describeEvents(got))
		}
	})
}

// TestWatchEveryKeepsEachPipelinesOrder appends to several pipelines at
// once; every pipeline's events reach the watcher without gap, duplicate
// or reordering.
func TestWatchEveryKeepsEachPipelinesOrder(t *testing.T) {
	l := openLog(t, store.NewInMemory(), Options{})
	ctx := context.Background()
	w, err := l.WatchEvery(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const pipelines, perPipeline = 6, 60
	var wg sync.WaitGroup
	for i := range pipelines {
		id := fmt.Sprintf("p%d", i)
		// Two writers per pipeline, so that sequences are handed out
		// concurrently and settle out of order.
		for range 2 {
			wg.Go(func() {
				for range perPipeline / 2 {
					if _, err := l.Append(ctx, Event{PipelineID: id, Kind: KindRunning}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	got := receive(t, w, pipelines*perPipeline)
	wg.Wait()
	next := map[string]uint64{}
	for _, e := range got {
		if e.Sequence != next[e.PipelineID]+1 {
			t.Fatalf("pipeline %s: got sequence %d after %d", e.PipelineID, e.Sequence, next[e.PipelineID])
		}
		next[e.PipelineID] = e.Sequence
	}
	for i := range pipelines {
		if id := fmt.Sprintf("p%d", i); next[id] != perPipeline {
			t.Fatalf("pipeline %s: got up to %d, want %d", id, next[id], perPipeline)
		}
	}
}

// TestWatchEverySeesAnotherInstancesEvents: events another Log wrote to
// the same store reach the watchers of all pipelines when Sync takes
// them up, as they reach a pipeline's own watchers.
func TestWatchEverySeesAnotherInstancesEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		db := bk.open(t, "")
		a := openLog(t, db, Options{})
		b := openLog(t, db, Options{})
		w, err := b.WatchEvery(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, a, "p", KindRunning)
		mustAppend(t, a, "p", KindFault)
		if n, err := b.Sync(ctx, "p"); err != nil || n != 2 {
			t.Fatalf("Sync = %d, %v, want 2", n, err)
		}
		if got := receive(t, w, 2); describeEvents(got) != "p#1 running, p#2 fault" {
			t.Fatalf("got %s", describeEvents(got))
		}
	})
}

func TestWatchEveryEnds(t *testing.T) {
	t.Run("slow reader", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		w, err := l.WatchEvery(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range WatchBuffer + 2 {
			mustAppend(t, l, fmt.Sprintf("p%d", i%3), KindRunning)
		}
		got, err := drain(w)
		if !errors.Is(err, ErrWatcherTooSlow) {
			t.Fatalf("Err = %v, want ErrWatcherTooSlow", err)
		}
		if len(got) == 0 || len(got) > WatchBuffer+1 {
			t.Fatalf("the slow reader got %d events before the error", len(got))
		}
		// Appends go on without it.
		mustAppend(t, l, "p0", KindRunning)
	})
	t.Run("context cancelled", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		ctx, cancel := context.WithCancel(context.Background())
		w, err := l.WatchEvery(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := drain(w); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", err)
		}
		for range WatchBuffer + 10 {
			mustAppend(t, l, "p", KindRunning)
		}
	})
	t.Run("log closed", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		w, err := l.WatchEvery(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, "p", KindRunning) // never read
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := drain(w); !errors.Is(err, ErrClosed) {
			t.Fatalf("Err = %v, want ErrClosed", err)
		}
		if _, err := l.WatchEvery(context.Background(), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("WatchEvery after Close: %v, want ErrClosed", err)
		}
	})
}

func describeEvents(events []Event) string {
	s := ""
	for i, e := range events {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s#%d %s", e.PipelineID, e.Sequence, e.Kind)
	}
	return s
}
