package auditlog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

// The benchmarks run on Badger in $TMPDIR: a synced write there, not the
// code here, bounds the append rate (see pkg/store's BenchmarkBadgerSetSynced).

// countingUpdates counts the store's commits, each one sync.
type countingUpdates struct {
	store.Store
	n atomic.Int64
}

func (c *countingUpdates) Commit(ctx context.Context, ops []store.Op) error {
	c.n.Add(1)
	return c.Store.Commit(ctx, ops)
}

// BenchmarkAppendDurable64 appends from 64 goroutines, each append
// returning once durable. Target: 100,000 events/s.
func BenchmarkAppendDurable64(b *testing.B) {
	for _, pipelines := range []int{1, 64} {
		b.Run(fmt.Sprintf("pipelines=%d", pipelines), func(b *testing.B) {
			db := &countingUpdates{Store: openBadger(b, "")}
			l := openLog(b, db, Options{})
			ctx := context.Background()
			const writers = 64
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			db.n.Store(0)
			for w := range writers {
				wg.Go(func() {
					e := Event{PipelineID: fmt.Sprintf("pipeline-%03d", w%pipelines), Kind: KindRecovering,
						StatusBefore: "running", StatusAfter: "recovering", Message: "restarting in 1s", Actor: "system",
						ErrorCode: 503, ErrorClass: "transient", ErrorSource: "json", ErrorMessage: "connection refused",
						Component: "pg", ComponentKind: "source", Attempt: 1, Delay: time.Second}
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(ctx, e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.N)/float64(max(db.n.Load(), 1)), "events/commit")
		})
	}
}

// BenchmarkListLast100 reads one pipeline's newest 100 events among
// 1,000,000 events of 1,000 pipelines. Target: p99 <= 5 ms.
func BenchmarkListLast100(b *testing.B) {
	const pipelines, perPipeline = 1000, 1000
	ctx := context.Background()
	db := openBadger(b, "")
	buildStart := time.Now()
	bulkLoad(b, db, pipelines, perPipeline)
	b.Logf("wrote %d events in %s", pipelines*perPipeline, time.Since(buildStart).Round(time.Millisecond))

	openStart := time.Now()
	l := openLog(b, db, Options{})
	openTook := time.Since(openStart)
	if got := l.LastSequence("pipeline-0500"); got != perPipeline {
		b.Fatalf("LastSequence = %d", got)
	}

	var lat []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("pipeline-%04d", (i*7919)%pipelines)
		start := time.Now()
		events, err := l.List(ctx, id, Query{Limit: 100, NewestFirst: true})
		lat = append(lat, time.Since(start))
		if err != nil || len(events) != 100 || events[0].Sequence != perPipeline {
			b.Fatalf("List(%s): %d events, %v", id, len(events), err)
		}
	}
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(openTook), "open-ms")
}

// bulkLoad writes perPipeline events to each of n pipelines, interleaved
// as a live system would write them, in large transactions from two
// goroutines: a test-only fast path, the log itself syncs every append.
func bulkLoad(b *testing.B, db store.Store, n, perPipeline int) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prefixes := make([][]byte, n)
	for i := range prefixes {
		prefixes[i] = pipelinePrefix(fmt.Sprintf("pipeline-%04d", i))
	}
	const perTxn = 3000
	total := n * perPipeline
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				start := int(next.Add(perTxn)) - perTxn
				if start >= total {
					return
				}
				var ops []store.Op
				for j := start; j < min(start+perTxn, total); j++ {
					p, seq := j%n, uint64(j/n+1)
					v, err := encodeEvent(Event{Sequence: seq, Time: at.Add(time.Duration(j) * time.Millisecond),
						PipelineID: fmt.Sprintf("pipeline-%04d", p), Kind: KindRunning,
						StatusBefore: "recovering", StatusAfter: "running", Message: "pipeline is running", Actor: "system"})
					if err != nil {
						b.Error(err)
						return
					}
					ops = append(ops, store.Op{Key: eventKey(prefixes[p], seq), Value: v})
				}
				if err := db.Commit(context.Background(), ops); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// BenchmarkWatchFanout100 appends one event at a time to a pipeline with
// 100 watchers and measures, per watcher, the time from the start of the
// Append (including its synced write) to the event's arrival. Target:
// p99 <= 10 ms.
func BenchmarkWatchFanout100(b *testing.B) {
	const watchers = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := openLog(b, openBadger(b, ""), Options{})

	// started[i] is when the append of sequence i+1 began; written before
	// the Append that publishes it.
	var started []time.Time
	var mu sync.Mutex
	arrivals := make(chan time.Duration, watchers)
	var wg sync.WaitGroup
	for range watchers {
		w, err := l.Watch(ctx, "p", 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for e := range w.C {
				now := time.Now()
				mu.Lock()
				at := started[e.Sequence-1]
				mu.Unlock()
				arrivals <- now.Sub(at)
			}
		})
	}

	var lat []time.Duration
	for b.Loop() {
		mu.Lock()
		started = append(started, time.Now())
		mu.Unlock()
		if _, err := l.Append(ctx, Event{PipelineID: "p", Kind: KindRunning, Message: "running"}); err != nil {
			b.Fatal(err)
		}
		for range watchers {
			lat = append(lat, <-arrivals)
		}
	}
	cancel()
	wg.Wait()
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
