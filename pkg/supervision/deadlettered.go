package supervision

import (
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/record"
)

// deadLetterEventInterval is how often, at most, a pipeline writes a
// dead-lettered audit event for one rule. A storm of records taken one by
// one writes one event a second per rule, with the count, instead of one
// per record; the metric counts every record at once, and the records
// taken since the last event are written when the run ends.
const deadLetterEventInterval = time.Second

// maxPositionText bounds a position quoted in a dead-lettered event.
const maxPositionText = 64

// deadLetterTally is what a pipeline's dead-letter rules and quarantine
// took: the records not yet in an audit event, per rule, and the totals
// that describe shows.
type deadLetterTally struct {
	mu      sync.Mutex
	pending map[string]*pendingDeadLetters
	// total counts the records taken since the process started; last is
	// when the last of them was, and lastRule by which rule.
	total    int64
	last     time.Time
	lastRule string
}

// pendingDeadLetters are one rule's records not yet in an event.
type pendingDeadLetters struct {
	batch   pipeline.DeadLettered // Count 0: none
	eventAt time.Time             // when the rule's last event was written
}

// DeadLettered returns how many records the pipeline's dead-letter rules
// and quarantine took since the process started, and when and by which
// rule the last one was.
func (t *deadLetterTally) DeadLettered() (total int64, last time.Time, rule string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total, t.last, t.lastRule
}

// deadLettered takes note of records a run's dead-letter rule or
// quarantine sent to the dead-letter queue: counted at once, audited at
// most once per deadLetterEventInterval and rule. Called from the run's
// acknowledging stage: it only writes the event on its way, as the
// dedup-skipped event is written.
func (ps *Pipelines) deadLettered(m *managedPipeline, d pipeline.DeadLettered) {
	ps.metrics.DeadLettered(m.cfg.ID, d.Rule, d.Count)
	now := ps.clock.Now()
	t := &m.deadLetters
	t.mu.Lock()
	t.total += int64(d.Count)
	t.last, t.lastRule = now, d.Rule
	if t.pending == nil {
		t.pending = map[string]*pendingDeadLetters{}
	}
	p := t.pending[d.Rule]
	if p == nil {
		p = &pendingDeadLetters{}
		t.pending[d.Rule] = p
	}
	if p.batch.Count == 0 {
		p.batch = d
	} else {
		first := p.batch.First
		p.batch, p.batch.First, p.batch.Count = d, first, p.batch.Count+d.Count
	}
	var due *pipeline.DeadLettered
	if now.Sub(p.eventAt) >= deadLetterEventInterval {
		b := p.batch
		due, p.batch, p.eventAt = &b, pipeline.DeadLettered{}, now
	}
	t.mu.Unlock()
	if due != nil {
		ps.writeDeadLettered(m, *due)
	}
}

// flushDeadLettered writes the events of the records taken since each
// rule's last event: the run ended.
func (ps *Pipelines) flushDeadLettered(m *managedPipeline) {
	t := &m.deadLetters
	t.mu.Lock()
	var due []pipeline.DeadLettered
	for _, p := range t.pending {
		if p.batch.Count > 0 {
			due = append(due, p.batch)
			p.batch = pipeline.DeadLettered{}
		}
	}
	t.mu.Unlock()
	for _, d := range due {
		ps.writeDeadLettered(m, d)
	}
}

// writeDeadLettered writes one dead-lettered event and its log line. It
// changes no status; it carries the one the pipeline is in.
func (ps *Pipelines) writeDeadLettered(m *managedPipeline, d pipeline.DeadLettered) {
	c := d.Kind.Classify(d.Err)
	by := "rule " + strconv.Quote(d.Rule)
	if d.Rule == pipeline.QuarantineRule {
		by = "quarantine (the record failed the same way on quarantine-after runs in a row)"
	}
	records, positions := "records", fmt.Sprintf("positions %s to %s", positionText(d.First), positionText(d.Last))
	if d.Count == 1 {
		records, positions = "record", "position "+positionText(d.Last)
	}
	message := fmt.Sprintf("%d %s sent to the dead-letter queue instead of the destinations by %s (%s); error of the last: %s",
		d.Count, records, by, positions, c.Message)
	ps.log.Warn("records sent to the dead-letter queue", zap.String("pipeline_id", m.cfg.ID), zap.String("rule", d.Rule),
		zap.Int("count", d.Count), zap.String("first_position", positionText(d.First)), zap.String("last_position", positionText(d.Last)),
		zap.String("component", d.ComponentID), zap.Int("code", c.Code), zap.String("error", c.Message))
	e := auditlog.Event{PipelineID: m.cfg.ID, Kind: auditlog.KindDeadLettered, Actor: lifecycle.ActorSystem,
		Component: d.ComponentID, ComponentKind: d.Kind.Component(), Count: int64(d.Count), ErrorRule: d.Rule,
		ErrorCode: c.Code, ErrorClass: c.Class, ErrorSource: cerrors.SourceRule, ErrorMessage: c.Message,
		Message: message}
	m.recordEvent(ps, &e, "")
	ps.metrics.CountEvent(string(auditlog.KindDeadLettered))
}

// positionText quotes a record position for people: as text when it is
// printable, cut to maxPositionText.
func positionText(p []byte) string {
	s := string(p)
	if record.IsDerived(p) {
		// A record split off another: "42#1", its original's and its index.
		s = record.Readable(p)
	}
	if !utf8.ValidString(s) {
		s = fmt.Sprintf("%x", p)
	}
	if len(s) > maxPositionText {
		s = s[:maxPositionText] + "..."
	}
	return strconv.Quote(s)
}
