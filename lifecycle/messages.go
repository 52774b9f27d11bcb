package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
)

// message is the closed set of requests the supervisor goroutine handles.
type message interface{ isMessage() }

type startMsg struct {
	actor auditlog.Actor
	reply chan error
}

type stopMsg struct {
	force bool
	reply chan error
}

type runEndedMsg struct {
	id  int
	err error
}

type firstAckMsg struct{ id int }

// restartedMsg is the first thing a restarted run sends: the scheduler
// launched it at at.
type restartedMsg struct {
	id int
	at time.Time
	// handed is closed once the supervisor stepped the message and handed
	// the state it leads to over to be persisted: the run is built only
	// then, after its crash-loop mark (nil: nobody waits).
	handed chan struct{}
}

type stateMsg struct{ reply chan State }

type syncMsg struct{ reply chan struct{} }

type killMsg struct{}

type retireMsg struct{ why Retirement }

type releaseMsg struct{ after time.Duration }

type applyRuleMsg struct {
	rule  string
	actor auditlog.Actor
	reply chan ApplyOutcome
}

func (startMsg) isMessage() {}

func (stopMsg) isMessage() {}

func (runEndedMsg) isMessage() {}

func (firstAckMsg) isMessage() {}

func (restartedMsg) isMessage() {}

func (stateMsg) isMessage() {}

func (syncMsg) isMessage() {}

func (killMsg) isMessage() {}

func (retireMsg) isMessage() {}

func (releaseMsg) isMessage() {}

func (applyRuleMsg) isMessage() {}

// sync returns once every message sent before it was handled (tests).
func (s *Supervisor) sync(ctx context.Context) error {
	reply := make(chan struct{}, 1)
	if err := s.send(ctx, syncMsg{reply: reply}); err != nil {
		return err
	}
	_, err := answer(ctx, s, reply)
	return err
}

func (s *Supervisor) send(ctx context.Context, m message) error {
	select {
	case s.inbox <- m:
		return nil
	case <-s.done:
		return ErrSupervisorDone
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Supervisor) await(ctx context.Context, reply chan error) error {
	err, werr := answer(ctx, s, reply)
	if werr != nil {
		return werr
	}
	return err
}

// answer waits for the reply to a message sent to the supervisor: the
// reply, the end of ctx, or the end of the supervisor (ErrSupervisorDone),
// which leaves the messages it had not handled unanswered - a pipeline
// retired while a caller asked for its state must not keep the caller
// waiting.
func answer[T any](ctx context.Context, s *Supervisor, reply <-chan T) (T, error) {
	var zero T
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.done:
		select {
		case v := <-reply: // answered as it ended
			return v, nil
		default:
			return zero, ErrSupervisorDone
		}
	}
}

// handle answers a query, and steps every other message (step.go).
func (s *Supervisor) handle(msg message) {
	switch m := msg.(type) {
	case stateMsg:
		m.reply <- s.state.Clone()
	case syncMsg:
		close(m.reply)
	case restartedMsg:
		s.decide(m)
		s.saveUnsaved()
		if m.handed != nil {
			close(m.handed)
		}
	case input:
		s.decide(m)
	default:
		panic(fmt.Sprintf("lifecycle: unknown message %T", msg))
	}
}
