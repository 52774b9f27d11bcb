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

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// procFunc adapts a function to processor.Processor.
type procFunc func(*record.Record) error

func (f procFunc) Process(_ context.Context, r *record.Record) error { return f(r) }

func seqOf(r *record.Record) int {
	n, _ := strconv.Atoi(string(r.Position))
	return n
}

// rejectEvery returns a processor that fails records whose sequence number
// is a multiple of n with err, and keeps the others.
func rejectEvery(n int, err error) processor.Processor {
	return procFunc(func(r *record.Record) error {
		if seqOf(r)%n == 0 {
			return err
		}
		return nil
	})
}

func TestFilteredRecordsAreAckedNotWritten(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 7}
	dst := &memDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors: []Processor{{ID: "odd-only", Processor: procFunc(func(r *record.Record) error {
			if seqOf(r)%2 == 0 {
				return processor.ErrFiltered
			}
			return nil
		})}},
		Positions: &memPositions{},
		BatchSize: 10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 100 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	var odd []string
	for i := 1; i <= 100; i += 2 {
		odd = append(odd, strconv.Itoa(i))
	}
	if got := dst.records(); !slices.Equal(got, odd) {
		t.Fatalf("destination got %v, want the odd records", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 100)) {
		t.Fatalf("acked %d records out of order or incomplete", len(got))
	}
	if f := h.engine.Stats().RecordsFiltered.Load(); f != 50 {
		t.Fatalf("filtered %d, want 50", f)
	}
}

func TestProcessorNackWithDefaultDLQEndsTheRunAtThatRecord(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dst := &memDestination{}
	pos := &memPositions{}
	bad := errors.New("field .Payload.After.price: not a number")
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors:   []Processor{{ID: "parse", Processor: rejectEvery(15, bad)}},
		Positions:    pos,
		BatchSize:    10,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindProcessor || se.ID != "parse" || !errors.Is(err, bad) {
		t.Fatalf("got %v, want the processor's own error naming parse", err)
	}
	if c := cerrors.ClassifyProcessor(se.Err); c.Class != cerrors.ClassFatal {
		t.Fatalf("the nack error classifies as %v, want fatal", c.Class)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 14)) {
		t.Fatalf("acked %v, want 1..14 (everything before the rejected record)", got)
	}
	if got := pos.saved("p1", "src"); got != "14" {
		t.Fatalf("persisted %q, want 14", got)
	}
}

func TestNackedRecordsGoToTheDLQWithinTheWindow(t *testing.T) {
	src := &seqSource{limit: 60, perRead: 10}
	dst := &memDestination{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors:   []Processor{{ID: "check", Processor: rejectEvery(10, errors.New("rejected"))}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 10, WindowNackThreshold: 1},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 60 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("one nack in every 10 records is within the window, got %v", err)
	}
	if got, want := dlq.positions(), []string{"10", "20", "30", "40", "50", "60"}; !slices.Equal(got, want) {
		t.Fatalf("DLQ got %v, want %v", got, want)
	}
	if md := dlq.recs[0].Metadata; md[MetadataDLQNackError] != "rejected" || md[MetadataDLQNackNodeID] != "p1:check" {
		t.Fatalf("DLQ record metadata %v", md)
	}
	if n := len(dst.records()); n != 54 {
		t.Fatalf("destination got %d records, want the 54 accepted", n)
	}
	if n := h.engine.Stats().RecordsNacked.Load(); n != 6 {
		t.Fatalf("nacked %d, want 6", n)
	}
}

func TestNackWindowOverflowIsFatal(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		// Every 4th record is rejected: 2 nacks within 5 records happen at
		// record 8 (4 and 8), more than the threshold of 1.
		Processors: []Processor{{ID: "check", Processor: rejectEvery(4, errors.New("rejected"))}},
		DLQ:        DeadLetterQueue{Connector: dlq, WindowSize: 5, WindowNackThreshold: 1},
		Positions:  &memPositions{},
		BatchSize:  10,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.ID != "check" {
		t.Fatalf("got %v, want the overflowing nack's error", err)
	}
	// The error says the window ended the run, with the record's error as
	// the detail (and the cause its class comes from).
	var window *DLQWindowError
	if !errors.As(err, &window) || window.Nacks != 2 || window.Size != 5 || window.Threshold != 1 || window.Err.Error() != "rejected" {
		t.Fatalf("got %#v, want a window error of 2 nacks in 5 records over the record's error", err)
	}
	if want := "dead-letter queue window overflowed: 2 nacks in the last 5 records (window-size 5, window-nack-threshold 1); last nacked record: rejected"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"4"}) {
		t.Fatalf("DLQ got %v, want only 4 (8 overflowed the window)", got)
	}
	if got := src.ackedPositions(); !slices.Equal(got, seqStrings(1, 7)) {
		t.Fatalf("acked %v, want 1..7", got)
	}
}

func TestTransientProcessorErrorIsNotNacked(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "lookup", Processor: rejectEvery(25, cerrors.WithCode(errors.New("cache unavailable"), 503))}},
		DLQ:          DeadLetterQueue{Connector: dlq},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	err := h.wait()
	if c := cerrors.Classify(err); c.Class != cerrors.ClassTransient || c.Code != 503 {
		t.Fatalf("got %v (%+v), want the transient error to end the run", err, c)
	}
	if len(dlq.positions()) != 0 {
		t.Fatalf("a transient processor error was sent to the DLQ: %v", dlq.positions())
	}
	if got := src.ackedPositions(); slices.Contains(got, "25") {
		t.Fatal("the record that failed transiently was acknowledged; it must be processed again after the restart")
	}
}

func TestDestinationFatalErrorNacksOnlyThatRecord(t *testing.T) {
	src := &seqSource{limit: 30, perRead: 10}
	dst := &memDestination{failAtPos: "12", failErr: cerrors.WithCode(errors.New("row too large"), 422), failOnce: true}
	other := &memDestination{}
	dlq := &dlqDestination{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}, {ID: "other", Connector: other}},
		DLQ:          DeadLetterQueue{Connector: dlq},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 30 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"12"}) {
		t.Fatalf("DLQ got %v", got)
	}
	want := slices.DeleteFunc(seqStrings(1, 30), func(s string) bool { return s == "12" })
	if got := dst.records(); !slices.Equal(got, want) {
		t.Fatalf("refusing destination got %v, want every record but 12", got)
	}
	if got := other.records(); !slices.Equal(got, seqStrings(1, 30)) {
		t.Fatalf("the other destination got %v, want all (a nack is per destination)", got)
	}
}

func TestDLQWriteFailureIsTransient(t *testing.T) {
	src := &seqSource{limit: 30, perRead: 10}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "check", Processor: rejectEvery(5, errors.New("rejected"))}},
		DLQ:          DeadLetterQueue{Connector: &dlqDestination{fail: errors.New("disk full")}},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindDLQ || cerrors.Classify(err).Class != cerrors.ClassTransient {
		t.Fatalf("got %v, want a transient dead-letter-queue error", err)
	}
	if got := src.ackedPositions(); len(got) != 0 {
		t.Fatalf("acked %v although the DLQ write failed", got)
	}
}

func TestDestinationProcessorsSeeTheirOwnCopies(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 10}
	plain := &memDestination{}
	shouted := &memDestination{}
	upper := procFunc(func(r *record.Record) error {
		if seqOf(r) > 10 {
			return processor.ErrFiltered
		}
		r.Payload.After = record.RawData("x" + string(r.Payload.After.Bytes()))
		return nil
	})
	h := startEngine(t, Config{
		Source: Source{ID: "src", Connector: src},
		Destinations: []Destination{
			{ID: "plain", Connector: plain},
			{ID: "shouted", Connector: shouted, Processors: []Processor{{ID: "x", Processor: upper}}},
		},
		Positions: &memPositions{},
		BatchSize: 10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 20 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := plain.records(); !slices.Equal(got, seqStrings(1, 20)) {
		t.Fatalf("plain destination saw another destination's processor: %v", got)
	}
	var want []string
	for _, s := range seqStrings(1, 10) {
		want = append(want, "x"+s)
	}
	if got := shouted.records(); !slices.Equal(got, want) {
		t.Fatalf("shouted destination got %v, want %v", got, want)
	}
}

func TestNackWindow(t *testing.T) {
	tests := []struct {
		name            string
		size, threshold int
		nacks           []bool
		overflowAt      int // index of the add that overflows, -1 for none
	}{
		{name: "default: the first nack overflows", size: 1, threshold: 0, nacks: []bool{false, false, true}, overflowAt: 2},
		{name: "no window never overflows", size: 0, threshold: 0, nacks: []bool{true, true, true}, overflowAt: -1},
		{name: "nacks far apart slide out", size: 3, threshold: 1, nacks: []bool{true, false, false, true, false, false, true}, overflowAt: -1},
		{name: "two nacks in three records overflow", size: 3, threshold: 1, nacks: []bool{true, false, true}, overflowAt: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newNackWindow(tt.size, tt.threshold)
			got := -1
			for i, n := range tt.nacks {
				if w.add(n) {
					got = i
					break
				}
			}
			if got != tt.overflowAt {
				t.Fatalf("overflow at %d, want %d", got, tt.overflowAt)
			}
		})
	}
}

// dlqDestination records what the dead-letter queue received.
type dlqDestination struct {
	fail error
	recs []record.Record
}

func (d *dlqDestination) Open(context.Context) error     { return nil }
func (d *dlqDestination) Teardown(context.Context) error { return nil }
func (d *dlqDestination) Write(_ context.Context, recs []record.Record) (int, error) {
	if d.fail != nil {
		return 0, d.fail
	}
	for _, r := range recs {
		d.recs = append(d.recs, r.Clone())
	}
	return len(recs), nil
}

// positions are those of the records the dead-letter records carry in
// their payload; read after the run ended (the acker is the only writer).
func (d *dlqDestination) positions() []string {
	var out []string
	for _, r := range d.recs {
		failed, _ := r.Payload.After.(record.StructuredData)
		pos, _ := failed["position"].([]byte)
		out = append(out, string(pos))
	}
	return out
}

// claimAll is a DeadLetter hook whose rule takes every record it is asked
// about, and remembers what it was asked.
type claimAll struct {
	mu    sync.Mutex
	asked []string
}

func (c *claimAll) hook(err error, kind Kind, id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, fmt.Sprintf("%s %s", kind, id))
	return "poison-rows", true
}

func TestDeadLetterRuleTakesARecordADestinationNames(t *testing.T) {
	src := &seqSource{limit: 30, perRead: 10}
	// A transient error, but about record 12: the rule takes it.
	dst := &memDestination{failAtPos: "12", failErr: cerrors.ForRecord(record.Position("12"), cerrors.WithCode(errors.New("lock timeout on row"), 503)), failOnce: true}
	dlq := &dlqDestination{}
	claim := &claimAll{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 0},
		DeadLetter:   claim.hook,
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 30 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("the run ended with %v; a dead-letter rule should have let it go on", err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"12"}) {
		t.Fatalf("DLQ got %v, want 12", got)
	}
	if md := dlq.recs[0].Metadata; md[MetadataDLQRule] != "poison-rows" || md[MetadataDLQNackNodeID] != "p1:dst-acker" || md[MetadataDLQNackError] != "lock timeout on row" {
		t.Fatalf("DLQ metadata %v, want the rule, the destination and the error", md)
	}
	if !slices.Equal(claim.asked, []string{"destination dst"}) {
		t.Fatalf("the hook was asked %v", claim.asked)
	}

	// A fatal error that names its record is nacked anyway; the rule that
	// claims it is named too.
	src = &seqSource{limit: 30, perRead: 10}
	dst = &memDestination{failAtPos: "7", failErr: cerrors.ForRecord(record.Position("7"), cerrors.WithCode(errors.New("row conflict"), 409)), failOnce: true}
	dlq = &dlqDestination{}
	h = startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 0},
		DeadLetter:   (&claimAll{}).hook,
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 30 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"7"}) || dlq.recs[0].Metadata[MetadataDLQRule] != "poison-rows" {
		t.Fatalf("DLQ got %v, metadata %v; want 7 with the rule", got, dlq.recs)
	}
}

func TestTransientErrorThatNamesNoRecordIsNotDeadLettered(t *testing.T) {
	src := &seqSource{limit: 30, perRead: 10}
	dst := &memDestination{failAtPos: "12", failErr: cerrors.WithCode(errors.New("connection reset"), 503)}
	claim := &claimAll{}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		DLQ:          DeadLetterQueue{Connector: &dlqDestination{}, WindowSize: 0},
		DeadLetter:   claim.hook,
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	if err := h.wait(); cerrors.Classify(err).Code != 503 {
		t.Fatalf("got %v, want the 503 to end the run", err)
	}
	if len(claim.asked) != 0 {
		t.Fatalf("the hook was asked about an error that names no record: %v", claim.asked)
	}
}

func TestTransientProcessorErrorNamesItsRecordAndCanBeDeadLettered(t *testing.T) {
	// Without a rule the run ends, and the error names the record.
	src := &seqSource{limit: 30, perRead: 10}
	lookup := rejectEvery(25, cerrors.WithCode(errors.New("cache unavailable"), 503))
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "lookup", Processor: lookup}},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	err := h.wait()
	if pos, ok := cerrors.RecordOf(err); !ok || string(pos) != "25" {
		t.Fatalf("the error %v names record %q (%v), want 25", err, pos, ok)
	}

	// With one, the record goes to the queue and the run goes on.
	src = &seqSource{limit: 30, perRead: 10}
	dlq := &dlqDestination{}
	h = startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "lookup", Processor: lookup}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 0},
		DeadLetter:   (&claimAll{}).hook,
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 30 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"25"}) || dlq.recs[0].Metadata[MetadataDLQRule] != "poison-rows" {
		t.Fatalf("DLQ got %v %v, want 25 by the rule", got, dlq.recs)
	}
}

func TestQuarantinedRecordGoesToTheDLQUnprocessed(t *testing.T) {
	src := &seqSource{limit: 20, perRead: 10}
	dst := &memDestination{}
	dlq := &dlqDestination{}
	processed := 0
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		Processors: []Processor{{ID: "count", Processor: procFunc(func(r *record.Record) error {
			if string(r.Position) == "7" {
				processed++
			}
			return nil
		})}},
		DLQ: DeadLetterQueue{Connector: dlq, WindowSize: 0},
		Quarantine: map[string]QuarantinedRecord{"7": {Kind: KindDestination, ID: "dst",
			Err: errors.New("quarantined after 3 runs in a row failed on this record: lock timeout")}},
		Positions: &memPositions{},
		BatchSize: 10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 20 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"7"}) {
		t.Fatalf("DLQ got %v, want 7", got)
	}
	if md := dlq.recs[0].Metadata; md[MetadataDLQRule] != QuarantineRule || md[MetadataDLQNackNodeID] != "p1:dst-acker" {
		t.Fatalf("DLQ metadata %v", md)
	}
	if processed != 0 || slices.Contains(dst.records(), "7") {
		t.Fatal("the quarantined record was processed or written")
	}

	// Without processors too.
	src, dst, dlq = &seqSource{limit: 20, perRead: 10}, &memDestination{}, &dlqDestination{}
	h = startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: dst}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 0},
		Quarantine:   map[string]QuarantinedRecord{"7": {Kind: KindDestination, ID: "dst", Err: errors.New("quarantined")}},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 20 }, nil)
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	if got := dlq.positions(); !slices.Equal(got, []string{"7"}) || slices.Contains(dst.records(), "7") {
		t.Fatalf("without processors: DLQ got %v, destination %v; want 7 quarantined", got, dst.records())
	}
}

// With no nack tolerated (the default window of 1, threshold 0) the first
// nack's own error is the cause: no window to speak of.
func TestFirstNackWithTheDefaultWindowIsTheRecordsError(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "check", Processor: rejectEvery(4, errors.New("rejected"))}},
		DLQ:          DeadLetterQueue{Connector: &dlqDestination{}, WindowSize: 1, WindowNackThreshold: 0},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	err := h.wait()
	var window *DLQWindowError
	if errors.As(err, &window) || !strings.HasSuffix(err.Error(), ": rejected") {
		t.Fatalf("got %v, want the record's own error", err)
	}
}
