package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
)

// testTimeout bounds waits for things that happen promptly; it is a guard
// against hangs, not a timing assertion.
const testTimeout = 10 * time.Second

type harness struct {
	t      *testing.T
	engine *Engine
	acked  atomic.Int64
	ackCh  chan struct{}
	done   chan error
	cancel context.CancelFunc
}

func startEngine(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, ackCh: make(chan struct{}, 1), done: make(chan error, 1)}
	if cfg.PipelineID == "" {
		cfg.PipelineID = "p1"
	}
	cfg.OnAck = func(n int) {
		h.acked.Add(int64(n))
		select {
		case h.ackCh <- struct{}{}:
		default:
		}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.engine = e
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	go func() { h.done <- e.Run(ctx) }()
	return h
}

// waitAcked waits until at least n records were acknowledged.
func (h *harness) waitAcked(n int64) {
	h.t.Helper()
	deadline := time.After(testTimeout)
	for h.acked.Load() < n {
		select {
		case <-h.ackCh:
		case err := <-h.done:
			h.t.Fatalf("run ended after %d of %d acks: %v", h.acked.Load(), n, err)
		case <-deadline:
			h.t.Fatalf("only %d of %d records acknowledged", h.acked.Load(), n)
		}
	}
}

func (h *harness) wait() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(testTimeout):
		h.t.Fatal("Run did not return")
		return nil
	}
}

func TestEngineMovesRecordsAndAcksInReadOrder(t *testing.T) {
	src := &seqSource{limit: 1000, perRead: 7}
	dst := &memDestination{}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    pos,
		BatchSize:    5, // smaller than perRead: the batch bounds the read
	})
	h.waitAcked(1000)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("graceful stop returned %v", err)
	}
	want := seqStrings(1, 1000)
	if got := dst.records(); !slices.Equal(got, want) {
		t.Fatalf("destination got %d records, want 1..1000 in order (first %v)", len(got), got[:min(5, len(got))])
	}
	if got := src.ackedPositions(); !slices.Equal(got, want) {
		t.Fatalf("acks not in read order: %d acks, first %v", len(got), got[:min(5, len(got))])
	}
	for _, a := range src.acks {
		if len(a) > 5*DefaultBatchesInFlight/2 {
			t.Fatalf("an ack covered %d records, more than half the batches in flight (%d of 5)", len(a), DefaultBatchesInFlight/2)
		}
	}
	if got := pos.saved("p1", "src"); got != "1000" {
		t.Fatalf("persisted position %q, want 1000", got)
	}
	if !src.torn || !dst.torn {
		t.Fatalf("teardown: source %v destination %v, want both", src.torn, dst.torn)
	}
}

// A source whose Ack is slow (a round trip to a plugin or a broker) would
// hold the pipeline to one batch per round trip; the batches that finish
// meanwhile are acknowledged together, in read order.
func TestEngineAcknowledgesFinishedBatchesTogether(t *testing.T) {
	gate := make(chan struct{})
	src := &seqSource{limit: 100, perRead: 5, ackGate: gate}
	dst := &memDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    &memPositions{},
		BatchSize:    5,
	})
	// The first Ack is held; the destination goes on with later batches.
	// The first Ack may cover several batches already (the acker groups
	// what finished before it got to them), so what counts is that two
	// more finish while it is held.
	first := -1
	clocktest.Eventually(t, func() bool {
		src.mu.Lock()
		if len(src.acks) > 0 {
			first = len(src.acks[0])
		}
		src.mu.Unlock()
		return first >= 0 && len(dst.records()) >= first+10
	}, func() string {
		return fmt.Sprintf("the destination got %d records while the first ack (of %d) was held, want 10 more", len(dst.records()), first)
	})
	close(gate)
	h.waitAcked(100)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := src.ackedPositions(), seqStrings(1, 100); !slices.Equal(got, want) {
		t.Fatalf("acks not in read order: %v", got)
	}
	if second := src.acks[1]; len(second) <= 5 {
		t.Fatalf("the ack after the held one covered %d records, want the batches that finished meanwhile", len(second))
	}
	for _, a := range src.acks {
		if len(a)%5 != 0 || len(a) > 5*DefaultBatchesInFlight/2 {
			t.Fatalf("an ack covered %d records: want whole batches of 5, at most %d of them", len(a), DefaultBatchesInFlight/2)
		}
	}
}

// A batch is acknowledged as soon as it is done, without waiting for the
// next: a quiet source's records must not sit unacknowledged.
func TestEngineAcknowledgesALoneBatchAtOnce(t *testing.T) {
	src := &seqSource{limit: 3, perRead: 3}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Positions:    &memPositions{},
	})
	h.waitAcked(3)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestEngineResumesFromPersistedPosition(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 3}
	dst := &memDestination{}
	pos := &memPositions{}
	pos.set("p1", "src", "12")
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    pos,
	})
	h.waitAcked(8)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if string(src.openedAt) != "12" {
		t.Fatalf("source opened at %q, want the persisted 12", src.openedAt)
	}
	if got, want := dst.records(), seqStrings(13, 20); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestEngineAcksOnlyAfterEveryDestinationWrote(t *testing.T) {
	src := &seqSource{limit: 6, perRead: 2}
	fast := &memDestination{}
	slow := &memDestination{gate: make(chan struct{})}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "fast", Connector: fast}, {ID: "slow", Connector: slow}},
		Positions:    pos,
		BatchSize:    2,
	})
	// Let the slow destination write exactly one batch.
	slow.gate <- struct{}{}
	h.waitAcked(2)
	if got := src.ackedPositions(); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("acked %v while the slow destination had written only 1 and 2", got)
	}
	close(slow.gate)
	h.waitAcked(6)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*memDestination{"fast": fast, "slow": slow} {
		if got := d.records(); !slices.Equal(got, seqStrings(1, 6)) {
			t.Errorf("%s destination got %v", name, got)
		}
	}
}

func TestEngineGracefulStopDrainsInFlightBatches(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &memDestination{gate: make(chan struct{})}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Source:          Source{ID: "src", Connector: src},
		Destinations:    []Destination{{ID: "dst", Connector: dst}},
		Positions:       pos,
		BatchSize:       10,
		BatchesInFlight: 4,
	})
	// The destination is blocked, so the reader fills the pool (4 batches)
	// and waits. Stop now: everything read must still be written and acked.
	clocktest.Eventually(t, func() bool { return h.engine.Stats().RecordsRead.Load() == 40 }, nil)
	h.engine.Stop()
	close(dst.gate)
	if err := h.wait(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	read := h.engine.Stats().RecordsRead.Load()
	if read < 40 {
		t.Fatalf("read %d records, want at least the 40 in flight", read)
	}
	if got := dst.records(); !slices.Equal(got, seqStrings(1, int(read))) {
		t.Fatalf("destination holds %d records, want all %d read", len(got), read)
	}
	if got := src.ackedPositions(); len(got) != int(read) {
		t.Fatalf("acked %d of %d read records", len(got), read)
	}
	if got, want := pos.saved("p1", "src"), seqStrings(int(read), int(read))[0]; got != want {
		t.Fatalf("persisted %q, want %q", got, want)
	}
}

func TestEngineForceStopDropsInFlight(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &memDestination{gate: make(chan struct{})} // never opened
	pos := &memPositions{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    pos,
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return h.engine.Stats().RecordsRead.Load() > 0 }, nil)
	h.cancel()
	err := h.wait()
	if !errors.Is(err, ErrForceStopped) {
		t.Fatalf("got %v, want ErrForceStopped", err)
	}
	if got := pos.saved("p1", "src"); got != "" {
		t.Fatalf("persisted %q although nothing was acknowledged", got)
	}
	if !src.torn || !dst.torn {
		t.Fatal("connectors not torn down after a force stop")
	}
}

func TestEngineDestinationFailureAcksWrittenPrefix(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &memDestination{failAtPos: "14", failErr: errBoom}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "out", Connector: dst}},
		Positions:    pos,
		BatchSize:    10,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindDestination || se.ID != "out" || se.Op != "write" || !errors.Is(err, errBoom) {
		t.Fatalf("got %v, want a destination write StageError for out wrapping boom", err)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 13)) {
		t.Fatalf("acked %v, want exactly the written 1..13", got)
	}
	if got := pos.saved("p1", "src"); got != "13" {
		t.Fatalf("persisted %q, want 13 (the last written record)", got)
	}
}

func TestEngineSourceErrorsNameTheStage(t *testing.T) {
	tests := []struct {
		name   string
		src    *seqSource
		wantOp string
	}{
		{name: "read", src: &seqSource{limit: 100, perRead: 5, readErr: errBoom, failAt: 11}, wantOp: "read"},
		{name: "ack", src: &seqSource{limit: 100, perRead: 5, ackErr: errBoom}, wantOp: "ack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startEngine(t, Config{
				Source:       Source{ID: "gen", Connector: tt.src},
				Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
				Positions:    &memPositions{},
			})
			err := h.wait()
			var se *StageError
			if !errors.As(err, &se) || se.Kind != KindSource || se.ID != "gen" || se.Op != tt.wantOp || !errors.Is(err, errBoom) {
				t.Fatalf("got %v, want source %s StageError for gen", err, tt.wantOp)
			}
		})
	}
}

func TestEnginePositionSaveFailureEndsRun(t *testing.T) {
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: &seqSource{limit: 100, perRead: 5}},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Positions:    &memPositions{saveErr: errBoom},
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Op != "save position" || !errors.Is(err, errBoom) {
		t.Fatalf("got %v, want a save position StageError", err)
	}
}

func TestEngineCoalescesPositionSaves(t *testing.T) {
	src := &seqSource{limit: 50, perRead: 1}
	pos := &memPositions{saveGate: make(chan struct{})}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Positions:    pos,
		BatchSize:    1,
	})
	// The first save is held while all 50 single-record batches are acked:
	// acks must not wait for the disk, and the saves that follow coalesce.
	h.waitAcked(50)
	h.engine.Stop()
	close(pos.saveGate)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := pos.saved("p1", "src"); got != "50" {
		t.Fatalf("persisted %q, want 50", got)
	}
	if n := pos.saveCount(); n > 3 {
		t.Fatalf("%d synced saves for 50 batches acknowledged during one save, want them coalesced (<= 3)", n)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	src := Source{ID: "s", Connector: &seqSource{}}
	dst := []Destination{{ID: "d", Connector: &memDestination{}}}
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "no id", cfg: Config{Source: src, Destinations: dst, Positions: &memPositions{}}},
		{name: "no source", cfg: Config{PipelineID: "p", Destinations: dst, Positions: &memPositions{}}},
		{name: "no destination", cfg: Config{PipelineID: "p", Source: src, Positions: &memPositions{}}},
		{name: "no positions", cfg: Config{PipelineID: "p", Source: src, Destinations: dst}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New accepted an incomplete config")
			}
		})
	}
}

// TestFirstFailureNamesTheCause: when the source fails while a destination
// write is cut short by the cancellation that follows, the run's error is
// the source's, not the destination's "context canceled".
func TestFirstFailureNamesTheCause(t *testing.T) {
	for range 20 {
		src := &seqSource{limit: 100, perRead: 5, readErr: errBoom, failAt: 6}
		dst := &memDestination{gate: make(chan struct{})} // every write waits for cancellation
		h := startEngine(t, Config{
			Source:       Source{ID: "src", Connector: src},
			Destinations: []Destination{{ID: "dst", Connector: dst}},
			Positions:    &memPositions{},
			BatchSize:    5,
		})
		err := h.wait()
		var se *StageError
		if !errors.As(err, &se) || se.ID != "src" || !errors.Is(err, errBoom) {
			t.Fatalf("got %v, want the source's read error", err)
		}
	}
}

// OnOpen is called once per run: when the connectors are open, or when
// opening them failed.
func TestEngineReportsItsConnectorsOpenOnce(t *testing.T) {
	var calls atomic.Int32
	h := startEngine(t, Config{Source: Source{ID: "src", Connector: &seqSource{limit: 1000, perRead: 7}},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}}, Positions: &memPositions{},
		OnOpen: func() { calls.Add(1) }})
	h.waitAcked(1000)
	h.engine.Stop()
	if err := h.wait(); err != nil || calls.Load() != 1 {
		t.Fatalf("run ended with %v after %d OnOpen calls, want nil after 1", err, calls.Load())
	}

	calls.Store(0)
	pos := &memPositions{}
	// A position the source cannot parse makes its Open fail.
	pos.set("p1", "src", "not a number")
	e, err := New(Config{PipelineID: "p1", Source: Source{ID: "src", Connector: &seqSource{limit: 10}},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}}, Positions: pos,
		OnOpen: func() { calls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err == nil || calls.Load() != 1 {
		t.Fatalf("run with a failing open ended with %v after %d OnOpen calls, want an error after 1", err, calls.Load())
	}
}
