package auditlog

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
)

// Query selects events of one pipeline for List.
type Query struct {
	// AfterSequence: only events with a greater sequence (0: from the
	// first).
	AfterSequence uint64
	// Limit is the most events to return; 0 returns all that match, which
	// retention bounds.
	Limit int
	// Kinds keeps only events of these kinds; empty keeps all.
	Kinds []Kind
	// NewestFirst returns the newest matching events first (with Limit:
	// the newest Limit of them) instead of the oldest.
	NewestFirst bool
}

// List returns the pipeline's events that q selects, in sequence order (or
// reversed with q.NewestFirst). It sees every event whose Append returned
// and none that a Watch started now would not also deliver, so a client may
// List and then Watch after the last sequence it got, without a gap. An
// unknown pipeline has no events.
func (l *Log) List(ctx context.Context, pipelineID string, q Query) ([]Event, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("list audit events of pipeline %s: limit is %d, want 0 (no limit) or more", pipelineID, q.Limit)
	}
	p, err := l.pipeline(pipelineID, false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, ctx.Err()
	}
	last := p.published.Load()
	if q.AfterSequence >= last {
		return nil, ctx.Err()
	}
	var events []Event
	_, err = l.scan(ctx, p, q.AfterSequence+1, last, q.NewestFirst, func(e Event) bool {
		if len(q.Kinds) == 0 || slices.Contains(q.Kinds, e.Kind) {
			events = append(events, e)
		}
		return q.Limit == 0 || len(events) < q.Limit
	})
	if err != nil {
		return nil, fmt.Errorf("list audit events of pipeline %s: %w", pipelineID, err)
	}
	return events, nil
}

// scan calls fn for p's events with from <= sequence <= to, in order (in
// reverse order with reverse), until fn returns false, and returns the
// sequence of the last entry it looked at (0 for none). Entries that do
// not decode are skipped with a log line.
func (l *Log) scan(ctx context.Context, p *pipelineLog, from, to uint64, reverse bool, fn func(Event) bool) (uint64, error) {
	var seen uint64
	visit := func(key, value []byte) error {
		escID, seq, ok := parseKey(key)
		if !ok || escID != p.escID {
			l.log.Warn("skipping an entry under the audit log prefix that is not an audit event", zap.String("key", string(key)))
			return nil
		}
		if seq < from || seq > to {
			return errStop
		}
		seen = seq
		e, err := decodeEvent(value, p.escID, seq)
		if err != nil {
			l.log.Warn("skipping an audit event that cannot be read", zap.String("key", string(key)), zap.Error(err))
			return nil
		}
		if !fn(e) {
			return errStop
		}
		return nil
	}
	var err error
	if reverse {
		err = l.db.ScanReverse(ctx, p.prefix, eventKey(p.prefix, to), visit)
	} else {
		err = l.db.ScanFrom(ctx, p.prefix, eventKey(p.prefix, from), visit)
	}
	if err != nil && !errors.Is(err, errStop) {
		return seen, err
	}
	return seen, nil
}
