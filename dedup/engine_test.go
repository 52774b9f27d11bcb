package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
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
	w         *store.GroupWriter
	positions *pipeline.PositionStore
	dd        *dedup.Store
}

func newEnv(t *testing.T) *env {
	db := store.NewInMemory()
	w := store.NewGroupWriter(db)
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

// gatedDestination blocks its first Write until release is closed.
type gatedDestination struct {
	logDestination
	release chan struct{}
	once    sync.Once
}

func (d *gatedDestination) Write(ctx context.Context, b []record.Record) (int, error) {
	d.once.Do(func() { <-d.release })
	return d.logDestination.Write(ctx, b)
}

// rememberLog records how many positions each Remember call carried.
type rememberLog struct {
	mu    sync.Mutex
	sizes []int
}

type countingDedup struct {
	s   *dedup.Store
	log *rememberLog
}

func (c countingDedup) Open(ctx context.Context, p, d string) (pipeline.DedupDestination, error) {
	dd, err := c.s.Open(ctx, p, d)
	return countingDestination{dd, c.log}, err
}

type countingDestination struct {
	*dedup.Destination
	log *rememberLog
}

func (c countingDestination) Remember(ctx context.Context, positions []record.Position) ([]byte, func() error, error) {
	c.log.mu.Lock()
	c.log.sizes = append(c.log.sizes, len(positions))
	c.log.mu.Unlock()
	return c.Destination.Remember(ctx, positions)
}

// Batches queued behind a slow destination share one dedup entry (one disk
// sync) instead of one each; the entry still protects all of them, and is
// gone once all of them are acknowledged.
func TestQueuedBatchesShareOneEntry(t *testing.T) {
	for _, ackFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("source ack fails %v", ackFails), func(t *testing.T) {
			e := newEnv(t)
			dst := &gatedDestination{release: make(chan struct{})}
			remembered := &rememberLog{}
			eng, err := pipeline.New(pipeline.Config{PipelineID: "p", Source: pipeline.Source{ID: "src", Connector: &seqSource{limit: 80, ackFails: ackFails}},
				Destinations: []pipeline.Destination{{ID: "a", Connector: dst}}, Positions: e.positions,
				Dedup: countingDedup{e.dd, remembered}, BatchSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- eng.Run(context.Background()) }()
			// All five batches (new batches hold 16 records) are read while
			// the destination holds the first: four wait in its queue.
			waitFor(t, func() bool { return eng.Stats().RecordsRead.Load() == 80 })
			close(dst.release)
			if ackFails {
				if err := <-done; err == nil {
					t.Fatal("the run should end with the lost source ack")
				}
			} else {
				waitFor(t, func() bool { return eng.Stats().RecordsAcked.Load() == 80 })
				eng.Stop()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			remembered.mu.Lock()
			sizes := slices.Clone(remembered.sizes)
			remembered.mu.Unlock()
			// Batch 1 waited for 2-4 (maxRememberedTogether is 4); batch 5
			// found nobody behind it. When the source ack fails, the run
			// may end before batch 5 is written.
			want := [][]int{{64, 16}}
			if ackFails {
				want = append(want, []int{64})
			}
			if !slices.ContainsFunc(want, func(w []int) bool { return slices.Equal(sizes, w) }) {
				t.Fatalf("Remember carried %v positions; want one of %v", sizes, want)
			}
			if !ackFails {
				if n := e.entries(t); n != 0 {
					t.Fatalf("%d entries left after every record was acknowledged", n)
				}
				return
			}
			// Nothing reached the source: the next run gets all 80 again,
			// and the shared entries keep every one from a second write.
			if err := e.run(t, &seqSource{limit: 80}, map[string]*logDestination{"a": &dst.logDestination}, 80); err != nil {
				t.Fatal(err)
			}
			if dst.count() != 80 {
				t.Fatalf("the destination holds %d records after the second run; want 80, each once", dst.count())
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
