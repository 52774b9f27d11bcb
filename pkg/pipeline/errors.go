package pipeline

import (
	"fmt"

	cerrors "github.com/conduitry/conduit/errors"
)

// Kind says what part of a pipeline a stage runs.
type Kind int

// Stage kinds.
const (
	KindSource Kind = iota + 1
	KindDestination
	KindProcessor
	KindDLQ
)

// DLQID is the component id of the dead-letter queue in errors.
const DLQID = "dead-letter-queue"

func (k Kind) String() string {
	if c := k.Component(); c != "" {
		return string(c)
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Component is the kind as errors, events and the API name it.
func (k Kind) Component() cerrors.ComponentKind {
	switch k {
	case KindSource:
		return cerrors.ComponentSource
	case KindDestination:
		return cerrors.ComponentDestination
	case KindProcessor:
		return cerrors.ComponentProcessor
	case KindDLQ:
		return cerrors.ComponentDeadLetterQueue
	default:
		return ""
	}
}

// Classify classifies an error a component of this kind returned
// (cerrors.ClassifyComponent).
func (k Kind) Classify(err error) cerrors.Classification {
	return cerrors.ClassifyComponent(k.Component(), err)
}

// StageError is how a run ends when a connector or processor fails: it names
// the component so the supervisor and the user see where the error came
// from. Err is the component's error unchanged, so classification by
// errors.As still finds whatever the component attached to it.
type StageError struct {
	Kind Kind
	// ID is the connector or processor id from the pipeline file.
	ID string
	// Op is what the engine was doing: open, read, write, ack, teardown...
	Op  string
	Err error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("%s %q: %s: %v", e.Kind, e.ID, e.Op, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

// Component returns the kind ("source", "destination", "processor") and id
// of the component that failed; the supervisor records both.
func (e *StageError) Component() (kind cerrors.ComponentKind, id string) {
	return e.Kind.Component(), e.ID
}
