package lifecycle

import (
	"time"

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

// Event is one thing that happened to a pipeline, in the order the
// supervisor decided it.
type Event struct {
	PipelineID string
	Kind       auditlog.Kind
	At         time.Time
	// From and To are the statuses before and after; equal when the event
	// changed nothing (a fault in recovering).
	From, To Status
	Message  string
	Actor    auditlog.Actor
	// Error is set for fault, recovering and degraded events.
	Error *ErrorInfo
	// Attempt, Delay and NextAttemptAt describe a scheduled restart
	// (recovering) or the restart that happened (restarted).
	Attempt       int
	Delay         time.Duration
	NextAttemptAt time.Time
	// Reason is the degraded or recovered reason.
	Reason string
	// Action is what the policy decided about a fault (restart or
	// degrade), Strategy the strategy that gave Delay.
	Action, Strategy string
}

// Observer receives every event, after the StateSaver was handed the event
// and the state it leads to (see EventRecorder); neither is durable yet
// when it is called. It is called from the supervisor goroutine and must
// not block.
type Observer interface {
	PipelineEvent(e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// PipelineEvent calls f.
func (f ObserverFunc) PipelineEvent(e Event) { f(e) }

// logEvent writes one line per transition, at a level that matches its
// gravity: info for running, warn for recovering, error for degraded. A
// fault and a start request are not logged on their own: the recovering,
// degraded or running event that follows carries the same facts.
func logEvent(log *zap.Logger, e Event) {
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
	fields = append(fields, zap.String("event", string(e.Kind)), zap.Stringer("status", e.To))
	if e.From != e.To {
		fields = append(fields, zap.Stringer("from", e.From))
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
	if err := e.Error; err != nil {
		if err.Code != 0 {
			fields = append(fields, zap.Int("code", err.Code))
		}
		fields = append(fields, zap.String("class", string(err.Class)), zap.String("classified_by", string(err.Source)),
			zap.String("error", err.Message))
		if err.Rule != "" {
			fields = append(fields, zap.String("rule", err.Rule))
		}
		if err.Component != "" {
			fields = append(fields, zap.String("component", err.Component), zap.String("component_kind", string(err.ComponentKind)))
		}
	}
	ce.Write(fields...)
}
