package notify

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/store"
)

// entryVersion is the version of a persisted outbox entry. Entries of
// another version are skipped with a log line (and left in place for the
// conduit that wrote them).
//
// WARNING: part of the on-disk format, pinned by testdata/entry.golden.json.
const entryVersion = 1

// entry is one notification for one target, as stored in the outbox.
type entry struct {
	Version  int       `json:"version"`
	Target   string    `json:"target"`
	Kind     Kind      `json:"kind"`
	Severity string    `json:"severity"`
	Time     time.Time `json:"time"`
	// Pipeline is the pipeline it is about; empty for a breaker, which is
	// about Dependency (Canary and Pipelines say who failed on it).
	Pipeline   string   `json:"pipeline,omitempty"`
	Dependency string   `json:"dependency,omitempty"`
	Canary     string   `json:"canary,omitempty"`
	Pipelines  []string `json:"pipelines,omitempty"`
	// Summary is one line for people; Hint what to do about it.
	Summary string `json:"summary"`
	Hint    string `json:"hint,omitempty"`
	// Event is the audit event it comes from, when there is one.
	Event *Event `json:"event,omitempty"`

	// key is where it is stored (not persisted).
	key []byte
}

// Event is an audit event as notifications carry it: the names are those
// of the audit log's own JSON.
type Event struct {
	Sequence      uint64    `json:"sequence"`
	Time          time.Time `json:"time"`
	PipelineID    string    `json:"pipelineId"`
	Kind          string    `json:"kind"`
	StatusBefore  string    `json:"statusBefore,omitempty"`
	StatusAfter   string    `json:"statusAfter,omitempty"`
	Message       string    `json:"message,omitempty"`
	Actor         string    `json:"actor,omitempty"`
	ErrorCode     int       `json:"errorCode,omitempty"`
	ErrorClass    string    `json:"errorClass,omitempty"`
	ErrorMessage  string    `json:"errorMessage,omitempty"`
	Component     string    `json:"component,omitempty"`
	ComponentKind string    `json:"componentKind,omitempty"`
	Rule          string    `json:"rule,omitempty"`
	Attempt       int       `json:"attempt,omitempty"`
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	Reason        string    `json:"reason,omitempty"`
	Count         int64     `json:"count,omitempty"`
}

func eventOf(e auditlog.Event) *Event {
	return &Event{Sequence: e.Sequence, Time: e.Time, PipelineID: e.PipelineID, Kind: string(e.Kind),
		StatusBefore: string(e.StatusBefore), StatusAfter: string(e.StatusAfter), Message: e.Message, Actor: string(e.Actor),
		ErrorCode: e.ErrorCode, ErrorClass: string(e.ErrorClass), ErrorMessage: e.ErrorMessage, Component: e.Component,
		ComponentKind: string(e.ComponentKind), Rule: e.ErrorRule, Attempt: e.Attempt, NextAttemptAt: e.NextAttemptAt,
		Reason: e.Reason, Count: e.Count}
}

// entryKey is where an entry is stored; subject is its pipeline or
// dependency and n tells apart entries of one subject and time (the
// event's sequence, or a counter).
func entryKey(target string, at time.Time, subject string, n uint64) []byte {
	return fmt.Appendf(nil, "%s%s/%016x/%s/%016x", store.PrefixNotifyOutbox, store.KeyPart(target), uint64(at.UnixNano()),
		store.KeyPart(subject), n)
}

func encodeEntry(e entry) ([]byte, error) {
	e.Version = entryVersion
	return json.Marshal(e)
}

// appendEntry appends the encoded entry to dst (store.Op.Encode).
func appendEntry(dst []byte, e entry) ([]byte, error) {
	raw, err := encodeEntry(e)
	if err != nil {
		return dst, err
	}
	return append(dst, raw...), nil
}

func decodeEntry(key, value []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(value, &e); err != nil {
		return e, err
	}
	if e.Version != entryVersion {
		return e, fmt.Errorf("version %d, this conduit reads %d", e.Version, entryVersion)
	}
	e.key = append([]byte(nil), key...)
	return e, nil
}

// subject is what the entry is about, for messages and audit events.
func (e entry) subject() string {
	if e.Pipeline != "" {
		return e.Pipeline
	}
	return e.Dependency
}
