package auditlog

import "fmt"

// Status is the state a pipeline is in, as the supervisor (lifecycle, where
// it is lifecycle.Status) keeps it and events, the persisted state and the
// API name it. It is defined here, beside the kinds, so that an Event
// carries it typed. The zero value is invalid, so a status nobody set is
// caught instead of passing for "running"; an Event leaves it zero when it
// does not concern a status.
type Status string

// Statuses.
const (
	StatusRunning    Status = "running"
	StatusRecovering Status = "recovering"
	StatusDegraded   Status = "degraded"
	StatusStopped    Status = "stopped"
)

// Statuses returns every status above.
func Statuses() []Status {
	return []Status{StatusRunning, StatusRecovering, StatusDegraded, StatusStopped}
}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusRunning, StatusRecovering, StatusDegraded, StatusStopped:
		return true
	}
	return false
}

// String returns the status's name; an invalid status prints as
// Status(...) so that it stands out.
func (s Status) String() string {
	if s.Valid() {
		return string(s)
	}
	return fmt.Sprintf("Status(%q)", string(s))
}

// ParseStatus is the inverse of String.
func ParseStatus(name string) (Status, error) {
	if s := Status(name); s.Valid() {
		return s, nil
	}
	return "", fmt.Errorf("unknown pipeline status %q", name)
}

// MarshalText writes the status by name; it refuses an invalid status, so
// that persisted state never holds one.
func (s Status) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("invalid status %q", string(s))
	}
	return []byte(s), nil
}

// UnmarshalText is the inverse of MarshalText.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Actor is who caused an event: one of the actors below, or the name a
// caller gives its changes (the API's is "api").
type Actor string

// Actors.
const (
	ActorUser   Actor = "user"
	ActorSystem Actor = "system"
	ActorConfig Actor = "config"
)
