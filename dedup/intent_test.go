package dedup

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// intendAll records one intent per batch, as a destination that reports
// what it holds does before writing each, and waits for them.
func intendAll(t *testing.T, f *fixture, batches ...[]record.Position) {
	t.Helper()
	d, err := f.s.Open(context.Background(), "p", "out", Holdings{Reports: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		_, wait, err := d.Intend(context.Background(), "", b)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// skipped returns which of ps the destination opened with held skips.
func skipped(t *testing.T, f *fixture, held Holdings, ps ...string) []string {
	t.Helper()
	d, err := f.s.Open(context.Background(), "p", "out", held)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		if skip, _ := d.Skip("", record.Position(p)); skip {
			out = append(out, p)
		}
	}
	return out
}

func TestIntentsAreHeldUpToTheLastPositionTheDestinationReports(t *testing.T) {
	all := []string{"1", "2", "3", "4", "5", "6"}
	tests := []struct {
		name string
		held Holdings
		want []string
	}{
		{"in the middle of the last intent", Holdings{Reports: true, Last: record.Position("5")}, []string{"1", "2", "3", "4", "5"}},
		{"at the end of an intent", Holdings{Reports: true, Last: record.Position("3")}, []string{"1", "2", "3"}},
		{"in the first intent", Holdings{Reports: true, Last: record.Position("1")}, []string{"1"}},
		{"at the very end", Holdings{Reports: true, Last: record.Position("6")}, all},
		{"in no intent", Holdings{Reports: true, Last: record.Position("earlier")}, nil},
		{"nothing held", Holdings{Reports: true}, nil},
		{"the destination does not report any more", Holdings{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			intendAll(t, f, positions("1", "2", "3"), positions("4", "5", "6"))
			if got := skipped(t, f, tc.held, all...); !slices.Equal(got, tc.want) {
				t.Fatalf("skipped %v, want %v", got, tc.want)
			}
		})
	}
}

// TestIntentsAreResolvedOnce: the resolution is written before the run
// starts, so a crash of that run never resolves the old intents against
// the position its own writes leave.
func TestIntentsAreResolvedOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	intendAll(t, f, positions("1", "2", "3"), positions("4", "5", "6"))
	d, err := f.s.Open(ctx, "p", "out", Holdings{Reports: true, Last: record.Position("2")})
	if err != nil {
		t.Fatal(err)
	}
	if d.Pending() != 2 {
		t.Fatalf("%d positions held, want 2", d.Pending())
	}
	// That run writes 3..6 again and crashes after 6: the old intents must
	// not now count 3..6 as written by the run before.
	if got := skipped(t, f, Holdings{Reports: true, Last: record.Position("6")}, "1", "2", "3", "4", "5", "6"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("after a second open skipped %v, want [1 2]", got)
	}
	// Every stored entry is a written one now.
	err = f.db.Scan(ctx, []byte(store.PrefixDedup), func(k, v []byte) error {
		_, kind, _, _, err := decodeEntry(v)
		if err != nil || kind != kindWritten {
			return fmt.Errorf("entry %q: kind %v, err %v", k, kind, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntentResolutionIsOneCommit: resolving writes what it changes in one
// commit of the store (all or nothing).
func TestIntentResolutionIsOneCommit(t *testing.T) {
	ctx := context.Background()
	db := &countingCommits{Store: store.NewInMemory()}
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	s := New(db, w, Options{})
	d, err := s.Open(ctx, "p", "out", Holdings{Reports: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]record.Position{positions("1", "2"), positions("3", "4"), positions("5")} {
		_, wait, _ := d.Intend(ctx, "", b)
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	before := db.count()
	if _, err := s.Open(ctx, "p", "out", Holdings{Reports: true, Last: record.Position("3")}); err != nil {
		t.Fatal(err)
	}
	if n := db.count() - before; n != 1 {
		t.Fatalf("resolving took %d commits, want 1", n)
	}
}

type countingCommits struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (c *countingCommits) Commit(ctx context.Context, ops []store.Op) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Store.Commit(ctx, ops)
}

func (c *countingCommits) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestIntentsOfSeveralSources: in a pipeline of several sources, intents
// of each name their source, and equal positions of different sources are
// told apart by the source of the destination's last record; when the
// destination cannot say it, no intent counts as written (records may be
// written again, none is lost: the last record may be another source's of
// an entry deleted long ago).
func TestIntentsOfSeveralSources(t *testing.T) {
	ctx := context.Background()
	type sp struct{ source, pos string }
	all := []sp{{"a", "1"}, {"a", "2"}, {"a", "3"}, {"b", "1"}, {"b", "2"}, {"b", "3"}, {"a", "4"}, {"a", "5"}}
	tests := []struct {
		name string
		held Holdings
		want []sp
	}{
		{"b's record last", Holdings{Reports: true, Last: record.Position("2"), LastSource: "b"}, []sp{{"a", "1"}, {"a", "2"}, {"a", "3"}, {"b", "1"}, {"b", "2"}}},
		{"a's record last", Holdings{Reports: true, Last: record.Position("2"), LastSource: "a"}, []sp{{"a", "1"}, {"a", "2"}}},
		{"a's later record last", Holdings{Reports: true, Last: record.Position("4"), LastSource: "a"}, all[:7]},
		{"source unknown, position of both", Holdings{Reports: true, Last: record.Position("2")}, nil},
		{"source unknown, position of one", Holdings{Reports: true, Last: record.Position("5")}, nil},
		{"a source of no intent", Holdings{Reports: true, Last: record.Position("2"), LastSource: "c"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			d, err := f.s.Open(ctx, "p", "out", Holdings{Reports: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range []struct {
				source string
				ps     []record.Position
			}{{"a", positions("1", "2", "3")}, {"b", positions("1", "2", "3")}, {"a", positions("4", "5")}} {
				_, wait, err := d.Intend(ctx, in.source, in.ps)
				if err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
			}
			d2, err := f.s.Open(ctx, "p", "out", tc.held)
			if err != nil {
				t.Fatal(err)
			}
			var got []sp
			for _, x := range all {
				if skip, _ := d2.Skip(x.source, record.Position(x.pos)); skip {
					got = append(got, x)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("skipped %v, want %v", got, tc.want)
			}
		})
	}
}

// syncCountingStore counts the commits made with and without a sync.
type syncCountingStore struct {
	*store.InMemory
	mu               sync.Mutex
	synced, unsynced int
}

func (s *syncCountingStore) Commit(ctx context.Context, ops []store.Op) error {
	s.mu.Lock()
	s.synced++
	s.mu.Unlock()
	return s.InMemory.Commit(ctx, ops)
}

func (s *syncCountingStore) CommitUnsynced(ctx context.Context, ops []store.Op) error {
	s.mu.Lock()
	s.unsynced++
	s.mu.Unlock()
	return s.InMemory.Commit(ctx, ops)
}

// The entries of a destination that does not sync its writes are as
// durable as its writes (they survive the process's crash): committed
// without a sync. Those of any other destination are synced.
func TestEntriesAreSyncedOnlyForADestinationThatSyncs(t *testing.T) {
	for _, unsynced := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsynced=%v", unsynced), func(t *testing.T) {
			db := &syncCountingStore{InMemory: store.NewInMemory()}
			w := store.NewBatcher(db, nil)
			defer w.Close()
			s := New(db, w, Options{})
			d, err := s.Open(context.Background(), "p", "out", Holdings{Reports: true, Unsynced: unsynced})
			if err != nil {
				t.Fatal(err)
			}
			for _, submit := range []func(context.Context, string, []record.Position) ([]byte, func() error, error){d.Intend, d.Remember} {
				_, wait, err := submit(context.Background(), "", positions("1", "2"))
				if err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
			}
			db.mu.Lock()
			got := [2]int{db.synced, db.unsynced}
			db.mu.Unlock()
			want := [2]int{2, 0}
			if unsynced {
				want = [2]int{0, 2}
			}
			if got != want {
				t.Fatalf("commits synced, unsynced = %v, want %v", got, want)
			}
			// And the entries are there to be resolved at the next open.
			if got := skipped(t, &fixture{s: s}, Holdings{Reports: true, Last: record.Position("2")}, "1", "2"); !slices.Equal(got, []string{"1", "2"}) {
				t.Fatalf("skipped %v after the restart, want [1 2]", got)
			}
		})
	}
}
