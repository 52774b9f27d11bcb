package auditlog

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/store"
)

// formatVersion is the version of the persisted event. Readers skip events
// of any other version (written by a newer conduit) rather than misread them.
//
// WARNING: part of the on-disk format, pinned by testdata/event.golden.json.
// A change of the JSON below needs a new version and a reader for the old.
const formatVersion = 1

// record is the persisted form of an Event. It is separate from Event so
// that the API type can change without changing what is on disk.
type record struct {
	Version       int           `json:"version"`
	Sequence      uint64        `json:"sequence"`
	Time          time.Time     `json:"time"`
	PipelineID    string        `json:"pipelineId"`
	Kind          Kind          `json:"kind"`
	StatusBefore  string        `json:"statusBefore,omitempty"`
	StatusAfter   string        `json:"statusAfter,omitempty"`
	Message       string        `json:"message,omitempty"`
	Actor         string        `json:"actor,omitempty"`
	Error         *recordError  `json:"error,omitempty"`
	Attempt       int           `json:"attempt,omitempty"`
	Delay         time.Duration `json:"delay,omitempty"`
	NextAttemptAt time.Time     `json:"nextAttemptAt,omitzero"`
	Reason        string        `json:"reason,omitempty"`
	Count         int64         `json:"count,omitempty"`
	// Action and Strategy (optional, so version 1 still reads and writes
	// the events from before them): what the policy decided about a fault
	// and the strategy of the delay.
	Action   string `json:"action,omitempty"`
	Strategy string `json:"strategy,omitempty"`
}

// recordError has the same names as lifecycle's persisted ErrorInfo.
type recordError struct {
	Code          int    `json:"code,omitempty"`
	Class         string `json:"class,omitempty"`
	Source        string `json:"source,omitempty"`
	Message       string `json:"message,omitempty"`
	Component     string `json:"component,omitempty"`
	ComponentKind string `json:"componentKind,omitempty"`
	Rule          string `json:"rule,omitempty"`
}

func encodeEvent(e Event) ([]byte, error) {
	// About the size of an event, so that encoding it allocates once.
	return appendEncodedEvent(make([]byte, 0, 320+len(e.Message)+len(e.ErrorMessage)), e)
}

// appendEncodedEvent appends the persisted form of e to dst (the store's
// writer appends a chunk's values to one buffer, store.Op.Encode).
func appendEncodedEvent(dst []byte, e Event) ([]byte, error) {
	r := record{
		Version:       formatVersion,
		Sequence:      e.Sequence,
		Time:          e.Time,
		PipelineID:    e.PipelineID,
		Kind:          e.Kind,
		StatusBefore:  string(e.StatusBefore),
		StatusAfter:   string(e.StatusAfter),
		Message:       e.Message,
		Actor:         string(e.Actor),
		Attempt:       e.Attempt,
		Delay:         e.Delay,
		NextAttemptAt: e.NextAttemptAt,
		Reason:        e.Reason,
		Count:         e.Count,
		Action:        e.Action,
		Strategy:      e.Strategy,
	}
	re := recordError{
		Code:          e.ErrorCode,
		Class:         string(e.ErrorClass),
		Source:        string(e.ErrorSource),
		Message:       e.ErrorMessage,
		Component:     e.Component,
		ComponentKind: string(e.ComponentKind),
		Rule:          e.ErrorRule,
	}
	if re != (recordError{}) {
		r.Error = &re
	}
	if out, ok := appendRecord(dst, &r); ok {
		return out, nil
	}
	// What appendRecord wrote past dst is overwritten.
	raw, err := json.Marshal(r)
	if err != nil {
		return dst, err
	}
	return append(dst, raw...), nil
}

// decodeEvent parses a persisted event and checks that it is the one the
// key promises (the pipeline's escaped id and the sequence).
func decodeEvent(data []byte, escapedID string, seq uint64) (Event, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return Event{}, err
	}
	switch {
	case r.Version != formatVersion:
		return Event{}, fmt.Errorf("format version %d, this conduit reads %d", r.Version, formatVersion)
	case r.Sequence != seq:
		return Event{}, fmt.Errorf("sequence %d does not match the key's %d", r.Sequence, seq)
	case escapeID(r.PipelineID) != escapedID:
		return Event{}, fmt.Errorf("pipeline id %q does not match the key", r.PipelineID)
	case r.Kind == "":
		return Event{}, errors.New("kind is empty")
	}
	e := Event{
		Sequence:      r.Sequence,
		Time:          r.Time.UTC(),
		PipelineID:    r.PipelineID,
		Kind:          r.Kind,
		StatusBefore:  Status(r.StatusBefore),
		StatusAfter:   Status(r.StatusAfter),
		Message:       r.Message,
		Actor:         Actor(r.Actor),
		Attempt:       r.Attempt,
		Delay:         r.Delay,
		NextAttemptAt: r.NextAttemptAt,
		Reason:        r.Reason,
		Count:         r.Count,
		Action:        r.Action,
		Strategy:      r.Strategy,
	}
	if !e.NextAttemptAt.IsZero() {
		e.NextAttemptAt = e.NextAttemptAt.UTC()
	}
	if re := r.Error; re != nil {
		e.ErrorCode = re.Code
		e.ErrorClass = cerrors.Class(re.Class)
		e.ErrorSource = cerrors.Source(re.Source)
		e.ErrorMessage = re.Message
		e.Component = re.Component
		e.ComponentKind = cerrors.ComponentKind(re.ComponentKind)
		e.ErrorRule = re.Rule
	}
	return e, nil
}

// seqDigits is the width of the sequence in a key: a uint64 in hex.
const seqDigits = 16

// pipelinePrefix is the key prefix of one pipeline's events:
// PrefixAuditLog + escaped id + "/".
func pipelinePrefix(id string) []byte {
	esc := escapeID(id)
	p := make([]byte, 0, len(store.PrefixAuditLog)+len(esc)+1+seqDigits)
	p = append(p, store.PrefixAuditLog...)
	p = append(p, esc...)
	return append(p, '/')
}

// eventKey is the key of event seq under a pipeline's prefix.
func eventKey(prefix []byte, seq uint64) []byte {
	k := make([]byte, len(prefix), len(prefix)+seqDigits)
	copy(k, prefix)
	var b [8]byte
	for i := range b {
		b[i] = byte(seq >> (56 - 8*i))
	}
	return hex.AppendEncode(k, b[:])
}

// parseKey splits an audit log key into the escaped pipeline id and the
// sequence; ok is false for anything else under the prefix.
func parseKey(key []byte) (escapedID string, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(string(key), store.PrefixAuditLog)
	if !found {
		return "", 0, false
	}
	slash := strings.LastIndexByte(rest, '/')
	if slash <= 0 || len(rest)-slash-1 != seqDigits {
		return "", 0, false
	}
	escapedID = rest[:slash]
	if strings.IndexByte(escapedID, '/') >= 0 {
		return "", 0, false
	}
	for _, c := range rest[slash+1:] {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return "", 0, false
		}
		seq = seq<<4 | d
	}
	return escapedID, seq, true
}

// escapeID and unescapeID keep a pipeline id with "/" in it from reaching
// into another pipeline's key range (store.KeyPart).
func escapeID(id string) string { return store.KeyPart(id) }

func unescapeID(esc string) (string, bool) { return store.ParseKeyPart(esc) }
