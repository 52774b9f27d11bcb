// Package jsonenc appends JSON values to a buffer, byte for byte as
// encoding/json writes them, for the few persisted records the store's one
// writer encodes at every commit (pipeline states, audit events): there,
// reflection-driven encoding is a large share of what the whole store can
// commit per second. A hand-written encoder built on it must be held to
// json.Marshal by a property test; its callers fall back to json.Marshal
// for any value it cannot write exactly (OK false).
package jsonenc

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// Encoder appends to Buf. OK turns false at the first value it cannot
// write exactly as encoding/json would; what Buf holds is then to be
// thrown away.
type Encoder struct {
	Buf []byte
	OK  bool
}

// New returns an encoder appending to buf.
func New(buf []byte) *Encoder { return &Encoder{Buf: buf, OK: true} }

// Raw appends s as it is: punctuation and keys.
func (e *Encoder) Raw(s string) { e.Buf = append(e.Buf, s...) }

// Int appends n.
func (e *Encoder) Int(n int64) { e.Buf = strconv.AppendInt(e.Buf, n, 10) }

// Uint appends n.
func (e *Encoder) Uint(n uint64) { e.Buf = strconv.AppendUint(e.Buf, n, 10) }

// Bool appends b.
func (e *Encoder) Bool(b bool) { e.Buf = strconv.AppendBool(e.Buf, b) }

// String appends s quoted as encoding/json does. Plain ASCII, the usual
// case, is copied; any other string is left to encoding/json, whose
// escaping (HTML characters, invalid UTF-8, U+2028) it then matches by
// definition.
func (e *Encoder) String(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil {
				e.OK = false
				return
			}
			e.Buf = append(e.Buf, quoted...)
			return
		}
	}
	e.Buf = append(e.Buf, '"')
	e.Buf = append(e.Buf, s...)
	e.Buf = append(e.Buf, '"')
}

// Time appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the times it writes without an error: a year of four
// digits and an offset of whole minutes under a day. Any other turns OK
// false.
func (e *Encoder) Time(t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		e.OK = false
		return
	}
	if _, offset := t.Zone(); offset%60 != 0 || offset <= -24*3600 || offset >= 24*3600 {
		e.OK = false
		return
	}
	e.Buf = append(e.Buf, '"')
	e.Buf = t.AppendFormat(e.Buf, time.RFC3339Nano)
	e.Buf = append(e.Buf, '"')
}

// Bytes appends b as encoding/json writes a []byte: base64, null when nil.
func (e *Encoder) Bytes(b []byte) {
	if b == nil {
		e.Raw("null")
		return
	}
	e.Buf = append(e.Buf, '"')
	e.Buf = base64.StdEncoding.AppendEncode(e.Buf, b)
	e.Buf = append(e.Buf, '"')
}

// OptionalString writes key (`,"name":`) and s, unless s is empty: a field
// tagged omitempty.
func (e *Encoder) OptionalString(key, s string) {
	if s != "" {
		e.Raw(key)
		e.String(s)
	}
}

// OptionalInt writes key and n, unless n is 0: a field tagged omitempty.
func (e *Encoder) OptionalInt(key string, n int64) {
	if n != 0 {
		e.Raw(key)
		e.Int(n)
	}
}

// OptionalTime writes key and t, unless t is zero: a field tagged omitzero.
func (e *Encoder) OptionalTime(key string, t time.Time) {
	if !t.IsZero() {
		e.Raw(key)
		e.Time(t)
	}
}
