package dedup_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// faults decides, with a seeded generator, where the next run breaks.
type faults struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (f *faults) roll(p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < p
}

func (f *faults) intn(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(n)
}

// faultySource delivers 1..limit after its opened position; its Ack fails
// now and then, after the destination already accepted the records: the
// window dedup closes.
type faultySource struct {
	limit, next int
	f           *faults
}

func (s *faultySource) Open(_ context.Context, pos record.Position) error {
	s.next = 1
	if pos != nil {
		n, err := strconv.Atoi(string(pos))
		if err != nil {
			return err
		}
		s.next = n + 1
	}
	return nil
}

func (s *faultySource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.next > s.limit {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	n := 0
	for n < len(batch) && n < 1+s.f.intn(50) && s.next <= s.limit {
		batch[n] = record.Record{Position: record.Position(strconv.Itoa(s.next)), Operation: record.OperationCreate}
		s.next++
		n++
	}
	return n, nil
}

func (s *faultySource) Ack(context.Context, []record.Position) error {
	if s.f.roll(0.05) {
		return cerrors.Transientf("ack lost")
	}
	return nil
}

func (s *faultySource) Teardown(context.Context) error { return nil }

// faultyDestination accepts records into a shared log that survives runs
// (the "file"), and fails now and then: before writing anything, or after
// writing part of a batch.
type faultyDestination struct {
	mu      *sync.Mutex
	written *[]int
	f       *faults
}

func (d *faultyDestination) Open(context.Context) error     { return nil }
func (d *faultyDestination) Teardown(context.Context) error { return nil }

func (d *faultyDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	n := len(batch)
	var err error
	switch {
	case d.f.roll(0.03):
		n, err = 0, cerrors.Transientf("connection reset")
	case d.f.roll(0.05):
		n, err = d.f.intn(len(batch)), cerrors.Transientf("failed after writing part of the batch")
	}
	d.mu.Lock()
	for _, r := range batch[:n] {
		id, _ := strconv.Atoi(string(r.Position))
		*d.written = append(*d.written, id)
	}
	d.mu.Unlock()
	return n, err
}

// readingBackDestination is a faultyDestination that reads back what it
// wrote, as the file destination does: an offset is an index in the log.
type readingBackDestination struct{ *faultyDestination }

func (d readingBackDestination) Offset() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(len(*d.written)), true
}

func (d readingBackDestination) HeldSince(_ context.Context, offset int64, visit func(record.Position, string) error) (bool, error) {
	d.mu.Lock()
	held := slices.Clone((*d.written)[min(offset, int64(len(*d.written))):])
	d.mu.Unlock()
	for _, id := range held {
		if err := visit(record.Position(strconv.Itoa(id)), "p:src"); err != nil {
			return false, err
		}
	}
	return true, nil
}

// lastAcked is the persisted source position: the last record whose
// acknowledgement completed.
func lastAcked(t *testing.T, p *pipeline.PositionStore) int {
	t.Helper()
	pos, err := p.Load(context.Background(), "p", "src")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(string(pos))
	return n
}

type dedupAdapter struct{ s *dedup.Store }

func (a dedupAdapter) Open(ctx context.Context, p, d string, held pipeline.Held) (pipeline.DedupDestination, error) {
	return a.s.Open(ctx, p, d, dedup.Holdings{Reports: held.Reports, Last: held.Last, LastSource: held.LastSource, Since: held.Since, Offset: held.Offset})
}

// TestExactlyOnceUnderFaults runs a pipeline again and again, each run
// ending at a random fault (a lost source ack after the write, a failed
// write, a write that failed half way), until every record arrived. With
// dedup, the destination ends with every record exactly once, whether it
// is remembered after each write or reads back what it wrote.
func TestExactlyOnceUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		seed uint64
		mode destinations
	}{{1, remembered}, {2, remembered}, {3, remembered}, {1, readingBack}, {2, readingBack}, {3, readingBack}, {1, readingBackAndRemembered}, {2, readingBackAndRemembered}} {
		t.Run(fmt.Sprint("seed ", tc.seed, " ", tc.mode), func(t *testing.T) {
			missing, dups, skipped := runUnderFaults(t, tc.seed, true, tc.mode)
			if missing != 0 || dups != 0 {
				t.Fatalf("%d missing and %d duplicate records; want every record exactly once", missing, dups)
			}
			if skipped == 0 {
				t.Fatal("no record was skipped: the faults never hit the window dedup closes")
			}
		})
	}
	// The control: the same faults without dedup do write records twice, so
	// the test above proves something.
	if _, dups, _ := runUnderFaults(t, 1, false, remembered); dups == 0 {
		t.Fatal("without dedup no record was written twice: the faults do not exercise the window")
	}
}

// destinations are the destinations of a pipeline under faults.
type destinations int

const (
	remembered  destinations = iota // one, remembered after each write
	readingBack                     // one, reading back what it wrote
	// one reading back and one remembered: the other's failures cut the
	// acknowledgement of batches the one reading back wrote in full.
	readingBackAndRemembered
)

func (d destinations) String() string {
	return [...]string{"remembered", "reading back", "reading back and remembered"}[d]
}

// runUnderFaults counts what the first destination's log holds, and fails
// the test when the second one's (if any) holds a record twice or misses
// one.
func runUnderFaults(t *testing.T, seed uint64, withDedup bool, mode destinations) (missing, dups int, skipped int64) {
	t.Helper()
	{
		{
			const records = 20000
			db := store.NewInMemory()
			w := store.NewBatcher(db, nil)
			defer w.Close()
			positions := pipeline.NewPositionStore(db, w, nil)
			var dd pipeline.Dedup
			if withDedup {
				dd = dedupAdapter{dedup.New(db, w, dedup.Options{})}
			}
			f := &faults{rng: rand.New(rand.NewPCG(seed, seed))}
			var mu sync.Mutex
			var written, other []int
			runs := 0

			finished := false
			for runs = 1; runs < 5000 && !finished; runs++ {
				progress := make(chan struct{}, 1)
				dsts := []pipeline.Destination{{ID: "dst", Connector: &faultyDestination{mu: &mu, written: &written, f: f}}}
				if mode != remembered {
					dsts[0].Connector = readingBackDestination{dsts[0].Connector.(*faultyDestination)}
				}
				if mode == readingBackAndRemembered {
					dsts = append(dsts, pipeline.Destination{ID: "other", Connector: &faultyDestination{mu: &mu, written: &other, f: f}})
				}
				e, err := pipeline.New(pipeline.Config{
					PipelineID:   "p",
					Source:       pipeline.Source{ID: "src", Connector: &faultySource{limit: records, f: f}},
					Destinations: dsts,
					Positions:    positions,
					Dedup:        dd,
					BatchSize:    64,
					OnAck: func(int) {
						select {
						case progress <- struct{}{}:
						default:
						}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- e.Run(context.Background()) }()
				// The run ends at its next fault, or is stopped once the
				// last record is acknowledged.
				// The persisted position lags the acknowledgements a little
				// (saves are coalesced), so it is also looked at on a tick.
				tick := time.NewTicker(10 * time.Millisecond)
				stall := time.NewTimer(10 * time.Second)
			wait:
				for {
					select {
					case <-done:
						break wait
					case <-progress:
						stall.Reset(10 * time.Second)
					case <-tick.C:
						if lastAcked(t, positions) >= records-64 {
							e.Stop()
						}
					case <-stall.C:
						t.Fatal("a run neither failed nor made progress")
					}
				}
				tick.Stop()
				stall.Stop()
				skipped += e.Stats().DedupSkipped.Load()
				finished = lastAcked(t, positions) == records
			}
			if !finished {
				t.Fatalf("not all records were acknowledged after %d runs", runs)
			}
			mu.Lock()
			defer mu.Unlock()
			seen := make(map[int]int, records)
			for _, id := range written {
				seen[id]++
			}
			for id := 1; id <= records; id++ {
				switch c := seen[id]; {
				case c == 0:
					missing++
				case c > 1:
					dups += c - 1
				}
			}
			if mode == readingBackAndRemembered {
				counts := make(map[int]int, records)
				for _, id := range other {
					counts[id]++
				}
				for id := 1; id <= records; id++ {
					if counts[id] == 0 {
						t.Errorf("the second destination misses record %d", id)
					}
				}
				// A remembered destination may write the batch being
				// written at a crash twice, never under faults of a live
				// process.
				if len(other) != records {
					t.Errorf("the second destination holds %d records, want %d once each", len(other), records)
				}
			}
			t.Logf("dedup %v: %d runs, %d records skipped, %d missing, %d duplicates", withDedup, runs, skipped, missing, dups)
			return missing, dups, skipped
		}
	}
}
