package notify

import (
	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
)

// Kind is what a notification is about; the names are those of
// config.NotificationEvents.
type Kind string

// Notification kinds.
const (
	KindDegraded       Kind = "degraded"
	KindRecoveringLong Kind = "recovering-long"
	KindFlapping       Kind = "flapping"
	KindBreakerOpened  Kind = "breaker-opened"
	KindBreakerClosed  Kind = "breaker-closed"
	KindDeadLettered   Kind = "dead-lettered"
	KindRecovered      Kind = "recovered"
)

// Severity orders notifications for a target's min-severity.
type Severity int

// Severities, lowest first.
const (
	SeverityInfo Severity = iota + 1
	SeverityWarning
	SeverityCritical
)

func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return config.SeverityInfo
	case SeverityWarning:
		return config.SeverityWarning
	case SeverityCritical:
		return config.SeverityCritical
	}
	return "unknown"
}

func parseSeverity(s string) Severity {
	switch s {
	case config.SeverityWarning:
		return SeverityWarning
	case config.SeverityCritical:
		return SeverityCritical
	}
	return SeverityInfo
}

// classify says which notification an audit event is, if any.
func classify(e auditlog.Event) (Kind, Severity, bool) {
	switch e.Kind {
	case auditlog.KindDegraded:
		if e.Reason == string(lifecycle.ReasonFlapping) {
			return KindFlapping, SeverityCritical, true
		}
		return KindDegraded, SeverityCritical, true
	case auditlog.KindRecovering:
		// The supervisor's recovering event of an episode that started
		// within flap-window of the last recovery.
		if e.Reason == string(lifecycle.ReasonFlapping) {
			return KindFlapping, SeverityWarning, true
		}
	case auditlog.KindDeadLettered:
		return KindDeadLettered, SeverityWarning, true
	case auditlog.KindRecovered:
		return KindRecovered, SeverityInfo, true
	case auditlog.KindStarting:
		// A degraded pipeline waits for a human; the one who starts it
		// again has acted on the incident, which is over (if it fails
		// again, that is a new one).
		if e.StatusBefore == "degraded" {
			return KindRecovered, SeverityInfo, true
		}
	}
	return "", 0, false
}

// resolves says whether the kind closes an incident (PagerDuty's resolve)
// rather than opening one.
func (k Kind) resolves() bool { return k == KindRecovered || k == KindBreakerClosed }

// hint says what to do about a degraded pipeline, by why it degraded.
func hint(kind Kind, e *auditlog.Event) string {
	if e == nil {
		switch kind {
		case KindBreakerOpened:
			return "the pipelines failing on this dependency wait while one of them retries it: check the dependency; they restart by themselves once it answers"
		}
		return ""
	}
	start := "then start it again: conduit pipelines start " + e.PipelineID
	switch kind {
	case KindDegraded:
		switch lifecycle.DegradeReason(e.Reason) {
		case lifecycle.ReasonFatal, lifecycle.ReasonRule:
			return "the error is one a restart does not fix: correct its cause (configuration, credentials, schema), " + start
		case lifecycle.ReasonRetriesExhausted, lifecycle.ReasonMaxDuration:
			return "the error did not go away on its own: check the system it names, " + start
		case lifecycle.ReasonDeadLetterWindow:
			return "too many records were rejected: read the dead-letter queue and the error, fix the cause, " + start
		case lifecycle.ReasonForceStop:
			return "a stop did not finish in time; " + start + " when it should run"
		case lifecycle.ReasonCrashLoop:
			return "conduit died during its runs each of the last times it started: read its last events and conduit's log from before each restart (out of memory, a crash), fix the cause, " + start
		}
		return "read its events (conduit pipelines events " + e.PipelineID + "), fix the cause, " + start
	case KindFlapping:
		return "it keeps failing soon after recovering: check the system the error names and its capacity; conduit pipelines events " + e.PipelineID + " shows each episode"
	case KindRecoveringLong:
		return "it restarts on its own; if the error names a system that is down, check it: conduit pipelines describe " + e.PipelineID
	case KindDeadLettered:
		return "the records are in the dead-letter queue, not lost: read them and the rule that sent them there"
	}
	return ""
}
