package lifecycle

import (
	"container/heap"
	"context"
	"github.com/conduitry/conduit/pkg/clock"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// RestartScheduler launches the restarts of many supervisors at their
// scheduled times: its own goroutine (Run) with one timer, and whichever
// supervisor or run goroutine calls Help first.
//
// Why not one timer per supervisor: in a fault storm thousands of restarts
// fall due within a few hundred milliseconds, while the process is busy
// with the runs that already restarted and, often, with a garbage
// collection. A supervisor woken by its own timer waits in the Go run queue
// behind all of that work; traces of 10,000 pipelines showed 80-200 ms
// waits whenever a collection's mark overlapped the restarts. Here
// whoever runs first launches every restart that is due, each in a new
// goroutine, a microsecond apiece: the scheduler's goroutine when its
// timer fires, or, in a storm, any supervisor or run goroutine of the
// process (Help), so that the busier the process is, the more often due
// restarts are looked at. One goroutine alone still waited up to 40 ms in
// the run queue under a collection's mark. The restart time stamped is
// when the run was launched; how long the run then takes to open its
// connectors is the run's own business (and measured separately by the
// storm benchmark).
//
// The scheduler never touches a supervisor's state: the launched run tells
// its supervisor "restarted at" through the supervisor's inbox before it
// does anything else.
type RestartScheduler struct {
	clock clock.Clock

	// earliest is the due time of the first queued restart in Unix
	// nanoseconds (math.MaxInt64: none), so that Help costs one atomic
	// load when nothing is due. It is wall-clock time: after a clock step
	// Help may look too early or too late, and Run's timer (monotonic)
	// still launches on time.
	earliest atomic.Int64

	mu    sync.Mutex
	queue restartQueue
	seq   uint64
	// wake tells Run that the earliest due time may have changed.
	wake chan struct{}
}

// restartTicket is one scheduled restart.
type restartTicket struct {
	due    time.Time
	seq    uint64 // equal due times launch in scheduling order
	launch func(at time.Time)
	index  int // in the queue; -1 once launched or cancelled
}

// NewRestartScheduler returns a scheduler on clock (nil: the wall clock).
// Restarts are launched by Run, which its owner runs, and by Help.
func NewRestartScheduler(clk clock.Clock) *RestartScheduler {
	if clk == nil {
		clk = clock.Real{}
	}
	s := &RestartScheduler{clock: clk, wake: make(chan struct{}, 1)}
	s.earliest.Store(math.MaxInt64)
	return s
}

// Pending reports how many restarts wait and when the earliest is due
// (zero when none waits).
func (s *RestartScheduler) Pending() (n int, earliest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return 0, time.Time{}
	}
	return len(s.queue), s.queue[0].due
}

// Span returns how many restarts wait and the earliest and latest due
// times (zero when none waits). It looks at every queued restart.
func (s *RestartScheduler) Span() (n int, earliest, latest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return 0, time.Time{}, time.Time{}
	}
	earliest = s.queue[0].due
	for _, t := range s.queue {
		if t.due.After(latest) {
			latest = t.due
		}
	}
	return len(s.queue), earliest, latest
}

// Help launches the restarts that are due, if any. Supervisors and runs
// call it as they go; it costs an atomic load when nothing is due.
func (s *RestartScheduler) Help() {
	if s.clock.Now().UnixNano() >= s.earliest.Load() {
		s.launchDue()
	}
}

// launchDue launches every restart that is due and returns when the next
// one is (false: none queued). It takes one ticket at a time: a
// launcher that loses the CPU halfway (a collection's assist, say) holds
// up one restart, not the batch it would otherwise have taken, and the
// others go to whoever calls next.
func (s *RestartScheduler) launchDue() (next time.Time, queued bool) {
	for {
		now := s.clock.Now()
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return time.Time{}, false
		}
		if next := s.queue[0].due; next.After(now) {
			s.mu.Unlock()
			return next, true
		}
		t := heap.Pop(&s.queue).(*restartTicket)
		s.updateEarliest()
		s.mu.Unlock()
		t.launch(now)
	}
}

// updateEarliest publishes the queue's first due time; mu must be held.
func (s *RestartScheduler) updateEarliest() {
	if len(s.queue) == 0 {
		s.earliest.Store(math.MaxInt64)
		return
	}
	s.earliest.Store(s.queue[0].due.UnixNano())
}

// Start runs Run on a goroutine of its own and returns the function that
// ends it: stop returns once Run has returned. The caller decides when,
// which is not when its own context ends (a shutting-down supervisor may
// still need a launched restart taken over and stopped).
func (s *RestartScheduler) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Run launches restarts as they fall due until ctx is done. Restarts still
// queued then are not launched: the process is shutting down, and each
// pipeline's persisted state says when to restart it next time.
func (s *RestartScheduler) Run(ctx context.Context) {
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next, queued := s.launchDue()
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var timerC <-chan time.Time
		if queued {
			// Armed at the due time, which a clock that moved since it was
			// read does not make late.
			timer = s.clock.TimerAt(next)
			timerC = timer.C()
			// Launching the restarts that were due takes a while in a storm:
			// one that fell due meanwhile is launched now rather than
			// through a timer that has already expired, whose wake-up
			// waits behind every goroutine the launches made runnable.
			if s.clock.Now().UnixNano() >= s.earliest.Load() {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timerC:
		}
	}
}

// schedule queues launch to be called at due (at once if due has passed).
// launch runs on the scheduler's goroutine and must not block.
func (s *RestartScheduler) schedule(due time.Time, launch func(at time.Time)) *restartTicket {
	s.mu.Lock()
	s.seq++
	t := &restartTicket{due: due, seq: s.seq, launch: launch}
	heap.Push(&s.queue, t)
	earliest := s.queue[0] == t
	s.updateEarliest()
	s.mu.Unlock()
	if earliest {
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return t
}

// cancel removes t from the queue. It reports false when t was already
// launched (or cancelled): the caller then owns a run that has started.
func (s *RestartScheduler) cancel(t *restartTicket) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&s.queue, t.index)
	s.updateEarliest()
	return true
}

// restartQueue is a min-heap of tickets by due time, then sequence.
type restartQueue []*restartTicket

func (q restartQueue) Len() int { return len(q) }

func (q restartQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}

func (q restartQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *restartQueue) Push(x any) {
	t := x.(*restartTicket)
	t.index = len(*q)
	*q = append(*q, t)
}

func (q *restartQueue) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*q = old[:len(old)-1]
	return t
}
