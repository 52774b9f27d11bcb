package gctuning

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name           string
		live, headroom uint64
		gcPercent      int
		want           int
	}{
		{"a small heap grows by gc-percent", 40 * mib, 256 * mib, 400, 400},
		{"growth capped at the headroom", 200 * mib, 256 * mib, 400, 128},
		{"never below doubling", 1024 * mib, 256 * mib, 400, 100},
		{"headroom off", 1024 * mib, 0, 400, 400},
		{"a percentage at or below 100 is left alone", 1024 * mib, 256 * mib, 80, 80},
		{"nothing live yet", 0, 256 * mib, 400, 400},
		{"exactly at the headroom", 64 * mib, 256 * mib, 400, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percent(tt.live, tt.headroom, tt.gcPercent); got != tt.want {
				t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", tt.live/mib, tt.headroom/mib, tt.gcPercent, got, tt.want)
			}
		})
	}
}

func TestParseHeadroom(t *testing.T) {
	for in, want := range map[string]uint64{"off": 0, "auto": 128 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30} {
		if got, err := ParseHeadroom(in); err != nil || got != want {
			t.Errorf("ParseHeadroom(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{"256": "at least 16MiB", "lots": "auto, off or a size", "": "auto, off or a size"} {
		if _, err := ParseHeadroom(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseHeadroom(%q) error %v, want one saying %q", in, err, msg)
		}
	}
}

// The tuner follows the live heap each collection finds: collections are
// forced here, and the live heap is what the test says it is.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	var live atomic.Uint64
	live.Store(50 << 20)
	set := make(chan int, 16)
	stop := startTuner(400, 100, func() uint64 { return 256 << 20 }, func(p int) int { set <- p; return 0 }, live.Load)
	defer stop()
	next := func(want int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			runtime.GC()
			select {
			case got := <-set:
				if got != want {
					t.Fatalf("percentage set to %d, want %d", got, want)
				}
				return
			case <-deadline:
				t.Fatalf("no percentage set after collections, want %d", want)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	live.Store(200 << 20)
	next(128)
	live.Store(1 << 30)
	next(100)
	live.Store(10 << 20)
	next(400)
}

func TestApplyStartsTheTunerUnlessGOGCIsSet(t *testing.T) {
	f := newFakeHost()
	a, err := apply(Settings{GCPercent: 400, MemoryLimit: LimitOff, Headroom: "256MiB"}, f.host(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if a.Headroom != 256<<20 || !strings.Contains(a.String(), "headroom 256 MiB") {
		t.Errorf("applied %+v (%s), want a headroom of 256 MiB", a, a)
	}

	f = newFakeHost()
	f.env["GOGC"] = "300"
	a, err = apply(Settings{GCPercent: 400, MemoryLimit: LimitOff, Headroom: "256MiB"}, f.host(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if a.Headroom != 0 {
		t.Errorf("applied %+v, want no headroom when GOGC is set", a)
	}

	if _, err := apply(Settings{GCPercent: 400, MemoryLimit: LimitOff, Headroom: "12"}, newFakeHost().host(), zap.NewNop()); err == nil || !strings.Contains(err.Error(), "runtime.gc-headroom") {
		t.Errorf("a bad headroom: error %v, want one naming runtime.gc-headroom", err)
	}
}

// auto keeps gc-percent for a process that holds many goroutines (ten
// thousand pipelines in a fault storm) and caps the growth of one that
// holds few with a large heap (a snapshot's reads in flight).
func TestAutoHeadroomFollowsTheGoroutines(t *testing.T) {
	cases := []struct {
		name       string
		goroutines int
		live       uint64
		want       int
	}{
		{name: "a snapshot: few goroutines, 250 MB live", goroutines: 60, live: 250 << 20, want: 51},
		{name: "a snapshot: few goroutines, 500 MB live", goroutines: 60, live: 500 << 20, want: 50},
		{name: "a fleet: 50,000 goroutines, 250 MB live", goroutines: 50_000, live: 250 << 20, want: 400},
		{name: "a small process keeps gc-percent", goroutines: 60, live: 20 << 20, want: 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeHost()
			f.goroutines, f.live = c.goroutines, c.live
			a, err := apply(Settings{GCPercent: 400, MemoryLimit: LimitOff, Headroom: HeadroomAuto}, f.host(), zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			a.Stop()
			if !a.HeadroomAuto || !strings.Contains(a.String(), "auto") {
				t.Errorf("applied %+v (%s), want the auto headroom", a, a)
			}
			if f.gcPercent != c.want {
				t.Errorf("percentage %d, want %d", f.gcPercent, c.want)
			}
		})
	}
}

// The headroom follows the most goroutines of the last minutes: in a fault
// storm the runs are down, and their pipelines are about to restart.
func TestAutoHeadroomRemembersThePeak(t *testing.T) {
	n, now := 50_000, time.Unix(0, 0)
	g := &goroutinePeak{count: func() int { return n }, now: func() time.Time { return now }}
	if got := g.headroom(); got != 50_000*autoHeadroomPerGoroutine {
		t.Fatalf("headroom %d at 50,000 goroutines", got)
	}
	n, now = 20_000, now.Add(time.Minute)
	if got := g.headroom(); got != 50_000*autoHeadroomPerGoroutine {
		t.Errorf("headroom %d a minute after the peak, want the peak's", got)
	}
	now = now.Add(autoHeadroomMemory)
	if got := g.headroom(); got != 20_000*autoHeadroomPerGoroutine {
		t.Errorf("headroom %d long after the peak, want today's", got)
	}
	n = 10
	now = now.Add(autoHeadroomMemory + time.Second)
	if got := g.headroom(); got != autoHeadroomMin {
		t.Errorf("headroom %d with 10 goroutines, want the least, %d", got, autoHeadroomMin)
	}
}
