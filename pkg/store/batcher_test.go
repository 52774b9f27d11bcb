package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conduitry/conduit/pkg/clocktest"
)

// heldStore records the keys of every commit and, while hold is set, holds
// each commit until release is called; failKey makes commits holding that
// key fail.
type heldStore struct {
	*InMemory
	mu      sync.Mutex
	commits [][]string
	hold    chan struct{} // closed to let held commits through; nil: no hold
	entered chan struct{} // receives once per commit that started
	failKey string
}

func newHeldStore() *heldStore {
	return &heldStore{InMemory: NewInMemory(), entered: make(chan struct{}, 1024)}
}

func (h *heldStore) Commit(ctx context.Context, ops []Op) error {
	h.entered <- struct{}{}
	h.mu.Lock()
	hold := h.hold
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = string(op.Key)
		if op.Delete {
			keys[i] = "-" + keys[i]
		}
	}
	h.mu.Lock()
	h.commits = append(h.commits, keys)
	fail := h.failKey != "" && slices.Contains(keys, h.failKey)
	h.mu.Unlock()
	if fail {
		return errors.New("disk on fire")
	}
	return h.InMemory.Commit(ctx, ops)
}

func (h *heldStore) holdCommits() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = make(chan struct{})
	return h.hold
}

func (h *heldStore) release(hold chan struct{}) {
	h.mu.Lock()
	h.hold = nil
	h.mu.Unlock()
	close(hold)
}

func (h *heldStore) recorded() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.commits)
}

func set(k, v string) Op { return Op{Key: []byte(k), Value: []byte(v)} }

func submit(t *testing.T, b *Batcher, ops ...Op) Pending {
	t.Helper()
	p, err := b.Submit(WriteOptions{}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// blockFirstCommit submits a write and waits until its commit is held:
// what is submitted next gathers into the following round.
func blockFirstCommit(t *testing.T, h *heldStore, b *Batcher) (chan struct{}, Pending) {
	t.Helper()
	hold := h.holdCommits()
	p := submit(t, b, set("first", "1"))
	<-h.entered
	return hold, p
}

func TestBatcherGathersWritesIntoOneCommit(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, first := blockFirstCommit(t, h, b)
	var ps []Pending
	for i := range 50 {
		ps = append(ps, submit(t, b, set(fmt.Sprint("k", i), "v")))
	}
	h.release(hold)
	for _, p := range append(ps, first) {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.recorded(); len(got) != 2 || len(got[1]) != 50 {
		t.Fatalf("commits %v, want the first alone and then the 50 writes in one", got)
	}
}

func TestBatcherRefusesATooLargeValueToItsWriterAlone(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, first := blockFirstCommit(t, h, b)
	other := submit(t, b, set("other", "v"))
	_, err := b.Submit(WriteOptions{}, Op{Key: []byte("large"), Value: make([]byte, MaxValueBytes+1)})
	if !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Submit of a value over MaxValueBytes = %v, want ErrValueTooLarge", err)
	}
	h.release(hold)
	for _, p := range []Pending{first, other} {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatalf("a write submitted beside the refused one failed: %v", err)
		}
	}
	for _, commit := range h.recorded() {
		for _, key := range commit {
			if key == "large" {
				t.Fatalf("the refused value was committed: %v", h.recorded())
			}
		}
	}
}

func TestBatcherCoalescesWritesOfOneKey(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	encoded := 0
	lazy := func(v string) Op {
		return Op{Key: []byte("state"), Encode: func(dst []byte) ([]byte, error) { encoded++; return append(dst, v...), nil }}
	}
	submit(t, b, lazy("s1"), set("event-1", "e"))
	submit(t, b, lazy("s2"), set("event-2", "e"))
	submit(t, b, set("gone", "x"))
	last := submit(t, b, Op{Key: []byte("gone"), Delete: true}, lazy("s3"))
	h.release(hold)
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	commits := h.recorded()
	if want := []string{"state", "event-1", "event-2", "-gone"}; !slices.Equal(commits[1], want) {
		t.Fatalf("second commit %v, want %v", commits[1], want)
	}
	if encoded != 1 {
		t.Fatalf("the state was encoded %d times, want once (the replaced values never)", encoded)
	}
	if v, err := h.Get(context.Background(), []byte("state")); err != nil || string(v) != "s3" {
		t.Fatalf("state = %q, %v; want s3", v, err)
	}
}

// submitLargeWrites submits 20 writes of two 64 KiB values each (2.5 MiB,
// more than one chunk) and returns the last.
func submitLargeWrites(t *testing.T, b *Batcher) Pending {
	t.Helper()
	value := string(make([]byte, 64<<10))
	var last Pending
	for i := range 20 {
		last = submit(t, b, set(fmt.Sprint("w", i, "-a"), value), set(fmt.Sprint("w", i, "-b"), value))
	}
	return last
}

func TestBatcherKeepsAWriteInOneCommitAcrossChunks(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	last := submitLargeWrites(t, b)
	h.release(hold)
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	commits := h.recorded()[1:]
	if len(commits) < 2 {
		t.Fatalf("%d commits for 2.5 MiB, want it split into chunks", len(commits))
	}
	var order []string
	for _, c := range commits {
		for i := 0; i < len(c); i += 2 {
			a, bb := c[i], c[i+1]
			if a[:len(a)-2] != bb[:len(bb)-2] {
				t.Fatalf("a write was split across commits: %v", c)
			}
			order = append(order, a[:len(a)-2])
		}
	}
	for i, w := range order {
		if w != fmt.Sprint("w", i) {
			t.Fatalf("writes committed in the order %v, want submit order", order)
		}
	}
}

// unlimitedStore is a store whose transactions hold any number of
// writes (as PostgreSQL's do).
type unlimitedStore struct{ *heldStore }

func (unlimitedStore) TxnLimits() (ops, bytes int) { return 0, 0 }

// On a store without a limit for one transaction, a round is always one
// transaction, however large.
func TestBatcherCommitsARoundInOneTransactionWhenTheStoreHasNoLimit(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(unlimitedStore{h}, nil)
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	last := submitLargeWrites(t, b)
	for i := range maxChunkOps {
		last = submit(t, b, set(fmt.Sprint("small", i), "v"))
	}
	h.release(hold)
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if commits := h.recorded()[1:]; len(commits) != 1 || len(commits[0]) != 40+maxChunkOps {
		t.Fatalf("%d commits for a round of 2.5 MiB and %d writes, want one with all of them", len(commits), 20+maxChunkOps)
	}
}

func TestBatcherCallbacksRunInOrderBeforeTheWriteIsDone(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	var mu sync.Mutex
	var calls []int
	var ps []Pending
	for i := range 5 {
		p, err := b.Submit(WriteOptions{Done: func(err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			calls = append(calls, i)
			mu.Unlock()
		}}, set(fmt.Sprint("k", i), "v"))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	h.release(hold)
	if err := ps[0].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("callbacks ran %v before the write was done, want all five in order", calls)
	}
}

func TestBatcherReportsAFailedCommitAndGoesOn(t *testing.T) {
	h := newHeldStore()
	h.failKey = "bad"
	var failedWrites, commits atomic.Int64
	b := NewBatcherWith(h, BatcherOptions{
		OnError:  func(writes int, err error) { failedWrites.Add(int64(writes)) },
		OnCommit: func() { commits.Add(1) },
	})
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	p1 := submit(t, b, set("bad", "x"))
	p2 := submit(t, b, set("ok-in-same-commit", "y"))
	h.release(hold)
	for _, p := range []Pending{p1, p2} {
		if err := p.Wait(context.Background()); err == nil {
			t.Fatal("a write of the failed commit returned nil")
		}
	}
	if err := b.Flush(context.Background()); err == nil {
		t.Fatal("Flush after a failed round returned nil")
	}
	if got := failedWrites.Load(); got != 2 {
		t.Fatalf("onError was told of %d writes, want 2", got)
	}
	// Only the first round, alone before the failed one, committed.
	if got := commits.Load(); got != 1 {
		t.Fatalf("OnCommit was called %d times, want once (the failed round must not count)", got)
	}
	if err := b.Apply(context.Background(), set("later", "z")); err != nil {
		t.Fatalf("a later round: %v", err)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after a good round: %v", err)
	}
	if got := commits.Load(); got != 2 {
		t.Fatalf("OnCommit was called %d times after a good round, want 2", got)
	}
}

func TestBatcherWaitHonoursItsContext(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, first := blockFirstCommit(t, h, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := first.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want the context's error", err)
	}
	h.release(hold)
	if err := first.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := h.Get(context.Background(), []byte("first")); err != nil || string(v) != "1" {
		t.Fatalf("the write did not land: %q, %v", v, err)
	}
}

func TestBatcherCommitsUrgentWritesBetweenChunks(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	hold, _ := blockFirstCommit(t, h, b)
	value := string(make([]byte, 200<<10))
	var last Pending
	for i := range 6 {
		last = submit(t, b, set(fmt.Sprint("bookkeeping-", i), value))
	}
	urgent, err := b.Submit(WriteOptions{Priority: Urgent}, set("entry", "e"))
	if err != nil {
		t.Fatal(err)
	}
	h.release(hold)
	if err := urgent.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	commits := h.recorded()
	at := slices.IndexFunc(commits, func(c []string) bool { return slices.Contains(c, "entry") })
	lastBookkeeping := slices.IndexFunc(commits, func(c []string) bool { return slices.Contains(c, "bookkeeping-5") })
	if at < 0 || at >= lastBookkeeping {
		t.Fatalf("commits %v: the urgent write waited for the whole bookkeeping round", commits)
	}
}

func TestBatcherCloseCommitsWhatWasSubmitted(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	hold, _ := blockFirstCommit(t, h, b)
	submit(t, b, set("pending", "v"))
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	h.release(hold)
	<-closed
	if v, err := h.Get(context.Background(), []byte("pending")); err != nil || string(v) != "v" {
		t.Fatalf("pending = %q, %v; want it written by Close", v, err)
	}
	if _, err := b.Submit(WriteOptions{}, set("late", "v")); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("Submit after Close = %v, want ErrBatcherClosed", err)
	}
	other := NewBatcher(NewInMemory(), nil)
	defer other.Close()
	if _, err := other.Submit(WriteOptions{}, Op{Value: []byte("no key")}); err == nil {
		t.Fatal("Submit with an empty key returned nil")
	}
}

func TestBatcherConcurrentWritersLandWhole(t *testing.T) {
	db := NewInMemory()
	b := NewBatcher(db, nil)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				v := fmt.Sprint(i)
				op := func(k string) Op { return set(fmt.Sprint("w", w, "-", k), v) }
				if i%2 == 0 {
					if err := b.Apply(context.Background(), op("a"), op("b")); err != nil {
						t.Error(err)
						return
					}
				} else if _, err := b.Submit(WriteOptions{}, op("a"), op("b")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Close()
	for w := range 16 {
		for _, k := range []string{"a", "b"} {
			v, err := db.Get(context.Background(), []byte(fmt.Sprint("w", w, "-", k)))
			if err != nil || string(v) != "199" {
				t.Fatalf("writer %d key %s = %q, %v; want its last value 199", w, k, v, err)
			}
		}
	}
}

// fencingStore fails the ops of one pipeline's fence as a shared store does.
type fencingStore struct {
	Store
	stale string
}

func (f fencingStore) Commit(ctx context.Context, ops []Op) error {
	var kept []Op
	fenced := false
	for _, op := range ops {
		if op.Fence != nil && op.Fence.Pipeline == f.stale {
			fenced = true
			continue
		}
		kept = append(kept, op)
	}
	if err := f.Store.Commit(ctx, kept); err != nil {
		return err
	}
	if fenced {
		return &FencedError{Pipelines: []string{f.stale}}
	}
	return nil
}

// A fenced commit fails only the writes made under the stale lease.
func TestBatcherReportsFencingPerWrite(t *testing.T) {
	ctx := context.Background()
	db := fencingStore{Store: NewInMemory(), stale: "orders"}
	b := NewBatcher(db, nil)
	defer b.Close()
	var calls sync.WaitGroup
	calls.Add(3)
	results := make([]error, 3)
	pending := make([]Pending, 3)
	for i, ops := range [][]Op{
		{{Key: []byte("a"), Value: []byte("1"), Fence: &Fence{Pipeline: "orders", Token: 1}}},
		{{Key: []byte("b"), Value: []byte("2"), Fence: &Fence{Pipeline: "billing", Token: 3}}},
		{{Key: []byte("c"), Value: []byte("3")}},
	} {
		p, err := b.Submit(WriteOptions{Done: func(err error) { results[i] = err; calls.Done() }}, ops...)
		if err != nil {
			t.Fatal(err)
		}
		pending[i] = p
	}
	calls.Wait()
	if !errors.Is(results[0], ErrFenced) || results[1] != nil || results[2] != nil {
		t.Fatalf("callbacks: %v", results)
	}
	if err := pending[0].Wait(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced write's Wait: %v", err)
	}
	if err := pending[1].Wait(ctx); err != nil {
		t.Fatalf("another pipeline's write: %v", err)
	}
	if _, err := db.Get(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the fenced write landed: %v", err)
	}
}

func TestPipelineOfKey(t *testing.T) {
	for key, want := range map[string]string{
		PrefixPipelineState + "orders":             "orders",
		PrefixPosition + KeyPart("a/b") + "/src":   "a/b",
		PrefixDedup + "orders/dst/\x00\x01":        "orders",
		PrefixAuditLog + "orders/000000000000002a": "orders",
		PrefixConnectorState + "orders/dst":        "orders",
		KeyProcess:                                 "",
		PrefixManagedRule + "rate-limits":          "",
		PrefixAPIPipeline + "orders":               "",
		PrefixPosition + "no-slash":                "",
	} {
		got, ok := PipelineOfKey([]byte(key))
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", key, got, ok, want)
		}
	}
}

// A Batcher with a fencer fences every write of a pipeline's state.
func TestBatcherFencesPipelineWrites(t *testing.T) {
	db := fencingStore{Store: NewInMemory(), stale: "orders"}
	b := NewBatcherWith(db, BatcherOptions{FenceOf: func(key []byte) *Fence {
		if p, ok := PipelineOfKey(key); ok {
			return &Fence{Pipeline: p, Token: 7}
		}
		return nil
	}})
	defer b.Close()
	ctx := context.Background()
	if err := b.Apply(ctx, Op{Key: []byte(PrefixPipelineState + "orders"), Value: []byte("x")}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write of a pipeline whose lease is stale: %v", err)
	}
	if err := b.Apply(ctx, Op{Key: []byte(PrefixPipelineState + "billing"), Value: []byte("x")}); err != nil {
		t.Fatalf("another pipeline's write: %v", err)
	}
	if err := b.Apply(ctx, Op{Key: []byte(KeyProcess), Value: []byte("x")}); err != nil {
		t.Fatalf("a write of no pipeline: %v", err)
	}

	// Fence fences copies, once: the caller's ops stay as they are, and
	// ops that all carry a fence keep it (a write tried again later lands
	// under the lease it was made under).
	ops := []Op{{Key: []byte(PrefixPipelineState + "billing")}, {Key: []byte(KeyProcess)}}
	fenced := b.Fence(ops)
	if ops[0].Fence != nil || fenced[0].Fence == nil || fenced[0].Fence.Token != 7 || fenced[1].Fence != nil {
		t.Fatalf("fenced %+v from %+v", fenced, ops)
	}
	old := []Op{{Key: []byte(PrefixPipelineState + "billing"), Fence: &Fence{Pipeline: "billing", Token: 3}}}
	if again := b.Fence(old); &again[0] != &old[0] || again[0].Fence.Token != 3 {
		t.Fatalf("ops fenced already were fenced again: %+v", again)
	}
}

// syncRecordingStore records, for each commit, whether it was synced.
type syncRecordingStore struct {
	*heldStore
	mu     sync.Mutex
	synced []bool
}

func (s *syncRecordingStore) Commit(ctx context.Context, ops []Op) error {
	s.mu.Lock()
	s.synced = append(s.synced, true)
	s.mu.Unlock()
	return s.heldStore.Commit(ctx, ops)
}

// CommitUnsynced is not held: the lane of unsynced writes does not wait
// for the others.
func (s *syncRecordingStore) CommitUnsynced(ctx context.Context, ops []Op) error {
	s.mu.Lock()
	s.synced = append(s.synced, false)
	s.mu.Unlock()
	return s.InMemory.Commit(ctx, ops)
}

func TestBatcherCommitsUnsyncedWritesWithoutWaitingForASync(t *testing.T) {
	s := &syncRecordingStore{heldStore: newHeldStore()}
	b := NewBatcher(s, nil)
	defer b.Close()
	// A synced write's commit is held, as a slow sync would hold it.
	hold, first := blockFirstCommit(t, s.heldStore, b)
	// An unsynced write is committed meanwhile, without a sync.
	p, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set("intent", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	synced := slices.Clone(s.synced)
	s.mu.Unlock()
	if !slices.Equal(synced, []bool{true, false}) {
		t.Fatalf("commits synced %v, want [true false]: the held synced one, then the intent without a sync", synced)
	}
	s.release(hold)
	if err := first.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Flush and Close wait for both lanes.
	if _, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set("intent-2", "v")); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"first", "intent", "intent-2"} {
		if _, err := s.Get(context.Background(), []byte(k)); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if _, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set("intent-3", "v")); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := s.Get(context.Background(), []byte("intent-3")); err != nil {
		t.Fatalf("intent-3 after Close: %v", err)
	}
	if _, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set("late", "v")); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("a write after Close: %v, want ErrBatcherClosed", err)
	}
}

func TestBatcherCommitsUnsyncedWritesSyncedOnAStoreThatCannotDoOtherwise(t *testing.T) {
	h := newHeldStore()
	b := NewBatcher(h, nil)
	defer b.Close()
	p, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set("intent", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.recorded(); len(got) != 1 {
		t.Fatalf("commits %v, want the write committed through Commit", got)
	}
}

// TestBatcherEncodedValuesShareABuffer: the values a chunk's ops encode are
// appended to one buffer that grows and is reused chunk after chunk; each
// op still commits its own value, also those written before the buffer
// moved to a larger array.
func TestBatcherEncodedValuesShareABuffer(t *testing.T) {
	db := NewInMemory()
	b := NewBatcher(db, nil)
	defer b.Close()
	ctx := context.Background()
	value := func(round, i int) string { return fmt.Sprintf("%d-%d-%s", round, i, strings.Repeat("v", i*37%900)) }
	for round := range 3 {
		ops := make([]Op, 200)
		for i := range ops {
			v := value(round, i)
			ops[i] = Op{Key: []byte(fmt.Sprintf("k%03d", i)), Encode: func(dst []byte) ([]byte, error) { return append(dst, v...), nil }}
		}
		if err := b.Apply(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		for i := range ops {
			got, err := db.Get(ctx, ops[i].Key)
			if err != nil {
				t.Fatal(err)
			}
			if want := value(round, i); string(got) != want {
				t.Fatalf("round %d, key %d: got %.40q..., want %.40q...", round, i, got, want)
			}
		}
	}
}

// orderCheckingStore records the values each key was committed with, in
// commit order, and fails the test if two unsynced commits overlap: the
// lane's goroutine and callers of Wait take turns committing it.
type orderCheckingStore struct {
	*InMemory
	t         *testing.T
	active    atomic.Int32
	mu        sync.Mutex
	byKey     map[string][]int
	byWaiters int
}

func (s *orderCheckingStore) CommitUnsynced(ctx context.Context, ops []Op) error {
	if s.active.Add(1) != 1 {
		s.t.Error("two commits of the Unsynced lane at once")
	}
	defer s.active.Add(-1)
	s.mu.Lock()
	for _, op := range ops {
		var v int
		fmt.Sscan(string(op.Value), &v)
		s.byKey[string(op.Key)] = append(s.byKey[string(op.Key)], v)
	}
	if strings.Contains(goroutineStack(), "Pending.Wait") {
		s.byWaiters++
	}
	s.mu.Unlock()
	return s.InMemory.Commit(ctx, ops)
}

func goroutineStack() string {
	buf := make([]byte, 8192)
	return string(buf[:runtime.Stack(buf, false)])
}

// Unsynced writes land in the order they were submitted whoever commits
// them (the lane's goroutine or a waiter whose round nobody took), never
// two commits at once, and Close commits those nobody waited for.
func TestBatcherUnsyncedLaneKeepsOrderWhoeverCommits(t *testing.T) {
	s := &orderCheckingStore{InMemory: NewInMemory(), t: t, byKey: map[string][]int{}}
	b := NewBatcher(s, nil)
	const writers, writes = 8, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("waited-%d", w)
			for i := range writes {
				p, err := b.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, set(key, fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
					return
				}
				if err := p.Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range writes {
			if _, err := b.Submit(WriteOptions{Durability: Unsynced}, set("unwaited", fmt.Sprint(i))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	b.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, values := range s.byKey {
		if !slices.IsSorted(values) {
			t.Errorf("%s was committed out of order: %v", key, values)
		}
		if last := values[len(values)-1]; last != writes-1 {
			t.Errorf("%s: last value committed %d, want %d", key, last, writes-1)
		}
	}
	if len(s.byKey) != writers+1 {
		t.Errorf("%d keys committed, want %d", len(s.byKey), writers+1)
	}
	// A round begun on an idle lane is left to its waiters: of 2,400
	// waits, hundreds commit their own round. None means Wait no longer
	// commits.
	if s.byWaiters == 0 {
		t.Error("no waiter committed its own round")
	}
	t.Logf("%d commits made by waiters", s.byWaiters)
}

// A write of the Unsynced lane that nobody waits for is still committed:
// the lane's goroutine is not woken for a round begun on an idle lane (its
// caller usually commits it in Wait), so a late wake-up does it, and Flush
// does not wait for that.
func TestBatcherCommitsUnsyncedWritesNobodyWaitsFor(t *testing.T) {
	s := &syncRecordingStore{heldStore: newHeldStore()}
	b := NewBatcher(s, nil)
	defer b.Close()
	p, err := b.Submit(WriteOptions{Durability: Unsynced}, set("unwaited", "v"))
	if err != nil {
		t.Fatal(err)
	}
	clocktest.Eventually(t, func() bool {
		select {
		case <-p.r.done:
			return true
		default:
			return false
		}
	}, func() string { return "a write nobody waits for was never committed" })
	if _, err := s.Get(context.Background(), []byte("unwaited")); err != nil {
		t.Fatalf("unwaited: %v", err)
	}

	// Flush wakes the lane's goroutine itself.
	if _, err := b.Submit(WriteOptions{Durability: Unsynced}, set("flushed", "v")); err != nil {
		t.Fatal(err)
	}
	b.unsyncedLate.Stop() // only Flush may commit it now
	ctx, cancel := context.WithTimeout(context.Background(), clocktest.Timeout)
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if _, err := s.Get(context.Background(), []byte("flushed")); err != nil {
		t.Fatalf("flushed: %v", err)
	}
}
