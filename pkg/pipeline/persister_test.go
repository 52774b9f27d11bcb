package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/record"
)

// savedLog is a Positions that records every save.
type savedLog struct {
	mu      sync.Mutex
	saves   []string
	deletes [][]string
}

func (s *savedLog) Load(context.Context, string, string) (record.Position, error) { return nil, nil }

func (s *savedLog) Save(_ context.Context, _, _ string, pos record.Position, deletes [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves = append(s.saves, string(pos))
	var ds []string
	for _, d := range deletes {
		ds = append(ds, string(d))
	}
	s.deletes = append(s.deletes, ds)
	return nil
}

func (s *savedLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.saves)
}

// With dedup, saves are spaced: offers made during the interval wait and
// go together, with every dedup entry they acknowledge, in one save; a stop
// does not wait for the interval.
func TestPersisterSpacesSavesAndStopSavesAtOnce(t *testing.T) {
	log := &savedLog{}
	var stats Stats
	// An interval no test run reaches: only close can end the wait.
	p := newPersister(log, "p", "src", &stats, time.Hour)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background()) }()

	p.offer(record.Position("1"), [][]byte{[]byte("e1")})
	deadline := time.Now().Add(10 * time.Second)
	for log.count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first position was not saved")
		}
		time.Sleep(time.Millisecond)
	}
	p.offer(record.Position("2"), [][]byte{[]byte("e2")})
	p.offer(record.Position("3"), [][]byte{[]byte("e3")})
	p.close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end the wait for the interval")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.saves, []string{"1", "3"}) {
		t.Fatalf("saved %v; want [1 3]: 2 and 3 were offered within one interval", log.saves)
	}
	if !slices.Equal(log.deletes[1], []string{"e2", "e3"}) {
		t.Fatalf("the second save deleted %v; want the entries of both offers", log.deletes[1])
	}
	if got := stats.PositionsSaved.Load(); got != 2 {
		t.Fatalf("PositionsSaved = %d, want 2", got)
	}
}

// Without dedup a save follows as soon as the previous one finished: a
// later save would widen what a crash writes twice.
func TestPersisterWithoutIntervalSavesEveryOfferAfterTheLastSave(t *testing.T) {
	log := &savedLog{}
	var stats Stats
	p := newPersister(log, "p", "src", &stats, 0)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background()) }()
	for i, pos := range []string{"1", "2", "3"} {
		p.offer(record.Position(pos), nil)
		deadline := time.Now().Add(10 * time.Second)
		for log.count() < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("position %s was not saved while the persister was idle", pos)
			}
			time.Sleep(time.Millisecond)
		}
	}
	p.close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(log.saves, []string{"1", "2", "3"}) {
		t.Fatalf("saved %v; want [1 2 3]", log.saves)
	}
}
