package conduit

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// refusalLogEvery is how often, at most, a spell of refused writes is
// logged again after its first line.
const refusalLogEvery = 30 * time.Second

// refusalLog tells the operator that the store refuses writes for now (no
// space, too few descriptors, the database out of reach) without a line
// for every refused round: the batcher tries again every few hundred
// milliseconds, and a line each time buried everything else while a disk
// stayed full. The first refusal of a spell is logged, then at most one
// line per refusalLogEvery counting the refusals it stands for, and one
// line when a round commits again.
//
// refused and committed are called by the batcher's committing
// goroutines.
type refusalLog struct {
	log *zap.Logger
	now func() time.Time

	// refusing lets committed return at once in the common case.
	refusing atomic.Bool

	mu         sync.Mutex
	since      time.Time // the spell's first refusal
	lastLogged time.Time
	// quiet counts the refused rounds, and quietWrites their writes, not
	// logged since the last line; writes counts the spell's refused writes.
	quiet, quietWrites, writes int
}

// refused records a refused round of writes and logs it when due.
func (l *refusalLog) refused(writes int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.refusing.Load() {
		l.refusing.Store(true)
		l.since, l.lastLogged = now, now
		l.quiet, l.quietWrites, l.writes = 0, 0, writes
		l.log.Warn("the store refuses writes for now; audit events and the pipeline states recorded with them wait in memory and are written once it takes writes again",
			zap.Int("writes", writes), zap.Error(err))
		return
	}
	l.writes += writes
	if now.Sub(l.lastLogged) < refusalLogEvery {
		l.quiet++
		l.quietWrites += writes
		return
	}
	l.log.Warn("the store still refuses writes; audit events and the pipeline states recorded with them wait in memory and are written once it takes writes again",
		zap.Int("writes", writes), zap.Error(err),
		zap.Int("refusals_not_logged", l.quiet), zap.Int("their_writes", l.quietWrites),
		zap.Duration("refusing_for", now.Sub(l.since).Round(time.Millisecond)))
	l.lastLogged = now
	l.quiet, l.quietWrites = 0, 0
}

// committed records a round committed without an error, which ends a
// spell of refusals.
func (l *refusalLog) committed() {
	if !l.refusing.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.refusing.Load() {
		return
	}
	l.refusing.Store(false)
	l.log.Info("the store takes writes again",
		zap.Duration("refused_for", l.now().Sub(l.since).Round(time.Millisecond)),
		zap.Int("refused_writes", l.writes), zap.Int("refusals_not_logged", l.quiet))
}
