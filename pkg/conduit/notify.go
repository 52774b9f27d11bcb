package conduit

import (
	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/api"
)

// recordNotification writes a notified or notification-failed event with
// the status the pipeline is in (a deleted pipeline's: none).
func (r *Runtime) recordNotification(e auditlog.Event) {
	if m := r.get(e.PipelineID); m != nil {
		m.recordEvent(r, &e, "")
		return
	}
	if err := r.audit.Record(e); err != nil {
		r.auditFailed(&e, err)
	}
}

// notifications is the API's view of the notifier; nil (not a nil
// *Notifier in an interface) when there is none, so the API leaves the
// service out.
func (r *Runtime) notifications() api.Notifications {
	if r.notifier == nil {
		return nil
	}
	return r.notifier
}
