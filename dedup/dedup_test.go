package dedup

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

type fixture struct {
	db  store.Store
	w   *store.Batcher
	now time.Time
	s   *Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: store.NewInMemory(), now: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
	f.w = store.NewBatcher(f.db, nil)
	t.Cleanup(f.w.Close)
	f.s = New(f.db, f.w, Options{TTL: time.Hour, Now: func() time.Time { return f.now }})
	return f
}

func positions(ps ...string) []record.Position {
	out := make([]record.Position, len(ps))
	for i, p := range ps {
		out[i] = record.Position(p)
	}
	return out
}

func (f *fixture) keys(t *testing.T) int {
	t.Helper()
	n := 0
	if err := f.db.Scan(context.Background(), []byte(store.PrefixDedup), func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRememberThenSkipAfterRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d, err := f.s.Open(ctx, "p", "out", Holdings{})
	if err != nil || d.Pending() != 0 {
		t.Fatalf("first open: pending %d, %v", d.Pending(), err)
	}
	key1, wait, err := d.Remember(ctx, positions("1", "2", "3"))
	if err != nil || wait() != nil {
		t.Fatalf("remember: %v", err)
	}
	_, wait, _ = d.Remember(ctx, positions("4"))
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	// The source acknowledged batch 1 and the position was saved with its
	// entry deleted; batch 2's acknowledgement never completed (crash).
	if err := f.w.Apply(ctx, deleteOps([][]byte{key1})...); err != nil {
		t.Fatal(err)
	}

	d2, err := f.s.Open(ctx, "p", "out", Holdings{})
	if err != nil || d2.Pending() != 1 {
		t.Fatalf("after restart: pending %d, %v; want position 4", d2.Pending(), err)
	}
	if skip, _ := d2.Skip(record.Position("3")); skip {
		t.Fatal("skipped 3, whose acknowledgement completed")
	}
	skip, done := d2.Skip(record.Position("4"))
	if !skip || done == nil || d2.Hits() != 1 || d2.Pending() != 0 {
		t.Fatalf("Skip(4) = %v, %q; hits %d pending %d", skip, done, d2.Hits(), d2.Pending())
	}
	if skip, _ := d2.Skip(record.Position("4")); skip {
		t.Fatal("a position was skipped twice")
	}
	// Other destinations and pipelines are not affected.
	other, _ := f.s.Open(ctx, "p", "other", Holdings{})
	if other.Pending() != 0 {
		t.Fatal("one destination's entries skip another's records")
	}
}

func TestExpiredAndCorruptEntriesAreDeleted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d, _ := f.s.Open(ctx, "p", "out", Holdings{})
	_, wait, _ := d.Remember(ctx, positions("1"))
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Set(ctx, append(destinationPrefix("p", "out"), "garbage"...), []byte("not an entry")); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(2 * time.Hour) // past the TTL
	d2, err := f.s.Open(ctx, "p", "out", Holdings{})
	if err != nil || d2.Pending() != 0 {
		t.Fatalf("pending %d, %v: an expired entry was used", d2.Pending(), err)
	}
	if n := f.keys(t); n != 0 {
		t.Fatalf("%d entries left; expired and corrupt ones must be deleted", n)
	}
}

func TestForgetAndSweep(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, dest := range []string{"a", "b"} {
		d, _ := f.s.Open(ctx, "p", dest, Holdings{})
		_, wait, _ := d.Remember(ctx, positions("1"))
		_ = wait()
	}
	q, _ := f.s.Open(ctx, "q", "a", Holdings{})
	_, wait, _ := q.Remember(ctx, positions("1"))
	_ = wait()
	if n, err := f.s.Forget(ctx, "p"); n != 2 || err != nil {
		t.Fatalf("Forget(p) = %d, %v", n, err)
	}
	if n := f.keys(t); n != 1 {
		t.Fatalf("%d entries left, want q's", n)
	}
	if n, _ := f.s.Sweep(ctx); n != 0 {
		t.Fatalf("swept %d live entries", n)
	}
	f.now = f.now.Add(2 * time.Hour)
	if n, _ := f.s.Sweep(ctx); n != 1 || f.keys(t) != 0 {
		t.Fatalf("swept %d, left %d", n, f.keys(t))
	}
}

func TestIDsWithSlashesDoNotCollide(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d, _ := f.s.Open(ctx, "a/b", "c", Holdings{})
	_, wait, _ := d.Remember(ctx, positions("1"))
	_ = wait()
	if other, _ := f.s.Open(ctx, "a", "b/c", Holdings{}); other.Pending() != 0 {
		t.Fatal("pipeline a/b destination c shares entries with pipeline a destination b/c")
	}
}

// TestEntryFormatGolden pins the persisted entry format of both kinds, and
// that version 1 (every entry written) is still read.
func TestEntryFormatGolden(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		file string
		kind entryKind
	}{
		{"entry.v2.golden", kindWritten},
		{"entry.v2-intent.golden", kindIntent},
	} {
		golden := filepath.Join("testdata", tc.file)
		got := encodeEntry(at, tc.kind, positions("1", "offset:4096", ""))
		if *updateGolden {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("read golden file (run with -update to create it): %v", err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: entry encoding changed:\n got %x\nwant %x", tc.file, got, want)
		}
		exp, kind, ps, err := decodeEntry(want)
		if err != nil || !exp.Equal(at) || kind != tc.kind || len(ps) != 3 || string(ps[1]) != "offset:4096" {
			t.Fatalf("%s decodes to %v %v %q %v", tc.file, exp, kind, ps, err)
		}
	}
	v1, err := os.ReadFile(filepath.Join("testdata", "entry.golden"))
	if err != nil {
		t.Fatal(err)
	}
	exp, kind, ps, err := decodeEntry(v1)
	if err != nil || !exp.Equal(at) || kind != kindWritten || len(ps) != 3 || string(ps[1]) != "offset:4096" {
		t.Fatalf("version 1 decodes to %v %v %q %v", exp, kind, ps, err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(time.Unix(0, 1), kindIntent, positions("a", "bc")))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _, _ = decodeEntry(b) // must not panic
	})
}
