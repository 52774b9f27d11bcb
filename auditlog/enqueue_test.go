package auditlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

func TestEnqueueWritesInOrderAndFlushWaitsForIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		ctx := context.Background()
		mustAppend(t, l, "p", KindCreated)
		for i := range 300 {
			id := fmt.Sprintf("p%d", i%3)
			if i%3 == 0 {
				id = "p"
			}
			if err := l.Enqueue(Event{PipelineID: id, Kind: KindFault, Message: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got := mustList(t, l, "p", Query{})
		if !equalSeqs(got, seqRange(1, 101)) {
			t.Fatalf("p has sequences %v, want 1..101", seqs(got))
		}
		for i, e := range got[1:] {
			if want := fmt.Sprint(i * 3); e.Message != want {
				t.Fatalf("event %d of p is %q, want %q: not in Enqueue order", e.Sequence, e.Message, want)
			}
			if e.Time.IsZero() {
				t.Fatalf("event %d has no time", e.Sequence)
			}
		}
		for _, id := range []string{"p1", "p2"} {
			if n := len(mustList(t, l, id, Query{})); n != 100 {
				t.Fatalf("%s has %d events, want 100", id, n)
			}
		}
	})
}

func TestEnqueueRejectsInvalidEventsAndCloseWritesTheQueue(t *testing.T) {
	db := openBadger(t, t.TempDir())
	w := store.NewGroupWriter(db)
	defer w.Close()
	l, err := Open(context.Background(), db, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Enqueue(Event{Kind: KindFault}); err == nil {
		t.Fatal("Enqueue without a pipeline id returned nil")
	}
	if err := l.Enqueue(Event{PipelineID: "p"}); err == nil {
		t.Fatal("Enqueue without a kind returned nil")
	}
	for range 50 {
		if err := l.Enqueue(Event{PipelineID: "p", Kind: KindFault}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Enqueue(Event{PipelineID: "p", Kind: KindFault}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after Close = %v, want ErrClosed", err)
	}
	reopened, err := Open(context.Background(), db, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := reopened.LastSequence("p"); got != 50 {
		t.Fatalf("after Close the log ends at %d, want 50: Close must write what was queued", got)
	}
}

// TestBeforeWriteRunsBeforeTheEventsItPrecedes is the ordering the runtime
// relies on: pipeline states handed over before an event are durable
// before the event is visible.
func TestBeforeWriteRunsBeforeTheEventsItPrecedes(t *testing.T) {
	var mu sync.Mutex
	var visibleAtBarrier []uint64
	var l *Log
	l = openLog(t, store.NewInMemory(), Options{BeforeWrite: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		visibleAtBarrier = append(visibleAtBarrier, l.LastSequence("p"))
		return errors.New("state store failed") // events are still written
	}})
	for i := range 3 {
		if err := l.Enqueue(Event{PipelineID: "p", Kind: KindFault}); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		calls, last := len(visibleAtBarrier), visibleAtBarrier[len(visibleAtBarrier)-1]
		mu.Unlock()
		if calls != i+1 || last != uint64(i) {
			t.Fatalf("round %d: barrier called %d times, saw the log at %d; want %d calls, log at %d (the new event not yet visible)",
				i, calls, last, i+1, i)
		}
	}
	if got := l.LastSequence("p"); got != 3 {
		t.Fatalf("log ends at %d, want 3", got)
	}
}

func TestFlushHonoursItsContext(t *testing.T) {
	db := &holdingStore{Store: store.NewInMemory(), hold: make(chan struct{})}
	l := openLog(t, db, Options{})
	defer close(db.hold)
	if err := l.Enqueue(Event{PipelineID: "p", Kind: KindFault}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the store is held = %v, want the deadline", err)
	}
}

// holdingStore holds Updates until hold is closed.
type holdingStore struct {
	store.Store
	hold chan struct{}
}

func (h *holdingStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	<-h.hold
	return h.Store.Update(ctx, fn)
}
