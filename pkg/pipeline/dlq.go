package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// Metadata keys a record sent to the dead-letter queue carries (Conduit's).
const (
	MetadataDLQNackError  = "conduit.dlq.nack.error"
	MetadataDLQNackNodeID = "conduit.dlq.nack.node.id"
	// MetadataDLQRule names the recovery rule that dead-lettered the
	// record ("quarantine" for a record quarantined after failing run
	// after run).
	MetadataDLQRule = "conduit.dlq.rule"
)

func opOf(k Kind) string {
	if k == KindProcessor {
		return "process"
	}
	return "write"
}

// dlqRecord is the record the dead-letter queue receives for r, in the
// shape Conduit writes: a new create record whose position is the source's
// node id and r's position ("pipeline:source/position"), with no key, r
// itself (Record.Map) as payload.after, and metadata opencdc.createdAt,
// conduit.dlq.nack.error and conduit.dlq.nack.node.id. A record that a
// recovery rule sent to the queue also carries conduit.dlq.rule, which
// Conduit has no use for as it has no rules.
func (e *Engine) dlqRecord(r record.Record, sourceNode string, n nack, now time.Time) record.Record {
	md := record.Metadata{
		record.MetadataCreatedAt: strconv.FormatInt(now.UnixNano(), 10),
		MetadataDLQNackError:     n.err.Error(),
		MetadataDLQNackNodeID:    e.nodes.of(e.cfg.PipelineID, n.kind, n.id),
	}
	if n.rule != "" {
		md[MetadataDLQRule] = n.rule
	}
	// r's buffers go back to the source with its batch, and the queue's
	// connector may keep what it is given: it gets a copy.
	failed := r.Clone()
	pos := make(record.Position, 0, len(sourceNode)+1+len(r.Position))
	pos = append(append(append(pos, sourceNode...), '/'), r.Position...)
	return record.Record{
		Position:  pos,
		Operation: record.OperationCreate,
		Metadata:  md,
		Payload:   record.Change{After: record.StructuredData(failed.Map())},
	}
}

// writeDLQ writes nacked records to the dead-letter queue. A failure is
// transient: the records were not acknowledged, so after the restart they
// are read, rejected and offered to the queue again.
func (e *Engine) writeDLQ(ctx context.Context, recs []record.Record) error {
	dlq := e.cfg.DLQ.Connector
	if dlq == nil {
		return nil
	}
	for written := 0; written < len(recs); {
		// The queue is a destination too: the same guard as in writeAll.
		if guard := e.cfg.WriteGuard; guard != nil {
			if err := guard(); err != nil {
				return &StageError{Kind: KindDLQ, ID: DLQID, Op: "write", Err: cerrors.Transient(err)}
			}
		}
		n, err := dlq.Write(ctx, recs[written:])
		written += min(max(n, 0), len(recs)-written)
		if err == nil && written < len(recs) {
			err = fmt.Errorf("wrote %d of %d records and returned no error", written, len(recs))
		}
		if err != nil {
			return &StageError{Kind: KindDLQ, ID: DLQID, Op: "write", Err: cerrors.Transient(err)}
		}
	}
	return nil
}

// DeadLettered is what a run reports of the records a dead-letter rule or
// quarantine sent to the dead-letter queue: per rule and batch, once they
// are in the queue.
type DeadLettered struct {
	// Rule is the recovery rule that took them, QuarantineRule for
	// quarantined records.
	Rule string
	// Kind and ComponentID name the component whose error they carry.
	Kind        Kind
	ComponentID string
	Count       int
	// First and Last are the positions of the first and last of them, in
	// read order; Err is the last one's error.
	First, Last record.Position
	Err         error
}

// reportDeadLettered tells Config.OnDeadLettered about the nacks of a batch
// that a rule took (sorted by index), one call per rule.
func (e *Engine) reportDeadLettered(b *batch, nacks []nack) {
	if e.cfg.OnDeadLettered == nil {
		return
	}
	var reports []DeadLettered
	for k := range nacks {
		n := &nacks[k]
		if n.rule == "" {
			continue
		}
		i := slices.IndexFunc(reports, func(d DeadLettered) bool { return d.Rule == n.rule })
		if i < 0 {
			reports = append(reports, DeadLettered{Rule: n.rule, First: b.nackedPosition(n)})
			i = len(reports) - 1
		}
		d := &reports[i]
		d.Count++
		d.Kind, d.ComponentID, d.Last, d.Err = n.kind, n.id, b.nackedPosition(n), n.err
	}
	for _, d := range reports {
		e.cfg.OnDeadLettered(d)
	}
}

// DLQWindowError ends a run whose dead-letter queue window overflowed:
// more than window-nack-threshold of the last window-size records were
// nacked. Err is the last nacked record's error, which decides the class
// (Unwrap); the message says the window, not only that record, stopped the
// pipeline.
type DLQWindowError struct {
	// Nacks of the last Size records were nacked; Threshold were allowed.
	Nacks, Size, Threshold int
	Err                    error
}

// Error says the cause first, then the last nacked record's error.
func (e *DLQWindowError) Error() string {
	return fmt.Sprintf("dead-letter queue window overflowed: %d nacks in the last %d records (window-size %d, window-nack-threshold %d); last nacked record: %v",
		e.Nacks, e.Size, e.Size, e.Threshold, e.Err)
}

// Unwrap returns the last nacked record's error.
func (e *DLQWindowError) Unwrap() error { return e.Err }

// DeadLetterWindowOverflow tells the supervisor that the dead-letter
// queue's window, not a single record, ended the run.
func (e *DLQWindowError) DeadLetterWindowOverflow() {}

// nackWindow is the sliding window of Conduit's DLQ settings: it remembers
// whether each of the last size records was nacked and overflows when more
// than threshold of them were. A size of 0 never overflows.
type nackWindow struct {
	size, threshold int
	ring            []bool
	next, nacks     int
}

func newNackWindow(size, threshold int) *nackWindow {
	return &nackWindow{size: size, threshold: threshold, ring: make([]bool, size)}
}

// walk adds records[0:limit] in read order, nacks being the nacked ones
// (sorted by index; a record a destination's processors split may have
// several, each counted as a record). At the first overflow it stops and
// returns the index of that record and its nack; otherwise it returns
// limit and nil.
func (w *nackWindow) walk(limit int, nacks []nack) (int, *nack) {
	next := 0
	for i := range limit {
		nacked := false
		for next < len(nacks) && nacks[next].index == i {
			n := &nacks[next]
			next++
			nacked = true
			if w.add(true) {
				return i, n
			}
		}
		if !nacked && w.add(false) {
			return i, nil
		}
	}
	return limit, nil
}

// addClean records n records without a nack: the common case, done in bulk.
func (w *nackWindow) addClean(n int) {
	if w.size == 0 || w.nacks == 0 {
		// Nothing in the window to slide out.
		w.next = (w.next + n) % max(w.size, 1)
		return
	}
	if n >= w.size {
		clear(w.ring)
		w.nacks, w.next = 0, 0
		return
	}
	for range n {
		w.add(false)
	}
}

// add records one record and reports whether the window overflowed.
func (w *nackWindow) add(nacked bool) bool {
	if w.size == 0 {
		return false
	}
	if w.ring[w.next] {
		w.nacks--
	}
	w.ring[w.next] = nacked
	if nacked {
		w.nacks++
	}
	w.next = (w.next + 1) % w.size
	return w.nacks > w.threshold
}
