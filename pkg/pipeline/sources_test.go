package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// sourcedDestination keeps, per source node (conduit.source.connector.id),
// the payloads it was given in the order it got them, and which of them a
// processor marked.
type sourcedDestination struct {
	mu     sync.Mutex
	bySrc  map[string][]string
	marked map[string]int
}

func (d *sourcedDestination) Open(context.Context) error { return nil }

func (d *sourcedDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bySrc == nil {
		d.bySrc, d.marked = map[string][]string{}, map[string]int{}
	}
	for _, r := range batch {
		src := r.Metadata[record.MetadataSourceConnectorID]
		d.bySrc[src] = append(d.bySrc[src], string(r.Payload.After.Bytes()))
		if r.Metadata["mark"] != "" {
			d.marked[src+" "+r.Metadata["mark"]]++
		}
	}
	return len(batch), nil
}

func (d *sourcedDestination) Teardown(context.Context) error { return nil }

func (d *sourcedDestination) got(src string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.bySrc[src])
}

// markProcessor sets metadata "mark" to its value.
type markProcessor string

func (m markProcessor) Process(_ context.Context, r *record.Record) error {
	if r.Metadata == nil {
		r.Metadata = record.Metadata{}
	}
	r.Metadata["mark"] += string(m)
	return nil
}

// TestSeveralSourcesReachEveryDestination: two sources read at their own
// pace; every destination gets every record of both, each source's in its
// read order; a source's processors run on its records only, the
// pipeline's on all; each source is acknowledged exactly its own
// positions, in its read order, and saves its own position.
func TestSeveralSourcesReachEveryDestination(t *testing.T) {
	a := &seqSource{limit: 500, perRead: 7}
	b := &seqSource{limit: 700, perRead: 3}
	d1, d2 := &sourcedDestination{}, &sourcedDestination{}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Sources: []Source{
			{ID: "a", Connector: a, Processors: []Processor{{ID: "only-a", Processor: markProcessor("a"), Connector: "a"}}},
			{ID: "b", Connector: b},
		},
		Processors:   []Processor{{ID: "all", Processor: markProcessor("p")}},
		Destinations: []Destination{{ID: "d1", Connector: d1}, {ID: "d2", Connector: d2}},
		Positions:    pos,
		BatchSize:    16,
	})
	h.waitAcked(1200)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, d := range []*sourcedDestination{d1, d2} {
		if got := d.got("p1:a"); !slices.Equal(got, seqStrings(1, 500)) {
			t.Errorf("records of source a: %d, out of order or missing", len(got))
		}
		if got := d.got("p1:b"); !slices.Equal(got, seqStrings(1, 700)) {
			t.Errorf("records of source b: %d, out of order or missing", len(got))
		}
		if d.marked["p1:a ap"] != 500 || d.marked["p1:b p"] != 700 || len(d.marked) != 2 {
			t.Errorf("processors ran as %v, want a's and the pipeline's on a's 500, the pipeline's only on b's 700", d.marked)
		}
	}
	if got := a.ackedPositions(); !slices.Equal(got, seqStrings(1, 500)) {
		t.Errorf("source a acknowledged %d positions, not its own in read order", len(got))
	}
	if got := b.ackedPositions(); !slices.Equal(got, seqStrings(1, 700)) {
		t.Errorf("source b acknowledged %d positions, not its own in read order", len(got))
	}
	if pa, pb := pos.saved("p1", "a"), pos.saved("p1", "b"); pa != "500" || pb != "700" {
		t.Errorf("saved positions a=%q b=%q, want 500 and 700", pa, pb)
	}
	if !a.torn || !b.torn {
		t.Error("a source was not torn down")
	}
}

// TestSeveralSourcesResumeFromTheirOwnPositions: each source opens at the
// position saved for it.
func TestSeveralSourcesResumeFromTheirOwnPositions(t *testing.T) {
	a := &seqSource{limit: 50, perRead: 4}
	b := &seqSource{limit: 70, perRead: 4}
	dst := &sourcedDestination{}
	pos := &memPositions{}
	pos.set("p1", "a", "10")
	pos.set("p1", "b", "65")
	h := startEngine(t, Config{
		Sources:      []Source{{ID: "a", Connector: a}, {ID: "b", Connector: b}},
		Destinations: []Destination{{ID: "d", Connector: dst}},
		Positions:    pos,
	})
	h.waitAcked(40 + 5)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(a.openedAt) != "10" || string(b.openedAt) != "65" {
		t.Errorf("opened a at %q and b at %q, want 10 and 65", a.openedAt, b.openedAt)
	}
	if got := dst.got("p1:a"); !slices.Equal(got, seqStrings(11, 50)) {
		t.Errorf("records of a %v", got)
	}
	if got := dst.got("p1:b"); !slices.Equal(got, seqStrings(66, 70)) {
		t.Errorf("records of b %v", got)
	}
}

// TestOneFailingSourceEndsTheRun: the pipeline is one unit: a source that
// fails ends the run with its error, the other stops too, and what was
// acknowledged before stays acknowledged.
func TestOneFailingSourceEndsTheRun(t *testing.T) {
	healthy := &seqSource{limit: 1 << 30, perRead: 5}
	failing := &seqSource{limit: 1 << 30, perRead: 5, readErr: errBoom, failAt: 41}
	pos := &memPositions{}
	h := startEngine(t, Config{
		Sources:      []Source{{ID: "ok", Connector: healthy}, {ID: "bad", Connector: failing}},
		Destinations: []Destination{{ID: "d", Connector: &sourcedDestination{}}},
		Positions:    pos,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindSource || se.ID != "bad" || se.Op != "read" || !errors.Is(err, errBoom) {
		t.Fatalf("Run = %v, want the failing source's read error", err)
	}
	if !healthy.torn || !failing.torn {
		t.Error("sources not torn down after the failure")
	}
	// Acknowledged positions of each source are in its read order.
	for _, s := range []*seqSource{healthy, failing} {
		got := s.ackedPositions()
		if !slices.Equal(got, seqStrings(1, len(got))) {
			t.Errorf("acknowledged %v, not a prefix in read order", got)
		}
	}
}

// TestSeveralSourcesDedupPerSource: positions of different sources may be
// equal; the dedup store is told the source of every position, so that a
// position an earlier run wrote for one source does not skip the other's
// record of the same position.
func TestSeveralSourcesDedupPerSource(t *testing.T) {
	a := &seqSource{limit: 20, perRead: 4}
	b := &seqSource{limit: 20, perRead: 4}
	dst := &sourcedDestination{}
	dd := &sourceDedup{skip: map[string]bool{"a/3": true, "a/4": true, "b/7": true}}
	h := startEngine(t, Config{
		Sources:      []Source{{ID: "a", Connector: a}, {ID: "b", Connector: b}},
		Destinations: []Destination{{ID: "d", Connector: dst}},
		Positions:    &memPositions{},
		Dedup:        dd,
	})
	h.waitAcked(40 - 3)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	without := func(all []string, drop ...string) []string {
		return slices.DeleteFunc(all, func(s string) bool { return slices.Contains(drop, s) })
	}
	if got := dst.got("p1:a"); !slices.Equal(got, without(seqStrings(1, 20), "3", "4")) {
		t.Errorf("a wrote %v", got)
	}
	if got := dst.got("p1:b"); !slices.Equal(got, without(seqStrings(1, 20), "7")) {
		t.Errorf("b wrote %v", got)
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	for _, r := range dd.remembered {
		if !strings.HasPrefix(r, "a/") && !strings.HasPrefix(r, "b/") {
			t.Errorf("remembered %q without its source", r)
		}
	}
	if len(dd.remembered) != 37 {
		t.Errorf("remembered %d positions, want 37", len(dd.remembered))
	}
}

// sourceDedup is a Dedup whose earlier run wrote skip ("source/position").
type sourceDedup struct {
	mu         sync.Mutex
	skip       map[string]bool
	remembered []string
	hits       int64
}

func (s *sourceDedup) Open(context.Context, string, string, Held) (DedupDestination, error) {
	return s, nil
}
func (s *sourceDedup) Pending() int { return len(s.skip) }
func (s *sourceDedup) Hits() int64  { return s.hits }
func (s *sourceDedup) Skip(source string, pos record.Position) (bool, []byte) {
	k := source + "/" + string(pos)
	if s.skip[k] {
		delete(s.skip, k)
		s.hits++
		return true, nil
	}
	return false, nil
}
func (s *sourceDedup) Remember(_ context.Context, source string, ps []record.Position) ([]byte, func() error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		s.remembered = append(s.remembered, source+"/"+string(p))
	}
	return []byte("k"), func() error { return nil }, nil
}
func (s *sourceDedup) Intend(ctx context.Context, source string, ps []record.Position) ([]byte, func() error, error) {
	return s.Remember(ctx, source, ps)
}

// TestNewRejectsSourcesOfOneID: positions are kept per source id.
func TestNewRejectsSourcesOfOneID(t *testing.T) {
	_, err := New(Config{PipelineID: "p", Sources: []Source{{ID: "s", Connector: &seqSource{}}, {ID: "s", Connector: &seqSource{}}},
		Destinations: []Destination{{ID: "d", Connector: &memDestination{}}}, Positions: &memPositions{}})
	if err == nil || !strings.Contains(err.Error(), `two sources with id "s"`) {
		t.Fatalf("New = %v", err)
	}
}

// rejectAt rejects (fatally) the records at one position.
type rejectAt string

func (r rejectAt) Process(_ context.Context, rec *record.Record) error {
	if string(rec.Position) == string(r) {
		return errBoom
	}
	return nil
}

// TestSeveralSourcesDeadLetterNamesTheSource: a record a source's own
// processor rejects goes to the dead-letter queue with its source's node
// in the position, as Conduit writes it; the other source's record of the
// same position is written.
func TestSeveralSourcesDeadLetterNamesTheSource(t *testing.T) {
	a := &seqSource{limit: 10, perRead: 5}
	b := &seqSource{limit: 10, perRead: 5}
	dst := &sourcedDestination{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Sources: []Source{
			{ID: "a", Connector: a},
			{ID: "b", Connector: b, Processors: []Processor{{ID: "picky", Processor: rejectAt("4"), Connector: "b"}}},
		},
		Destinations: []Destination{{ID: "d", Connector: dst}},
		Positions:    &memPositions{},
		DLQ:          DeadLetterQueue{Connector: dlq},
	})
	h.waitAcked(19)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(dlq.recs) != 1 || string(dlq.recs[0].Position) != "p1:b/4" || dlq.recs[0].Metadata[MetadataDLQNackNodeID] != "p1:b:picky" {
		t.Fatalf("dead-letter records %+v, want one at p1:b/4 from p1:b:picky", dlq.recs)
	}
	if got := dst.got("p1:a"); !slices.Equal(got, seqStrings(1, 10)) {
		t.Errorf("a wrote %v", got)
	}
	if got := dst.got("p1:b"); !slices.Equal(got, []string{"1", "2", "3", "5", "6", "7", "8", "9", "10"}) {
		t.Errorf("b wrote %v", got)
	}
}
