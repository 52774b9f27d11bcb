package pipeline

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/record"
)

// reportingDestination is a memDestination that says what it holds, so
// that dedup records intents before its writes.
type reportingDestination struct{ memDestination }

func (*reportingDestination) LastPosition(context.Context) (record.Position, bool, error) {
	return nil, true, nil
}

// slowIntents is a dedup store whose first intent is submitted only once
// the test says so, and whose intents become durable only when the test
// closes durable, as a slow disk would have them.
type slowIntents struct {
	firstSubmit <-chan struct{}
	durable     chan struct{}
	waiting     chan struct{} // closed when the writer first waits

	mu       sync.Mutex
	intents  int
	waitOnce sync.Once
}

func (s *slowIntents) Open(context.Context, string, string, Held) (DedupDestination, error) {
	return s, nil
}
func (s *slowIntents) Pending() int                                { return 0 }
func (s *slowIntents) Hits() int64                                 { return 0 }
func (s *slowIntents) Skip(string, record.Position) (bool, []byte) { return false, nil }
func (s *slowIntents) Remember(context.Context, string, []record.Position) ([]byte, func() error, error) {
	panic("a destination that reports what it holds records intents")
}

func (s *slowIntents) Intend(_ context.Context, _ string, _ []record.Position) ([]byte, func() error, error) {
	s.mu.Lock()
	s.intents++
	first := s.intents == 1
	s.mu.Unlock()
	if first {
		<-s.firstSubmit
	}
	return []byte("k"), func() error {
		s.waitOnce.Do(func() { close(s.waiting) })
		<-s.durable
		return nil
	}, nil
}

func (s *slowIntents) submitted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intents
}

// countingReads signals when the source was asked for its n-th batch.
type countingReads struct {
	seqSource
	n     int
	reads int
	nth   chan struct{}
}

func (c *countingReads) Read(ctx context.Context, batch []record.Record) (int, error) {
	c.reads++
	if c.reads == c.n {
		close(c.nth)
	}
	return c.seqSource.Read(ctx, batch)
}

// TestIntentsRunAheadOfASlowCommit: while the first batch's intent is not
// durable, the destination records the intents of the batches read since,
// all the engine holds but the few the reader and acker use, so that one
// slow sync does not stop the writes. With 16 batches in flight it took 12
// ahead; a sync of 10-30 ms on a busy disk then stopped the file
// destination for a sixth of a run.
func TestIntentsRunAheadOfASlowCommit(t *testing.T) {
	release := make(chan struct{})
	dd := &slowIntents{firstSubmit: release, durable: make(chan struct{}), waiting: make(chan struct{})}
	src := &countingReads{seqSource: seqSource{limit: 1 << 20, perRead: 1 << 20}, n: DefaultBatchesInFlightWithIntents, nth: make(chan struct{})}
	dst := &reportingDestination{}
	e, err := New(Config{
		PipelineID:   "p",
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    &memPositions{},
		Dedup:        dd,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()
	// When the source is asked for its last batch, every batch before it
	// was handed to the destination's stage.
	<-src.nth
	close(release)
	<-dd.waiting
	want := intentsAhead(DefaultBatchesInFlightWithIntents) + 1
	if got := dd.submitted(); got != want {
		t.Errorf("intents submitted while the first one commits: %d, want %d (the batch written and %d ahead)", got, want, want-1)
	}
	if got := len(dst.records()); got != 0 {
		t.Errorf("the destination wrote %d records before their intent was durable", got)
	}
	close(dd.durable)
	e.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// syncingDestination is a reportingDestination that says whether it
// syncs its writes (connector.SyncReporter).
type syncingDestination struct {
	reportingDestination
	syncs bool
}

func (d *syncingDestination) SyncsWrites() bool { return d.syncs }

// unsyncedMemDestination is a memDestination that does not sync and
// cannot say what it holds.
type unsyncedMemDestination struct{ memDestination }

func (*unsyncedMemDestination) SyncsWrites() bool { return false }

// heldRecorder is a dedup store that records what each destination said
// when it opened, and then fails the run.
type heldRecorder struct{ held []Held }

func (h *heldRecorder) Open(_ context.Context, _, _ string, held Held) (DedupDestination, error) {
	h.held = append(h.held, held)
	return nil, errors.New("recorded")
}

// TestHeldSaysWhetherTheDestinationSyncs: the dedup store learns that a
// destination does not sync its writes, so that it keeps its entries
// without a sync; one that syncs, or cannot say, gets synced entries.
func TestHeldSaysWhetherTheDestinationSyncs(t *testing.T) {
	tests := []struct {
		name string
		dst  connector.Destination
		want Held
	}{
		{"reports, does not sync", &syncingDestination{syncs: false}, Held{Reports: true, Unsynced: true}},
		{"reports, syncs", &syncingDestination{syncs: true}, Held{Reports: true}},
		{"reports, cannot say", &reportingDestination{}, Held{Reports: true}},
		{"does not report, does not sync", &unsyncedMemDestination{}, Held{Unsynced: true}},
		{"neither", &memDestination{}, Held{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &heldRecorder{}
			e, err := New(Config{
				PipelineID:   "p",
				Source:       Source{ID: "src", Connector: &seqSource{limit: 1, perRead: 1}},
				Destinations: []Destination{{ID: "dst", Connector: tt.dst}},
				Positions:    &memPositions{},
				Dedup:        h,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Run(context.Background()); err == nil {
				t.Fatal("the run went on after the dedup store failed to open")
			}
			if len(h.held) != 1 || !reflect.DeepEqual(h.held[0], tt.want) {
				t.Fatalf("held %+v, want [%+v]", h.held, tt.want)
			}
		})
	}
}
