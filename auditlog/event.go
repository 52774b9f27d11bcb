package auditlog

import (
	"slices"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
)

// Kind names what happened to a pipeline.
type Kind string

// Event kinds: the one list of them. The supervisor (lifecycle) emits the
// kinds of SupervisorKinds; the runtime records the others.
const (
	KindCreated      Kind = "created"       // the pipeline was created (config or API)
	KindProvisioned  Kind = "provisioned"   // its configuration was validated and built
	KindStarting     Kind = "starting"      // a start was requested (user, config or process restart)
	KindRunning      Kind = "running"       // the pipeline is running
	KindResumed      Kind = "resumed"       // after a process restart, the persisted state was taken up again
	KindFault        Kind = "fault"         // a run ended with an error; carries its classification
	KindRecovering   Kind = "recovering"    // a restart is scheduled: Attempt, Delay, NextAttemptAt
	KindRestarted    Kind = "restarted"     // the backoff elapsed and a new run started
	KindRecovered    Kind = "recovered"     // back to running; Reason is record or window
	KindDegraded     Kind = "degraded"      // Reason: fatal error, retries exhausted, max duration, force stop
	KindStopping     Kind = "stopping"      // a graceful stop was requested
	KindStopped      Kind = "stopped"       // the pipeline is stopped
	KindDeleted      Kind = "deleted"       // the pipeline was deleted
	KindDedupSkipped Kind = "dedup-skipped" // Count records already accepted by a destination were not written again
	// KindDedupUnverified: a destination that reads back what it wrote
	// could not (its output was replaced or cut): records its last run
	// wrote without seeing them acknowledged may be written again.
	KindDedupUnverified Kind = "dedup-unverified"
	KindDeadLettered    Kind = "dead-lettered" // Count records a dead-letter rule or quarantine (ErrorRule) sent to the dead-letter queue
	// KindNotified: a notification about the pipeline was delivered to a
	// target (pkg/notify); KindNotificationFailed: an attempt failed
	// (ErrorMessage, Attempt, and Delay until the next).
	KindNotified           Kind = "notified"
	KindNotificationFailed Kind = "notification-failed"
)

// Kinds returns every kind above, in the order a pipeline's life meets them.
func Kinds() []Kind {
	return []Kind{KindCreated, KindProvisioned, KindStarting, KindRunning, KindResumed, KindFault,
		KindRecovering, KindRestarted, KindRecovered, KindDegraded, KindStopping, KindStopped,
		KindDeleted, KindDedupSkipped, KindDedupUnverified, KindDeadLettered, KindNotified, KindNotificationFailed}
}

// SupervisorKinds returns the kinds the supervisor emits (metrics count
// them from the start, at zero).
func SupervisorKinds() []Kind {
	return []Kind{KindStarting, KindRunning, KindResumed, KindFault, KindRecovering, KindRestarted,
		KindRecovered, KindDegraded, KindStopping, KindStopped}
}

// Known reports whether k is one of the kinds above. Append stores any
// non-empty kind (a newer supervisor may add some); callers validating a
// user's filter use Known.
func (k Kind) Known() bool {
	return slices.Contains(Kinds(), k)
}

// Event is one thing that happened to a pipeline. Fields that do not apply
// to a kind are left zero.
type Event struct {
	// Sequence is assigned by Append: 1 for a pipeline's first event, then
	// one more for each; it never repeats, also after a restart.
	Sequence uint64
	// Time is when it happened; Append sets it when zero. Stored in UTC.
	Time       time.Time
	PipelineID string
	Kind       Kind
	// StatusBefore and StatusAfter are the pipeline's status around the
	// event; equal when it changed nothing.
	StatusBefore, StatusAfter Status
	Message                   string
	// Actor is who caused it.
	Actor Actor

	// The error of a fault, recovering or degraded event: its code (0 when
	// it has none), class, how the class was decided, its text, and the
	// connector or processor it came from.
	ErrorCode     int
	ErrorClass    cerrors.Class
	ErrorSource   cerrors.Source
	ErrorMessage  string
	Component     string
	ComponentKind cerrors.ComponentKind
	// ErrorRule is the recovery rule that decided the error's class
	// (ErrorSource rule).
	ErrorRule string

	// Attempt, Delay and NextAttemptAt describe a scheduled restart
	// (recovering) or the restart that happened (restarted); Attempt and
	// Delay of a notification-failed event, the failed attempt and the
	// wait before the next.
	Attempt       int
	Delay         time.Duration
	NextAttemptAt time.Time
	// Reason is why a pipeline recovered or degraded.
	Reason string
	// Count is the number of records a dedup-skipped or dead-lettered
	// event covers.
	Count int64
	// Action is what the policy decided about a fault (restart or
	// degrade); Strategy is the strategy that gave Delay.
	Action, Strategy string
}

// HasError reports whether e carries an error (a fault, recovering or
// degraded event; dead-lettered, notification-failed).
func (e *Event) HasError() bool {
	return e.ErrorClass != "" || e.ErrorMessage != ""
}
