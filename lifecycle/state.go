package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

// stateFormatVersion is the version of the persisted State. WARNING: the
// format is pinned by testdata/state.golden.json; changing it needs a new
// version and a reader for the old one.
const stateFormatVersion = 1

// maxEpisodeAttempts bounds the attempts an episode keeps: with unlimited
// retries an episode could otherwise grow for ever. The count of dropped
// (oldest) attempts is kept.
const maxEpisodeAttempts = 500

// ErrorInfo is an error as the user sees it: the cause, its classification
// and where it came from.
type ErrorInfo struct {
	At time.Time `json:"at"`
	// Code is the error's code, 0 when it has none.
	Code int `json:"code,omitempty"`
	// Class is "transient" or "fatal".
	Class string `json:"class"`
	// Source says how the class was decided: typed, json, default, rule.
	Source  string `json:"source"`
	Message string `json:"message"`
	// Component is the connector or processor id, ComponentKind "source",
	// "destination" or "processor"; empty when the error is the pipeline's.
	Component     string `json:"component,omitempty"`
	ComponentKind string `json:"componentKind,omitempty"`
}

// Attempt is one failure of a recovery episode and what was decided.
type Attempt struct {
	// Number is the fail count after this failure (1 for the first).
	Number   int       `json:"number"`
	FailedAt time.Time `json:"failedAt"`
	Error    ErrorInfo `json:"error"`
	// Delay and NextAttemptAt are set when a restart was scheduled.
	Delay         time.Duration `json:"delay,omitempty"`
	NextAttemptAt time.Time     `json:"nextAttemptAt,omitzero"`
}

// Episode is one stretch of recovery: from the first transient error until
// the pipeline runs again (or is degraded or stopped).
type Episode struct {
	StartedAt time.Time `json:"startedAt"`
	// EndedAt is zero while the episode lasts.
	EndedAt time.Time `json:"endedAt,omitzero"`
	// Outcome is how it ended: "recovered (record)", "degraded (...)", ...
	Outcome  string    `json:"outcome,omitempty"`
	Attempts []Attempt `json:"attempts"`
	// DroppedAttempts counts the oldest attempts no longer kept.
	DroppedAttempts int `json:"droppedAttempts,omitempty"`
}

// Duration is the time the episode took, or has taken until now.
func (e *Episode) Duration(now time.Time) time.Duration {
	if !e.EndedAt.IsZero() {
		return e.EndedAt.Sub(e.StartedAt)
	}
	return now.Sub(e.StartedAt)
}

func (e *Episode) add(a Attempt) {
	if len(e.Attempts) >= maxEpisodeAttempts {
		e.Attempts = append(e.Attempts[:0], e.Attempts[1:]...)
		e.DroppedAttempts++
	}
	e.Attempts = append(e.Attempts, a)
}

// State is everything the supervisor knows about a pipeline and persists
// at every transition, so that it is true after a crash.
type State struct {
	Version int    `json:"version"`
	Status  Status `json:"status"`
	// FailCount is the number of transient failures in the current episode.
	FailCount int `json:"failCount"`
	// NextAttemptAt is when a recovering pipeline restarts; zero otherwise.
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	// Probation is true while a restarted pipeline has not yet proved
	// itself (no record end to end, healthy window not over).
	Probation bool `json:"probation,omitempty"`
	// LastError is the error that ended the last failed run.
	LastError *ErrorInfo `json:"lastError,omitempty"`
	// DegradedReason is set while degraded.
	DegradedReason DegradeReason `json:"degradedReason,omitempty"`
	// Episode is the current recovery episode, or the last one.
	Episode *Episode `json:"episode,omitempty"`
	// ConfigHash identifies the pipeline configuration the state belongs
	// to; a changed configuration is provisioned afresh.
	ConfigHash string    `json:"configHash,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// Clone returns a deep copy, for handing state to other goroutines.
func (s State) Clone() State {
	if s.LastError != nil {
		e := *s.LastError
		s.LastError = &e
	}
	if s.Episode != nil {
		ep := *s.Episode
		ep.Attempts = append([]Attempt(nil), ep.Attempts...)
		s.Episode = &ep
	}
	return s
}

func encodeState(s State) ([]byte, error) {
	s.Version = stateFormatVersion
	return json.Marshal(s)
}

func decodeState(raw []byte) (State, error) {
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, fmt.Errorf("persisted pipeline state is corrupt: %w", err)
	}
	if s.Version != stateFormatVersion {
		return State{}, fmt.Errorf("persisted pipeline state has format version %d, this build reads version %d", s.Version, stateFormatVersion)
	}
	return s, nil
}

// StateStore persists State per pipeline. Saves from many supervisors at
// once share synced writes (group commit), so a fault storm across
// thousands of pipelines costs a handful of disk syncs, not thousands.
type StateStore struct {
	db     store.Store
	writer *store.GroupWriter
}

// NewStateStore returns a StateStore writing through w (a GroupWriter on db).
func NewStateStore(db store.Store, w *store.GroupWriter) *StateStore {
	return &StateStore{db: db, writer: w}
}

func stateKey(pipelineID string) []byte {
	return []byte(store.PrefixPipelineState + pipelineID)
}

// Load returns the persisted state of a pipeline; ok is false when there is
// none (a pipeline never run).
func (s *StateStore) Load(ctx context.Context, pipelineID string) (st State, ok bool, err error) {
	raw, err := s.db.Get(ctx, stateKey(pipelineID))
	if errors.Is(err, store.ErrNotFound) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("load state of pipeline %s: %w", pipelineID, err)
	}
	st, err = decodeState(raw)
	if err != nil {
		return State{}, false, fmt.Errorf("load state of pipeline %s: %w", pipelineID, err)
	}
	return st, true, nil
}

// Save durably stores the state of a pipeline.
func (s *StateStore) Save(ctx context.Context, pipelineID string, st State) error {
	raw, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("save state of pipeline %s: %w", pipelineID, err)
	}
	if err := s.writer.Set(ctx, stateKey(pipelineID), raw); err != nil {
		return fmt.Errorf("save state of pipeline %s: %w", pipelineID, err)
	}
	return nil
}

// IDs returns the ids of every pipeline with persisted state.
func (s *StateStore) IDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.db.Scan(ctx, []byte(store.PrefixPipelineState), func(key, _ []byte) error {
		ids = append(ids, string(key[len(store.PrefixPipelineState):]))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pipeline states: %w", err)
	}
	return ids, nil
}

// Delete forgets the persisted state of a pipeline.
func (s *StateStore) Delete(ctx context.Context, pipelineID string) error {
	if err := s.writer.Delete(ctx, stateKey(pipelineID)); err != nil {
		return fmt.Errorf("delete state of pipeline %s: %w", pipelineID, err)
	}
	return nil
}
