package lifecycle

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendState appends the persisted form of s - the exact bytes
// json.Marshal writes for it - to buf. The store's one writer encodes every
// state it commits, so in a fault storm across ten thousand pipelines
// reflection-driven encoding is a large share of what the whole store can
// commit per second; this encoder writes the same bytes several times
// faster. ok is false for a state it does not encode exactly (a time
// outside what RFC 3339 can say, an invalid status): encodeState then
// uses json.Marshal, which also reports the error. TestStateEncoderMatchesJSON
// holds it to json.Marshal's output.
func appendState(buf []byte, s State) (_ []byte, ok bool) {
	if !s.Status.valid() || (s.ResumeStatus != 0 && !s.ResumeStatus.valid()) {
		return buf, false
	}
	e := stateEncoder{buf: buf, ok: true}
	e.raw(`{"version":`)
	e.int(s.Version)
	e.raw(`,"status":`)
	e.str(s.Status.String())
	e.raw(`,"failCount":`)
	e.int(s.FailCount)
	if !s.NextAttemptAt.IsZero() {
		e.raw(`,"nextAttemptAt":`)
		e.time(s.NextAttemptAt)
	}
	if s.Probation {
		e.raw(`,"probation":true`)
	}
	if s.LastError != nil {
		e.raw(`,"lastError":`)
		e.errorInfo(s.LastError)
	}
	if s.DegradedReason != "" {
		e.raw(`,"degradedReason":`)
		e.str(string(s.DegradedReason))
	}
	if s.Episode != nil {
		e.raw(`,"episode":`)
		e.episode(s.Episode)
	}
	if s.StopReason != "" {
		e.raw(`,"stopReason":`)
		e.str(string(s.StopReason))
	}
	if s.ResumeStatus != 0 {
		e.raw(`,"resumeStatus":`)
		e.str(s.ResumeStatus.String())
	}
	if s.ConfigHash != "" {
		e.raw(`,"configHash":`)
		e.str(s.ConfigHash)
	}
	e.raw(`,"updatedAt":`)
	e.time(s.UpdatedAt)
	if !s.CreatedAt.IsZero() {
		e.raw(`,"createdAt":`)
		e.time(s.CreatedAt)
	}
	if !s.LastRecoveredAt.IsZero() {
		e.raw(`,"lastRecoveredAt":`)
		e.time(s.LastRecoveredAt)
	}
	if s.LastEpisodeAttempts != 0 {
		e.raw(`,"lastEpisodeAttempts":`)
		e.int(s.LastEpisodeAttempts)
	}
	if s.Flaps != 0 {
		e.raw(`,"flaps":`)
		e.int(s.Flaps)
	}
	if p := s.Poison; p != nil {
		e.raw(`,"poison":{"position":`)
		e.bytes(p.Position)
		e.raw(`,"error":`)
		e.errorInfo(&p.Error)
		e.raw(`,"runs":`)
		e.int(p.Runs)
		if p.Quarantined {
			e.raw(`,"quarantined":true`)
		}
		e.raw(`}`)
	}
	if s.HeldBy != "" {
		e.raw(`,"heldBy":`)
		e.str(s.HeldBy)
	}
	e.raw(`}`)
	return e.buf, e.ok
}

// valid reports whether s is one of the statuses MarshalText writes.
func (s Status) valid() bool { return s >= StatusRunning && s <= StatusStopped }

// stateEncoder appends JSON to buf; ok turns false at the first value it
// cannot write exactly as encoding/json would.
type stateEncoder struct {
	buf []byte
	ok  bool
}

func (e *stateEncoder) raw(s string) { e.buf = append(e.buf, s...) }

func (e *stateEncoder) int(n int) { e.buf = strconv.AppendInt(e.buf, int64(n), 10) }

// str writes s as encoding/json does. Strings of plain ASCII, the usual
// case, are copied; any other is left to encoding/json, whose escaping
// (HTML characters, invalid UTF-8, U+2028) it then matches by definition.
func (e *stateEncoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil {
				e.ok = false
				return
			}
			e.buf = append(e.buf, quoted...)
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds),
// for the times it accepts: a four-digit year and an offset of whole
// minutes under a day. Others are left to encoding/json.
func (e *stateEncoder) time(t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		e.ok = false
		return
	}
	if _, offset := t.Zone(); offset%60 != 0 || offset <= -24*3600 || offset >= 24*3600 {
		e.ok = false
		return
	}
	e.buf = append(e.buf, '"')
	e.buf = t.AppendFormat(e.buf, time.RFC3339Nano)
	e.buf = append(e.buf, '"')
}

// bytes writes b as encoding/json writes a []byte: base64, null when nil.
func (e *stateEncoder) bytes(b []byte) {
	if b == nil {
		e.raw("null")
		return
	}
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
}

func (e *stateEncoder) errorInfo(info *ErrorInfo) {
	e.raw(`{"at":`)
	e.time(info.At)
	if info.Code != 0 {
		e.raw(`,"code":`)
		e.int(info.Code)
	}
	e.raw(`,"class":`)
	e.str(string(info.Class))
	e.raw(`,"source":`)
	e.str(string(info.Source))
	e.raw(`,"message":`)
	e.str(info.Message)
	if info.Component != "" {
		e.raw(`,"component":`)
		e.str(info.Component)
	}
	if info.ComponentKind != "" {
		e.raw(`,"componentKind":`)
		e.str(string(info.ComponentKind))
	}
	if info.Rule != "" {
		e.raw(`,"rule":`)
		e.str(info.Rule)
	}
	if len(info.Record) > 0 {
		e.raw(`,"record":`)
		e.bytes(info.Record)
	}
	if info.Dependency != "" {
		e.raw(`,"dependency":`)
		e.str(info.Dependency)
	}
	e.raw(`}`)
}

// episode writes ep as Episode.MarshalJSON does: an attempt that repeats
// the error of the one before it, at its own failure time, without it.
func (e *stateEncoder) episode(ep *Episode) {
	e.raw(`{"startedAt":`)
	e.time(ep.StartedAt)
	if !ep.EndedAt.IsZero() {
		e.raw(`,"endedAt":`)
		e.time(ep.EndedAt)
	}
	if ep.Outcome != "" {
		e.raw(`,"outcome":`)
		e.str(ep.Outcome)
	}
	e.raw(`,"attempts":`)
	if ep.Attempts == nil {
		e.raw("null")
	} else {
		e.raw("[")
		for i := range ep.Attempts {
			a := &ep.Attempts[i]
			if i > 0 {
				e.raw(",")
			}
			e.raw(`{"number":`)
			e.int(a.Number)
			e.raw(`,"failedAt":`)
			e.time(a.FailedAt)
			if i == 0 || !a.Error.At.Equal(a.FailedAt) || !sameError(ep.Attempts[i-1].Error, a.Error) {
				e.raw(`,"error":`)
				e.errorInfo(&a.Error)
			}
			if a.Delay != 0 {
				e.raw(`,"delay":`)
				e.buf = strconv.AppendInt(e.buf, int64(a.Delay), 10)
			}
			if !a.NextAttemptAt.IsZero() {
				e.raw(`,"nextAttemptAt":`)
				e.time(a.NextAttemptAt)
			}
			if a.Strategy != "" {
				e.raw(`,"strategy":`)
				e.str(a.Strategy)
			}
			e.raw("}")
		}
		e.raw("]")
	}
	if ep.DroppedAttempts != 0 {
		e.raw(`,"droppedAttempts":`)
		e.int(ep.DroppedAttempts)
	}
	if len(ep.ErrorCounts) > 0 {
		e.raw(`,"errorCounts":[`)
		for i, c := range ep.ErrorCounts {
			if i > 0 {
				e.raw(",")
			}
			e.raw(`{"class":`)
			e.str(string(c.Class))
			if c.Code != 0 {
				e.raw(`,"code":`)
				e.int(c.Code)
			}
			e.raw(`,"count":`)
			e.int(c.Count)
			e.raw("}")
		}
		e.raw("]")
	}
	if ep.OtherErrors != 0 {
		e.raw(`,"otherErrors":`)
		e.int(ep.OtherErrors)
	}
	if len(ep.RuleCounts) > 0 {
		e.raw(`,"ruleCounts":{`)
		names := make([]string, 0, len(ep.RuleCounts))
		for name := range ep.RuleCounts {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				e.raw(",")
			}
			e.str(name)
			e.raw(":")
			e.int(ep.RuleCounts[name])
		}
		e.raw("}")
	}
	e.raw("}")
}
