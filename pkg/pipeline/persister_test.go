package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

func TestPersisterRunWaitsForTheLastOfferedSave(t *testing.T) {
	pos := &memPositions{saveGate: make(chan struct{})}
	var stats Stats
	p := newPersister(pos, "p", "src", &stats)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background()) }()
	for _, s := range []string{"1", "2", "3"} {
		p.offer(record.Position(s), []store.Op{{Key: []byte("entry-" + s), Delete: true}})
	}
	p.close()
	select {
	case err := <-done:
		t.Fatalf("run returned %v before the saves were durable", err)
	default:
	}
	close(pos.saveGate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pos.saved("p", "src"); got != "3" {
		t.Fatalf("saved %q, want 3", got)
	}
	if got := len(pos.deleted); got != 3 {
		t.Fatalf("%d entries deleted with the saves, want 3", got)
	}
	if got := stats.PositionsSaved.Load(); got != 3 {
		t.Fatalf("PositionsSaved = %d, want 3", got)
	}
}

func TestPersisterFailedSaveEndsRun(t *testing.T) {
	pos := &memPositions{saveErr: errBoom}
	var stats Stats
	p := newPersister(pos, "p", "src", &stats)
	p.offer(record.Position("1"), nil)
	err := p.run(context.Background())
	var se *StageError
	if !errors.As(err, &se) || se.Op != "save position" || !errors.Is(err, errBoom) {
		t.Fatalf("run = %v, want a save position StageError wrapping the failure", err)
	}
	// Later offers are dropped: the run is over.
	p.offer(record.Position("2"), nil)
	if n := pos.saveCount(); n != 0 {
		t.Fatalf("%d saves recorded after a failure", n)
	}
}

func TestPersisterWithNothingOfferedReturnsOnClose(t *testing.T) {
	var stats Stats
	p := newPersister(&memPositions{}, "p", "src", &stats)
	p.close()
	if err := p.run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
