package lifecycle

import (
	"github.com/conduitry/conduit/pkg/clocktest"
	"sync"
	"testing"
	"time"
)

// launchLog records launches: which ticket, at what time.
type launchLog struct {
	mu   sync.Mutex
	got  []string
	at   []time.Time
	more chan struct{}
}

func newLaunchLog() *launchLog { return &launchLog{more: make(chan struct{}, 100)} }

func (l *launchLog) launcher(name string) func(time.Time) {
	return func(at time.Time) {
		l.mu.Lock()
		l.got = append(l.got, name)
		l.at = append(l.at, at)
		l.mu.Unlock()
		l.more <- struct{}{}
	}
}

func (l *launchLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// wait returns once n launches happened in total.
func (l *launchLog) wait(t *testing.T, n int) {
	t.Helper()
	for len(l.names()) < n {
		select {
		case <-l.more:
		case <-time.After(guard):
			t.Fatalf("%d launches, want %d: %v", len(l.names()), n, l.names())
		}
	}
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRestartSchedulerLaunchesInDueOrderWhenTheClockGetsThere(t *testing.T) {
	clock := clocktest.New()
	s := NewRestartScheduler(clock)
	log := newLaunchLog()
	now := clock.Now()
	s.schedule(now.Add(3*time.Second), log.launcher("c"))
	s.schedule(now.Add(time.Second), log.launcher("a"))
	s.schedule(now.Add(2*time.Second), log.launcher("b1"))
	s.schedule(now.Add(2*time.Second), log.launcher("b2")) // same time: scheduling order

	t.Cleanup(s.Start())

	clock.Advance(999 * time.Millisecond)
	s.Help()
	if got := log.names(); len(got) != 0 {
		t.Fatalf("launched %v before anything was due", got)
	}
	clock.Advance(time.Millisecond)
	log.wait(t, 1)
	clock.Advance(time.Second)
	log.wait(t, 3)
	clock.Advance(time.Second)
	log.wait(t, 4)
	if got, want := log.names(), []string{"a", "b1", "b2", "c"}; !equalNames(got, want) {
		t.Fatalf("launch order %v, want %v", got, want)
	}
	dues := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}
	for i, at := range log.at {
		if due := now.Add(dues[i]); at.Before(due) {
			t.Fatalf("launch %d stamped %s, before its due time %s", i, at, due)
		}
	}
}

// TestRestartSchedulerHelpLaunchesWithoutItsGoroutine is what keeps a
// storm on schedule: when the scheduler's own goroutine is starved, any
// goroutine that calls Help launches what is due.
func TestRestartSchedulerHelpLaunchesWithoutItsGoroutine(t *testing.T) {
	clock := clocktest.New()
	s := NewRestartScheduler(clock) // Run is never called
	log := newLaunchLog()
	s.schedule(clock.Now().Add(time.Second), log.launcher("a"))
	s.schedule(clock.Now().Add(time.Second), log.launcher("b"))
	s.schedule(clock.Now().Add(time.Minute), log.launcher("later"))
	s.Help()
	clock.Advance(time.Second)
	s.Help()
	if got := log.names(); !equalNames(got, []string{"a", "b"}) {
		t.Fatalf("Help launched %v, want [a b]", got)
	}
	if at := log.at[0]; !at.Equal(clock.Now()) {
		t.Fatalf("launch stamped %s, want the clock's time %s", at, clock.Now())
	}
	s.Help()
	if got := log.names(); len(got) != 2 {
		t.Fatalf("a ticket was launched twice or too early: %v", got)
	}
}

func TestRestartSchedulerCancel(t *testing.T) {
	clock := clocktest.New()
	s := NewRestartScheduler(clock)
	log := newLaunchLog()
	first := s.schedule(clock.Now().Add(time.Second), log.launcher("cancelled"))
	second := s.schedule(clock.Now().Add(time.Second), log.launcher("kept"))
	if !s.cancel(first) {
		t.Fatal("cancelling a queued restart reported it launched")
	}
	if s.cancel(first) {
		t.Fatal("cancelling twice reported success twice")
	}
	if n, earliest := s.Pending(); n != 1 || !earliest.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("pending %d, earliest %s; want the kept one", n, earliest)
	}
	clock.Advance(time.Second)
	s.Help()
	if n, earliest := s.Pending(); n != 0 || !earliest.IsZero() {
		t.Fatalf("pending %d, earliest %s after the launch; want none", n, earliest)
	}
	if got := log.names(); !equalNames(got, []string{"kept"}) {
		t.Fatalf("launched %v, want [kept]", got)
	}
	if s.cancel(second) {
		t.Fatal("cancelling a launched restart reported success: its run would be left to itself")
	}
}

func TestRestartSchedulerWakesForAnEarlierRestartAndLaunchesPastDueAtOnce(t *testing.T) {
	clock := clocktest.New()
	s := NewRestartScheduler(clock)
	log := newLaunchLog()
	t.Cleanup(s.Start())

	s.schedule(clock.Now().Add(time.Hour), log.launcher("late"))
	// Scheduled while Run waits for the hour: it must re-arm for this one.
	s.schedule(clock.Now().Add(time.Second), log.launcher("soon"))
	// Help is not called here: only Run's wake-up can launch it.
	clock.Advance(time.Second)
	log.wait(t, 1)
	// A restart whose time has passed (a pipeline resumed after the
	// process was down) launches without waiting.
	s.schedule(clock.Now().Add(-time.Minute), log.launcher("overdue"))
	log.wait(t, 2)
	if got := log.names(); !equalNames(got, []string{"soon", "overdue"}) {
		t.Fatalf("launched %v, want [soon overdue]", got)
	}
}
