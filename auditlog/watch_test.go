package auditlog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/conduitry/conduit/pkg/store"
)

// receive reads n events from w, failing if C closes first.
func receive(t *testing.T, w *Watcher, n int) []Event {
	t.Helper()
	out := make([]Event, 0, n)
	for len(out) < n {
		e, ok := <-w.C
		if !ok {
			t.Fatalf("C closed after %v: %v", seqs(out), w.Err())
		}
		out = append(out, e)
	}
	return out
}

// drain reads w until C closes and returns the events and Err.
func drain(w *Watcher) ([]Event, error) {
	var out []Event
	for e := range w.C {
		out = append(out, e)
	}
	return out, w.Err()
}

func TestWatchReplaysThenFollows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		for range 5 {
			mustAppend(t, l, "p", KindRunning)
		}
		tests := []struct {
			name  string
			after uint64
			kinds []Kind
			// appended after Watch: seq 6 running, 7 fault, 8 running
			want []uint64
		}{
			{"from the start", 0, nil, seqRange(1, 8)},
			{"after a sequence", 3, nil, seqRange(4, 8)},
			{"after the last", 5, nil, seqRange(6, 8)},
			{"beyond the end", 6, nil, []uint64{7, 8}},
			{"far beyond the end", 1 << 40, nil, nil},
			{"kinds", 0, []Kind{KindFault}, []uint64{7}},
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		watchers := make([]*Watcher, len(tests))
		for i, tt := range tests {
			w, err := l.Watch(ctx, "p", tt.after, tt.kinds)
			if err != nil {
				t.Fatal(err)
			}
			watchers[i] = w
		}
		for _, k := range []Kind{KindRunning, KindFault, KindRunning} {
			mustAppend(t, l, "p", k)
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := receive(t, watchers[i], len(tt.want))
				if !equalSeqs(got, tt.want) {
					t.Fatalf("got %v, want %v", seqs(got), tt.want)
				}
			})
		}
		// Nothing more is pending: the next event is the next one.
		mustAppend(t, l, "p", KindFault)
		for i, tt := range tests {
			if tt.after >= 1<<40 {
				continue
			}
			if e := receive(t, watchers[i], 1)[0]; e.Sequence != 9 {
				t.Fatalf("%s: got %d after the end of the test, want 9", tt.name, e.Sequence)
			}
		}
	})
}

// TestWatchNoGapNoDuplicate starts watchers while appends run, so that the
// replay and the live events overlap.
func TestWatchNoGapNoDuplicate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		ctx := context.Background()
		for range 300 { // more than a replay page
			mustAppend(t, l, "p", KindRunning)
		}
		const writers, perWriter, watchers = 8, 50, 8
		total := uint64(300 + writers*perWriter)

		start := make(chan struct{})
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				<-start
				for range perWriter {
					if _, err := l.Append(ctx, Event{PipelineID: "p", Kind: KindRunning}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		results := make([][]Event, watchers)
		var rwg sync.WaitGroup
		close(start)
		for i := range watchers {
			// Each watcher starts at a different point of the replay.
			after := uint64(i * 40)
			w, err := l.Watch(ctx, "p", after, nil)
			if err != nil {
				t.Fatal(err)
			}
			rwg.Go(func() { results[i] = receiveAll(w, total-after) })
		}
		wg.Wait()
		rwg.Wait()
		for i, got := range results {
			after := uint64(i * 40)
			if !equalSeqs(got, seqRange(after+1, total)) {
				t.Fatalf("watcher after %d got %d events, want %d..%d in order without gap or duplicate: %v",
					after, len(got), after+1, total, seqs(got))
			}
		}
	})
}

// receiveAll reads n events from w, or fewer if C closes.
func receiveAll(w *Watcher, n uint64) []Event {
	var out []Event
	for uint64(len(out)) < n {
		e, ok := <-w.C
		if !ok {
			break
		}
		out = append(out, e)
	}
	return out
}

func TestWatchSlowReaderIsDropped(t *testing.T) {
	l := openLog(t, store.NewInMemory(), Options{})
	ctx := context.Background()
	slow, err := l.Watch(ctx, "p", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := l.Watch(ctx, "p", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The watcher's goroutine holds one event it cannot hand over, plus
	// WatchBuffer in its buffer; one more overflows it.
	n := WatchBuffer + 2
	done := make(chan []Event)
	go func() { done <- receiveAll(fast, uint64(n)) }()
	for range n {
		mustAppend(t, l, "p", KindRunning)
	}
	if got := <-done; !equalSeqs(got, seqRange(1, uint64(n))) {
		t.Fatalf("fast reader got %d events", len(got))
	}
	// The slow reader gets what was buffered, in order, then the error.
	got, err := drain(slow)
	if !errors.Is(err, ErrWatcherTooSlow) {
		t.Fatalf("Err = %v, want ErrWatcherTooSlow", err)
	}
	if len(got) == 0 || !equalSeqs(got, seqRange(1, uint64(len(got)))) {
		t.Fatalf("slow reader got %v before the error", seqs(got))
	}
	// It can watch again from the last sequence it received.
	again, err := l.Watch(ctx, "p", got[len(got)-1].Sequence, nil)
	if err != nil {
		t.Fatal(err)
	}
	rest := receive(t, again, n-len(got))
	if !equalSeqs(rest, seqRange(uint64(len(got))+1, uint64(n))) {
		t.Fatalf("rewatch got %v", seqs(rest))
	}
}

func TestWatchEnds(t *testing.T) {
	t.Run("context cancelled", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		mustAppend(t, l, "p", KindRunning)
		ctx, cancel := context.WithCancel(context.Background())
		w, err := l.Watch(ctx, "p", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		receive(t, w, 1)
		cancel()
		if _, err := drain(w); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", err)
		}
		// The watcher is gone: appends do not reach it or block on it.
		for range WatchBuffer + 10 {
			mustAppend(t, l, "p", KindRunning)
		}
	})

	t.Run("context cancelled during the replay, reader gone", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		for range 10 {
			mustAppend(t, l, "p", KindRunning)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w, err := l.Watch(ctx, "p", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel() // nobody reads C; the goroutine must still end
		// Close waits for every watcher goroutine, so returning proves it.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := drain(w); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", err)
		}
	})

	t.Run("log closed", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		ws := make([]*Watcher, 3)
		for i := range ws {
			var err error
			if ws[i], err = l.Watch(context.Background(), "p", 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, l, "p", KindRunning) // unread by all
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if _, err := drain(w); !errors.Is(err, ErrClosed) {
				t.Fatalf("Err = %v, want ErrClosed", err)
			}
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		l := openLog(t, store.NewInMemory(), Options{})
		if _, err := l.Watch(context.Background(), "", 0, nil); err == nil {
			t.Error("an empty pipeline id was accepted")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := l.Watch(ctx, "p", 0, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("Watch with a cancelled context: %v", err)
		}
	})
}

// TestPublishWaitsForLowerSequences drives settle directly with writes
// finishing out of order, as concurrent appends' waits may.
func TestPublishWaitsForLowerSequences(t *testing.T) {
	l := openLog(t, store.NewInMemory(), Options{})
	p := newPipelineLog("p", nil)
	w := &Watcher{live: newLiveQueue()}
	p.watchers[w] = struct{}{}
	published := func() []uint64 {
		var out []uint64
		for {
			e, ok, _ := w.live.pop()
			if !ok {
				return out
			}
			out = append(out, e.Sequence)
		}
	}
	steps := []struct {
		seq           uint64
		stored        bool
		wantPublished []uint64
		wantCursor    uint64
	}{
		{3, true, nil, 0},
		{2, false, nil, 0}, // failed: skipped, but still waited for
		{5, true, nil, 0},
		{1, true, []uint64{1, 3}, 3},
		{4, true, []uint64{4, 5}, 5},
		{6, true, []uint64{6}, 6},
	}
	for _, s := range steps {
		l.settle(p, Event{Sequence: s.seq, Kind: KindRunning}, s.stored)
		if got := published(); fmt.Sprint(got) != fmt.Sprint(s.wantPublished) {
			t.Fatalf("after settling %d: published %v, want %v", s.seq, got, s.wantPublished)
		}
		if got := p.published.Load(); got != s.wantCursor {
			t.Fatalf("after settling %d: cursor %d, want %d", s.seq, got, s.wantCursor)
		}
	}
	if len(p.settled) != 0 {
		t.Fatalf("%d settled events left behind", len(p.settled))
	}
}

// TestIdleWatcherMemory: an idle watcher holds its goroutine and a few
// small values, not a buffer of WatchBuffer events (about 300 KB).
func TestIdleWatcherMemory(t *testing.T) {
	l := openLog(t, store.NewInMemory(), Options{})
	mustAppend(t, l, "p", KindRunning)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inUse := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse + ms.StackInuse)
	}
	const n = 1000
	ws := make([]*Watcher, n)
	before := inUse()
	for i := range ws {
		w, err := l.Watch(ctx, "p", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-w.C // replayed: the watcher is following live events now
		ws[i] = w
	}
	per := (inUse() - before) / n
	runtime.KeepAlive(ws)
	t.Logf("%d bytes per idle watcher", per)
	// 8 KiB of goroutine stack and about 2 KiB of heap.
	if per > 16<<10 {
		t.Fatalf("an idle watcher holds %d bytes, want at most 16 KiB", per)
	}
}

func TestLiveQueueGivesMemoryBack(t *testing.T) {
	q := newLiveQueue()
	for i := range WatchBuffer {
		if !q.push(Event{Sequence: uint64(i + 1)}) {
			t.Fatalf("push %d of %d refused", i+1, WatchBuffer)
		}
	}
	if q.push(Event{Sequence: WatchBuffer + 1}) {
		t.Fatal("a push beyond WatchBuffer was accepted")
	}
	for i := range WatchBuffer {
		if e, ok, _ := q.pop(); !ok || e.Sequence != uint64(i+1) {
			t.Fatalf("pop %d: %v %v", i+1, e.Sequence, ok)
		}
	}
	if cap(q.events) > keepQueue {
		t.Fatalf("an emptied queue keeps room for %d events", cap(q.events))
	}
	// A reader that stays a few events behind does not make it grow.
	for i := range 10 * WatchBuffer {
		q.push(Event{Sequence: uint64(i)})
		if i%2 == 1 {
			q.pop()
		}
		if len(q.events)-q.head > 5 {
			q.pop()
		}
	}
	if cap(q.events) > 64 {
		t.Fatalf("a queue a few events behind grew to %d", cap(q.events))
	}
	q.close()
	for {
		if _, ok, closed := q.pop(); !ok {
			if !closed {
				t.Fatal("a closed, empty queue does not say closed")
			}
			break
		}
	}
}
