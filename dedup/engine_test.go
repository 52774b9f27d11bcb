package dedup_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/dedup"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// seqSource delivers 1..limit after its position; ackFails makes every
// Ack fail (the window between a write and the source's acknowledgement).
type seqSource struct {
	limit, next int
	ackFails    bool
}

func (s *seqSource) Open(_ context.Context, pos record.Position) error {
	s.next = 1
	if pos != nil {
		n, _ := strconv.Atoi(string(pos))
		s.next = n + 1
	}
	return nil
}

func (s *seqSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.next > s.limit {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	n := 0
	for n < len(batch) && s.next <= s.limit {
		batch[n] = record.Record{Position: record.Position(strconv.Itoa(s.next)), Operation: record.OperationCreate}
		s.next++
		n++
	}
	return n, nil
}

func (s *seqSource) Ack(context.Context, []record.Position) error {
	if s.ackFails {
		return cerrors.Transientf("ack lost")
	}
	return nil
}

func (s *seqSource) Teardown(context.Context) error { return nil }

// logDestination keeps what it wrote; failing makes writes fail, and
// failAfter (when > 0) makes the write that would go past that many records
// write up to it and then fail.
type logDestination struct {
	mu        sync.Mutex
	failing   bool
	failAfter int
	ids       []int
}

func (d *logDestination) Open(context.Context) error     { return nil }
func (d *logDestination) Teardown(context.Context) error { return nil }
func (d *logDestination) Write(_ context.Context, b []record.Record) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing {
		return 0, cerrors.Transientf("down")
	}
	if d.failAfter > 0 && len(d.ids)+len(b) > d.failAfter {
		n := d.failAfter - len(d.ids)
		d.failAfter, d.failing = 0, true
		for _, r := range b[:n] {
			id, _ := strconv.Atoi(string(r.Position))
			d.ids = append(d.ids, id)
		}
		return n, cerrors.Transientf("down after %d records", len(d.ids))
	}
	for _, r := range b {
		id, _ := strconv.Atoi(string(r.Position))
		d.ids = append(d.ids, id)
	}
	return len(b), nil
}

func (d *logDestination) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ids)
}

type env struct {
	db        store.Store
	w         *store.Batcher
	positions *pipeline.PositionStore
	dd        *dedup.Store
}

func newEnv(t *testing.T) *env {
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	return &env{db: db, w: w, positions: pipeline.NewPositionStore(db, w, nil), dd: dedup.New(db, w, dedup.Options{})}
}

func (e *env) run(t *testing.T, src *seqSource, dsts map[string]*logDestination, stopAfter int) error {
	t.Helper()
	var ds []pipeline.Destination
	for _, id := range []string{"a", "b"} {
		if d, ok := dsts[id]; ok {
			ds = append(ds, pipeline.Destination{ID: id, Connector: d})
		}
	}
	eng, err := pipeline.New(pipeline.Config{PipelineID: "p", Source: pipeline.Source{ID: "src", Connector: src},
		Destinations: ds, Positions: e.positions, Dedup: dedupAdapter{e.dd}, BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(context.Background()) }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			t.Fatal("run did not end")
		case <-time.After(time.Millisecond):
			if stopAfter > 0 && eng.Stats().RecordsAcked.Load() >= int64(stopAfter) {
				eng.Stop()
				return <-done
			}
		}
	}
}

func (e *env) entries(t *testing.T) int {
	n := 0
	_ = e.db.Scan(context.Background(), []byte(store.PrefixDedup), func(_, _ []byte) error { n++; return nil })
	return n
}

func TestEntriesArePerDestination(t *testing.T) {
	e := newEnv(t)
	a, b := &logDestination{}, &logDestination{failing: true}
	// Run 1: a writes what it gets before b's failure ends the run (how
	// many batches that is depends on scheduling), b is down: the source
	// hears nothing. a's entries stay; b has none.
	if err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a, "b": b}, 0); err == nil {
		t.Fatal("run 1 should fail")
	}
	if a.count() == 0 || b.count() != 0 {
		t.Fatalf("after run 1: a %d, b %d records; want some for a, none for b", a.count(), b.count())
	}
	// Run 2: both up. a must skip what it already wrote; b must write all:
	// a's entry must not skip b's records.
	b.failing = false
	if err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a, "b": b}, 100); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*logDestination{"a": a, "b": b} {
		d.mu.Lock()
		ids := slices.Sorted(slices.Values(d.ids))
		d.mu.Unlock()
		want := make([]int, 100)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("after run 2: %s holds %d records, want 1..100 each once (no duplicates)", name, len(ids))
		}
	}
	// Everything acknowledged: the store is empty again.
	if n := e.entries(t); n != 0 {
		t.Fatalf("%d dedup entries left after everything was acknowledged", n)
	}
}

// When one destination wrote only part of a batch, the source hears of that
// part only; the other destination wrote the whole batch, and its entry
// must outlive the partial acknowledgement, or the rest of the batch is
// written to it twice after the restart.
func TestPartialAcknowledgementKeepsTheOtherDestinationsEntries(t *testing.T) {
	e := newEnv(t)
	a, b := &logDestination{}, &logDestination{failAfter: 53}
	if err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a, "b": b}, 0); err == nil {
		t.Fatal("run 1 should fail")
	}
	if b.count() != 53 || a.count() <= 53 {
		t.Fatalf("after run 1: a %d, b %d records; want b 53 and a more", a.count(), b.count())
	}
	b.failing = false
	// Run 2 resumes after record 53: 47 records to acknowledge.
	if err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a, "b": b}, 47); err != nil {
		t.Fatal(err)
	}
	want := make([]int, 100)
	for i := range want {
		want[i] = i + 1
	}
	for name, d := range map[string]*logDestination{"a": a, "b": b} {
		d.mu.Lock()
		ids := slices.Sorted(slices.Values(d.ids))
		d.mu.Unlock()
		if !slices.Equal(ids, want) {
			t.Fatalf("after run 2: %s holds %d records, want 1..100 each once", name, len(ids))
		}
	}
}

func TestStoreSizeFollowsRecordsInFlight(t *testing.T) {
	e := newEnv(t)
	d := &logDestination{}
	if err := e.run(t, &seqSource{limit: 50_000}, map[string]*logDestination{"a": d}, 50_000); err != nil {
		t.Fatal(err)
	}
	if d.count() != 50_000 {
		t.Fatalf("wrote %d", d.count())
	}
	if n := e.entries(t); n != 0 {
		t.Fatalf("%d entries left for 50,000 acknowledged records; entries must go with their acknowledgement", n)
	}
}

// fullStore refuses every write while full, as the Badger store does when
// the disk is short of its reserve.
type fullStore struct {
	store.Store
	full atomic.Bool
}

func (f *fullStore) Writable() error {
	if f.full.Load() {
		return store.ErrNoSpace
	}
	return nil
}

func (f *fullStore) Commit(ctx context.Context, ops []store.Op) error {
	if err := f.Writable(); err != nil {
		return err
	}
	return f.Store.Commit(ctx, ops)
}

// While the store cannot remember what a destination writes, the
// destination is not written to: a batch written and not remembered would
// be written twice once the disk has space again.
func TestFullStoreWritesNothingTwice(t *testing.T) {
	db := &fullStore{Store: store.NewInMemory()}
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	e := &env{db: db, w: w, positions: pipeline.NewPositionStore(db, w, nil), dd: dedup.New(db, w, dedup.Options{})}
	a := &logDestination{}
	db.full.Store(true)
	err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a}, 0)
	if !errors.Is(err, store.ErrNoSpace) || cerrors.Classify(err).Class != cerrors.ClassTransient {
		t.Fatalf("run on a full store ended with %v, want a transient error wrapping ErrNoSpace", err)
	}
	if n := a.count(); n != 0 {
		t.Fatalf("the destination got %d records that nothing remembered", n)
	}
	db.full.Store(false)
	if err := e.run(t, &seqSource{limit: 100}, map[string]*logDestination{"a": a}, 100); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) != 100 || len(slices.Compact(slices.Sorted(slices.Values(a.ids)))) != 100 {
		t.Fatalf("after space came back the destination holds %d records, want 1..100 once", len(a.ids))
	}
}
