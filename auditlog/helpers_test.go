package auditlog

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/conduitry/conduit/pkg/store"
)

// backend is a store the tests run on.
type backend struct {
	name string
	// open returns an empty store, or the one in dir for Badger; it is
	// closed when the test ends.
	open func(t testing.TB, dir string) store.Store
}

var backends = []backend{
	{name: "inmemory", open: func(t testing.TB, _ string) store.Store {
		s := store.NewInMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{name: "badger", open: openBadger},
}

func openBadger(t testing.TB, dir string) store.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := store.OpenBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// forEachBackend runs fn as a subtest on every store.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// openLog opens a Log with its own Batcher on db. Both are closed when
// the test ends (the Log first), before db, whose cleanup was registered
// earlier.
func openLog(t testing.TB, db store.Store, opts Options) *Log {
	t.Helper()
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	l, err := Open(context.Background(), db, w, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, pipelineID string, kind Kind) Event {
	t.Helper()
	e, err := l.Append(context.Background(), Event{PipelineID: pipelineID, Kind: kind, Message: string(kind)})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return e
}

func mustList(t testing.TB, l *Log, pipelineID string, q Query) []Event {
	t.Helper()
	events, err := l.List(context.Background(), pipelineID, q)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return events
}

// seqs returns the sequences of events, for short failure messages.
func seqs(events []Event) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = e.Sequence
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	if from <= to {
		for s := from; s <= to; s++ {
			out = append(out, s)
		}
	} else {
		for s := from; s >= to; s-- {
			out = append(out, s)
		}
	}
	return out
}

func equalSeqs(got []Event, want []uint64) bool {
	return fmt.Sprint(seqs(got)) == fmt.Sprint(want) || (len(got) == 0 && len(want) == 0)
}
