package lifecycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

// heldStore holds every Update until released, like a disk that is slow
// to sync, and can fail them.
type heldStore struct {
	store.Store
	hold    chan struct{}
	entered chan struct{} // receives once per Update that began
	updates atomic.Int64
	fail    atomic.Bool
}

func (h *heldStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	h.updates.Add(1)
	h.entered <- struct{}{}
	<-h.hold
	if h.fail.Load() {
		return errors.New("disk on fire")
	}
	return h.Store.Update(ctx, fn)
}

func newHeldStateStore(t *testing.T) (*heldStore, *StateStore) {
	t.Helper()
	db := &heldStore{Store: store.NewInMemory(), hold: make(chan struct{}), entered: make(chan struct{}, 64)}
	w := store.NewGroupWriter(db)
	s := NewStateStore(db, w, nil)
	t.Cleanup(func() {
		select {
		case <-db.hold:
		default:
			close(db.hold)
		}
		s.Close()
		w.Close()
	})
	return db, s
}

func loadStatus(t *testing.T, s *StateStore, id string) Status {
	t.Helper()
	st, ok, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return st.Status
}

// TestSaveLaterDoesNotWaitForTheDisk is why the store writes behind: a
// supervisor's transitions must go on while the disk is slow, and Flush
// is what waits.
func TestSaveLaterDoesNotWaitForTheDisk(t *testing.T) {
	db, s := newHeldStateStore(t)
	ctx := context.Background()
	// A save that waited for the held disk would hang: the bound turns
	// that into a failure instead of a test binary timeout.
	returnsAtOnce := func(save func() error) {
		t.Helper()
		saved := make(chan error, 1)
		go func() { saved <- save() }()
		select {
		case err := <-saved:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("SaveLater waited for the disk")
		}
	}
	returnsAtOnce(func() error { return s.SaveLater("p", State{Status: StatusRunning}) })
	<-db.entered
	// The first write is held. Later saves return at once too, and the
	// newest of a pipeline replaces the ones before it.
	returnsAtOnce(func() error {
		for _, st := range []Status{StatusRecovering, StatusRunning, StatusDegraded} {
			if err := s.SaveLater("p", State{Status: st}); err != nil {
				return err
			}
		}
		return s.SaveLater("q", State{Status: StatusStopped})
	})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the disk is held = %v, want the context's deadline", err)
	}
	close(db.hold)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := loadStatus(t, s, "p"); got != StatusDegraded {
		t.Fatalf("p is %v after Flush, want the newest state, degraded", got)
	}
	if got := loadStatus(t, s, "q"); got != StatusStopped {
		t.Fatalf("q is %v after Flush, want stopped", got)
	}
	if n := db.updates.Load(); n != 2 {
		t.Fatalf("%d writes, want 2: the held one and one for everything queued behind it", n)
	}
}

func TestStateStoreFlushReportsAFailedWrite(t *testing.T) {
	db, s := newHeldStateStore(t)
	var reported atomic.Int64
	s.onError = func(pipelines int, _ error) { reported.Add(int64(pipelines)) }
	db.fail.Store(true)
	close(db.hold)
	if err := s.Save(context.Background(), "p", State{Status: StatusRunning}); err == nil {
		t.Fatal("Save on a failing disk returned nil")
	}
	if reported.Load() != 1 {
		t.Fatalf("onError heard of %d pipelines, want 1", reported.Load())
	}
	db.fail.Store(false)
	if err := s.Save(context.Background(), "p", State{Status: StatusStopped}); err != nil {
		t.Fatalf("the next save after a failure: %v", err)
	}
	if got := loadStatus(t, s, "p"); got != StatusStopped {
		t.Fatalf("p is %v, want stopped", got)
	}
}

// A round that failed before anyone flushed is still reported: Flush
// must not say "durable" about states that are not on disk.
func TestStateStoreFlushAfterAFailedRoundReportsIt(t *testing.T) {
	db, s := newHeldStateStore(t)
	failed := make(chan struct{}, 1)
	s.onError = func(int, error) { failed <- struct{}{} }
	db.fail.Store(true)
	close(db.hold)
	if err := s.SaveLater("p", State{Status: StatusRunning}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never reported the failed round")
	}
	if err := s.Flush(context.Background()); err == nil {
		t.Fatal("Flush after a failed round returned nil")
	}
	db.fail.Store(false)
	if err := s.SaveLater("p", State{Status: StatusStopped}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatalf("Flush once a later round succeeded: %v", err)
	}
}

func TestStateStoreCloseWritesWhatWasHandedOver(t *testing.T) {
	db := store.NewInMemory()
	w := store.NewGroupWriter(db)
	defer w.Close()
	s := NewStateStore(db, w, nil)
	for i := range 100 {
		if err := s.SaveLater("p", State{Status: StatusRunning, FailCount: i}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s.Close() // safe twice
	if err := s.SaveLater("p", State{Status: StatusStopped}); !errors.Is(err, ErrStateStoreClosed) {
		t.Fatalf("SaveLater after Close = %v, want ErrStateStoreClosed", err)
	}
	reader := NewStateStore(db, w, nil)
	defer reader.Close()
	st, ok, err := reader.Load(context.Background(), "p")
	if err != nil || !ok || st.FailCount != 99 {
		t.Fatalf("after Close: %+v ok=%v err=%v, want the last state (fail count 99)", st, ok, err)
	}
}

func TestStateStoreDeleteDropsAStateNotYetWritten(t *testing.T) {
	db, s := newHeldStateStore(t)
	if err := s.SaveLater("first", State{Status: StatusRunning}); err != nil {
		t.Fatal(err)
	}
	<-db.entered
	// "gone" waits behind the held write; deleting it must not let the
	// writer bring it back.
	if err := s.SaveLater("gone", State{Status: StatusRunning}); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- s.Delete(context.Background(), "gone") }()
	close(db.hold)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := loadStatus(t, s, "gone"); got != 0 {
		t.Fatalf("deleted pipeline has state %v", got)
	}
	if got := loadStatus(t, s, "first"); got != StatusRunning {
		t.Fatalf("first is %v, want running", got)
	}
}
