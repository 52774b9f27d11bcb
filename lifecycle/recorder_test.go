package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/store"
)

// journal is a StateSaver with the EventRecorder ability: it keeps every
// event with the state handed over with it, and the states saved alone.
type journal struct {
	mu      sync.Mutex
	records []recorded
	alone   []State
}

type recorded struct {
	e  auditlog.Event
	st *State
}

func (j *journal) SaveLater(_ string, st State) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.alone = append(j.alone, st.Clone())
	return nil
}

func (j *journal) RecordLater(_ string, st *State, ev *auditlog.Event) error {
	e := *ev
	j.mu.Lock()
	defer j.mu.Unlock()
	j.records = append(j.records, recorded{e: e, st: st})
	return nil
}

// TestTransitionStatesTravelWithTheirEvents: with an EventRecorder, the
// state a transition leads to is handed over with the event that records
// it (so the runtime commits both together), never before it.
func TestTransitionStatesTravelWithTheirEvents(t *testing.T) {
	j := &journal{}
	h := newHarnessWith(t, defaultPolicy(), State{Status: StatusRunning}, func(c *Config) { c.States = j })
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.syncSup()

	j.mu.Lock()
	defer j.mu.Unlock()
	var sawRecovering bool
	for _, r := range j.records {
		if r.e.Kind != auditlog.KindRecovering {
			continue
		}
		sawRecovering = true
		if r.st == nil || r.st.Status != StatusRecovering || r.st.FailCount != 1 {
			t.Fatalf("recovering event carries state %+v, want recovering with fail count 1", r.st)
		}
	}
	if !sawRecovering {
		t.Fatal("no recovering event was recorded")
	}
	for _, st := range j.alone {
		if st.Status == StatusRecovering {
			t.Fatalf("the recovering state was saved apart from its event: %+v", st)
		}
	}
}

// heldCommits holds every commit until release is closed.
type heldCommits struct {
	*store.InMemory
	release chan struct{}
	fail    bool
}

func (h *heldCommits) Commit(ctx context.Context, ops []store.Op) error {
	<-h.release
	if h.fail {
		return errors.New("disk on fire")
	}
	return h.InMemory.Commit(ctx, ops)
}

func TestStateStoreSaveLaterDoesNotWaitForTheDisk(t *testing.T) {
	db := &heldCommits{InMemory: store.NewInMemory(), release: make(chan struct{})}
	w := store.NewBatcher(db, nil)
	defer w.Close()
	s := NewStateStore(db, w)
	st := State{Status: StatusRecovering, FailCount: 1, UpdatedAt: time.Unix(1, 0).UTC()}
	returned := make(chan error, 2)
	go func() {
		returned <- s.SaveLater("p", st)
		st.FailCount = 2 // the caller may change its copy at once
		returned <- s.SaveLater("p", st)
	}()
	for range 2 {
		if err := <-returned; err != nil {
			t.Fatal(err)
		}
	}
	close(db.release)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Load(context.Background(), "p")
	if err != nil || !ok || got.FailCount != 2 {
		t.Fatalf("Load = %+v, %v, %v; want the newer state", got, ok, err)
	}
	// Writes land in order: a delete after a save leaves nothing.
	if err := s.SaveLater("p", st); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Load(context.Background(), "p"); ok {
		t.Fatal("a state saved before the delete came back")
	}
}

func TestStateStoreSaveReportsAFailedWrite(t *testing.T) {
	db := &heldCommits{InMemory: store.NewInMemory(), release: make(chan struct{}), fail: true}
	close(db.release)
	w := store.NewBatcher(db, nil)
	defer w.Close()
	err := NewStateStore(db, w).Save(context.Background(), "orders", State{Status: StatusRunning})
	if err == nil || !strings.Contains(err.Error(), "pipeline orders") {
		t.Fatalf("Save = %v, want the write's error naming the pipeline", err)
	}
}
