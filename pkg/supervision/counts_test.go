package supervision

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// Each run of countingRun reads runRecords records. Record i is filtered
// when i%8 == 1, nacked when i%8 == 2, skipped by dedup when i%8 == 3 and
// written otherwise, so each run adds exactly perRun to every counter.
const runRecords = 64

var perRun = metrics.RecordCounts{
	Read:         runRecords,
	Written:      runRecords - runRecords/8, // acknowledged and not nacked
	Filtered:     runRecords / 8,
	Nacked:       runRecords / 8,
	DedupSkipped: runRecords / 8,
}

func recordIndex(pos record.Position) int {
	i, err := strconv.Atoi(string(pos))
	if err != nil {
		panic(fmt.Sprintf("position %q is not a record index", pos))
	}
	return i
}

// countingSource reads runRecords records, then waits for its context.
// Once all of them are acknowledged it stops the engine gracefully.
type countingSource struct {
	next, acked int
	stop        func()
}

func (s *countingSource) Open(context.Context, record.Position) error { return nil }
func (s *countingSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.next == runRecords {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	n := min(len(batch), runRecords-s.next)
	for i := range n {
		batch[i] = record.Record{Position: record.Position(strconv.Itoa(s.next + i))}
	}
	s.next += n
	return n, nil
}
func (s *countingSource) Ack(_ context.Context, positions []record.Position) error {
	s.acked += len(positions)
	if s.acked == runRecords {
		s.stop()
	}
	return nil
}
func (s *countingSource) Teardown(context.Context) error { return nil }

type acceptingDestination struct{}

func (acceptingDestination) Open(context.Context) error { return nil }
func (acceptingDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	return len(batch), nil
}
func (acceptingDestination) Teardown(context.Context) error { return nil }

// sortingProcessor filters and rejects records by index.
type sortingProcessor struct{}

func (sortingProcessor) Process(_ context.Context, rec *record.Record) error {
	switch recordIndex(rec.Position) % 8 {
	case 1:
		return processor.ErrFiltered
	case 2:
		return fmt.Errorf("record %s rejected", rec.Position)
	}
	return nil
}

type noPositions struct{}

func (noPositions) Load(context.Context, string, string) (record.Position, error) { return nil, nil }
func (noPositions) SaveLater(_, _ string, _ record.Position, _ []store.Op, done func(error)) error {
	done(nil)
	return nil
}

// earlierRunWrote says that an earlier run already wrote every record
// with i%8 == 3, so the destination skips them.
type earlierRunWrote struct{}

func (earlierRunWrote) Open(context.Context, string, string, pipeline.Held) (pipeline.DedupDestination, error) {
	return &writtenBefore{pending: runRecords / 8}, nil
}

type writtenBefore struct {
	pending int
	hits    int64
}

func (w *writtenBefore) Pending() int { return w.pending }
func (w *writtenBefore) Hits() int64  { return w.hits }
func (w *writtenBefore) Skip(_ string, pos record.Position) (bool, []byte) {
	if recordIndex(pos)%8 != 3 {
		return false, nil
	}
	w.pending--
	w.hits++
	return true, nil
}
func (w *writtenBefore) Intend(context.Context, string, []record.Position) ([]byte, func() error, error) {
	return nil, func() error { return nil }, nil
}

func (w *writtenBefore) Remember(context.Context, string, []record.Position) ([]byte, func() error, error) {
	return nil, func() error { return nil }, nil
}

// countingRun is one run of m that moves runRecords records through every
// counter, then ends gracefully.
func countingRun(m *managedPipeline) (trackedRun, error) {
	src := &countingSource{}
	e, err := pipeline.New(pipeline.Config{
		PipelineID:   m.cfg.ID,
		Source:       pipeline.Source{ID: "src", Connector: src},
		Destinations: []pipeline.Destination{{ID: "dst", Connector: acceptingDestination{}}},
		Processors:   []pipeline.Processor{{ID: "sort", Processor: sortingProcessor{}}},
		// A window of 0 takes every nack: the run is not ended by them.
		DLQ:       pipeline.DeadLetterQueue{Connector: acceptingDestination{}},
		Positions: noPositions{},
		Dedup:     earlierRunWrote{},
		// Small batches: a run acknowledges in several steps, and a record
		// is nacked in one step and acknowledged in a later one.
		BatchSize: 8,
	})
	if err != nil {
		return trackedRun{}, err
	}
	src.stop = e.Stop
	return trackedRun{Engine: e, m: m, discard: func() {}}, nil
}

// TestRecordCountersNeverGoBack scrapes the record counters while runs end
// and are folded into their pipelines' totals. Prometheus reads a counter
// that went down as a reset and counts the whole value again, so every
// scrape must read at least what the one before read, and once the runs
// are over the counters must be exact.
func TestRecordCountersNeverGoBack(t *testing.T) {
	const pipelines, runsEach, scrapers = 2, 150, 2
	ps := &Pipelines{}
	for i := range pipelines {
		ps.pipelines = append(ps.pipelines, &managedPipeline{cfg: config.Pipeline{ID: fmt.Sprintf("p%d", i)}})
	}

	// The runs start once every scraper is scraping.
	var scraping sync.WaitGroup
	scraping.Add(scrapers)
	var runners sync.WaitGroup
	runErrs := make(chan error, pipelines)
	for _, m := range ps.pipelines {
		runners.Go(func() {
			scraping.Wait()
			// One run at a time per pipeline, as its supervisor does.
			for range runsEach {
				run, err := countingRun(m)
				if err == nil {
					err = run.Run(context.Background())
				}
				if err != nil {
					runErrs <- fmt.Errorf("pipeline %s: run: %w", m.cfg.ID, err)
					return
				}
			}
		})
	}
	runsOver := make(chan struct{})
	go func() {
		runners.Wait()
		close(runsOver)
	}()

	var scrapes sync.WaitGroup
	wentBack := make(chan string, scrapers)
	var midRun atomic.Int64
	for range scrapers {
		scrapes.Go(func() {
			last := map[string]metrics.RecordCounts{}
			scrape := func() (drop string) {
				ps.RecordCounts(func(id string, c metrics.RecordCounts) {
					if d := counterDrop(last[id], c); d != "" && drop == "" {
						drop = fmt.Sprintf("pipeline %s: %s (previous scrape %+v, this one %+v)", id, d, last[id], c)
					}
					if c != runsOf(c.Read/runRecords) {
						midRun.Add(1)
					}
					last[id] = c
				})
				return drop
			}
			scrape()
			scraping.Done()
			for {
				select {
				case <-runsOver:
					return
				default:
				}
				if drop := scrape(); drop != "" {
					wentBack <- drop
					return
				}
			}
		})
	}
	scrapes.Wait()
	<-runsOver
	close(wentBack)
	close(runErrs)
	for err := range runErrs {
		t.Error(err)
	}
	for drop := range wentBack {
		t.Error("a counter went back between two scrapes: " + drop)
	}
	if midRun.Load() == 0 {
		t.Error("no scrape read a run in progress: nothing raced")
	}

	// The final values, through the collector Prometheus scrapes.
	want := runsOf(runsEach)
	families, err := metrics.New(ps.RecordCounts).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ps.pipelines {
		for name, w := range map[string]int64{
			"conduit_pipeline_records_read_total":     want.Read,
			"conduit_pipeline_records_written_total":  want.Written,
			"conduit_pipeline_records_filtered_total": want.Filtered,
			"conduit_pipeline_dlq_nacks_total":        want.Nacked,
			"conduit_pipeline_dedup_skipped_total":    want.DedupSkipped,
		} {
			got, found := 0.0, false
			for _, f := range families {
				if f.GetName() != name {
					continue
				}
				for _, s := range f.GetMetric() {
					if s.GetLabel()[0].GetValue() == m.cfg.ID {
						got, found = s.GetCounter().GetValue(), true
					}
				}
			}
			if !found || got != float64(w) {
				t.Errorf("pipeline %s: %s = %v (found %v), want %d", m.cfg.ID, name, got, found, w)
			}
		}
	}
}

// runsOf is what n runs count.
func runsOf(n int64) metrics.RecordCounts {
	return metrics.RecordCounts{Read: perRun.Read * n, Written: perRun.Written * n, Filtered: perRun.Filtered * n,
		Nacked: perRun.Nacked * n, DedupSkipped: perRun.DedupSkipped * n}
}

// counterDrop names the counters that are lower in cur than in prev.
func counterDrop(prev, cur metrics.RecordCounts) string {
	var drop string
	for _, c := range []struct {
		name      string
		prev, cur int64
	}{
		{"read", prev.Read, cur.Read},
		{"written", prev.Written, cur.Written},
		{"filtered", prev.Filtered, cur.Filtered},
		{"nacked", prev.Nacked, cur.Nacked},
		{"dedup skipped", prev.DedupSkipped, cur.DedupSkipped},
	} {
		if c.cur < c.prev {
			drop += fmt.Sprintf("%s %d -> %d; ", c.name, c.prev, c.cur)
		}
	}
	return drop
}
