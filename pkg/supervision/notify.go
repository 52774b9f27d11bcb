package supervision

import (
	"github.com/conduitry/conduit/auditlog"
)

// RecordNotification writes a notified or notification-failed event with
// the status the pipeline is in (a deleted pipeline's: none).
func (ps *Pipelines) RecordNotification(e auditlog.Event) {
	if m := ps.get(e.PipelineID); m != nil {
		m.recordEvent(ps, &e, "")
		return
	}
	if err := ps.audit.Record(e); err != nil {
		ps.auditFailed(&e, err)
	}
}
