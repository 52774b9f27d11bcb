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

func TestRecordWritesInOrderAndFlushWaitsForIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		ctx := context.Background()
		mustAppend(t, l, "p", KindCreated)
		for i := range 300 {
			id := fmt.Sprintf("p%d", i%3)
			if i%3 == 0 {
				id = "p"
			}
			if err := l.Record(Event{PipelineID: id, Kind: KindFault, Message: fmt.Sprint(i)}); err != nil {
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
				t.Fatalf("event %d of p is %q, want %q: not in Record order", e.Sequence, e.Message, want)
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

func TestRecordRejectsInvalidEventsAndCloseWritesWhatWasRecorded(t *testing.T) {
	db := openBadger(t, t.TempDir())
	w := store.NewBatcher(db, nil)
	defer w.Close()
	l, err := Open(context.Background(), db, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Event{Kind: KindFault}); err == nil {
		t.Fatal("Record without a pipeline id returned nil")
	}
	if err := l.Record(Event{PipelineID: "p"}); err == nil {
		t.Fatal("Record without a kind returned nil")
	}
	for range 50 {
		if err := l.Record(Event{PipelineID: "p", Kind: KindFault}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Event{PipelineID: "p", Kind: KindFault}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Record after Close = %v, want ErrClosed", err)
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

// TestRecordCommitsExtraWithTheEvent is what the runtime relies on: a
// pipeline's state and the event that records the transition to it land in
// one commit, so the log never shows a transition the store does not hold,
// nor the reverse.
func TestRecordCommitsExtraWithTheEvent(t *testing.T) {
	db := &committingStore{Store: store.NewInMemory()}
	l := openLog(t, db, Options{})
	state := store.Op{Key: []byte(store.PrefixPipelineState + "p"), Value: []byte(`{"status":"recovering"}`)}
	if err := l.Record(Event{PipelineID: "p", Kind: KindRecovering}, state); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	commits := db.commits
	db.mu.Unlock()
	if len(commits) != 1 {
		t.Fatalf("%d commits, want the event and the state in one", len(commits))
	}
	keys := map[string]bool{}
	for _, k := range commits[0] {
		keys[k] = true
	}
	if !keys[string(eventKey(pipelinePrefix("p"), 1))] || !keys[string(state.Key)] {
		t.Fatalf("the commit holds %v, want the event and the state", commits[0])
	}
	if got, err := db.Get(context.Background(), state.Key); err != nil || string(got) != string(state.Value) {
		t.Fatalf("state = %q, %v", got, err)
	}
	if got := l.LastSequence("p"); got != 1 {
		t.Fatalf("log ends at %d, want 1", got)
	}
}

// committingStore records the keys of every Commit.
type committingStore struct {
	store.Store
	mu      sync.Mutex
	commits [][]string
}

func (c *committingStore) Commit(ctx context.Context, ops []store.Op) error {
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = string(op.Key)
	}
	c.mu.Lock()
	c.commits = append(c.commits, keys)
	c.mu.Unlock()
	return c.Store.Commit(ctx, ops)
}

func TestFlushHonoursItsContext(t *testing.T) {
	db := &holdingStore{Store: store.NewInMemory(), hold: make(chan struct{})}
	l := openLog(t, db, Options{})
	defer close(db.hold)
	if err := l.Record(Event{PipelineID: "p", Kind: KindFault}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the store is held = %v, want the deadline", err)
	}
}

// holdingStore holds commits until hold is closed.
type holdingStore struct {
	store.Store
	hold chan struct{}
}

func (h *holdingStore) Commit(ctx context.Context, ops []store.Op) error {
	<-h.hold
	return h.Store.Commit(ctx, ops)
}
