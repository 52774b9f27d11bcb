package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/store"
)

// stateFormatVersion is the version of the persisted State. WARNING: the
// format is pinned by testdata/state.v2.golden.json; changing it needs a new
// version and a reader for the old ones. Version 1
// (testdata/state.v1.golden.json) kept up to 500 attempts per episode, each
// with its error in full; decodeState still reads it.
const stateFormatVersion = 2

// oldestStateFormatVersion is the oldest persisted State decodeState reads.
const oldestStateFormatVersion = 1

// An episode keeps its first episodeKeepFirst attempts (how it began) and
// its latest episodeKeepLast (how it is going), and counts the ones between.
// The supervisor persists the state at every transition, so the episode's
// size is what a tight restart loop writes again and again: it must not
// grow with the loop.
const (
	episodeKeepFirst = 5
	episodeKeepLast  = 10
)

// maxAttemptMessage bounds the error message an episode keeps per attempt,
// in bytes, so that a connector with huge error messages cannot make every
// write of the state huge. State.LastError keeps more: maxErrorMessage.
const maxAttemptMessage = 256

// maxErrorMessage bounds the message of the error a run ended with (the
// state's LastError, the fault events): enough for any real cause and its
// context, while an error that carries a whole payload does not make every
// state write and audit event that large.
const maxErrorMessage = 4 << 10

// maxErrorCounts bounds the distinct class and code pairs Episode.ErrorCounts
// holds; attempts with further pairs are counted in OtherErrors.
const maxErrorCounts = 8

// ErrorInfo is an error as the user sees it: the cause, its classification
// and where it came from.
type ErrorInfo struct {
	At time.Time `json:"at"`
	// Code is the error's code, 0 when it has none.
	Code  int           `json:"code,omitempty"`
	Class cerrors.Class `json:"class"`
	// Source says how Class was decided.
	Source  cerrors.Source `json:"source"`
	Message string         `json:"message"`
	// Component is the connector or processor id, ComponentKind "source",
	// "destination" or "processor"; empty when the error is the pipeline's.
	Component     string                `json:"component,omitempty"`
	ComponentKind cerrors.ComponentKind `json:"componentKind,omitempty"`
	// Rule is the recovery rule that decided the error's class (Source
	// rule), empty when none matched.
	Rule string `json:"rule,omitempty"`
	// Record is the position of the record the error is about, when it
	// names one (see cerrors.ForRecord).
	Record []byte `json:"record,omitempty"`
	// Dependency is the external system the error is about: the error's
	// details.dependency, else the failing connector's dependency.
	Dependency string `json:"dependency,omitempty"`
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
	// Strategy is the strategy that gave Delay.
	Strategy string `json:"strategy,omitempty"`
}

// Episode is one stretch of recovery: from the first transient error until
// the pipeline runs again (or is degraded or stopped).
//
// Its size is bounded however long it lasts: it keeps the first
// episodeKeepFirst and the latest episodeKeepLast attempts, and counts every
// attempt by error class and code.
type Episode struct {
	StartedAt time.Time `json:"startedAt"`
	// EndedAt is zero while the episode lasts.
	EndedAt time.Time `json:"endedAt,omitzero"`
	// Outcome is how it ended: "recovered (record)", "degraded (...)", ...
	Outcome string `json:"outcome,omitempty"`
	// Attempts are the attempts kept, oldest first: the first ones of the
	// episode, then the latest. Where DroppedAttempts were left out, the
	// attempt numbers jump. (An episode persisted in format 1 dropped its
	// oldest attempts instead.)
	Attempts []Attempt `json:"attempts"`
	// DroppedAttempts counts the attempts no longer kept.
	DroppedAttempts int `json:"droppedAttempts,omitempty"`
	// ErrorCounts counts the attempts by the class and code of their
	// error, in the order the pairs first occurred. For an episode
	// persisted in format 1 it counts only the attempts that were kept.
	ErrorCounts []ErrorCount `json:"errorCounts,omitempty"`
	// OtherErrors counts the attempts whose class and code pair came after
	// ErrorCounts was full.
	OtherErrors int `json:"otherErrors,omitempty"`
	// RuleCounts counts the failures each recovery rule matched; a rule's
	// max-retries applies to its count.
	RuleCounts map[string]int `json:"ruleCounts,omitempty"`
}

// countRule counts a failure rule matched; nil counts nothing.
func (e *Episode) countRule(r *Rule) {
	if r == nil {
		return
	}
	if e.RuleCounts == nil {
		e.RuleCounts = map[string]int{}
	}
	e.RuleCounts[r.Name]++
}

// ErrorCount is how many attempts of an episode failed with one class and
// code of error.
type ErrorCount struct {
	Class cerrors.Class `json:"class"`
	Code  int           `json:"code,omitempty"`
	Count int           `json:"count"`
}

// Duration is the time the episode took, or has taken until now.
func (e *Episode) Duration(now time.Time) time.Duration {
	if !e.EndedAt.IsZero() {
		return e.EndedAt.Sub(e.StartedAt)
	}
	return now.Sub(e.StartedAt)
}

// TotalAttempts is the number of attempts of the episode, kept or not.
func (e *Episode) TotalAttempts() int {
	return len(e.Attempts) + e.DroppedAttempts
}

func (e *Episode) add(a Attempt) {
	a.Error.Message = truncateMessage(a.Error.Message, maxAttemptMessage)
	e.count(a.Error, 1)
	e.Attempts = append(e.Attempts, a)
	e.bound()
}

// bound drops the attempts between the first and the latest ones kept. It
// reuses the slice, so the episode's memory does not grow either.
func (e *Episode) bound() {
	extra := len(e.Attempts) - episodeKeepFirst - episodeKeepLast
	if extra <= 0 {
		return
	}
	kept := append(e.Attempts[:episodeKeepFirst], e.Attempts[episodeKeepFirst+extra:]...)
	clear(e.Attempts[len(kept):]) // let go of the dropped messages
	e.Attempts = kept
	e.DroppedAttempts += extra
}

func (e *Episode) count(info ErrorInfo, n int) {
	for i := range e.ErrorCounts {
		if c := &e.ErrorCounts[i]; c.Class == info.Class && c.Code == info.Code {
			c.Count += n
			return
		}
	}
	if len(e.ErrorCounts) >= maxErrorCounts {
		e.OtherErrors += n
		return
	}
	e.ErrorCounts = append(e.ErrorCounts, ErrorCount{Class: info.Class, Code: info.Code, Count: n})
}

// truncateMessage cuts s to at most limit bytes, at a rune boundary, and
// marks the cut.
func truncateMessage(s string, limit int) string {
	const mark = " [...]"
	if len(s) <= limit {
		return s
	}
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// episodeJSON is the persisted form of an Episode. An attempt whose error
// is the one of the attempt before it, at its own failure time, is written
// without it: in a restart loop that is nearly every attempt.
type episodeJSON struct {
	StartedAt       time.Time      `json:"startedAt"`
	EndedAt         time.Time      `json:"endedAt,omitzero"`
	Outcome         string         `json:"outcome,omitempty"`
	Attempts        []attemptJSON  `json:"attempts"`
	DroppedAttempts int            `json:"droppedAttempts,omitempty"`
	ErrorCounts     []ErrorCount   `json:"errorCounts,omitempty"`
	OtherErrors     int            `json:"otherErrors,omitempty"`
	RuleCounts      map[string]int `json:"ruleCounts,omitempty"`
}

type attemptJSON struct {
	Number   int       `json:"number"`
	FailedAt time.Time `json:"failedAt"`
	// Error is nil when it repeats the error of the attempt before.
	Error         *ErrorInfo    `json:"error,omitempty"`
	Delay         time.Duration `json:"delay,omitempty"`
	NextAttemptAt time.Time     `json:"nextAttemptAt,omitzero"`
	Strategy      string        `json:"strategy,omitempty"`
}

// MarshalJSON writes the persisted form: repeated errors are left out.
func (e Episode) MarshalJSON() ([]byte, error) {
	w := episodeJSON{StartedAt: e.StartedAt, EndedAt: e.EndedAt, Outcome: e.Outcome,
		DroppedAttempts: e.DroppedAttempts, ErrorCounts: e.ErrorCounts, OtherErrors: e.OtherErrors, RuleCounts: e.RuleCounts}
	if e.Attempts != nil {
		w.Attempts = make([]attemptJSON, len(e.Attempts))
	}
	for i, a := range e.Attempts {
		w.Attempts[i] = attemptJSON{Number: a.Number, FailedAt: a.FailedAt, Delay: a.Delay, NextAttemptAt: a.NextAttemptAt, Strategy: a.Strategy}
		if i > 0 && a.Error.At.Equal(a.FailedAt) && sameError(e.Attempts[i-1].Error, a.Error) {
			continue
		}
		w.Attempts[i].Error = &e.Attempts[i].Error
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the persisted form of format 2 and of format 1
// (which always wrote the error).
func (e *Episode) UnmarshalJSON(raw []byte) error {
	var w episodeJSON
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	*e = Episode{StartedAt: w.StartedAt, EndedAt: w.EndedAt, Outcome: w.Outcome,
		DroppedAttempts: w.DroppedAttempts, ErrorCounts: w.ErrorCounts, OtherErrors: w.OtherErrors, RuleCounts: w.RuleCounts}
	if w.Attempts != nil {
		e.Attempts = make([]Attempt, len(w.Attempts))
	}
	for i, a := range w.Attempts {
		e.Attempts[i] = Attempt{Number: a.Number, FailedAt: a.FailedAt, Delay: a.Delay, NextAttemptAt: a.NextAttemptAt, Strategy: a.Strategy}
		switch {
		case a.Error != nil:
			e.Attempts[i].Error = *a.Error
		case i > 0:
			e.Attempts[i].Error = e.Attempts[i-1].Error
			e.Attempts[i].Error.At = a.FailedAt
		default:
			return fmt.Errorf("episode attempt %d has no error and no attempt before it to repeat", a.Number)
		}
	}
	return nil
}

// sameError reports whether a and b are the same error, whenever they
// happened.
func sameError(a, b ErrorInfo) bool {
	return a.Code == b.Code && a.Class == b.Class && a.Source == b.Source && a.Message == b.Message &&
		a.Component == b.Component && a.ComponentKind == b.ComponentKind && a.Rule == b.Rule && bytes.Equal(a.Record, b.Record)
}

// upgradeFromV1 bounds an episode persisted in format 1, which kept up to
// 500 attempts and counted no errors: it counts the attempts it has and
// keeps the first and latest of them like any episode.
func (e *Episode) upgradeFromV1() {
	if len(e.ErrorCounts) == 0 && e.OtherErrors == 0 {
		for _, a := range e.Attempts {
			e.count(a.Error, 1)
		}
	}
	for i := range e.Attempts {
		e.Attempts[i].Error.Message = truncateMessage(e.Attempts[i].Error.Message, maxAttemptMessage)
	}
	e.bound()
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
	// StopReason is StopReasonShutdown while a pipeline is stopped only
	// because the process shut down; ResumeStatus is then the status it
	// had (running or recovering), which the next process takes up again.
	StopReason   StopReason `json:"stopReason,omitempty"`
	ResumeStatus Status     `json:"resumeStatus,omitempty"`
	// ConfigHash identifies the pipeline configuration the state belongs
	// to; a changed configuration is provisioned afresh.
	ConfigHash string    `json:"configHash,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// CreatedAt is when conduit first provisioned the pipeline; it stays
	// through configuration changes. Zero for a state an older version
	// wrote.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// LastRecoveredAt is when the pipeline last recovered and
	// LastEpisodeAttempts the fail count that episode ended with: a
	// failure within flap-window continues its backoff. Flaps counts the
	// episodes in a row that did.
	LastRecoveredAt     time.Time `json:"lastRecoveredAt,omitzero"`
	LastEpisodeAttempts int       `json:"lastEpisodeAttempts,omitempty"`
	Flaps               int       `json:"flaps,omitempty"`
	// Poison is the record the latest runs failed on, the same way each
	// time; nil when the last failure named no record.
	Poison *PoisonRecord `json:"poison,omitempty"`
	// HeldBy is the dependency whose open breaker a recovering pipeline
	// waits for, instead of a restart time.
	HeldBy string `json:"heldBy,omitempty"`
	// Crashes counts the process deaths in a row that cut off a run of
	// the pipeline before it had proved itself (a record end to end) or
	// ended: the crash-loop guard starts it degraded once they reach
	// pipelines.crash-loop-after. A run of the pipeline that starts is
	// marked by Run (persisted before it starts); a clean end, a clean
	// shutdown, a record end to end or a start by a user clear both.
	Crashes int `json:"crashes,omitempty"`
	// Run marks a run that was started and has not ended or proved
	// itself yet: a process that finds it set died during that run.
	Run bool `json:"run,omitempty"`
	// Stopping is true while the pipeline was stopped or force-stopped and
	// its last run has not ended yet (the phases stopped/stopping and
	// degraded/stopping). Not persisted: no run outlives its process.
	Stopping bool `json:"-"`
}

// StartStatus is the status a supervisor created from st starts in: st's
// own, except for a pipeline stopped only because the process shut down
// (or it moved, or its configuration changed), which starts where it was
// - running or recovering - and resume says so.
func (st State) StartStatus() Status {
	if !st.StopReason.resumable() {
		return st.Status
	}
	if st.ResumeStatus == StatusRecovering {
		return StatusRecovering
	}
	return StatusRunning
}

// PoisonRecord is a record runs of a pipeline keep failing on.
type PoisonRecord struct {
	Position []byte `json:"position"`
	// Error is the latest failure on it; Runs counts the runs in a row
	// that failed on it in the same component with the same class and
	// code.
	Error ErrorInfo `json:"error"`
	Runs  int       `json:"runs"`
	// Quarantined says Runs reached quarantine-after: the next runs send
	// the record to the dead-letter queue as they read it.
	Quarantined bool `json:"quarantined,omitempty"`
}

// sameFailure reports whether info is the poison record failing again the
// same way. Messages may differ (they often carry counters or times).
func (p *PoisonRecord) sameFailure(info ErrorInfo) bool {
	return p != nil && bytes.Equal(p.Position, info.Record) && p.Error.Component == info.Component &&
		p.Error.ComponentKind == info.ComponentKind && p.Error.Class == info.Class && p.Error.Code == info.Code
}

// Clone returns a deep copy, for handing state to other goroutines.
func (s State) Clone() State {
	if s.LastError != nil {
		e := *s.LastError
		s.LastError = &e
	}
	if s.Poison != nil {
		p := *s.Poison
		s.Poison = &p
	}
	if s.Episode != nil {
		ep := *s.Episode
		ep.Attempts = append([]Attempt(nil), ep.Attempts...)
		ep.ErrorCounts = append([]ErrorCount(nil), ep.ErrorCounts...)
		ep.RuleCounts = maps.Clone(ep.RuleCounts)
		s.Episode = &ep
	}
	return s
}

func encodeState(s State) ([]byte, error) { return appendEncodedState(nil, s) }

// appendEncodedState appends the persisted form of s to dst (the store's
// writer appends a chunk's values to one buffer, store.Op.Encode).
func appendEncodedState(dst []byte, s State) ([]byte, error) {
	s.Version = stateFormatVersion
	if out, ok := appendState(dst, s); ok {
		return out, nil
	}
	// What appendState wrote past dst is overwritten.
	raw, err := json.Marshal(s)
	if err != nil {
		return dst, err
	}
	return append(dst, raw...), nil
}

func decodeState(raw []byte) (State, error) {
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, fmt.Errorf("persisted pipeline state is corrupt: %w", err)
	}
	if s.Version < oldestStateFormatVersion || s.Version > stateFormatVersion {
		return State{}, fmt.Errorf("persisted pipeline state has format version %d, this build reads versions %d to %d",
			s.Version, oldestStateFormatVersion, stateFormatVersion)
	}
	if s.Version == 1 && s.Episode != nil {
		s.Episode.upgradeFromV1()
	}
	// What is returned is in the current format, however it was stored.
	s.Version = stateFormatVersion
	return s, nil
}

// StateStore persists State per pipeline through the store's one writer
// (store.Batcher). SaveLater hands a state over and returns at once: a
// supervisor never waits for the disk, so in a fault storm across ten
// thousand pipelines restarts keep their schedule however long the writes
// take. A newer state of a pipeline submitted before the older one was
// committed replaces it in the same commit; writes land in order, so a
// state never overwrites a newer one. The runtime usually writes a state
// together with the audit event that records it (StateOp).
type StateStore struct {
	db     store.Store
	writer *store.Batcher
}

// NewStateStore returns a StateStore reading db and writing through w (the
// Batcher of db).
func NewStateStore(db store.Store, w *store.Batcher) *StateStore {
	return &StateStore{db: db, writer: w}
}

func stateKey(pipelineID string) []byte {
	return []byte(store.PrefixPipelineState + pipelineID)
}

// StateOp is the write that persists st as the state of a pipeline, for a
// caller that commits it together with other writes. The store's writer
// encodes it when it commits, off the caller's goroutine, so st must not
// change afterwards: hand over a Clone.
func StateOp(pipelineID string, st State) store.Op {
	return store.Op{Key: stateKey(pipelineID), Encode: func(dst []byte) ([]byte, error) {
		out, err := appendEncodedState(dst, st)
		if err != nil {
			return dst, fmt.Errorf("save state of pipeline %s: %w", pipelineID, err)
		}
		return out, nil
	}}
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
		return State{}, false, fmt.Errorf("load state of pipeline %s: %w: %w", pipelineID, ErrStateUnreadable, err)
	}
	return st, true, nil
}

// ErrStateUnreadable is Load's error for a state that was read but cannot
// be decoded (damaged, or of a format this build does not read), as
// opposed to one the store could not read (unavailable, cancelled).
var ErrStateUnreadable = errors.New("persisted pipeline state is unreadable")

// SaveLater hands st over to be written and returns without waiting; the
// writer's Flush waits for it. It keeps a copy, so the caller may change st
// afterwards. A failed write is reported by the
// writer's error callback; the state in memory stays the truth, and the
// pipeline's next save tries again.
func (s *StateStore) SaveLater(pipelineID string, st State) error {
	if _, err := s.writer.Submit(store.WriteOptions{}, StateOp(pipelineID, st.Clone())); err != nil {
		return fmt.Errorf("save state of pipeline %s: %w", pipelineID, err)
	}
	return nil
}

// Save durably stores the state of a pipeline and returns once it is on
// disk.
func (s *StateStore) Save(ctx context.Context, pipelineID string, st State) error {
	if err := s.writer.Apply(ctx, StateOp(pipelineID, st.Clone())); err != nil {
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

// Delete forgets the persisted state of a pipeline. Writes land in the
// order they were submitted, so a state handed over before cannot bring it
// back.
func (s *StateStore) Delete(ctx context.Context, pipelineID string) error {
	if err := s.writer.Apply(ctx, store.Op{Key: stateKey(pipelineID), Delete: true}); err != nil {
		return fmt.Errorf("delete state of pipeline %s: %w", pipelineID, err)
	}
	return nil
}
