package auditlog

import (
	"bytes"
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/store"
)

// deleteBatch is how many keys one retention transaction deletes, well
// under the store's transaction limit.
const deleteBatch = 1000

// runSweeper runs the retention pass every sweepEvery until Close.
func (l *Log) runSweeper() {
	defer l.wg.Done()
	ticker := time.NewTicker(l.sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-l.life.Done():
			return
		case <-ticker.C:
		}
		l.sweep(l.life)
		if l.afterSweep != nil {
			l.afterSweep()
		}
	}
}

// sweep applies both limits to every pipeline: the count exactly (appends
// only trim once the slack is used up, and a pipeline that stopped
// appending never does), and the age.
func (l *Log) sweep(ctx context.Context) {
	l.mu.Lock()
	pipelines := make([]*pipelineLog, 0, len(l.pipelines))
	for _, p := range l.pipelines {
		pipelines = append(pipelines, p)
	}
	l.mu.Unlock()
	for _, p := range pipelines {
		if ctx.Err() != nil {
			return
		}
		l.trimCount(p, 0)
		if l.maxAge > 0 {
			l.trimAge(ctx, p)
		}
	}
}

// owned reports whether retention may delete p's events (Options.Owns).
func (l *Log) owned(p *pipelineLog) bool {
	return l.owns == nil || l.owns(p.id)
}

// begin claims p for a retention pass; false when one is under way.
func (p *pipelineLog) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maintaining {
		return false
	}
	p.maintaining = true
	return true
}

// end releases p, raising oldest when the pass removed events below it.
func (p *pipelineLog) end(oldest uint64) { p.endAt(oldest, time.Time{}) }

// endAt is end for a pass that read the time of the oldest event left
// (zero: it did not).
func (p *pipelineLog) endAt(oldest uint64, oldestAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maintaining = false
	p.oldest = max(p.oldest, oldest)
	if oldestAt.After(p.oldestAt) {
		p.oldestAt = oldestAt
	}
}

// trimCount deletes p's oldest events beyond maxEvents once there are more
// than maxEvents+slack of them, if p is owned. It counts sequences, not
// stored entries, so it may delete a little early where failed writes left
// gaps.
func (l *Log) trimCount(p *pipelineLog, slack uint64) {
	p.mu.Lock()
	published, oldest := p.published.Load(), p.oldest
	over := published >= oldest && published-oldest+1 > l.maxEvents+slack
	p.mu.Unlock()
	if !over || !l.owned(p) || !p.begin() {
		return
	}
	to := published - l.maxEvents
	err := l.deleteRange(l.life, p, eventKey(p.prefix, oldest), eventKey(p.prefix, to))
	if err != nil {
		p.end(0)
		l.logFailure(err, "could not delete audit events beyond the count limit", p)
		return
	}
	p.end(to + 1)
}

// trimAge deletes p's events older than maxAge, oldest first, up to the
// first younger one, if p is owned. Sequence order is time order (Append
// stamps events under the pipeline's lock), so one look at the oldest event
// usually settles it. The newest event always stays, so that its sequence survives
// a restart; an entry that cannot be read goes with the events around it.
func (l *Log) trimAge(ctx context.Context, p *pipelineLog) {
	if !l.owned(p) || !p.begin() {
		return
	}
	p.mu.Lock()
	from, to, oldestAt := p.oldest, p.published.Load(), p.oldestAt
	p.mu.Unlock()
	cutoff := l.now().Add(-l.maxAge)
	if to < from || (!oldestAt.IsZero() && !oldestAt.Before(cutoff)) {
		p.end(0)
		return
	}

	// Keys up to the last expired event, whose sequence is lastExpired.
	var keys [][]byte
	var expired int
	var lastExpired uint64
	var lastExpiredAt, youngerAt time.Time
	younger := false
	err := l.db.ScanFrom(ctx, p.prefix, eventKey(p.prefix, from), func(key, value []byte) error {
		escID, seq, ok := parseKey(key)
		if ok && seq > to {
			return errStop
		}
		if !ok || escID != p.escID {
			keys = append(keys, bytes.Clone(key))
			return nil
		}
		e, err := decodeEvent(value, p.escID, seq)
		if err != nil {
			keys = append(keys, bytes.Clone(key))
			return nil
		}
		if !e.Time.Before(cutoff) {
			younger, youngerAt = true, e.Time
			return errStop
		}
		keys = append(keys, bytes.Clone(key))
		expired, lastExpired, lastExpiredAt = len(keys), seq, e.Time
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		p.end(0)
		l.logFailure(err, "could not read audit events for the age limit", p)
		return
	}
	keys = keys[:expired]
	// What stays once the keys go: the first younger event, else the
	// newest expired one, kept.
	remainingAt := youngerAt
	if !younger && expired > 0 {
		// Every event is expired: keep the newest.
		keys = keys[:expired-1]
		lastExpired--
		remainingAt = lastExpiredAt
	}
	if len(keys) == 0 {
		p.endAt(0, remainingAt)
		return
	}
	if err := l.deleteList(ctx, keys); err != nil {
		p.end(0)
		l.logFailure(err, "could not delete audit events beyond the age limit", p)
		return
	}
	p.endAt(lastExpired+1, remainingAt)
}

// deleteRange deletes p's keys from start to end (inclusive), reading and
// deleting deleteBatch keys at a time.
func (l *Log) deleteRange(ctx context.Context, p *pipelineLog, start, end []byte) error {
	for {
		var keys [][]byte
		err := l.db.ScanFrom(ctx, p.prefix, start, func(key, _ []byte) error {
			if bytes.Compare(key, end) > 0 {
				return errStop
			}
			keys = append(keys, bytes.Clone(key))
			if len(keys) == deleteBatch {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if err := l.deleteList(ctx, keys); err != nil {
			return err
		}
		if len(keys) < deleteBatch {
			return nil
		}
		start = append(keys[len(keys)-1], 0)
	}
}

// deleteList deletes keys in transactions of deleteBatch.
func (l *Log) deleteList(ctx context.Context, keys [][]byte) error {
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		batch := keys[:n]
		keys = keys[n:]
		ops := make([]store.Op, len(batch))
		for i, k := range batch {
			ops[i] = store.Op{Key: k, Delete: true}
		}
		err := l.w.Apply(ctx, ops...)
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) logFailure(err error, msg string, p *pipelineLog) {
	if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClosed) {
		return // shutting down; the next pass tries again
	}
	l.log.Warn(msg, zap.String("pipeline_id", p.id), zap.Error(err))
}
