package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

var errLeaseLost = errors.New("lease of pipeline p1 expired 3s ago")

// guardAllowing returns a WriteGuard that allows the first allowed calls
// and refuses every later one, as a lease that runs out does, and the
// number of calls it got.
func guardAllowing(allowed int64) (func() error, *atomic.Int64) {
	var calls atomic.Int64
	return func() error {
		if calls.Add(1) > allowed {
			return errLeaseLost
		}
		return nil
	}, &calls
}

// checkGuardError checks that err is the transient StageError of a write
// the guard refused.
func checkGuardError(t *testing.T, err error, kind Kind, id string) {
	t.Helper()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != kind || se.ID != id || se.Op != "write" || !errors.Is(err, errLeaseLost) {
		t.Fatalf("got %v, want a %s write StageError for %s wrapping the guard's error", err, kind, id)
	}
	if !strings.Contains(err.Error(), errLeaseLost.Error()) {
		t.Fatalf("error %q does not say what the guard said", err)
	}
	if c := cerrors.Classify(err).Class; c != cerrors.ClassTransient {
		t.Fatalf("a refused write classifies as %v, want transient", c)
	}
}

func TestWriteGuardRefusalStopsDestinationWrites(t *testing.T) {
	tests := []struct {
		name    string
		allowed int64 // batches the guard lets through
	}{
		{name: "refused from the first batch", allowed: 0},
		{name: "refused after three batches", allowed: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &seqSource{limit: 100, perRead: 10}
			dst := &memDestination{}
			pos := &memPositions{}
			guard, calls := guardAllowing(tt.allowed)
			h := startEngine(t, Config{
				Source:       Source{ID: "src", Connector: src},
				Destinations: []Destination{{ID: "dst", Connector: dst}},
				Positions:    pos,
				BatchSize:    10, // one Write call per batch
				WriteGuard:   guard,
			})
			checkGuardError(t, h.wait(), KindDestination, "dst")
			want := seqStrings(1, int(tt.allowed)*10)
			if got := dst.records(); !slices.Equal(got, want) {
				t.Fatalf("destination got %v, want exactly the records of the batches allowed (%v)", got, want)
			}
			if got := src.ackedPositions(); !slices.Equal(got, want) {
				t.Fatalf("acked %v, want only the written %v", got, want)
			}
			wantPos := "" // nothing acknowledged, nothing persisted
			if len(want) > 0 {
				wantPos = want[len(want)-1]
			}
			if got := pos.saved("p1", "src"); got != wantPos {
				t.Fatalf("persisted %q, want %q", got, wantPos)
			}
			if n := calls.Load(); n != tt.allowed+1 {
				t.Fatalf("the guard was called %d times, want once per Write call and once refused (%d)", n, tt.allowed+1)
			}
		})
	}
}

// The dead-letter queue is a destination too: a record rejected after the
// lease ran out must not reach it either.
func TestWriteGuardRefusalStopsDeadLetterQueueWrites(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &memDestination{}
	dlq := &dlqDestination{}
	guard, calls := guardAllowing(2)
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		// Every record is rejected, so the destination has nothing to
		// write and every guard call is the queue's.
		Processors: []Processor{{ID: "reject", Processor: rejectEvery(1, errors.New("rejected"))}},
		DLQ:        DeadLetterQueue{Connector: dlq}, // window 0: no limit
		Positions:  &memPositions{},
		BatchSize:  10,
		WriteGuard: guard,
	})
	checkGuardError(t, h.wait(), KindDLQ, DLQID)
	want := seqStrings(1, 20)
	if got := dlq.positions(); !slices.Equal(got, want) {
		t.Fatalf("dead-letter queue got %v, want the two batches allowed (%v)", got, want)
	}
	if got := dst.records(); len(got) > 0 {
		t.Fatalf("destination got %v, want nothing", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, want) {
		t.Fatalf("acked %v, want only the queued %v", got, want)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("the guard was called %d times, want 3 (two queue writes, one refused)", n)
	}
}

// guardCheckingDestination checks the write guard of Write's context
// before it writes, as a destination that takes time before its records
// become visible does.
type guardCheckingDestination struct{ memDestination }

func (d *guardCheckingDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if err := writeguard.Check(ctx); err != nil {
		return 0, err
	}
	return d.memDestination.Write(ctx, batch)
}

// A lease that runs out between the engine's check and the destination's
// own, right before it writes: the destination writes nothing of that
// batch and the run ends as after the engine's refusal.
func TestWriteGuardReachesTheDestinationsOwnCheck(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &guardCheckingDestination{}
	// Two calls per batch: the engine's, then the destination's. The
	// third batch passes the engine's check and is refused by the
	// destination's.
	guard, calls := guardAllowing(5)
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Positions:    &memPositions{},
		BatchSize:    10,
		WriteGuard:   guard,
	})
	checkGuardError(t, h.wait(), KindDestination, "dst")
	want := seqStrings(1, 20)
	if got := dst.records(); !slices.Equal(got, want) {
		t.Fatalf("destination got %v, want the two batches its own check allowed (%v)", got, want)
	}
	if got := src.ackedPositions(); !slices.Equal(got, want) {
		t.Fatalf("acked %v, want only the written %v", got, want)
	}
	if n := calls.Load(); n != 6 {
		t.Fatalf("the guard was called %d times, want 6 (twice for each of three batches)", n)
	}
}
