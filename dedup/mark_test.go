package dedup

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// TestMarkFormatGolden pins the persisted mark, and that neither a mark
// passes for an entry nor an entry for a mark.
func TestMarkFormatGolden(t *testing.T) {
	got := encodeMark(1<<40 + 12345)
	want := golden.File(t, "mark.v5.golden", got)
	if offset, ok := decodeMark(want); !ok || offset != 1<<40+12345 {
		t.Fatalf("golden mark decodes to %d, %v", offset, ok)
	}
	if _, _, _, _, err := decodeEntry(want); err == nil {
		t.Fatal("a mark decodes as an entry")
	}
	entry := encodeEntry(time.Unix(0, 0), kindWritten, "", positions("1"))
	for _, b := range [][]byte{entry, want[:len(want)-1], append(slices.Clone(want), 0), {markVersion, byte(kindMark)}} {
		if _, ok := decodeMark(b); ok {
			t.Fatalf("%x decodes as a mark", b)
		}
	}
}

// heldOutput is a destination's output as Holdings.Since reads it back:
// positions at offsets 0, 1, 2..., each of a source ("" by default).
type heldOutput struct {
	positions []string
	sources   []string
	since     []int64 // the offsets it was asked to read from
	cannot    bool
}

func (o *heldOutput) holdings() Holdings {
	return Holdings{Offset: int64(len(o.positions)), Since: func(offset int64, visit func(string, record.Position)) (bool, error) {
		o.since = append(o.since, offset)
		if o.cannot {
			return false, nil
		}
		for i := offset; i < int64(len(o.positions)); i++ {
			source := ""
			if i < int64(len(o.sources)) {
				source = o.sources[i]
			}
			visit(source, record.Position(o.positions[i]))
		}
		return true, nil
	}}
}

func (f *fixture) mark(t *testing.T, pipelineID, destinationID string) (int64, bool) {
	t.Helper()
	v, err := f.db.Get(context.Background(), markKey(destinationPrefix(pipelineID, destinationID)))
	if errors.Is(err, store.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	offset, ok := decodeMark(v)
	if !ok {
		t.Fatalf("the mark of %s/%s is %x", pipelineID, destinationID, v)
	}
	return offset, true
}

// TestWhatADestinationReadsBackBecomesAnEntry: the first open marks where
// the destination writes; the next one reads back from the mark, and what
// it holds there becomes written entries (one per source) while the mark
// moves to where it writes next, so that another crash never reads it
// back again.
func TestWhatADestinationReadsBackBecomesAnEntry(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	out := &heldOutput{positions: []string{"a", "b"}}
	d, err := f.s.Open(ctx, "p", "out", out.holdings())
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := f.mark(t, "p", "out"); !ok || at != 2 {
		t.Fatalf("mark after the first open = %d, %v; want 2, where it writes next", at, ok)
	}
	if len(out.since) != 0 || d.Pending() != 0 {
		t.Fatalf("a first open read back from %v and holds %d", out.since, d.Pending())
	}
	// The run writes c, d (of source s1) and e (of s2); its position saves
	// moved the mark to 3 (c acknowledged), then it died.
	out.positions = append(out.positions, "c", "d", "e")
	out.sources = []string{"", "", "s1", "s1", "s2"}
	if err := f.w.Apply(ctx, d.Mark(3)); err != nil {
		t.Fatal(err)
	}

	d, err = f.s.Open(ctx, "p", "out", out.holdings())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.since, []int64{3}) || d.Pending() != 2 {
		t.Fatalf("read back from %v, holds %d; want from 3, d and e", out.since, d.Pending())
	}
	if at, _ := f.mark(t, "p", "out"); at != 5 {
		t.Fatalf("mark after reading back = %d, want 5", at)
	}
	if f.keys(t) != 3 {
		t.Fatalf("%d dedup keys, want the mark and an entry for each of two sources", f.keys(t))
	}
	if skip, _ := d.Skip("s1", record.Position("c")); skip {
		t.Fatal("c skipped: it is before the mark, its position was saved")
	}
	if skip, _ := d.Skip("s2", record.Position("d")); skip {
		t.Fatal("d skipped as a record of another source")
	}
	if skip, done := d.Skip("s1", record.Position("d")); !skip || done == nil {
		t.Fatalf("d: skip %v, done %q; want skipped, its entry done", skip, done)
	}
	if skip, done := d.Skip("s2", record.Position("e")); !skip || done == nil {
		t.Fatalf("e: skip %v, done %q; want skipped, its entry done", skip, done)
	}

	// A crash before they were acknowledged: the entries are still there,
	// and nothing is read back twice.
	out.since = nil
	d, err = f.s.Open(ctx, "p", "out", out.holdings())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.since, []int64{5}) || d.Pending() != 2 {
		t.Fatalf("read back from %v, holds %d; want from 5, the entries' d and e", out.since, d.Pending())
	}
}

// TestMarksOutliveSweepsAndGoWithTheirDestination: a mark does not expire
// (an idle pipeline's is old and still needed), Forget and DropMarks
// delete it, and a destination that cannot tell what it holds takes
// nothing as written.
func TestMarksOutliveSweepsAndGoWithTheirDestination(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	out := &heldOutput{positions: []string{"a"}}
	for _, dest := range []string{"out", "gone"} {
		if _, err := f.s.Open(ctx, "p", dest, Holdings{Offset: 0, Since: out.holdings().Since}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(10 * 24 * time.Hour)
	if n, err := f.s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep deleted %d, %v; want no mark", n, err)
	}
	out.cannot = true
	d, err := f.s.Open(ctx, "p", "out", out.holdings())
	if err != nil || d.Pending() != 0 {
		t.Fatalf("a destination that cannot tell holds %d, %v", d.Pending(), err)
	}
	if err := f.s.DropMarks(ctx, "p", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.mark(t, "p", "gone"); ok {
		t.Fatal("DropMarks kept the mark")
	}
	if _, ok := f.mark(t, "p", "out"); !ok {
		t.Fatal("DropMarks of another destination deleted this one's mark")
	}
	if _, err := f.s.Forget(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if f.keys(t) != 0 {
		t.Fatalf("%d dedup keys after Forget", f.keys(t))
	}
}
