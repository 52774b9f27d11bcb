package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conduitry/conduit/dedup"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// sourcedLog is a destination that keeps, per source node
// (conduit.source.connector.id), the readable positions and the payloads
// of what it wrote, in write order. failAfter > 0 makes the write that
// would go past that many records (of all sources) write up to it and
// fail (transient), once. It reports the last record it holds and that
// record's source, as the file destination does.
type sourcedLog struct {
	failAfter int

	mu        sync.Mutex
	count     int
	positions map[string][]string
	payloads  map[string][]string
	last      record.Position
	lastNode  string
}

func (d *sourcedLog) Open(context.Context) error     { return nil }
func (d *sourcedLog) Teardown(context.Context) error { return nil }

func (d *sourcedLog) Write(_ context.Context, recs []record.Record) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.positions == nil {
		d.positions, d.payloads = map[string][]string{}, map[string][]string{}
	}
	n := len(recs)
	if d.failAfter > 0 && d.count+n > d.failAfter {
		n = d.failAfter - d.count
	}
	for _, r := range recs[:n] {
		node := r.Metadata[record.MetadataSourceConnectorID]
		d.positions[node] = append(d.positions[node], record.Readable(r.Position))
		d.payloads[node] = append(d.payloads[node], string(r.Payload.After.Bytes()))
		d.last, d.lastNode = slices.Clone(r.Position), node
		d.count++
	}
	if n < len(recs) {
		d.failAfter = 0
		return n, cerrors.Transientf("down after %d records", d.count)
	}
	return n, nil
}

func (d *sourcedLog) written(node string) (positions, payloads []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.positions[node]), slices.Clone(d.payloads[node])
}

// sourcedReporter is a sourcedLog that says what it holds last, and from
// which source.
type sourcedReporter struct{ *sourcedLog }

func (d sourcedReporter) LastPosition(context.Context) (record.Position, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last, true, nil
}

func (d sourcedReporter) LastSource(context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastNode, nil
}

// derivedReadable are the readable positions of the records derived from
// records from..to of a source when each is split into the counts of
// splits in turn ("1#0#0", "1#0#1", ... for 2 then 3); no splits leaves
// the positions as they were read.
func derivedReadable(from, to int, splits ...int) []string {
	var out []string
	for i := from; i <= to; i++ {
		level := []string{fmt.Sprint(i)}
		for _, k := range splits {
			var next []string
			for _, p := range level {
				for j := range k {
					next = append(next, fmt.Sprintf("%s#%d", p, j))
				}
			}
			level = next
		}
		out = append(out, level...)
	}
	return out
}

// payloadsOf are the payloads splitInto makes for the readable positions
// of derivedReadable ("1#0#2" -> "1-0-2").
func payloadsOf(readable []string) []string {
	out := make([]string, len(readable))
	for i, p := range readable {
		out[i] = strings.ReplaceAll(p, "#", "-")
	}
	return out
}

// In a pipeline of two sources whose records are split - by the
// pipeline's processors, by one source's own, or by both - each source's
// records are split by its own chain only; every derived record reaches
// the destination with a position derived from its source's; each source
// is acknowledged exactly its own positions, each once, in its read
// order, once the last record derived from each is written; and each
// source saves its own last position, never a derived one.
func TestSplitInAPipelineOfTwoSources(t *testing.T) {
	const limitA, limitB = 300, 200
	for _, c := range []struct {
		name             string
		ownA, pipeline   []int // splitInto counts, in order
		splitsA, splitsB []int // what a record of each source becomes
	}{
		{name: "the pipeline's processor splits", pipeline: []int{3}, splitsA: []int{3}, splitsB: []int{3}},
		{name: "one source's own processor splits", ownA: []int{2}, splitsA: []int{2}},
		{name: "a source's and the pipeline's processors split", ownA: []int{2}, pipeline: []int{3}, splitsA: []int{2, 3}, splitsB: []int{3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			procs := func(prefix, connector string, counts []int) []Processor {
				var out []Processor
				for i, k := range counts {
					out = append(out, Processor{ID: fmt.Sprintf("%s-%d", prefix, i), Processor: splitInto(k), Connector: connector})
				}
				return out
			}
			a := &seqSource{limit: limitA, perRead: 7}
			b := &seqSource{limit: limitB, perRead: 3}
			dst := &sourcedLog{}
			pos := &memPositions{}
			wantA, wantB := derivedReadable(1, limitA, c.splitsA...), derivedReadable(1, limitB, c.splitsB...)
			h := startEngine(t, Config{
				Sources: []Source{
					{ID: "a", Connector: a, Processors: procs("split-a", "a", c.ownA)},
					{ID: "b", Connector: b},
				},
				Processors:   procs("split", "", c.pipeline),
				Destinations: []Destination{{ID: "d", Connector: dst}},
				Positions:    pos,
				BatchSize:    10,
			})
			h.waitAcked(int64(len(wantA) + len(wantB)))
			h.engine.Stop()
			if err := h.wait(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, s := range []struct {
				node string
				want []string
			}{{"p1:a", wantA}, {"p1:b", wantB}} {
				positions, payloads := dst.written(s.node)
				if !slices.Equal(positions, s.want) {
					t.Errorf("%s: destination got %d records at %v..., want %d at %v...", s.node, len(positions), positions[:min(4, len(positions))], len(s.want), s.want[:4])
				}
				if !slices.Equal(payloads, payloadsOf(s.want)) {
					t.Errorf("%s: payloads %v..., want %v...", s.node, payloads[:min(4, len(payloads))], payloadsOf(s.want[:4]))
				}
			}
			if got := a.ackedPositions(); !slices.Equal(got, seqStrings(1, limitA)) {
				t.Errorf("source a acknowledged %d positions, not its own 1..%d in read order, each once", len(got), limitA)
			}
			if got := b.ackedPositions(); !slices.Equal(got, seqStrings(1, limitB)) {
				t.Errorf("source b acknowledged %d positions, not its own 1..%d in read order, each once", len(got), limitB)
			}
			if pa, pb := pos.saved("p1", "a"), pos.saved("p1", "b"); pa != fmt.Sprint(limitA) || pb != fmt.Sprint(limitB) {
				t.Errorf("saved positions a=%q b=%q, want %d and %d", record.Readable(record.Position(pa)), record.Readable(record.Position(pb)), limitA, limitB)
			}
			st := h.engine.Stats()
			if st.RecordsAcked.Load() != limitA+limitB || st.RecordsWritten.Load() != int64(len(wantA)+len(wantB)) {
				t.Errorf("acked %d, written %d; want %d, %d", st.RecordsAcked.Load(), st.RecordsWritten.Load(), limitA+limitB, len(wantA)+len(wantB))
			}
		})
	}
}

// A pipeline of two sources of the same positions, split by the
// pipeline's processor, whose destination fails after 14 records - two of
// the three derived from one record, of whichever source. The next run
// reads each source from its own saved position and writes every derived
// record of each source once: the dedup store tells the sources' equal
// positions apart, for a destination that remembers what it wrote and for
// one that reports what it holds and from which source.
func TestSplitDedupInAPipelineOfTwoSources(t *testing.T) {
	for _, reports := range []bool{false, true} {
		t.Run(fmt.Sprintf("reports %v", reports), func(t *testing.T) {
			db := store.NewInMemory()
			w := store.NewBatcher(db, nil)
			t.Cleanup(w.Close)
			dd := dedupStore{dedup.New(db, w, dedup.Options{})}
			positions := NewPositionStore(db, w, nil)
			log := &sourcedLog{failAfter: 14}
			var dst interface {
				Write(context.Context, []record.Record) (int, error)
				Open(context.Context) error
				Teardown(context.Context) error
			} = log
			if reports {
				dst = sourcedReporter{log}
			}
			const limit = 20
			run := func() (*harness, *seqSource, *seqSource) {
				a := &seqSource{limit: limit, perRead: 7}
				b := &seqSource{limit: limit, perRead: 5}
				return startEngine(t, Config{
					Sources:      []Source{{ID: "a", Connector: a}, {ID: "b", Connector: b}},
					Processors:   []Processor{{ID: "split", Processor: splitInto(3)}},
					Destinations: []Destination{{ID: "d", Connector: dst}},
					Positions:    positions,
					Dedup:        dd,
					BatchSize:    10,
				}), a, b
			}
			h, a1, b1 := run()
			if err := h.wait(); cerrors.Classify(err).Class != cerrors.ClassTransient {
				t.Fatalf("run 1 ended with %v, want the destination's transient error", err)
			}
			saved := func(src string) int {
				p, err := positions.Load(context.Background(), "p1", src)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				if p != nil {
					if _, err := fmt.Sscan(string(p), &n); err != nil {
						t.Fatalf("source %s saved %q, not one of its own positions", src, record.Readable(p))
					}
				}
				return n
			}
			savedA, savedB := saved("a"), saved("b")
			if got := a1.ackedPositions(); !slices.Equal(got, seqStrings(1, savedA)) {
				t.Fatalf("run 1: a acknowledged %v and saved %d", got, savedA)
			}
			if got := b1.ackedPositions(); !slices.Equal(got, seqStrings(1, savedB)) {
				t.Fatalf("run 1: b acknowledged %v and saved %d", got, savedB)
			}

			h, a2, b2 := run()
			clocktest.Eventually(t, func() bool {
				return len(a2.ackedPositions()) == limit-savedA && len(b2.ackedPositions()) == limit-savedB
			}, nil)
			h.engine.Stop()
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			if got := a2.ackedPositions(); !slices.Equal(got, seqStrings(savedA+1, limit)) {
				t.Errorf("run 2: a acknowledged %v, want %d..%d", got, savedA+1, limit)
			}
			if got := b2.ackedPositions(); !slices.Equal(got, seqStrings(savedB+1, limit)) {
				t.Errorf("run 2: b acknowledged %v, want %d..%d", got, savedB+1, limit)
			}
			want := derivedReadable(1, limit, 3)
			for _, node := range []string{"p1:a", "p1:b"} {
				if got, _ := log.written(node); !slices.Equal(got, want) {
					t.Errorf("%s: destination holds %v\nwant every derived record once, in order", node, got)
				}
			}
			if n := h.engine.Stats().DedupSkipped.Load(); n < 2 {
				t.Errorf("run 2 skipped %d records, want at least the two written of the record the failure cut", n)
			}
		})
	}
}

// In a pipeline of two sources, a source position that looks like a
// derived one ends the run with a fatal error naming that source - the
// other's records are fine - whether the pipeline's processors split or
// only a destination's do.
func TestDerivedLookalikeNamesItsSourceAmongSeveral(t *testing.T) {
	for _, inDestination := range []bool{false, true} {
		t.Run(fmt.Sprintf("split by a destination's processors %v", inDestination), func(t *testing.T) {
			odd := withPosition{seqSource: &seqSource{limit: 3, perRead: 3}, prefix: record.DerivedMark}
			procs := []Processor{{ID: "split", Processor: splitInto(2)}}
			d := Destination{ID: "dst", Connector: &memDestination{}}
			if inDestination {
				d.Processors, procs = procs, nil
			}
			h := startEngine(t, Config{
				Sources:      []Source{{ID: "fine", Connector: &seqSource{limit: 1 << 20, perRead: 5}}, {ID: "odd", Connector: odd}},
				Processors:   procs,
				Destinations: []Destination{d},
				Positions:    &memPositions{},
			})
			err := h.wait()
			var se *StageError
			if !errors.As(err, &se) || se.Kind != KindSource || se.ID != "odd" || cerrors.Classify(err).Class != cerrors.ClassFatal {
				t.Fatalf("got %v, want a fatal error of source odd", err)
			}
			if len(odd.ackedPositions()) != 0 {
				t.Fatal("records of the odd source were acknowledged")
			}
		})
	}
}
