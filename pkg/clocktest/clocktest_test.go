package clocktest

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := New()
	if got := c.Now(); !got.Equal(Start) {
		t.Fatalf("New().Now() = %v, want %v", got, Start)
	}
	c.Advance(90 * time.Minute)
	if got, want := c.Now(), Start.Add(90*time.Minute); !got.Equal(want) {
		t.Fatalf("after Advance: %v, want %v", got, want)
	}
	earlier := Start.Add(-time.Hour)
	c.Set(earlier)
	if got := c.Now(); !got.Equal(earlier) {
		t.Fatalf("after Set: %v, want %v", got, earlier)
	}
	if got := NewAt(earlier).Now(); !got.Equal(earlier) {
		t.Fatalf("NewAt: %v, want %v", got, earlier)
	}
}

func TestEventuallyWaitsForAnotherGoroutine(t *testing.T) {
	var done atomic.Bool
	polls := 0
	go done.Store(true)
	Eventually(t, func() bool { polls++; return done.Load() }, nil)
	if !done.Load() || polls == 0 {
		t.Fatalf("Eventually returned after %d polls with the condition %v", polls, done.Load())
	}
}
