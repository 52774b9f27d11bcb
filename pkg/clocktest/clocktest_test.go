package clocktest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clock"
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

func TestTimersFireWhenTheClockPassesThem(t *testing.T) {
	c := New()
	var _ clock.Clock = c
	soon, later, stopped := c.TimerAt(Start.Add(time.Second)), c.TimerAt(Start.Add(time.Minute)), c.TimerAt(Start.Add(time.Second))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a waiting timer must report true once")
	}
	if c.Pending() != 2 {
		t.Fatalf("%d timers pending, want 2", c.Pending())
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-soon.C():
		t.Fatal("a timer fired before its time")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-soon.C(); !got.Equal(Start.Add(time.Second)) {
		t.Fatalf("fired at %v", got)
	}
	select {
	case <-later.C():
		t.Fatal("the later timer fired too")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	c.Set(Start.Add(time.Hour))
	<-later.C()
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending after all fired", c.Pending())
	}
	select {
	case <-c.TimerAt(c.Now()).C():
	default:
		t.Fatal("a timer at the clock's time did not fire at once")
	}
	select {
	case <-c.TimerAt(Start).C():
	default:
		t.Fatal("a timer at a time passed did not fire at once")
	}
}

// A timer armed at a time fires then, however far the clock moved between
// the reading that computed the time and the arming: a restart due in a
// second, armed after the clock moved by 999 ms, fires 1 ms later, not a
// second later.
func TestTimersArmedLateFireOnTime(t *testing.T) {
	c := New()
	due := c.Now().Add(time.Second)
	c.Advance(999 * time.Millisecond)
	timer := c.TimerAt(due)
	c.Advance(time.Millisecond)
	select {
	case got := <-timer.C():
		if !got.Equal(due) {
			t.Fatalf("fired at %v, want %v", got, due)
		}
	default:
		t.Fatal("a timer armed after the clock moved fired late")
	}
}

func TestAfterTakesNoTime(t *testing.T) {
	c := New()
	timer := c.TimerAt(Start.Add(300 * time.Millisecond))
	<-c.After(100 * time.Millisecond)
	if got := <-c.After(250 * time.Millisecond); !got.Equal(Start.Add(350 * time.Millisecond)) {
		t.Fatalf("After fired at %v", got)
	}
	<-timer.C() // passed by the second wait
	if got := c.Waits(); len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != 250*time.Millisecond {
		t.Fatalf("Waits = %v", got)
	}
}
