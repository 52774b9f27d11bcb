package dedup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

type fixture struct {
	db    store.Store
	w     *store.Batcher
	clock *clocktest.Clock
	s     *Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: store.NewInMemory(), clock: clocktest.New()}
	f.w = store.NewBatcher(f.db, nil)
	t.Cleanup(f.w.Close)
	f.s = New(f.db, f.w, Options{TTL: time.Hour, Now: f.clock.Now})
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
	key1, wait, err := d.Remember(ctx, "", positions("1", "2", "3"))
	if err != nil || wait() != nil {
		t.Fatalf("remember: %v", err)
	}
	_, wait, _ = d.Remember(ctx, "", positions("4"))
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
	if skip, _ := d2.Skip("", record.Position("3")); skip {
		t.Fatal("skipped 3, whose acknowledgement completed")
	}
	skip, done := d2.Skip("", record.Position("4"))
	if !skip || done == nil || d2.Hits() != 1 || d2.Pending() != 0 {
		t.Fatalf("Skip(4) = %v, %q; hits %d pending %d", skip, done, d2.Hits(), d2.Pending())
	}
	if skip, _ := d2.Skip("", record.Position("4")); skip {
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
	_, wait, _ := d.Remember(ctx, "", positions("1"))
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Commit(ctx, []store.Op{{Key: append(destinationPrefix("p", "out"), "garbage"...), Value: []byte("not an entry")}}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Hour) // past the TTL
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
		_, wait, _ := d.Remember(ctx, "", positions("1"))
		_ = wait()
	}
	q, _ := f.s.Open(ctx, "q", "a", Holdings{})
	_, wait, _ := q.Remember(ctx, "", positions("1"))
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
	f.clock.Advance(2 * time.Hour)
	if n, _ := f.s.Sweep(ctx); n != 1 || f.keys(t) != 0 {
		t.Fatalf("swept %d, left %d", n, f.keys(t))
	}
}

func TestIDsWithSlashesDoNotCollide(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d, _ := f.s.Open(ctx, "a/b", "c", Holdings{})
	_, wait, _ := d.Remember(ctx, "", positions("1"))
	_ = wait()
	if other, _ := f.s.Open(ctx, "a", "b/c", Holdings{}); other.Pending() != 0 {
		t.Fatal("pipeline a/b destination c shares entries with pipeline a destination b/c")
	}
}

// goldenPositions are the positions of the golden entries: one that runs
// cannot hold, a run of decimal successors across a change of length, and
// positions after it that share a prefix.
func goldenPositions() []record.Position {
	return positions("offset:4096", "8", "9", "10", "11", "12", "", "120", "99")
}

// TestEntryFormatGolden pins the persisted entry format of both kinds, and
// that versions 1 (every entry written) and 2 (no runs) are still read.
func TestEntryFormatGolden(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		file   string
		kind   entryKind
		source string
	}{
		{"entry.v3.golden", kindWritten, ""},
		{"entry.v3-intent.golden", kindIntent, ""},
		{"entry.v4.golden", kindWritten, "orders-eu"},
		{"entry.v4-intent.golden", kindIntent, "orders-eu"},
	} {
		got := encodeEntry(at, tc.kind, tc.source, goldenPositions())
		want := golden.File(t, tc.file, got)
		exp, kind, source, ps, err := decodeEntry(want)
		if err != nil || !exp.Equal(at) || kind != tc.kind || source != tc.source || !slices.EqualFunc(ps, goldenPositions(), slices.Equal) {
			t.Fatalf("%s decodes to %v %v %q %q %v", tc.file, exp, kind, source, ps, err)
		}
	}
	for _, tc := range []struct {
		file string
		kind entryKind
	}{
		{"entry.golden", kindWritten},
		{"entry.v2.golden", kindWritten},
		{"entry.v2-intent.golden", kindIntent},
	} {
		old, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		exp, kind, source, ps, err := decodeEntry(old)
		if err != nil || !exp.Equal(at) || kind != tc.kind || source != "" || len(ps) != 3 || string(ps[0]) != "1" || string(ps[1]) != "offset:4096" || len(ps[2]) != 0 {
			t.Fatalf("%s decodes to %v %v %q %v", tc.file, exp, kind, ps, err)
		}
	}
}

// TestEntryRoundTrip checks positions that runs may and may not hold,
// and that a batch of consecutive sequence numbers, as sources that count
// write them, costs a few bytes instead of a few per position.
func TestEntryRoundTrip(t *testing.T) {
	at := time.Unix(0, 42)
	seq := func(from, n int) []record.Position {
		out := make([]record.Position, n)
		for i := range out {
			out[i] = record.Position(strconv.Itoa(from + i))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		source    string
		positions []record.Position
		maxBytes  int
	}{
		{name: "a batch of 1,024 sequence numbers", positions: seq(1_999_000, 1024), maxBytes: 32},
		{name: "a batch of 1,024 sequence numbers of a named source", source: "gen-b", positions: seq(1_999_000, 1024), maxBytes: 40},
		{name: "across a power of ten", positions: seq(95, 10), maxBytes: 32},
		{name: "leading zeros are no numbers", positions: positions("07", "08", "09", "010")},
		{name: "a gap", positions: positions("1", "2", "4", "5")},
		{name: "the largest that runs hold", positions: positions("9999999999999999998", "9999999999999999999", "10000000000000000000")},
		{name: "not decimal", positions: positions("a1", "a2", "-1", "0", "+1", "")},
		{name: "repeated", positions: positions("5", "5", "6", "6")},
		{name: "none", positions: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeEntry(at, kindIntent, tc.source, tc.positions)
			if tc.maxBytes > 0 && len(b) > tc.maxBytes {
				t.Errorf("entry of %d positions takes %d bytes, want at most %d", len(tc.positions), len(b), tc.maxBytes)
			}
			exp, kind, source, ps, err := decodeEntry(b)
			if err != nil || !exp.Equal(at) || kind != kindIntent || source != tc.source {
				t.Fatalf("decode: %v %v %v", exp, kind, err)
			}
			if !slices.EqualFunc(ps, tc.positions, slices.Equal) {
				t.Fatalf("decoded %q, want %q", ps, tc.positions)
			}
		})
	}
}

// BenchmarkEncodeEntry reports what one batch's entry costs to encode,
// and its size, for sequence numbers (runs) and for positions that are not
// (front coding only).
func BenchmarkEncodeEntry(b *testing.B) {
	for _, tc := range []struct {
		name string
		pos  func(i int) string
	}{
		{"sequence", func(i int) string { return strconv.Itoa(1_000_000 + i) }},
		{"offsets", func(i int) string { return "offset:" + strconv.Itoa(1_000_000+i*37) }},
	} {
		ps := make([]record.Position, 1024)
		for i := range ps {
			ps[i] = record.Position(tc.pos(i))
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			var scratch []byte
			for b.Loop() {
				// As a destination does: into its buffer, then copied.
				scratch = appendEntry(scratch[:0], time.Unix(0, 1), kindIntent, "", ps)
				n = len(bytes.Clone(scratch))
			}
			b.ReportMetric(float64(n), "bytes/entry")
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(time.Unix(0, 1), kindIntent, "", positions("a", "bc")))
	f.Add(encodeEntry(time.Unix(0, 1), kindWritten, "", goldenPositions()))
	f.Add(encodeEntry(time.Unix(0, 1), kindWritten, "src", goldenPositions()))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _, _, _ = decodeEntry(b) // must not panic
	})
}
