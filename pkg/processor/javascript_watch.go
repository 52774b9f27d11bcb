package processor

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dustin/go-humanize"
)

// jsWatch bounds one call into a goja runtime: its time, how much the heap
// grows while it runs, and the run's context. goja can only be stopped
// from outside, with Interrupt; the script then throws at its next
// instruction and the call returns.
//
// A call costs a timer and nothing more unless it outlives the grace
// period (most calls take microseconds). From then on it is checked every
// tick, on the timer's goroutine, until it returns.
//
// Memory. goja allocates on Go's heap, shared by the whole process, so a
// runtime's own use cannot be counted. What is measured is how much the
// process's live heap grew while the call ran:
//
//   - the baseline is the live heap of the last garbage collection when
//     the watch began (/gc/heap/live:bytes);
//   - each tick reads the heap, garbage included
//     (/memory/classes/heap/objects:bytes). Only when that exceeds the
//     baseline by more than the budget can the live heap have done so;
//     then a collection is forced and its live heap compared with the
//     baseline. Over the budget: the call is interrupted. Under it (the
//     growth was garbage, or another pipeline's): the next collection is
//     forced only once the heap has grown by half the budget again.
//
// So a script is stopped once it holds more than the budget, plus at most
// half the budget and what it allocates in a tick; its garbage does not
// count against it. The growth is the process's: another pipeline whose
// live data grows by as much during the call would stop it too (a call
// that lasts milliseconds rarely overlaps such growth; one that lasts
// seconds may). A single allocation larger than the memory left (one
// string of gigabytes) happens before any check, and ends the process as
// before; the budget bounds scripts that grow step by step, which is how
// memory is exhausted in practice.
type jsWatch struct {
	ctx    context.Context
	rt     *goja.Runtime
	limits JavaScriptLimits
	start  time.Time
	timer  *time.Timer

	// done is closed when the call returns; exited when the watching
	// goroutine (if it started) has ended.
	done, exited chan struct{}
	mu           sync.Mutex
	// stopped is why the call was interrupted; nil while it was not.
	stopped *jsStopped
	// started: the timer fired and the watching goroutine runs (or ran).
	started bool
	ended   bool
}

// jsStopped is the error of a call that was interrupted (or panicked):
// its runtime cannot be used again.
type jsStopped struct{ err error }

func (e *jsStopped) Error() string { return e.err.Error() }
func (e *jsStopped) Unwrap() error { return e.err }

// startJSWatch starts watching a call into rt that is about to begin.
func startJSWatch(ctx context.Context, rt *goja.Runtime, limits JavaScriptLimits) *jsWatch {
	w := &jsWatch{ctx: ctx, rt: rt, limits: limits, start: time.Now(), done: make(chan struct{}), exited: make(chan struct{})}
	w.timer = time.AfterFunc(limits.grace, w.watch)
	return w
}

// end is called when the call returned. It waits for the watching
// goroutine, if it started, and says whether the call was interrupted.
func (w *jsWatch) end() *jsStopped {
	if w.timer.Stop() {
		return nil // it never fired: the call was short, and unwatched
	}
	w.mu.Lock()
	started := w.started
	w.ended = true
	w.mu.Unlock()
	if started {
		close(w.done)
		<-w.exited
	}
	if w.stopped != nil {
		// The runtime is dropped; the interrupt must not outlive the call
		// in case it was not (a panic's recovery).
		w.rt.ClearInterrupt()
		return w.stopped
	}
	return nil
}

// watch runs on the timer's goroutine once the call outlived the grace
// period, and checks it every tick until it returns or is interrupted.
func (w *jsWatch) watch() {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.exited)

	base := heapLive()
	// threshold is the heap, garbage included, above which a collection
	// is forced to see whether the live heap crossed the budget.
	threshold := base + w.limits.MemoryLimit
	tick := time.NewTicker(w.limits.tick)
	defer tick.Stop()
	for {
		switch {
		case w.ctx.Err() != nil:
			w.interrupt(&jsStopped{err: fmt.Errorf("custom.javascript: the script was interrupted: %w", context.Cause(w.ctx))})
			return
		case time.Since(w.start) > w.limits.Timeout:
			w.interrupt(&jsStopped{err: fmt.Errorf("custom.javascript: the script ran longer than processors.javascript.timeout (%s) on one call and was interrupted", w.limits.Timeout)})
			return
		case heapObjects() > threshold:
			runtime.GC()
			live := heapLive()
			if live > base+w.limits.MemoryLimit {
				w.interrupt(&jsStopped{err: fmt.Errorf(
					"custom.javascript: the script went over its memory budget and was interrupted: the live heap grew by %s while it ran (processors.javascript.memory-limit is %s)",
					humanize.IBytes(live-base), humanize.IBytes(w.limits.MemoryLimit))})
				return
			}
			threshold = max(threshold, live+w.limits.MemoryLimit/2)
		}
		select {
		case <-w.done:
			return
		case <-w.ctx.Done():
		case <-tick.C:
		}
	}
}

func (w *jsWatch) interrupt(s *jsStopped) {
	w.stopped = s
	w.rt.Interrupt(s.err)
}

// heapLive is the live heap at the end of the last garbage collection.
func heapLive() uint64 { return readHeapMetric("/gc/heap/live:bytes") }

// heapObjects is the heap's objects now, live or not yet collected.
func heapObjects() uint64 { return readHeapMetric("/memory/classes/heap/objects:bytes") }

func readHeapMetric(name string) uint64 {
	s := [1]metrics.Sample{{Name: name}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// freeOSMemory returns the memory of a stopped script to the system.
func freeOSMemory() { debug.FreeOSMemory() }
