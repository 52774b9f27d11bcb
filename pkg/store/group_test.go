package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// countingStore counts Update calls and can hold them, to prove grouping.
type countingStore struct {
	Store
	updates atomic.Int64
	hold    chan struct{}
}

func (c *countingStore) Update(ctx context.Context, fn func(Txn) error) error {
	c.updates.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	return c.Store.Update(ctx, fn)
}

func TestGroupWriterCommitsConcurrentWritesTogether(t *testing.T) {
	db := &countingStore{Store: NewInMemory(), hold: make(chan struct{})}
	w := NewGroupWriter(db)
	defer w.Close()
	ctx := context.Background()

	// The first write's commit is held; 200 more arrive meanwhile and must
	// share the next commit (or two, if the collector races them).
	first := make(chan error, 1)
	go func() { first <- w.Set(ctx, []byte("k-first"), []byte("v")) }()
	for db.updates.Load() == 0 {
		// The first commit has not begun yet; it will within microseconds.
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if err := w.Set(ctx, fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
				t.Error(err)
			}
		})
	}
	for len(w.reqs) < 200 {
		runtime.Gosched()
	}
	close(db.hold)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := db.updates.Load(); n > 3 {
		t.Fatalf("%d commits for 201 writes, want them grouped (<= 3)", n)
	}
	for i := range 200 {
		if _, err := db.Get(ctx, fmt.Appendf(nil, "k%03d", i)); err != nil {
			t.Fatalf("write %d lost: %v", i, err)
		}
	}
}

func TestGroupWriterDeleteAndClose(t *testing.T) {
	db := NewInMemory()
	w := NewGroupWriter(db)
	ctx := context.Background()
	if err := w.Set(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	w.Close()
	w.Close()
	if err := w.Set(ctx, []byte("b"), []byte("2")); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("Set after Close: %v", err)
	}
}

func TestGroupWriterReportsFailures(t *testing.T) {
	w := NewGroupWriter(NewInMemory())
	defer w.Close()
	if err := w.Set(context.Background(), nil, []byte("x")); err == nil {
		t.Fatal("an empty key was accepted")
	}
}

func TestGroupWriterSetAsync(t *testing.T) {
	ctx := context.Background()

	t.Run("commits in queue order and shares commits", func(t *testing.T) {
		db := &countingStore{Store: NewInMemory(), hold: make(chan struct{})}
		w := NewGroupWriter(db)
		defer w.Close()
		// The first write's commit is held while 100 more queue behind it,
		// each overwriting the same key: the last queued must win.
		first, err := w.SetAsync(ctx, []byte("k"), []byte("first"))
		if err != nil {
			t.Fatal(err)
		}
		for db.updates.Load() == 0 {
			runtime.Gosched()
		}
		waits := make([]func() error, 100)
		for i := range waits {
			if waits[i], err = w.SetAsync(ctx, []byte("k"), fmt.Appendf(nil, "v%03d", i)); err != nil {
				t.Fatal(err)
			}
		}
		close(db.hold)
		if err := first(); err != nil {
			t.Fatal(err)
		}
		for _, wait := range waits {
			if err := wait(); err != nil {
				t.Fatal(err)
			}
		}
		if n := db.updates.Load(); n > 3 {
			t.Fatalf("%d commits for 101 writes, want them grouped (<= 3)", n)
		}
		if v, err := db.Get(ctx, []byte("k")); err != nil || string(v) != "v099" {
			t.Fatalf("Get: %q, %v; want the last queued value", v, err)
		}
	})

	t.Run("nothing is queued after close or with a done context", func(t *testing.T) {
		db := NewInMemory()
		w := NewGroupWriter(db)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if wait, err := w.SetAsync(cctx, []byte("a"), []byte("1")); !errors.Is(err, context.Canceled) || wait != nil {
			t.Fatalf("SetAsync with a cancelled context: %v", err)
		}
		w.Close()
		if wait, err := w.SetAsync(ctx, []byte("b"), []byte("2")); !errors.Is(err, ErrWriterClosed) || wait != nil {
			t.Fatalf("SetAsync after Close: %v", err)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := db.Get(ctx, []byte(k)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("key %s: %v, want nothing written", k, err)
			}
		}
	})

	t.Run("failure reaches wait", func(t *testing.T) {
		w := NewGroupWriter(NewInMemory())
		defer w.Close()
		wait, err := w.SetAsync(ctx, nil, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err == nil {
			t.Fatal("an empty key was accepted")
		}
	})
}

func TestGroupWriterApplyIsAtomic(t *testing.T) {
	db := NewInMemory()
	w := NewGroupWriter(db)
	defer w.Close()
	ctx := context.Background()
	if err := w.Set(ctx, []byte("old"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(ctx, Op{Key: []byte("new"), Value: []byte("2")}, Op{Key: []byte("old"), Delete: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(ctx, []byte("old")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old: %v", err)
	}
	if v, err := db.Get(ctx, []byte("new")); err != nil || string(v) != "2" {
		t.Fatalf("new: %q %v", v, err)
	}
	// One bad op fails the whole request: nothing of it lands.
	if err := w.Apply(ctx, Op{Key: []byte("half"), Value: []byte("x")}, Op{Key: nil, Value: []byte("y")}); err == nil {
		t.Fatal("a request with an empty key was accepted")
	}
	if _, err := db.Get(ctx, []byte("half")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("part of a failed request landed: %v", err)
	}
}
