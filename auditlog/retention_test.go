package auditlog

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/store"
)

// stored returns the sequences stored for a pipeline, read from the store
// itself rather than through List.
func stored(t *testing.T, db store.Store, id string) []uint64 {
	t.Helper()
	var out []uint64
	err := db.Scan(context.Background(), pipelinePrefix(id), func(k, _ []byte) error {
		_, seq, ok := parseKey(k)
		if !ok {
			return fmt.Errorf("bad key %q", k)
		}
		out = append(out, seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRetentionByCount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.open(t, "")
		// 200 events per pipeline: trimmed in batches once 202 are stored.
		l := openLog(t, db, Options{MaxEventsPerPipeline: 200})
		if l.trimSlack != 2 {
			t.Fatalf("slack %d, want 2", l.trimSlack)
		}
		for i := 1; i <= 500; i++ {
			mustAppend(t, l, "p", KindRunning)
			got := stored(t, db, "p")
			if n := len(got); n > 202 || n < min(i, 200) {
				t.Fatalf("after %d appends %d events are stored, want 200..202", i, n)
			}
			if got[len(got)-1] != uint64(i) || got[0] != uint64(i-len(got)+1) {
				t.Fatalf("after %d appends stored %d..%d, want the newest", i, got[0], got[len(got)-1])
			}
		}
		mustAppend(t, l, "q", KindRunning)
		// The retention pass trims to the limit exactly.
		l.sweep(context.Background())
		if got := stored(t, db, "p"); !equalSeqs(evs(got), seqRange(301, 500)) {
			t.Fatalf("after the pass: %d..%d stored", got[0], got[len(got)-1])
		}
		if got := stored(t, db, "q"); len(got) != 1 {
			t.Fatalf("q: %v", got)
		}
	})
}

// evs wraps sequences as events for equalSeqs.
func evs(s []uint64) []Event {
	out := make([]Event, len(s))
	for i, q := range s {
		out[i].Sequence = q
	}
	return out
}

// TestRetentionLimitLowered: a log far over a lowered limit is trimmed in
// batches on the next pass, and sequences go on.
func TestRetentionLimitLowered(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	func() {
		db := openBadger(t, dir)
		defer db.Close()
		w := store.NewBatcher(db, nil)
		defer w.Close()
		l, err := Open(ctx, db, w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// Written in one transaction per 500, like the benchmark data.
		writeBulk(t, db, "p", 1, 2500)
	}()
	db := openBadger(t, dir)
	l := openLog(t, db, Options{MaxEventsPerPipeline: 10})
	if got := l.LastSequence("p"); got != 2500 {
		t.Fatalf("LastSequence = %d", got)
	}
	l.sweep(ctx)
	if got := stored(t, db, "p"); !equalSeqs(evs(got), seqRange(2491, 2500)) {
		t.Fatalf("stored %v", got)
	}
	if e := mustAppend(t, l, "p", KindRunning); e.Sequence != 2501 {
		t.Fatalf("next sequence %d", e.Sequence)
	}
}

// writeBulk stores events from..to of a pipeline directly, many per
// transaction.
func writeBulk(t testing.TB, db store.Store, id string, from, to uint64) {
	t.Helper()
	prefix := pipelinePrefix(id)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for start := from; start <= to; start += 500 {
		var ops []store.Op
		for seq := start; seq <= min(start+499, to); seq++ {
			v, err := encodeEvent(Event{Sequence: seq, Time: at.Add(time.Duration(seq) * time.Second),
				PipelineID: id, Kind: KindRunning, Message: "bulk"})
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, store.Op{Key: eventKey(prefix, seq), Value: v})
		}
		if err := db.Commit(context.Background(), ops); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetentionByAge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.open(t, "")
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := clocktest.NewAt(start)
		l := openLog(t, db, Options{MaxAge: time.Hour, Now: clock.Now})
		// p: one event a minute for 3 hours (1..180); q: one event, old.
		mustAppend(t, l, "q", KindStopped)
		for i := range 180 {
			clock.Set(start.Add(time.Duration(i) * time.Minute))
			mustAppend(t, l, "p", KindRunning)
		}
		// A corrupt entry among the expired ones goes with them.
		if err := db.Commit(context.Background(), []store.Op{{Key: eventKey(pipelinePrefix("p"), 10), Value: []byte("junk")}}); err != nil {
			t.Fatal(err)
		}

		steps := []struct {
			now   time.Duration // since start
			wantP []uint64
			wantQ []uint64
		}{
			{now: 30 * time.Minute, wantP: seqRange(1, 180), wantQ: []uint64{1}},
			// Events at minute 0..119 (sequences 1..120) are older than an hour.
			{now: 179*time.Minute + time.Second, wantP: seqRange(121, 180), wantQ: []uint64{1}},
			{now: 180 * time.Minute, wantP: seqRange(121, 180), wantQ: []uint64{1}},
			// Everything expired: the newest event stays, its sequence counts.
			{now: 10 * time.Hour, wantP: []uint64{180}, wantQ: []uint64{1}},
		}
		for _, s := range steps {
			clock.Set(start.Add(s.now))
			l.sweep(context.Background())
			if got := stored(t, db, "p"); !equalSeqs(evs(got), s.wantP) {
				t.Fatalf("at +%s: p stored %v, want %v", s.now, got, s.wantP)
			}
			if got := stored(t, db, "q"); !equalSeqs(evs(got), s.wantQ) {
				t.Fatalf("at +%s: q stored %v, want %v", s.now, got, s.wantQ)
			}
		}
		if e := mustAppend(t, l, "p", KindRunning); e.Sequence != 181 {
			t.Fatalf("next sequence %d, want 181", e.Sequence)
		}
		l.sweep(context.Background())
		if got := stored(t, db, "p"); !equalSeqs(evs(got), []uint64{181}) {
			t.Fatalf("after a new event: %v", got)
		}
	})
}

func TestSweeperRunsAndStops(t *testing.T) {
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	defer w.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.NewAt(start)
	l, err := open(context.Background(), db, w, Options{MaxAge: time.Minute, SweepInterval: time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	swept := make(chan struct{}, 1)
	l.afterSweep = func() {
		select {
		case swept <- struct{}{}:
		default:
		}
	}
	for range 3 {
		mustAppend(t, l, "p", KindRunning)
	}
	clock.Set(start.Add(time.Hour))
	l.start()
	<-swept // a pass that began after the clock moved
	if got := stored(t, db, "p"); !equalSeqs(evs(got), []uint64{3}) {
		t.Fatalf("stored %v after a pass, want [3]", got)
	}
	// Close returns once the goroutine has ended.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionOnlyOwnedPipelines: with Options.Owns, neither limit
// deletes the events of a pipeline another process owns.
func TestRetentionOnlyOwnedPipelines(t *testing.T) {
	db := store.NewInMemory()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.NewAt(start)
	l := openLog(t, db, Options{MaxEventsPerPipeline: 3, MaxAge: time.Hour, Now: clock.Now,
		Owns: func(id string) bool { return id != "q" }})
	for range 10 {
		mustAppend(t, l, "p", KindRunning)
		mustAppend(t, l, "q", KindRunning)
	}
	steps := []struct {
		name         string
		now          time.Duration // since start
		wantP, wantQ []uint64
	}{
		{name: "count", now: 0, wantP: seqRange(8, 10), wantQ: seqRange(1, 10)},
		{name: "age", now: 2 * time.Hour, wantP: []uint64{10}, wantQ: seqRange(1, 10)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clock.Set(start.Add(s.now))
			l.sweep(context.Background())
			if got := stored(t, db, "p"); !equalSeqs(evs(got), s.wantP) {
				t.Fatalf("p stored %v, want %v", got, s.wantP)
			}
			if got := stored(t, db, "q"); !equalSeqs(evs(got), s.wantQ) {
				t.Fatalf("q stored %v, want %v", got, s.wantQ)
			}
		})
	}
}

// scanCounter counts the range reads a Log makes of its store.
type scanCounter struct {
	store.Store
	scans atomic.Int64
}

func (c *scanCounter) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	c.scans.Add(1)
	return c.Store.ScanFrom(ctx, prefix, start, fn)
}

// TestRetentionByAgeSkipsYoungPipelines: a sweep does not read the events
// of a pipeline whose oldest event it knows to be younger than the age
// limit - known from the pipeline's first event, from the last pass, or,
// after a restart, from the oldest event stored - and still deletes them
// once they expire.
func TestRetentionByAgeSkipsYoungPipelines(t *testing.T) {
	inner := store.NewInMemory()
	db := &scanCounter{Store: inner}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.NewAt(start)
	opts := Options{MaxAge: time.Hour, Now: clock.Now, SweepInterval: time.Hour}
	l := openLog(t, db, opts)
	ids := []string{"a", "b", "c"}
	for i := range 5 {
		clock.Set(start.Add(time.Duration(i) * time.Minute))
		for _, id := range ids {
			mustAppend(t, l, id, KindRunning)
		}
	}
	clock.Set(start.Add(30 * time.Minute))
	before := db.scans.Load()
	l.sweep(context.Background())
	if n := db.scans.Load() - before; n != 0 {
		t.Fatalf("a sweep with every event young read the store %d times, want 0", n)
	}

	// Minutes 0 and 1 expire at 1h1m30s: the pass reads and deletes them
	// and learns the oldest left (minute 2), so the next pass skips.
	clock.Set(start.Add(time.Hour + 90*time.Second))
	l.sweep(context.Background())
	for _, id := range ids {
		if got := stored(t, inner, id); !equalSeqs(evs(got), seqRange(3, 5)) {
			t.Fatalf("%s stored %v, want 3..5", id, got)
		}
	}
	before = db.scans.Load()
	l.sweep(context.Background())
	if n := db.scans.Load() - before; n != 0 {
		t.Fatalf("a second sweep at the same time read the store %d times, want 0", n)
	}

	// A new Log on the same store knows the oldest times from the store.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, db, opts)
	before = db.scans.Load()
	l2.sweep(context.Background())
	if n := db.scans.Load() - before; n != 0 {
		t.Fatalf("a sweep after reopening read the store %d times, want 0", n)
	}
	clock.Set(start.Add(10 * time.Hour))
	l2.sweep(context.Background())
	for _, id := range ids {
		if got := stored(t, inner, id); !equalSeqs(evs(got), []uint64{5}) {
			t.Fatalf("%s stored %v once all expired, want [5]", id, got)
		}
	}
}
