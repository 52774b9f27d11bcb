package auditlog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/store"
)

// refusingStore refuses every commit with ErrNoSpace while refusing is set,
// as the Badger store does while its disk is full (or with refusal, when
// set). It keeps the fences of the ops it commits.
type refusingStore struct {
	store.Store
	refusing atomic.Bool
	refusal  error
	mu       sync.Mutex
	fences   map[string]store.Fence
}

func (s *refusingStore) Commit(ctx context.Context, ops []store.Op) error {
	if s.refusing.Load() {
		if s.refusal != nil {
			return fmt.Errorf("database test: %w", s.refusal)
		}
		return fmt.Errorf("database test: %w", store.ErrNoSpace)
	}
	s.mu.Lock()
	for _, op := range ops {
		if op.Fence != nil {
			if s.fences == nil {
				s.fences = map[string]store.Fence{}
			}
			s.fences[string(op.Key)] = *op.Fence
		}
	}
	s.mu.Unlock()
	return s.Store.Commit(ctx, ops)
}

// heldLog opens a Log on a store that refuses writes, with the retry
// clock in the test's hands: a send on the returned channel is one retry.
func heldLog(t *testing.T, maxHeld int) (*Log, *refusingStore, chan time.Time, *observer.ObservedLogs) {
	t.Helper()
	db := &refusingStore{Store: store.NewInMemory()}
	t.Cleanup(func() { _ = db.Store.Close() })
	db.refusing.Store(true)
	core, logs := observer.New(zapcore.InfoLevel)
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	l, err := open(context.Background(), db, w, Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	tick := make(chan time.Time)
	l.after = func(time.Duration) <-chan time.Time { return tick }
	l.held.max = maxHeld
	l.start()
	t.Cleanup(func() { _ = l.Close() })
	return l, db, tick, logs
}

// waitPublished waits until the pipeline's last visible event is seq.
func waitPublished(t *testing.T, l *Log, pipelineID string, seq uint64) {
	t.Helper()
	clocktest.Eventually(t, func() bool { return l.LastSequence(pipelineID) == seq }, func() string {
		return fmt.Sprintf("pipeline %s: last visible event %d, want %d", pipelineID, l.LastSequence(pipelineID), seq)
	})
}

func stateOp(pipelineID, state string) store.Op {
	return store.Op{Key: []byte(store.PrefixPipelineState + pipelineID), Value: []byte(state)}
}

func TestRecordedEventsWaitWhileTheStoreRefusesWrites(t *testing.T) {
	ctx := context.Background()
	l, db, tick, logs := heldLog(t, DefaultMaxHeld)

	// Refused: held, not visible, not lost.
	for i, kind := range []Kind{KindStarting, KindRunning, KindFault} {
		if err := l.Record(Event{PipelineID: "p", Kind: kind}, stateOp("p", fmt.Sprintf("state %d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(ctx); err == nil {
		t.Fatal("Flush returned nil while the store refuses writes")
	}
	if got := l.LastSequence("p"); got != 0 {
		t.Fatalf("an event that is not written is visible: last sequence %d", got)
	}
	if n := logs.FilterMessage("could not write an audit event").Len(); n != 0 {
		t.Fatalf("%d events logged as lost while the store refused writes", n)
	}
	// Held is not failed: the metrics tell them apart.
	if held, failed := l.WriteFigures(); held != 3 || failed != 0 {
		t.Fatalf("WriteFigures = %d held, %d failed; want 3 and 0", held, failed)
	}

	// Space is back. A new event queues behind the held ones, and a retry
	// writes them all, in order.
	db.refusing.Store(false)
	if err := l.Record(Event{PipelineID: "p", Kind: KindRecovering}, stateOp("p", "state 4")); err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{}
	waitPublished(t, l, "p", 4)

	events := mustList(t, l, "p", Query{})
	if !equalSeqs(events, seqRange(1, 4)) {
		t.Fatalf("sequences %v, want 1..4", seqs(events))
	}
	for i, want := range []Kind{KindStarting, KindRunning, KindFault, KindRecovering} {
		if events[i].Kind != want {
			t.Errorf("event %d is %s, want %s", i+1, events[i].Kind, want)
		}
	}
	state, err := db.Get(ctx, []byte(store.PrefixPipelineState+"p"))
	if err != nil || string(state) != "state 4" {
		t.Fatalf("state %q (%v), want the last one recorded", state, err)
	}
	if n := logs.FilterMessageSnippet("every audit event held meanwhile is written").Len(); n != 1 {
		t.Errorf("%d lines saying the held events were written, want 1", n)
	}
	if held, failed := l.WriteFigures(); held != 0 || failed != 0 {
		t.Errorf("after the retry WriteFigures = %d held, %d failed; want 0 and 0", held, failed)
	}
}

// While the database cannot be reached (PostgreSQL restarting, or cut off)
// a recorded event is held as while the disk is full, and it is written
// later under the lease it was recorded under - not under the one the
// instance holds by then (none, after it stopped the pipeline for want of
// a renewal): an expired lease nobody took over still takes it, and one
// another instance took over refuses it.
func TestHeldWritesKeepTheLeaseTheyWereRecordedUnder(t *testing.T) {
	ctx := context.Background()
	db := &refusingStore{Store: store.NewInMemory(), refusal: store.ErrUnavailable}
	t.Cleanup(func() { _ = db.Store.Close() })
	db.refusing.Store(true)
	var token atomic.Int64
	token.Store(7)
	w := store.NewBatcherWith(db, store.BatcherOptions{FenceOf: func(key []byte) *store.Fence {
		if id, ok := store.PipelineOfKey(key); ok {
			return &store.Fence{Pipeline: id, Token: token.Load()}
		}
		return nil
	}})
	t.Cleanup(w.Close)
	core, logs := observer.New(zapcore.InfoLevel)
	l, err := open(ctx, db, w, Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	tick := make(chan time.Time)
	l.after = func(time.Duration) <-chan time.Time { return tick }
	l.start()
	t.Cleanup(func() { _ = l.Close() })

	if err := l.Record(Event{PipelineID: "p", Kind: KindStopping}, stateOp("p", "stopping")); err != nil {
		t.Fatal(err)
	}
	_ = l.Flush(ctx)
	if held, failed := l.WriteFigures(); held != 1 || failed != 0 {
		t.Fatalf("while the database is away: %d held, %d failed; want 1 and 0", held, failed)
	}
	if n := logs.FilterMessage("could not write an audit event").Len(); n != 0 {
		t.Fatalf("%d events logged as lost while the database was away", n)
	}
	// The lease is given up meanwhile; the database comes back.
	token.Store(0)
	db.refusing.Store(false)
	tick <- time.Time{}
	waitPublished(t, l, "p", 1)
	db.mu.Lock()
	defer db.mu.Unlock()
	for key, want := range map[string]string{string(eventKey(pipelinePrefix("p"), 1)): "event", store.PrefixPipelineState + "p": "state"} {
		if f, ok := db.fences[key]; !ok || f.Token != 7 {
			t.Errorf("the %s was written under %+v (present %v), want the token it was recorded under, 7", want, f, ok)
		}
	}
}

func TestRecordBlocksWhenTheHeldQueueIsFull(t *testing.T) {
	l, db, tick, _ := heldLog(t, 2)
	for range 2 {
		if err := l.Record(Event{PipelineID: "p", Kind: KindFault}); err != nil {
			t.Fatal(err)
		}
	}
	// Both are refused and held (the writer's callbacks run in order);
	// Flush returns once they were tried.
	_ = l.Flush(context.Background())

	third := make(chan error, 1)
	go func() { third <- l.Record(Event{PipelineID: "p", Kind: KindRecovering}) }()
	select {
	case err := <-third:
		t.Fatalf("Record returned (%v) while the held queue is full; want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	db.refusing.Store(false)
	tick <- time.Time{}
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	_ = l.Flush(context.Background())
	waitPublished(t, l, "p", 3)
}

func TestCloseCountsTheEventsItCouldNotWrite(t *testing.T) {
	l, _, _, logs := heldLog(t, DefaultMaxHeld)
	for range 3 {
		if err := l.Record(Event{PipelineID: "p", Kind: KindFault}); err != nil {
			t.Fatal(err)
		}
	}
	_ = l.Flush(context.Background())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lost := logs.FilterMessageSnippet("were not written: the store refused writes until conduit stopped").All()
	if len(lost) != 1 || lost[0].ContextMap()["events"] != int64(3) {
		t.Fatalf("want one line counting 3 events not written, got %v", lost)
	}
	if held, failed := l.WriteFigures(); held != 0 || failed != 3 {
		t.Fatalf("WriteFigures = %d held, %d failed; want 0 and 3", held, failed)
	}
}
