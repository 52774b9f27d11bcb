package lifecycle

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/conduitry/conduit/auditlog"
)

// Actor is who caused an event: the audit log's actor.
type Actor = auditlog.Actor

// Actors.
const (
	ActorUser   = auditlog.ActorUser
	ActorSystem = auditlog.ActorSystem
	ActorConfig = auditlog.ActorConfig
)

// The supervisor emits its events as the audit log stores them
// (auditlog.Event), in the order it decided them: the journal records them
// as they are, and observers see the same values. Time is when it
// happened; StatusBefore and StatusAfter are equal when the event changed
// nothing (a fault in recovering); the error fields are set for fault,
// recovering and degraded events (see withError).

// withError makes e carry info and returns it: the error of a fault, recovering or
// degraded event; e unchanged when info is nil. The event keeps the facts
// of the error the audit log stores: its position, dependency and time
// stay in the State.
func withError(e *auditlog.Event, info *ErrorInfo) *auditlog.Event {
	if info != nil {
		e.ErrorCode, e.ErrorClass, e.ErrorSource, e.ErrorMessage = info.Code, info.Class, info.Source, info.Message
		e.Component, e.ComponentKind, e.ErrorRule = info.Component, info.ComponentKind, info.Rule
	}
	return e
}

// Observer receives every event, after the StateSaver was handed the event
// and the state it leads to (see EventRecorder); neither is durable yet
// when it is called. It is called from the supervisor goroutine and must
// not block. It is called before the event is logged.
type Observer interface {
	PipelineEvent(e auditlog.Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(auditlog.Event)

// PipelineEvent calls f.
func (f ObserverFunc) PipelineEvent(e auditlog.Event) { f(e) }

// logEvent writes one line per transition, at a level that matches its
// gravity: info for running, warn for recovering, error for degraded. A
// fault and a start request are not logged on their own: the recovering,
// degraded or running event that follows carries the same facts.
func logEvent(log *zap.Logger, e *auditlog.Event) {
	level := zapcore.InfoLevel
	switch e.Kind {
	case auditlog.KindFault, auditlog.KindStarting:
		return
	case auditlog.KindRecovering:
		level = zapcore.WarnLevel
	case auditlog.KindDegraded:
		level = zapcore.ErrorLevel
	}
	ce := log.Check(level, e.Message)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 12)
	fields = append(fields, zap.String("event", string(e.Kind)), zap.Stringer("status", e.StatusAfter))
	if e.StatusBefore != e.StatusAfter {
		fields = append(fields, zap.Stringer("from", e.StatusBefore))
	}
	if e.Actor != "" {
		fields = append(fields, zap.String("actor", string(e.Actor)))
	}
	if e.Attempt > 0 {
		fields = append(fields, zap.Int("attempt", e.Attempt))
	}
	if e.Delay > 0 {
		fields = append(fields, zap.Duration("delay", e.Delay))
	}
	if !e.NextAttemptAt.IsZero() {
		fields = append(fields, zap.Time("next_attempt_at", e.NextAttemptAt))
	}
	if e.Reason != "" {
		fields = append(fields, zap.String("reason", e.Reason))
	}
	if e.Strategy != "" {
		fields = append(fields, zap.String("strategy", e.Strategy))
	}
	if e.HasError() {
		if e.ErrorCode != 0 {
			fields = append(fields, zap.Int("code", e.ErrorCode))
		}
		fields = append(fields, zap.String("class", string(e.ErrorClass)), zap.String("classified_by", string(e.ErrorSource)),
			zap.String("error", e.ErrorMessage))
		if e.ErrorRule != "" {
			fields = append(fields, zap.String("rule", e.ErrorRule))
		}
		if e.Component != "" {
			fields = append(fields, zap.String("component", e.Component), zap.String("component_kind", string(e.ComponentKind)))
		}
	}
	ce.Write(fields...)
}
