package conduit

import (
	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/api"
	"go.uber.org/zap"
)

// notifications is the API's view of the notifier; nil (not a nil
// *Notifier in an interface) when there is none, so the API leaves the
// service out.
func (r *Runtime) notifications() api.Notifications {
	if r.notifier == nil {
		return nil
	}
	return r.notifier
}

// recordNotification writes a notified or notification-failed event with
// the status the pipeline is in (pkg/supervision), or as it is before the
// pipelines are.
func (r *Runtime) recordNotification(e auditlog.Event) {
	if r.pipes != nil {
		r.pipes.RecordNotification(e)
		return
	}
	if err := r.audit.Record(e); err != nil {
		r.log.Error("could not write to the audit log", zap.String("pipeline_id", e.PipelineID), zap.Error(err))
	}
}
