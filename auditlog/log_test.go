package auditlog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/store"
)

func TestAppendAssignsSequencesPerPipeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := clocktest.NewAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)))
		l := openLog(t, b.open(t, ""), Options{Now: clock.Now})
		steps := []struct {
			pipeline string
			want     uint64
		}{
			{"a", 1}, {"a", 2}, {"b", 1}, {"a", 3}, {"b", 2}, {"c", 1},
		}
		for _, s := range steps {
			e := mustAppend(t, l, s.pipeline, KindRunning)
			if e.Sequence != s.want {
				t.Fatalf("append to %s: sequence %d, want %d", s.pipeline, e.Sequence, s.want)
			}
			if !e.Time.Equal(clock.Now()) || e.Time.Location() != time.UTC {
				t.Fatalf("append: time %v, want %v in UTC", e.Time, clock.Now())
			}
		}
		for id, want := range map[string]uint64{"a": 3, "b": 2, "c": 1, "unknown": 0} {
			if got := l.LastSequence(id); got != want {
				t.Errorf("LastSequence(%s) = %d, want %d", id, got, want)
			}
		}
		// What List returns is exactly what Append returned.
		at := time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC)
		want, err := l.Append(context.Background(), Event{PipelineID: "a", Kind: KindDegraded, Time: at,
			ErrorCode: 400, ErrorClass: "fatal", NextAttemptAt: at.In(time.Local), Delay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !want.Time.Equal(at) {
			t.Fatalf("Append changed a given time: %v", want.Time)
		}
		got := mustList(t, l, "a", Query{AfterSequence: 3})
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("List = %+v, want [%+v]", got, want)
		}
	})
}

func TestAppendRejectsBadEvents(t *testing.T) {
	l := openLog(t, store.NewInMemory(), Options{})
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		e    Event
		want string
	}{
		{"no pipeline id", ctx, Event{Kind: KindRunning}, "pipeline id is empty"},
		{"no kind", ctx, Event{PipelineID: "p"}, "kind is empty"},
		{"cancelled context", cancelled, Event{PipelineID: "p", Kind: KindRunning}, context.Canceled.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(tt.ctx, tt.e); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Append: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	// A rejected append used no sequence.
	if e := mustAppend(t, l, "p", KindRunning); e.Sequence != 1 {
		t.Fatalf("first accepted append got sequence %d", e.Sequence)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	defer w.Close()
	for _, opts := range []Options{
		{MaxEventsPerPipeline: -1},
		{MaxAge: -time.Second},
		{SweepInterval: -time.Second},
	} {
		if l, err := Open(context.Background(), db, w, opts); err == nil {
			_ = l.Close()
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
}

func TestSequencesContinueAfterReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ids := []string{"a", "a-b", "a.b", "team/a", "100%", "b"}
	for round := range 3 {
		func() {
			// Each round opens the database anew, as a process restart does.
			db := openBadger(t, dir)
			defer db.Close()
			w := store.NewBatcher(db, nil)
			defer w.Close()
			l, err := Open(ctx, db, w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, id := range ids {
				if got, want := l.LastSequence(id), uint64(round*2); got != want {
					t.Fatalf("round %d: LastSequence(%s) = %d, want %d", round, id, got, want)
				}
				for i := range 2 {
					e := mustAppend(t, l, id, KindRunning)
					if want := uint64(round*2 + i + 1); e.Sequence != want {
						t.Fatalf("round %d: %s got sequence %d, want %d", round, id, e.Sequence, want)
					}
				}
			}
		}()
	}
}

func TestList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		// p: 1 starting, 2 running, 3 fault, 4 recovering, ... repeated to 20.
		kinds := []Kind{KindStarting, KindRunning, KindFault, KindRecovering}
		for i := range 20 {
			mustAppend(t, l, "p", kinds[i%len(kinds)])
			mustAppend(t, l, "p2", KindRunning) // interleaved, never listed
		}
		tests := []struct {
			name string
			q    Query
			want []uint64
		}{
			{"all", Query{}, seqRange(1, 20)},
			{"after", Query{AfterSequence: 15}, seqRange(16, 20)},
			{"after the last", Query{AfterSequence: 20}, nil},
			{"after beyond the end", Query{AfterSequence: 1 << 63}, nil},
			{"after the largest sequence", Query{AfterSequence: 1<<64 - 1}, nil},
			{"limit", Query{Limit: 3}, []uint64{1, 2, 3}},
			{"limit 1", Query{Limit: 1}, []uint64{1}},
			{"limit above the count", Query{Limit: 100}, seqRange(1, 20)},
			{"limit equal to the count", Query{Limit: 20}, seqRange(1, 20)},
			{"after and limit", Query{AfterSequence: 10, Limit: 2}, []uint64{11, 12}},
			{"kinds", Query{Kinds: []Kind{KindFault}}, []uint64{3, 7, 11, 15, 19}},
			{"two kinds", Query{Kinds: []Kind{KindStarting, KindFault}, Limit: 3}, []uint64{1, 3, 5}},
			{"kind never appended", Query{Kinds: []Kind{KindDeleted}}, nil},
			{"kinds and after", Query{Kinds: []Kind{KindFault}, AfterSequence: 11}, []uint64{15, 19}},
			{"newest first", Query{NewestFirst: true}, seqRange(20, 1)},
			{"newest first, limit", Query{NewestFirst: true, Limit: 3}, []uint64{20, 19, 18}},
			{"newest first, after", Query{NewestFirst: true, AfterSequence: 17}, []uint64{20, 19, 18}},
			{"newest first, after and limit", Query{NewestFirst: true, AfterSequence: 5, Limit: 100}, seqRange(20, 6)},
			{"newest first, kinds and limit", Query{NewestFirst: true, Kinds: []Kind{KindRecovering}, Limit: 2}, []uint64{20, 16}},
			{"newest first, after the last", Query{NewestFirst: true, AfterSequence: 20}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := mustList(t, l, "p", tt.q)
				if !equalSeqs(got, tt.want) {
					t.Fatalf("List(%+v) = %v, want %v", tt.q, seqs(got), tt.want)
				}
				for _, e := range got {
					if e.PipelineID != "p" || e.Kind != kinds[(e.Sequence-1)%4] {
						t.Fatalf("event %d is %s of %s", e.Sequence, e.Kind, e.PipelineID)
					}
				}
			})
		}
		if got := mustList(t, l, "unknown", Query{}); len(got) != 0 {
			t.Errorf("unknown pipeline: got %v", seqs(got))
		}
		if _, err := l.List(context.Background(), "p", Query{Limit: -1}); err == nil {
			t.Errorf("a negative limit was accepted")
		}
	})
}

// TestPipelineIDsDoNotOverlap checks that ids that are prefixes of each
// other, or contain '/', keep their logs apart.
func TestPipelineIDsDoNotOverlap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		l := openLog(t, b.open(t, ""), Options{})
		ids := []string{"a", "a/b", "a/0000000000000001", "a%2Fb", "a-b", "a0"}
		for range 3 {
			for _, id := range ids {
				mustAppend(t, l, id, KindRunning)
			}
		}
		for _, id := range ids {
			for _, q := range []Query{{}, {NewestFirst: true}} {
				got := mustList(t, l, id, q)
				want := seqRange(1, 3)
				if q.NewestFirst {
					want = seqRange(3, 1)
				}
				if !equalSeqs(got, want) {
					t.Fatalf("%s: List(%+v) = %v, want %v", id, q, seqs(got), want)
				}
				for _, e := range got {
					if e.PipelineID != id {
						t.Fatalf("List of %s returned an event of %s", id, e.PipelineID)
					}
				}
			}
		}
	})
}

func TestConcurrentAppends(t *testing.T) {
	tests := []struct {
		name      string
		pipelines int
	}{
		{"one pipeline", 1},
		{"many pipelines", 16},
	}
	const writers, perWriter = 64, 20
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				l := openLog(t, b.open(t, ""), Options{})
				ctx := context.Background()
				var mu sync.Mutex
				got := make(map[string][]uint64) // pipeline -> sequences Append returned
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						for i := range perWriter {
							id := fmt.Sprintf("p%d", (w+i)%tt.pipelines)
							e, err := l.Append(ctx, Event{PipelineID: id, Kind: KindRunning, Message: fmt.Sprintf("%d/%d", w, i)})
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							got[id] = append(got[id], e.Sequence)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				total := 0
				for id, s := range got {
					slices.Sort(s)
					if want := seqRange(1, uint64(len(s))); fmt.Sprint(s) != fmt.Sprint(want) {
						t.Fatalf("%s: sequences %v are not dense from 1", id, s)
					}
					stored := mustList(t, l, id, Query{})
					if !equalSeqs(stored, s) {
						t.Fatalf("%s: stored %v, appended %v", id, seqs(stored), s)
					}
					msgs := make(map[string]bool)
					for _, e := range stored {
						if msgs[e.Message] {
							t.Fatalf("%s: event %q stored twice", id, e.Message)
						}
						msgs[e.Message] = true
					}
					if l.LastSequence(id) != uint64(len(s)) {
						t.Fatalf("%s: LastSequence %d, want %d", id, l.LastSequence(id), len(s))
					}
					total += len(s)
				}
				if total != writers*perWriter {
					t.Fatalf("%d events appended, want %d", total, writers*perWriter)
				}
			})
		})
	}
}

// failingWrites makes every commit that holds a chosen key fail.
type failingWrites struct {
	store.Store
	fail func(key []byte) bool
}

func (f *failingWrites) Commit(ctx context.Context, ops []store.Op) error {
	for _, op := range ops {
		if f.fail(op.Key) {
			return errors.New("disk on fire")
		}
	}
	return f.Store.Commit(ctx, ops)
}

func TestFailedWriteSkipsItsSequence(t *testing.T) {
	failKey := string(eventKey(pipelinePrefix("p"), 2))
	db := &failingWrites{Store: store.NewInMemory(), fail: func(k []byte) bool { return string(k) == failKey }}
	l := openLog(t, db, Options{})
	ctx := context.Background()
	w, err := l.Watch(ctx, "p", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, "p", KindRunning)
	if _, err := l.Append(ctx, Event{PipelineID: "p", Kind: KindFault}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Append: %v, want the store's error", err)
	}
	if e := mustAppend(t, l, "p", KindRunning); e.Sequence != 3 {
		t.Fatalf("after a failed write: sequence %d, want 3 (2 is never reused)", e.Sequence)
	}
	if got := mustList(t, l, "p", Query{}); !equalSeqs(got, []uint64{1, 3}) {
		t.Fatalf("List = %v, want [1 3]", seqs(got))
	}
	// The metrics hear of the event the log lacks.
	if held, failed := l.WriteFigures(); held != 0 || failed != 1 {
		t.Fatalf("WriteFigures = %d held, %d failed; want 0 and 1", held, failed)
	}
	for _, want := range []uint64{1, 3} {
		if e := <-w.C; e.Sequence != want {
			t.Fatalf("watch got %d, want %d", e.Sequence, want)
		}
	}
}

func TestCorruptEntriesAreSkipped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, "")
		core, logs := observer.New(zap.WarnLevel)
		l := openLog(t, db, Options{Logger: zap.New(core)})
		for range 4 {
			mustAppend(t, l, "p", KindRunning)
		}
		_ = l.Close()

		prefix := pipelinePrefix("p")
		bad := map[string]string{
			string(eventKey(prefix, 2)):                          "{not json",
			string(eventKey(prefix, 3)):                          `{"version":99,"sequence":3,"pipelineId":"p","kind":"running"}`,
			string(prefix) + "0000000000000001x":                 "foreign key inside the range",
			string(prefix) + "zzz":                               "foreign key after the range",
			store.PrefixAuditLog + "no-slash":                    "foreign key between pipelines",
			store.PrefixAuditLog + "bad%escape/0000000000000001": "{}",
		}
		for k, v := range bad {
			if err := db.Commit(ctx, []store.Op{{Key: []byte(k), Value: []byte(v)}}); err != nil {
				t.Fatal(err)
			}
		}

		l = openLog(t, db, Options{Logger: zap.New(core)})
		if got := l.LastSequence("p"); got != 4 {
			t.Fatalf("LastSequence = %d, want 4", got)
		}
		for _, q := range []Query{{}, {NewestFirst: true}} {
			want := []uint64{1, 4}
			if q.NewestFirst {
				want = []uint64{4, 1}
			}
			if got := mustList(t, l, "p", q); !equalSeqs(got, want) {
				t.Fatalf("List(%+v) = %v, want %v", q, seqs(got), want)
			}
		}
		w, err := l.Watch(ctx, "p", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []uint64{1, 4} {
			if e := <-w.C; e.Sequence != want {
				t.Fatalf("watch replay got %d, want %d", e.Sequence, want)
			}
		}
		if e := mustAppend(t, l, "p", KindRunning); e.Sequence != 5 {
			t.Fatalf("next sequence %d, want 5", e.Sequence)
		}
		// Every skipped entry was named in a log line.
		for k := range bad {
			if k == string(prefix)+"zzz" {
				continue // beyond every range read here, never met
			}
			if logs.FilterField(zap.String("key", k)).Len() == 0 {
				t.Errorf("no log line names %q; logged: %v", k, logs.All())
			}
		}
	})
}

func TestClose(t *testing.T) {
	db := store.NewInMemory()
	l := openLog(t, db, Options{})
	ctx := context.Background()
	mustAppend(t, l, "p", KindRunning)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, Event{PipelineID: "p", Kind: KindRunning}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if _, err := l.List(ctx, "p", Query{}); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if _, err := l.Watch(ctx, "p", 0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
}
