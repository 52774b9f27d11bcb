package dedup_test

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// crashingDestination writes like logDestination until the record at
// crashAt: it writes the records of that batch before it, then the process
// "dies": crashed is closed and the write never returns. With reports, it
// says which record it holds last, as the file destination does.
type crashingDestination struct {
	crashAt int
	crashed chan struct{}

	mu  sync.Mutex
	ids []int
	// writes counts Write calls; entriesAtWrite[i] is how many dedup
	// entries were committed when write i began.
	entriesAtWrite []int
	entries        func() int
}

func (d *crashingDestination) Open(context.Context) error     { return nil }
func (d *crashingDestination) Teardown(context.Context) error { return nil }

func (d *crashingDestination) Write(ctx context.Context, b []record.Record) (int, error) {
	d.mu.Lock()
	if d.entries != nil {
		d.entriesAtWrite = append(d.entriesAtWrite, d.entries())
	}
	for i, r := range b {
		id, _ := strconv.Atoi(string(r.Position))
		if d.crashAt > 0 && id == d.crashAt {
			d.crashAt = 0
			d.mu.Unlock()
			close(d.crashed)
			<-ctx.Done()
			return i, ctx.Err()
		}
		d.ids = append(d.ids, id)
	}
	d.mu.Unlock()
	return len(b), nil
}

// reportingDestination adds the ability to crashingDestination.
type reportingDestination struct{ *crashingDestination }

func (d reportingDestination) LastPosition(context.Context) (record.Position, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ids) == 0 {
		return nil, true, nil
	}
	return record.Position(strconv.Itoa(d.ids[len(d.ids)-1])), true, nil
}

// holdingDestination adds the ability to read back what it wrote, as the
// file destination does: its output is ids, an offset an index in it.
type holdingDestination struct{ *crashingDestination }

func (d holdingDestination) Offset() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(len(d.ids)), true
}

func (d holdingDestination) HeldSince(_ context.Context, offset int64, visit func(record.Position, string) error) (bool, error) {
	d.mu.Lock()
	ids := slices.Clone(d.ids)
	d.mu.Unlock()
	for i := offset; i < int64(len(ids)); i++ {
		if err := visit(record.Position(strconv.Itoa(ids[i])), "p:src"); err != nil {
			return false, err
		}
	}
	return true, nil
}

// committedStore counts the dedup entries committed, and can be copied as
// it is at one moment: what a crash leaves.
type committedStore struct {
	*store.InMemory
	mu      sync.Mutex
	entries int
}

func (c *committedStore) Commit(ctx context.Context, ops []store.Op) error {
	err := c.InMemory.Commit(ctx, ops)
	if err == nil {
		c.mu.Lock()
		for _, op := range ops {
			if !op.Delete && bytes.HasPrefix(op.Key, []byte(store.PrefixDedup)) {
				c.entries++
			}
		}
		c.mu.Unlock()
	}
	return err
}

func (c *committedStore) committedEntries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries
}

// snapshot copies every key: what survives a SIGKILL at this moment (the
// store holds only committed writes).
func (c *committedStore) snapshot(t *testing.T) *committedStore {
	t.Helper()
	out := &committedStore{InMemory: store.NewInMemory()}
	var ops []store.Op
	err := c.Scan(context.Background(), nil, func(k, v []byte) error {
		ops = append(ops, store.Op{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if err == nil {
		err = out.Commit(context.Background(), ops)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runUntil runs a pipeline of limit records on db into dst until the
// destination crashes (crashed is closed) or, with no crash, every record is
// acknowledged.
func runUntil(t *testing.T, db *committedStore, dst pipeline.Destination, limit int) {
	t.Helper()
	w := store.NewBatcher(db, nil)
	defer w.Close()
	dd := dedup.New(db, w, dedup.Options{})
	positions := pipeline.NewPositionStore(db, w, nil)
	eng, err := pipeline.New(pipeline.Config{PipelineID: "p", Source: pipeline.Source{ID: "src", Connector: &seqSource{limit: limit}},
		Destinations: []pipeline.Destination{dst}, Positions: positions,
		Dedup: dedupAdapter{dd}, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	var crashed chan struct{}
	switch c := dst.Connector.(type) {
	case *crashingDestination:
		crashed = c.crashed
	case reportingDestination:
		crashed = c.crashed
	case holdingDestination:
		crashed = c.crashed
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-crashed:
			cancel()
			<-done
			return
		case err := <-done:
			t.Fatalf("run ended: %v", err)
		case <-deadline:
			t.Fatal("run did not end")
		case <-time.After(time.Millisecond):
			if pos, _ := positions.Load(context.Background(), "p", "src"); string(pos) == strconv.Itoa(limit) {
				eng.Stop()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
}

// TestCrashDuplicatesAtMostOneBatch kills the process in the middle of a
// write and starts again from what the store held at that moment: a
// destination that reports what it holds, or reads it back, ends with
// every record exactly once; one that does not has at most the batch being
// written, and the one before it, twice. A destination that reads back
// what it holds is killed a second time, while the records of the first
// kill come again.
func TestCrashDuplicatesAtMostOneBatch(t *testing.T) {
	const limit, batch = 2000, 10
	for _, ability := range []string{"reads back", "reports", "does not report"} {
		for _, crashAt := range []int{7, 555, 1234, 1999} {
			t.Run(ability+"/crash at "+strconv.Itoa(crashAt), func(t *testing.T) {
				db := &committedStore{InMemory: store.NewInMemory()}
				cd := &crashingDestination{crashAt: crashAt, crashed: make(chan struct{})}
				conn := pipelineDestination(cd, ability)
				runUntil(t, db, pipeline.Destination{ID: "out", Connector: conn}, limit)
				left := db.snapshot(t)
				if ability == "reads back" && crashAt < limit {
					// The first record this run writes is the one after
					// those the first kill left unacknowledged.
					cd.crashAt, cd.crashed = crashAt+1, make(chan struct{})
					runUntil(t, left, pipeline.Destination{ID: "out", Connector: conn}, limit)
					left = left.snapshot(t)
				}
				cd.crashed = make(chan struct{})
				runUntil(t, left, pipeline.Destination{ID: "out", Connector: conn}, limit)

				counts := map[int]int{}
				for _, id := range cd.ids {
					counts[id]++
				}
				dups := 0
				for id := 1; id <= limit; id++ {
					if counts[id] == 0 {
						t.Fatalf("record %d missing", id)
					}
					dups += counts[id] - 1
				}
				if ability != "does not report" && dups != 0 {
					t.Fatalf("%d records written twice by a destination that %s what it holds, want 0", dups, ability)
				}
				if dups > 2*batch {
					t.Fatalf("%d records written twice, want at most two batches (%d)", dups, 2*batch)
				}
			})
		}
	}
}

// TestDestinationThatReadsBackCommitsNothingBeforeItsWrites: its writes
// never wait for a dedup entry; only its mark is in the store.
func TestDestinationThatReadsBackCommitsNothingBeforeItsWrites(t *testing.T) {
	db := &committedStore{InMemory: store.NewInMemory()}
	dedupKeys := func() int {
		n := 0
		if err := db.Scan(context.Background(), []byte(store.PrefixDedup), func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Error(err)
		}
		return n
	}
	// At every write the store holds the mark and nothing else: no entry
	// was recorded for the batch being written, nor for any before it.
	cd := &crashingDestination{crashed: make(chan struct{}), entries: dedupKeys}
	runUntil(t, db, pipeline.Destination{ID: "out", Connector: holdingDestination{cd}}, 500)
	if len(cd.entriesAtWrite) < 10 {
		t.Fatalf("only %d writes", len(cd.entriesAtWrite))
	}
	for i, n := range cd.entriesAtWrite {
		if n != 1 {
			t.Fatalf("write %d began with %d dedup keys in the store, want the destination's mark alone", i+1, n)
		}
	}
	if n := dedupKeys(); n != 1 {
		t.Fatalf("the store holds %d dedup keys, want the destination's mark alone", n)
	}
	if !slices.Equal(cd.ids, seq(500)) {
		t.Fatalf("wrote %d records, want 1..500 once", len(cd.ids))
	}
}

func pipelineDestination(cd *crashingDestination, ability string) interface {
	Open(context.Context) error
	Write(context.Context, []record.Record) (int, error)
	Teardown(context.Context) error
} {
	switch ability {
	case "reads back":
		return holdingDestination{cd}
	case "reports":
		return reportingDestination{cd}
	}
	return cd
}

// TestDestinationWithoutTheAbilityWaitsForTheEntryBeforeItsNextWrite: at
// most one batch is written and not remembered at any moment.
func TestDestinationWithoutTheAbilityWaitsForTheEntryBeforeItsNextWrite(t *testing.T) {
	db := &committedStore{InMemory: store.NewInMemory()}
	cd := &crashingDestination{crashed: make(chan struct{}), entries: db.committedEntries}
	runUntil(t, db, pipeline.Destination{ID: "out", Connector: cd}, 500)
	if len(cd.entriesAtWrite) < 10 {
		t.Fatalf("only %d writes", len(cd.entriesAtWrite))
	}
	for i, n := range cd.entriesAtWrite {
		if n < i {
			t.Fatalf("write %d began with %d entries committed: the batch before was not remembered yet", i+1, n)
		}
	}
	if !slices.Equal(cd.ids, seq(500)) {
		t.Fatalf("wrote %d records, want 1..500 once", len(cd.ids))
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestDrainedRunLeavesNothingToReadBack: in a pipeline of several
// sources too, the last position save of a run that drained carries a
// mark at the end of the destination's output, so the next start reads
// nothing back and keeps nothing to skip.
func TestDrainedRunLeavesNothingToReadBack(t *testing.T) {
	ctx := context.Background()
	db := &committedStore{InMemory: store.NewInMemory()}
	w := store.NewBatcher(db, nil)
	defer w.Close()
	dd := dedup.New(db, w, dedup.Options{})
	cd := &crashingDestination{crashed: make(chan struct{})}
	eng, err := pipeline.New(pipeline.Config{PipelineID: "p",
		Sources:      []pipeline.Source{{ID: "a", Connector: &seqSource{limit: 300}}, {ID: "b", Connector: &seqSource{limit: 300}}},
		Destinations: []pipeline.Destination{{ID: "out", Connector: holdingDestination{cd}}},
		Positions:    pipeline.NewPositionStore(db, w, nil), Dedup: dedupAdapter{dd}, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	clocktest.Eventually(t, func() bool { return eng.Stats().RecordsAcked.Load() == 600 }, nil)
	eng.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	from := int64(-1)
	reopened, err := dd.Open(ctx, "p", "out", dedup.Holdings{Offset: 600, Since: func(offset int64, visit func(string, record.Position)) (bool, error) {
		from = offset
		return holdingDestination{cd}.HeldSince(ctx, offset, func(pos record.Position, _ string) error {
			visit("a", pos)
			return nil
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cd.ids) != 600 {
		t.Fatalf("wrote %d records, want 600", len(cd.ids))
	}
	if from != 600 || reopened.Pending() != 0 {
		t.Fatalf("the next start read back from %d and holds %d positions to skip; want from the end, 600, and none", from, reopened.Pending())
	}
}
