package lifecycle

import "github.com/conduitry/conduit/auditlog"

// Status is the state a pipeline is in. It is the audit log's status, so
// that the events the supervisor emits carry it as it is; the zero value is
// invalid, so a status nobody set is caught instead of passing for
// "running".
type Status = auditlog.Status

// Statuses.
const (
	StatusRunning    = auditlog.StatusRunning
	StatusRecovering = auditlog.StatusRecovering
	StatusDegraded   = auditlog.StatusDegraded
	StatusStopped    = auditlog.StatusStopped
)

// ParseStatus is the inverse of Status.String.
func ParseStatus(name string) (Status, error) { return auditlog.ParseStatus(name) }

// DegradeReason says why a pipeline is degraded.
type DegradeReason string

// Reasons for degraded.
const (
	ReasonFatal            DegradeReason = "fatal error"
	ReasonRetriesExhausted DegradeReason = "retries exhausted"
	ReasonMaxDuration      DegradeReason = "max duration"
	ReasonForceStop        DegradeReason = "force stop"
	// ReasonRule: a recovery rule with action degrade matched the error.
	ReasonRule DegradeReason = "rule"
	// ReasonFlapping: more than max-flaps episodes in a row started
	// within flap-window of a recovery.
	ReasonFlapping DegradeReason = "flapping"
	// ReasonDeadLetterWindow: more records were nacked than the
	// dead-letter queue's window allows (window-size,
	// window-nack-threshold), and the last one's error is fatal.
	ReasonDeadLetterWindow DegradeReason = "dead-letter queue window overflowed"
	// ReasonCrashLoop: the process died during the pipeline's runs
	// pipelines.crash-loop-after times in a row (the crash-loop guard).
	ReasonCrashLoop DegradeReason = "crash loop"
)

// RecoveredReason says why a recovering pipeline is running again.
type RecoveredReason string

// Reasons for recovered.
const (
	RecoveredByRecord RecoveredReason = "record"
	RecoveredByWindow RecoveredReason = "window"
	// RecoveredByProbation: the restarted run stayed up for the probation
	// without a record end to end (an idle source); it is running again,
	// and its fail count resets when the healthy window passes.
	RecoveredByProbation RecoveredReason = "probation"
)

// StopReason says why a pipeline is stopped when a user did not stop it.
type StopReason string

// Reasons for stopped.
const (
	// StopReasonShutdown: the process shut down gracefully; the pipeline
	// is started again (or keeps recovering) when the process starts.
	StopReasonShutdown StopReason = "shutdown"
	// StopReasonFinished: the source has no more records.
	StopReasonFinished StopReason = "finished"
	// StopReasonUpdated: the pipeline's configuration changed while the
	// process ran; the new configuration's supervisor takes over.
	StopReasonUpdated StopReason = "updated"
	// StopReasonDeleted: the pipeline was deleted while the process ran.
	StopReasonDeleted StopReason = "deleted"
	// StopReasonHandover: the instance that ran the pipeline handed it
	// over to another instance of the cluster (rebalancing, its
	// shutdown, or its lease could not be renewed); the new instance
	// takes up the status it had.
	StopReasonHandover StopReason = "handover"
)

// resumable says the pipeline was stopped by a retirement, not for itself:
// found persisted, the pipeline takes up the status it had. (A process
// that ends between retiring a pipeline for an update or a deletion and
// recording what follows leaves such a state behind.)
func (r StopReason) resumable() bool {
	return r == StopReasonShutdown || r == StopReasonUpdated || r == StopReasonDeleted || r == StopReasonHandover
}
