package processor

import (
	"errors"
)

// ErrUnknownPlugin is returned by the registry for a plugin it does not know.
var ErrUnknownPlugin = errors.New("unknown processor plugin")

// ConditionError says that a processor's `condition` cannot be used: the
// template does not parse, or it is a constant that is not a boolean. It is
// a separate type from SettingError because `condition` is a field of the
// processor, not one of its settings, so the caller points at a different
// place in the pipeline file.
type ConditionError struct {
	Err error
}

// Error says what is wrong with the condition.
func (e *ConditionError) Error() string { return "condition: " + e.Err.Error() }

// Unwrap returns the underlying problem.
func (e *ConditionError) Unwrap() error { return e.Err }
