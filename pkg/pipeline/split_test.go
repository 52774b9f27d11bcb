package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/conduitry/conduit/dedup"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// splitInto is a processor.Splitter that turns every record into n, whose
// payloads are the record's payload and "-j" (j from 0), as split does
// with an array of n elements.
type splitInto int

func (s splitInto) Process(context.Context, *record.Record) error {
	return errors.New("splitInto called as a plain processor")
}

func (s splitInto) ProcessMulti(_ context.Context, rec *record.Record, out []record.Record) ([]record.Record, error) {
	var payload []byte
	if rec.Payload.After != nil {
		payload = rec.Payload.After.Bytes()
	}
	for j := range int(s) {
		r := rec.Clone()
		r.Payload.After = record.RawData(fmt.Sprintf("%s-%d", payload, j))
		out = append(out, r)
	}
	return out, nil
}

var _ processor.Splitter = splitInto(0)

// byPayload returns a processor that applies f to records whose payload
// ends with suffix and keeps the others.
func byPayload(suffix string, f func() error) processor.Processor {
	return procFunc(func(r *record.Record) error {
		if strings.HasSuffix(string(r.Payload.After.Bytes()), suffix) {
			return f()
		}
		return nil
	})
}

// splitPayloads are the payloads n records split into k each make, in order.
func splitPayloads(from, to, k int, keep func(j int) bool) []string {
	var out []string
	for i := from; i <= to; i++ {
		for j := range k {
			if keep == nil || keep(j) {
				out = append(out, fmt.Sprintf("%d-%d", i, j))
			}
		}
	}
	return out
}

// positionLog is a destination that keeps the positions (readable) and
// payloads of what it wrote; failAfter > 0 makes the write that would go
// past that many records write up to it and fail (transient). reports
// makes it say what it holds, as the file destination does.
type positionLog struct {
	mu        sync.Mutex
	failAfter int
	positions []record.Position
	payloads  []string
}

func (d *positionLog) Open(context.Context) error     { return nil }
func (d *positionLog) Teardown(context.Context) error { return nil }
func (d *positionLog) Write(_ context.Context, recs []record.Record) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(recs)
	if d.failAfter > 0 && len(d.payloads)+n > d.failAfter {
		n = d.failAfter - len(d.payloads)
	}
	for _, r := range recs[:n] {
		d.positions = append(d.positions, slices.Clone(r.Position))
		d.payloads = append(d.payloads, string(r.Payload.After.Bytes()))
	}
	if n < len(recs) {
		d.failAfter = 0
		return n, cerrors.Transientf("down after %d records", len(d.payloads))
	}
	return n, nil
}

func (d *positionLog) written() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.payloads)
}

func (d *positionLog) readable() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, p := range d.positions {
		out = append(out, record.Readable(p))
	}
	return out
}

// reportingLog is a positionLog that reports the last record it holds.
type reportingLog struct{ *positionLog }

func (d reportingLog) LastPosition(context.Context) (record.Position, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.positions) == 0 {
		return nil, true, nil
	}
	return d.positions[len(d.positions)-1], true, nil
}

func TestDerivedPositions(t *testing.T) {
	for _, parent := range []record.Position{nil, record.Position("42"), record.Position(`{"lsn":"0/16B6C50"}`), record.DerivedPosition(record.Position("7"), 300)} {
		for _, i := range []int{0, 1, 127, 128, 1 << 20} {
			p := record.DerivedPosition(parent, i)
			got, gi, ok := record.ParseDerived(p)
			if !ok || !slices.Equal(got, parent) || gi != i {
				t.Fatalf("ParseDerived(DerivedPosition(%q, %d)) = %q, %d, %v", parent, i, got, gi, ok)
			}
			if !record.IsDerived(p) || record.IsDerived(parent) && !record.IsDerived(got) {
				t.Fatalf("IsDerived(%q) is false", p)
			}
			if o := record.Origin(p); record.IsDerived(o) {
				t.Fatalf("Origin(%q) = %q, still derived", p, o)
			}
		}
	}
	if got := record.Readable(record.DerivedPosition(record.DerivedPosition(record.Position("42"), 1), 2)); got != "42#1#2" {
		t.Fatalf("Readable = %q, want 42#1#2", got)
	}
	// Siblings differ; none is its parent; a trailing byte or a cut one is
	// no derived position.
	a, b := record.DerivedPosition(record.Position("1"), 0), record.DerivedPosition(record.Position("1"), 1)
	if slices.Equal(a, b) || slices.Equal(a, record.Position("1")) {
		t.Fatal("derived positions collide")
	}
	for _, bad := range []record.Position{append(slices.Clone(a), 0), a[:len(a)-2], record.Position(record.DerivedMark)} {
		if _, _, ok := record.ParseDerived(bad); ok {
			t.Fatalf("ParseDerived(%q) accepted a malformed position", bad)
		}
	}
}

// A record split into three is acknowledged once its third record is
// written, and records are acknowledged in read order; each derived record
// carries a position of its own.
func TestSplitAcksTheOriginalWithItsLastDerivedRecord(t *testing.T) {
	src := &seqSource{limit: 50, perRead: 7}
	dst := &positionLog{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors:   []Processor{{ID: "split", Processor: splitInto(3)}},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	h.waitAcked(150)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.written(), splitPayloads(1, 50, 3, nil); !slices.Equal(got, want) {
		t.Fatalf("destination got %d records (first %v), want 1-0, 1-1, 1-2, 2-0, ...", len(got), got[:min(6, len(got))])
	}
	if got := dst.readable()[:4]; !slices.Equal(got, []string{"1#0", "1#1", "1#2", "2#0"}) {
		t.Fatalf("positions %v, want 1#0 1#1 1#2 2#0", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 50)) {
		t.Fatalf("acked %v, want 1..50 in read order, each once", got)
	}
	st := h.engine.Stats()
	if st.RecordsRead.Load() != 50 || st.RecordsAcked.Load() != 50 || st.RecordsWritten.Load() != 150 {
		t.Fatalf("read %d, acked %d, written %d; want 50, 50, 150", st.RecordsRead.Load(), st.RecordsAcked.Load(), st.RecordsWritten.Load())
	}

	// A destination that stops after 5#0 and 5#1: 5 is not acknowledged,
	// so it is read again after the restart, and nothing after it either.
	src2 := &seqSource{limit: 50, perRead: 7}
	pos := &memPositions{}
	dst2 := &positionLog{failAfter: 14}
	h2 := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src2},
		Destinations: []Destination{{ID: "dst", Connector: dst2}},
		Processors:   []Processor{{ID: "split", Processor: splitInto(3)}},
		Positions:    pos,
		BatchSize:    10,
	})
	if err := h2.wait(); cerrors.Classify(err).Class != cerrors.ClassTransient {
		t.Fatalf("run ended with %v, want the destination's transient error", err)
	}
	if got := src2.ackedPositions(); !slices.Equal(got, seqStrings(1, 4)) {
		t.Fatalf("acked %v, want 1..4: 5's last derived record was not written", got)
	}
	if got := pos.saved("p1", "src"); got != "4" {
		t.Fatalf("saved position %q, want 4", got)
	}
}

// Split after split: every record derived from a derived one has its own
// position, nested, and the original is acknowledged after all of them.
func TestSplitOfDerivedRecordsNests(t *testing.T) {
	src := &seqSource{limit: 10, perRead: 4}
	dst := &positionLog{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors:   []Processor{{ID: "split", Processor: splitInto(2)}, {ID: "clone", Processor: splitInto(3)}},
		Positions:    &memPositions{},
	})
	h.waitAcked(60)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dst.readable()[:7]; !slices.Equal(got, []string{"1#0#0", "1#0#1", "1#0#2", "1#1#0", "1#1#1", "1#1#2", "2#0#0"}) {
		t.Fatalf("positions %v", got)
	}
	if got := dst.written()[:4]; !slices.Equal(got, []string{"1-0-0", "1-0-1", "1-0-2", "1-1-0"}) {
		t.Fatalf("payloads %v", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 10)) {
		t.Fatalf("acked %v, want 1..10", got)
	}
}

// A run that wrote 2 of the 3 records derived from a record and ended
// before the record was acknowledged: the next run reads the record again,
// splits it again and writes only the third - for a destination that
// remembers what it wrote after each write, and for one that reports what
// it holds (the file destination), which records intents instead.
func TestSplitDedupWritesOnlyTheRestAfterARestart(t *testing.T) {
	for _, c := range []struct {
		reports, inDestination bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		reports := c.reports
		t.Run(fmt.Sprintf("reports %v, split by the destination's processors %v", c.reports, c.inDestination), func(t *testing.T) {
			db := store.NewInMemory()
			w := store.NewBatcher(db, nil)
			t.Cleanup(w.Close)
			dd := dedupStore{dedup.New(db, w, dedup.Options{})}
			positions := NewPositionStore(db, w, nil)
			log := &positionLog{failAfter: 14} // 1..4 and 5#0, 5#1
			var dst interface {
				Write(context.Context, []record.Record) (int, error)
				Open(context.Context) error
				Teardown(context.Context) error
			} = log
			if reports {
				dst = reportingLog{log}
			}
			run := func(limit int) (*harness, *seqSource) {
				src := &seqSource{limit: limit, perRead: 7}
				procs := []Processor{{ID: "split", Processor: splitInto(3)}}
				d := Destination{ID: "dst", Connector: dst}
				if c.inDestination {
					d.Processors, procs = procs, nil
				}
				return startEngine(t, Config{
					Source:       Source{ID: "src", Connector: src},
					Destinations: []Destination{d},
					Processors:   procs,
					Positions:    positions,
					Dedup:        dd,
					BatchSize:    10,
				}), src
			}
			h, _ := run(20)
			if err := h.wait(); err == nil {
				t.Fatal("run 1 should end with the destination's failure")
			}
			if got := log.written(); !slices.Equal(got, splitPayloads(1, 5, 3, nil)[:14]) {
				t.Fatalf("run 1 wrote %v", got)
			}
			h, src := run(20)
			clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 16 }, nil) // 5 to 20
			h.engine.Stop()
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			if got, want := log.written(), splitPayloads(1, 20, 3, nil); !slices.Equal(got, want) {
				t.Fatalf("destination holds %v\nwant every derived record once, in order", got)
			}
			if got := src.ackedPositions(); !slices.Equal(got, seqStrings(5, 20)) {
				t.Fatalf("run 2 acked %v, want 5..20", got)
			}
			if n := h.engine.Stats().DedupSkipped.Load(); n != 2 {
				t.Fatalf("run 2 skipped %d records, want 5#0 and 5#1", n)
			}
			n := 0
			_ = db.Scan(context.Background(), []byte(store.PrefixDedup), func(_, _ []byte) error { n++; return nil })
			// Run 1's entry outlives its partial acknowledgement (its
			// positions of 1 to 4 are never delivered again) until its
			// TTL, as for records that stay one; run 2's are gone.
			if n > 1 {
				t.Fatalf("%d dedup entries left after everything was acknowledged, want at most run 1's", n)
			}
		})
	}
}

type dedupStore struct{ s *dedup.Store }

func (a dedupStore) Open(ctx context.Context, p, d string, held Held) (DedupDestination, error) {
	return a.s.Open(ctx, p, d, dedup.Holdings{Reports: held.Reports, Last: held.Last, LastSource: held.LastSource, Since: held.Since, Offset: held.Offset})
}

// A derived record a later processor rejects goes to the dead-letter queue
// alone, with its own position; its siblings are written, and the original
// is acknowledged.
func TestDerivedRecordGoesToTheDLQAlone(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 6}
	dst := &positionLog{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors: []Processor{
			{ID: "split", Processor: splitInto(3)},
			{ID: "check", Processor: byPayload("-1", func() error { return errors.New("middle one is bad") })},
		},
		DLQ:       DeadLetterQueue{Connector: dlq, WindowSize: 0},
		Positions: &memPositions{},
		BatchSize: 8,
	})
	h.waitAcked(40)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.written(), splitPayloads(1, 20, 3, func(j int) bool { return j != 1 }); !slices.Equal(got, want) {
		t.Fatalf("destination got %v, want every x-0 and x-2", got)
	}
	var dead []string
	for _, p := range dlq.positions() {
		dead = append(dead, record.Readable(record.Position(p)))
	}
	want := make([]string, 0, 20)
	for i := 1; i <= 20; i++ {
		want = append(want, strconv.Itoa(i)+"#1")
	}
	if !slices.Equal(dead, want) {
		t.Fatalf("DLQ got %v, want every x#1 alone", dead)
	}
	r := dlq.recs[0]
	if failed := r.Payload.After.(record.StructuredData); string(failed["payload"].(map[string]any)["after"].([]byte)) != "1-1" {
		t.Fatalf("DLQ record holds %v, want the derived record 1-1", failed)
	}
	if got, want := string(r.Position), "p1:src/"+string(record.DerivedPosition(record.Position("1"), 1)); got != want {
		t.Fatalf("DLQ record position %q, want %q", got, want)
	}
	if r.Metadata[MetadataDLQNackNodeID] != "p1:check" {
		t.Fatalf("DLQ metadata %v", r.Metadata)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 20)) {
		t.Fatalf("acked %v, want 1..20", got)
	}
	if n := h.engine.Stats().RecordsNacked.Load(); n != 20 {
		t.Fatalf("nacked %d, want 20", n)
	}
}

// With the default dead-letter queue (none: the first nack ends the run),
// a rejected derived record ends the run, and its original is not
// acknowledged, though a sibling before it was written.
func TestRejectedDerivedRecordWithoutDLQEndsTheRunBeforeItsOriginal(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 10}
	pos := &memPositions{}
	bad := errors.New("bad")
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &positionLog{}}},
		Processors: []Processor{
			{ID: "split", Processor: splitInto(3)},
			{ID: "check", Processor: byPayload("4-1", func() error { return bad })},
		},
		Positions: pos,
		BatchSize: 10,
	})
	if err := h.wait(); !errors.Is(err, bad) {
		t.Fatalf("run ended with %v, want the rejection", err)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 3)) {
		t.Fatalf("acked %v, want 1..3", got)
	}
}

// A filter after split drops some derived records; the original is
// acknowledged when the rest are written.
func TestFilterAfterSplit(t *testing.T) {
	src := &seqSource{limit: 30, perRead: 7}
	dst := &positionLog{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors: []Processor{
			{ID: "split", Processor: splitInto(3)},
			{ID: "drop-first", Processor: byPayload("-0", func() error { return processor.ErrFiltered })},
		},
		Positions: &memPositions{},
		BatchSize: 10,
	})
	h.waitAcked(60)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.written(), splitPayloads(1, 30, 3, func(j int) bool { return j != 0 }); !slices.Equal(got, want) {
		t.Fatalf("destination got %v, want x-1 and x-2 of each", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 30)) {
		t.Fatalf("acked %v, want 1..30", got)
	}
	if n := h.engine.Stats().RecordsFiltered.Load(); n != 30 {
		t.Fatalf("filtered %d, want 30", n)
	}

	// Every derived record of a record filtered: it is acknowledged all
	// the same, and the records around it go on.
	src2 := &seqSource{limit: 9, perRead: 9}
	dst2 := &positionLog{}
	h2 := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src2},
		Destinations: []Destination{{ID: "dst", Connector: dst2}},
		Processors: []Processor{
			{ID: "split", Processor: splitInto(2)},
			{ID: "drop-5", Processor: procFunc(func(r *record.Record) error {
				if strings.HasPrefix(string(r.Payload.After.Bytes()), "5-") {
					return processor.ErrFiltered
				}
				return nil
			})},
		},
		Positions: &memPositions{},
	})
	h2.waitAcked(16)
	h2.engine.Stop()
	if err := h2.wait(); err != nil {
		t.Fatal(err)
	}
	if got := src2.ackedPositions(); !slices.Equal(got, seqStrings(1, 9)) {
		t.Fatalf("acked %v, want 1..9", got)
	}
	if got := len(dst2.written()); got != 16 {
		t.Fatalf("wrote %d, want 16", got)
	}
}

// Records split only where a processor's condition holds: the batch mixes
// records that stayed one with derived ones, and both keep read order.
func TestSplitSomeRecordsOnly(t *testing.T) {
	src := &seqSource{limit: 12, perRead: 12}
	dst := &positionLog{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors: []Processor{
			{ID: "drop-2", Processor: byPayload("2", func() error { return processor.ErrFiltered })},
			{ID: "split-odd", Processor: oddSplitter{}},
		},
		Positions: &memPositions{},
	})
	h.waitAcked(16)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	want := []string{"1#0", "1#1", "3#0", "3#1", "4", "5#0", "5#1", "6", "7#0", "7#1", "8", "9#0", "9#1", "10", "11#0", "11#1"}
	if got := dst.readable(); !slices.Equal(got, want) {
		t.Fatalf("positions %v\nwant %v", got, want)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 12)) {
		t.Fatalf("acked %v, want 1..12", got)
	}
}

// oddSplitter splits odd records in two and leaves even ones as they are.
type oddSplitter struct{}

func (oddSplitter) Process(context.Context, *record.Record) error { return nil }
func (oddSplitter) ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) ([]record.Record, error) {
	if seqOf(rec)%2 == 0 {
		return out, nil
	}
	return splitInto(2).ProcessMulti(ctx, rec, out)
}

// A destination's own processors may split too: that destination writes
// the derived records, the other one the record as it was; a derived
// record its processors reject goes to the dead-letter queue alone; the
// record is acknowledged once both are done with it.
func TestSplitInADestinationsProcessors(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 6}
	split, plain := &positionLog{}, &positionLog{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source: Source{ID: "src", Connector: src},
		Destinations: []Destination{
			{ID: "split", Connector: split, Processors: []Processor{
				{ID: "clone", Processor: splitInto(3), Connector: "split"},
				{ID: "check", Processor: byPayload("-1", func() error { return errors.New("middle one is bad") }), Connector: "split"},
			}},
			{ID: "plain", Connector: plain},
		},
		DLQ:       DeadLetterQueue{Connector: dlq, WindowSize: 0},
		Positions: &memPositions{},
		BatchSize: 8,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 20 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := split.written(), splitPayloads(1, 20, 3, func(j int) bool { return j != 1 }); !slices.Equal(got, want) {
		t.Fatalf("splitting destination got %v, want every x-0 and x-2", got)
	}
	if got := split.readable()[:2]; !slices.Equal(got, []string{"1#0", "1#2"}) {
		t.Fatalf("positions %v, want 1#0 1#2", got)
	}
	if got := plain.written(); !slices.Equal(got, seqStrings(1, 20)) {
		t.Fatalf("other destination got %v, want 1..20 as read", got)
	}
	var dead []string
	for _, p := range dlq.positions() {
		dead = append(dead, record.Readable(record.Position(p)))
	}
	if len(dead) != 20 || dead[0] != "1#1" || dead[19] != "20#1" {
		t.Fatalf("DLQ got %v, want x#1 of every record, alone", dead)
	}
	if md := dlq.recs[0].Metadata; md[MetadataDLQNackNodeID] != "p1:split:check" {
		t.Fatalf("DLQ metadata %v", md)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 20)) {
		t.Fatalf("acked %v, want 1..20", got)
	}
}

// A source position that begins as a derived one would be ambiguous: the
// run ends with a fatal error of the source instead.
func TestSourcePositionLikeADerivedOneIsRefused(t *testing.T) {
	src := withPosition{seqSource: &seqSource{limit: 3, perRead: 3}, prefix: record.DerivedMark}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "split", Processor: splitInto(2)}},
		Positions:    &memPositions{},
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindSource || cerrors.Classify(err).Class != cerrors.ClassFatal {
		t.Fatalf("got %v, want a fatal error of the source", err)
	}
	if len(src.ackedPositions()) != 0 {
		t.Fatal("records were acknowledged")
	}
}

type withPosition struct {
	*seqSource
	prefix string
}

func (s withPosition) Read(ctx context.Context, batch []record.Record) (int, error) {
	n, err := s.seqSource.Read(ctx, batch)
	for i := range batch[:n] {
		batch[i].Position = append(record.Position(s.prefix), batch[i].Position...)
	}
	return n, err
}

// A derived record that failed run after run is quarantined by its own
// position: it goes to the dead-letter queue as it is made, its siblings
// are written.
func TestDerivedRecordIsQuarantinedAlone(t *testing.T) {
	src := &seqSource{limit: 4, perRead: 4}
	dst := &positionLog{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors:   []Processor{{ID: "split", Processor: splitInto(3)}},
		Quarantine: map[string]QuarantinedRecord{
			string(record.DerivedPosition(record.Position("2"), 1)): {Kind: KindProcessor, ID: "enrich", Err: errors.New("keeps failing")},
		},
		DLQ:       DeadLetterQueue{Connector: dlq, WindowSize: 0},
		Positions: &memPositions{},
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 4 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.written(), slices.DeleteFunc(splitPayloads(1, 4, 3, nil), func(p string) bool { return p == "2-1" }); !slices.Equal(got, want) {
		t.Fatalf("destination got %v, want all but 2-1", got)
	}
	if len(dlq.recs) != 1 || record.Readable(record.Position(dlq.positions()[0])) != "2#1" || dlq.recs[0].Metadata[MetadataDLQRule] != QuarantineRule {
		t.Fatalf("DLQ got %v, want 2#1 quarantined", dlq.positions())
	}
}

// The dead-letter queue's window counts each record a destination's
// processors derived: two of them rejected within the window overflow it,
// though they come from one record, which is then neither queued nor
// acknowledged.
func TestDLQWindowCountsDerivedRecords(t *testing.T) {
	src := &seqSource{limit: 10, perRead: 10}
	dlq := &dlqDestination{}
	bad := errors.New("bad")
	h := startEngine(t, Config{
		Source: Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &positionLog{}, Processors: []Processor{
			{ID: "clone", Processor: splitInto(3), Connector: "dst"},
			{ID: "check", Processor: procFunc(func(r *record.Record) error {
				if p := string(r.Payload.After.Bytes()); p == "4-0" || p == "4-2" {
					return bad
				}
				return nil
			}), Connector: "dst"},
		}}},
		DLQ:       DeadLetterQueue{Connector: dlq, WindowSize: 3, WindowNackThreshold: 1},
		Positions: &memPositions{},
	})
	err := h.wait()
	var window *DLQWindowError
	if !errors.As(err, &window) {
		t.Fatalf("run ended with %v, want the window's overflow", err)
	}
	if window.Nacks != 2 {
		t.Fatalf("window counted %d nacks, want 4#0 and 4#2", window.Nacks)
	}
	if got := dlq.positions(); len(got) != 0 {
		t.Fatalf("DLQ got %d records, want none (4's two nacks overflowed the window)", len(got))
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 3)) {
		t.Fatalf("acked %v, want 1..3", got)
	}
}
