package dedup

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/store"
)

// scanCountingStore counts the scans of destinations' entries, and fails
// commits holding failKey.
type scanCountingStore struct {
	store.Store
	scans   atomic.Int32
	failKey atomic.Pointer[string]
}

func (s *scanCountingStore) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if string(prefix) != store.PrefixDedup {
		s.scans.Add(1)
	}
	return s.Store.Scan(ctx, prefix, fn)
}

func (s *scanCountingStore) Commit(ctx context.Context, ops []store.Op) error {
	if k := s.failKey.Load(); k != nil {
		for _, op := range ops {
			if string(op.Key) == *k {
				return errors.New("disk on fire")
			}
		}
	}
	return s.Store.Commit(ctx, ops)
}

func newIndexFixture(t *testing.T) (*scanCountingStore, *store.Batcher, *Store) {
	t.Helper()
	db := &scanCountingStore{Store: store.NewInMemory()}
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	return db, w, New(db, w, Options{TTL: time.Hour, Now: clocktest.New().Now})
}

// sweep runs the startup sweep, which builds s's index.
func sweep(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// openScans opens the destination and returns how many scans it took and
// how many positions it loaded.
func openScans(t *testing.T, db *scanCountingStore, s *Store, pipeline, destination string) (scans int32, pending int) {
	t.Helper()
	before := db.scans.Load()
	d, err := s.Open(context.Background(), pipeline, destination, Holdings{})
	if err != nil {
		t.Fatal(err)
	}
	return db.scans.Load() - before, d.Pending()
}

func TestOpenSkipsTheScanOfADestinationWithoutEntries(t *testing.T) {
	ctx := context.Background()
	db, w, s := newIndexFixture(t)
	// An entry an earlier process left, before the index is built: every
	// Open scans.
	earlier, _ := s.Open(ctx, "p", "left", Holdings{})
	if _, wait, err := earlier.Remember(ctx, "", positions("7")); err != nil || wait() != nil {
		t.Fatal(err)
	}
	if scans, _ := openScans(t, db, s, "p", "empty"); scans != 1 {
		t.Fatalf("before Sweep: %d scans, want 1", scans)
	}
	sweep(t, s)
	if scans, _ := openScans(t, db, s, "p", "empty"); scans != 0 {
		t.Fatalf("a destination without entries: %d scans, want none", scans)
	}
	if scans, pending := openScans(t, db, s, "p", "left"); scans != 1 || pending != 1 {
		t.Fatalf("the destination Sweep found an entry of: %d scans, %d pending; want the entry loaded", scans, pending)
	}
	// A run remembers a batch: the next run of that destination loads it;
	// once the position save deleted it, the scan is skipped again.
	d, _ := s.Open(ctx, "p", "out", Holdings{})
	key, wait, err := d.Remember(ctx, "", positions("1", "2"))
	if err != nil || wait() != nil {
		t.Fatal(err)
	}
	if scans, pending := openScans(t, db, s, "p", "out"); scans != 1 || pending != 2 {
		t.Fatalf("after a run remembered a batch: %d scans, %d pending; want it loaded", scans, pending)
	}
	if err := w.Apply(ctx, deleteOps([][]byte{key})...); err != nil {
		t.Fatal(err)
	}
	if scans, _ := openScans(t, db, s, "p", "out"); scans != 0 {
		t.Fatalf("after its entry was deleted: %d scans, want none", scans)
	}
	// An entry only submitted (its commit not waited for) counts already.
	d, _ = s.Open(ctx, "p", "out", Holdings{})
	if _, _, err := d.Intend(ctx, "", positions("3")); err != nil {
		t.Fatal(err)
	}
	if scans, _ := openScans(t, db, s, "p", "out"); scans != 1 {
		t.Fatalf("with an intent submitted: %d scans, want 1", scans)
	}
}

func TestOpenScansAgainAfterACommitOfEntriesFailed(t *testing.T) {
	ctx := context.Background()
	db, w, s := newIndexFixture(t)
	sweep(t, s)
	d, _ := s.Open(ctx, "p", "out", Holdings{})
	key, wait, err := d.Remember(ctx, "", positions("1"))
	if err != nil || wait() != nil {
		t.Fatal(err)
	}
	// The delete fails: whether the entry is gone is unknown.
	k := string(key)
	db.failKey.Store(&k)
	if err := w.Apply(ctx, deleteOps([][]byte{key})...); err == nil {
		t.Fatal("the delete did not fail")
	}
	db.failKey.Store(nil)
	if scans, _ := openScans(t, db, s, "p", "other"); scans != 1 {
		t.Fatalf("after a failed commit of entries: %d scans, want every Open to scan", scans)
	}
}

func TestOnlyTheFirstStoreOnAWriterKeepsAnIndex(t *testing.T) {
	db, w, s := newIndexFixture(t)
	sweep(t, s)
	second := New(db, w, Options{TTL: time.Hour})
	sweep(t, second)
	if scans, _ := openScans(t, db, second, "p", "out"); scans != 1 {
		t.Fatalf("a second store on the same writer: %d scans, want 1 (it cannot follow the writes)", scans)
	}
	if scans, _ := openScans(t, db, s, "p", "out"); scans != 0 {
		t.Fatalf("the first store: %d scans, want none", scans)
	}
}

func TestDestinationOfAKey(t *testing.T) {
	for key, want := range map[string]string{
		store.PrefixDedup + "p/d/\x00\x00/\x01":   store.PrefixDedup + "p/d/",
		store.PrefixDedup + "a%2Fb/c%2Fd/run/seq": store.PrefixDedup + "a%2Fb/c%2Fd/",
		store.PrefixDedup + "p/":                  "",
		"conduit/positions/p/d/x":                 "",
	} {
		got, ok := destinationOf([]byte(key))
		if got != want || ok != (want != "") {
			t.Errorf("destinationOf(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	// destinationPrefix is what Open asks the index about.
	if got, _ := destinationOf(append(destinationPrefix("a/b", "c"), 1, 2)); got != string(destinationPrefix("a/b", "c")) {
		t.Errorf("destinationOf disagrees with destinationPrefix: %q", got)
	}
}
