package processor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/conduitry/conduit/pkg/record"
)

// Reference names one part of a record, in Conduit's syntax
// (https://conduit.io/docs/using/processors/referencing-fields):
//
//	.Position                    read-only
//	.Operation                   create, update, delete or snapshot
//	.Metadata                    the whole metadata map
//	.Metadata.key                one metadata value
//	.Metadata["opencdc.readAt"]  the same, for keys that are not identifiers
//	.Key                         the whole key
//	.Key.id                      a field of a structured key
//	.Payload                     before and after together
//	.Payload.Before, .Payload.After
//	.Payload.After.user.name     a nested field of a structured payload
//	.Payload.After["a.b"].c      quoted segments for any field name
//
// A segment written .name is letters, digits and underscores, not starting
// with a digit; any other name is written ["name"] (a Go string literal, so
// `\"` and `\\` escapes work). A leading $ is accepted ($.Key), as Conduit
// does. Parse a reference once with ParseReference and use it on any number
// of records; a Reference is immutable and safe for concurrent use.
type Reference struct {
	raw  string
	part part
	// path is the metadata key (one element) or the path of a field inside
	// the structured key or payload.
	path []string
}

// part is the part of the record a reference starts in.
type part int

const (
	partPosition part = iota + 1
	partOperation
	partMetadata
	partKey
	partPayload
	partBefore
	partAfter
)

var partNames = [...]string{
	partPosition:  ".Position",
	partOperation: ".Operation",
	partMetadata:  ".Metadata",
	partKey:       ".Key",
	partPayload:   ".Payload",
	partBefore:    ".Payload.Before",
	partAfter:     ".Payload.After",
}

// ParseReference parses a field reference. The error says what is wrong and
// where, e.g. `unknown field "payload" (did you mean Payload?)`.
func ParseReference(s string) (Reference, error) {
	raw := strings.TrimSpace(s)
	segs, err := splitReference(raw)
	if err != nil {
		return Reference{}, fmt.Errorf("invalid reference %q: %w", raw, err)
	}
	ref := Reference{raw: raw}
	if err := ref.interpret(segs); err != nil {
		return Reference{}, fmt.Errorf("invalid reference %q: %w", raw, err)
	}
	return ref, nil
}

// splitReference turns `.A.b["c.d"]` into [A b c.d].
func splitReference(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty (write e.g. .Payload.After.name or .Metadata.key)")
	}
	i := 0
	if s[0] == '$' {
		i = 1
	}
	var segs []string
	for i < len(s) {
		switch s[i] {
		case '.':
			i++
			start := i
			for i < len(s) {
				r, size := utf8.DecodeRuneInString(s[i:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += size
			}
			name := s[start:i]
			switch {
			case name == "" && i == len(s) && len(segs) == 0:
				// "." or "$." alone: the whole record; reported below.
			case name == "":
				return nil, fmt.Errorf("expected a field name after the dot at offset %d", start-1)
			case name[0] >= '0' && name[0] <= '9':
				return nil, fmt.Errorf("field name %q starts with a digit; write it as [%q]", name, name)
			default:
				segs = append(segs, name)
			}
		case '[':
			if len(segs) == 0 {
				return nil, errors.New(`a reference starts with a field such as .Payload, not with [`)
			}
			name, n, err := quotedSegment(s[i+1:])
			if err != nil {
				return nil, fmt.Errorf("at offset %d: %w", i, err)
			}
			segs = append(segs, name)
			i += 1 + n
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			if i == 0 {
				return nil, fmt.Errorf("a reference starts with a dot, as in .%s", s)
			}
			return nil, fmt.Errorf("unexpected %q at offset %d (use [\"...\"] for field names with other characters)", r, i)
		}
	}
	return segs, nil
}

// quotedSegment reads `"name"]` (or a backquoted name) from the start of s
// and returns the name and how many bytes it used.
func quotedSegment(s string) (string, int, error) {
	const want = `expected a quoted field name and ], as in ["a.b"]`
	if s == "" || (s[0] != '"' && s[0] != '`') {
		return "", 0, errors.New(want)
	}
	q := s[0]
	end := -1
	for j := 1; j < len(s); j++ {
		if q == '"' && s[j] == '\\' {
			j++
			continue
		}
		if s[j] == q {
			end = j
			break
		}
	}
	if end < 0 {
		return "", 0, errors.New("unterminated quoted field name")
	}
	name, err := strconv.Unquote(s[:end+1])
	if err != nil {
		return "", 0, fmt.Errorf("bad quoted field name %s: %w", s[:end+1], err)
	}
	if end+1 >= len(s) || s[end+1] != ']' {
		return "", 0, errors.New(want)
	}
	return name, end + 2, nil
}

// interpret maps the segments onto the record's parts.
func (r *Reference) interpret(segs []string) error {
	if len(segs) == 0 {
		return errors.New("refers to the whole record; name a part of it, e.g. .Payload.After or .Metadata.key")
	}
	rest := segs[1:]
	switch segs[0] {
	case "Position":
		r.part = partPosition
	case "Operation":
		r.part = partOperation
	case "Metadata":
		r.part = partMetadata
		if len(rest) > 1 {
			return errors.New(".Metadata values are text and have no fields; use .Metadata.key or .Metadata[\"a.b\"]")
		}
	case "Key":
		r.part = partKey
	case "Payload":
		r.part = partPayload
		if len(rest) > 0 {
			switch rest[0] {
			case "Before":
				r.part = partBefore
			case "After":
				r.part = partAfter
			default:
				return unknownField(".Payload", rest[0], "Before", "After")
			}
			rest = rest[1:]
		}
	default:
		return unknownField("", segs[0], "Position", "Operation", "Metadata", "Key", "Payload")
	}
	if (r.part == partPosition || r.part == partOperation) && len(rest) > 0 {
		return fmt.Errorf("%s has no fields", partNames[r.part])
	}
	if len(rest) > 0 {
		r.path = rest
	}
	return nil
}

func unknownField(parent, name string, known ...string) error {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return fmt.Errorf("unknown field %q (did you mean %s.%s?)", name, parent, k)
		}
	}
	return fmt.Errorf("unknown field %q in %s (want %s)", name, orRecord(parent), "."+strings.Join(known, ", ."))
}

func orRecord(parent string) string {
	if parent == "" {
		return "the record"
	}
	return parent
}

// String returns the reference as written (without surrounding spaces).
func (r Reference) String() string { return r.raw }

// errZeroReference is returned by the methods of a Reference that was not
// made by ParseReference: a programming error, reported instead of a panic.
var errZeroReference = errors.New("processor: zero Reference (use ParseReference)")

// data returns the Data field r points into, or nil for other parts.
func (r Reference) data(rec *record.Record) *record.Data {
	switch r.part {
	case partKey:
		return &rec.Key
	case partBefore:
		return &rec.Payload.Before
	case partAfter:
		return &rec.Payload.After
	}
	return nil
}

// Get returns the referenced value: a record.Position, record.Operation,
// record.Metadata, string (a metadata value), record.Data (.Key,
// .Payload.Before, .Payload.After), record.Change (.Payload) or the value of
// a structured field. Something that is absent (a missing metadata key or
// field, a nil payload) is nil with no error. It fails only when a field is
// looked up inside something that has no fields (raw data, a string).
func (r Reference) Get(rec *record.Record) (any, error) {
	switch r.part {
	case partPosition:
		return rec.Position, nil
	case partOperation:
		return rec.Operation, nil
	case partMetadata:
		if r.path == nil {
			return rec.Metadata, nil
		}
		v, ok := rec.Metadata[r.path[0]]
		if !ok {
			return nil, nil
		}
		return v, nil
	case partPayload:
		return rec.Payload, nil
	}
	dp := r.data(rec)
	if dp == nil {
		return nil, errZeroReference
	}
	d := *dp
	if r.path == nil {
		return d, nil
	}
	m, err := r.structured(d, false)
	if m == nil || err != nil {
		return nil, err
	}
	last := len(r.path) - 1
	for i, name := range r.path[:last] {
		child, ok := m[name]
		if !ok || child == nil {
			return nil, nil
		}
		if m, ok = asMap(child); !ok {
			return nil, r.notObject(i, child)
		}
	}
	return m[r.path[last]], nil
}

// Set sets the referenced value. What v may be depends on the part:
//
//   - .Position cannot be set.
//   - .Operation: an operation name (string) or a record.Operation.
//   - .Metadata: record.Metadata or map[string]string; nil empties it.
//   - .Metadata.key: a string; nil deletes the key.
//   - .Key, .Payload.Before, .Payload.After: record.Data, a string or
//     []byte (raw data), a map[string]any (structured data), or nil.
//   - .Payload: a record.Change.
//   - a structured field: any value. Absent data and missing parent fields
//     are created as structured data (as Conduit does); a field inside raw
//     data, or inside a value that is not an object, is an error.
func (r Reference) Set(rec *record.Record, v any) error {
	switch r.part {
	case partPosition:
		return fmt.Errorf("cannot set %s: it belongs to the source and is read-only", r.raw)
	case partOperation:
		var op record.Operation
		switch x := v.(type) {
		case string:
			var err error
			if op, err = record.ParseOperation(x); err != nil {
				return fmt.Errorf("cannot set %s: %w", r.raw, err)
			}
		case record.Operation:
			// Round-tripping through the name is the one validity check
			// record offers.
			if _, err := record.ParseOperation(x.String()); err != nil {
				return fmt.Errorf("cannot set %s: %v is not a valid operation", r.raw, x)
			}
			op = x
		default:
			return r.wrongType(v, "an operation name")
		}
		rec.Operation = op
		return nil
	case partMetadata:
		return r.setMetadata(rec, v)
	case partPayload:
		c, ok := v.(record.Change)
		if !ok {
			return r.wrongType(v, "a record.Change")
		}
		rec.Payload = c
		return nil
	}
	dp := r.data(rec)
	if dp == nil {
		return errZeroReference
	}
	if r.path == nil {
		d, err := toData(v)
		if err != nil {
			return fmt.Errorf("cannot set %s: %w", r.raw, err)
		}
		*dp = d
		return nil
	}
	m, err := r.structured(*dp, true)
	if err != nil {
		return err
	}
	if sd, ok := (*dp).(record.StructuredData); !ok || sd == nil {
		*dp = record.StructuredData(m)
	}
	last := len(r.path) - 1
	for i, name := range r.path[:last] {
		child := m[name]
		if child == nil {
			// Missing or null: create the parent, as Conduit does.
			n := make(map[string]any)
			m[name] = n
			m = n
			continue
		}
		cm, ok := asMap(child)
		if !ok {
			return r.notObject(i, child)
		}
		if cm == nil {
			cm = make(map[string]any)
			m[name] = cm
		}
		m = cm
	}
	m[r.path[last]] = v
	return nil
}

func (r Reference) setMetadata(rec *record.Record, v any) error {
	if r.path == nil {
		switch x := v.(type) {
		case record.Metadata:
			rec.Metadata = x
		case map[string]string:
			rec.Metadata = x
		case nil:
			rec.Metadata = record.Metadata{}
		default:
			return r.wrongType(v, "a metadata map")
		}
		return nil
	}
	switch x := v.(type) {
	case string:
		if rec.Metadata == nil {
			rec.Metadata = make(record.Metadata, 1)
		}
		rec.Metadata[r.path[0]] = x
	case nil:
		delete(rec.Metadata, r.path[0])
	default:
		return r.wrongType(v, "a string")
	}
	return nil
}

// Delete removes the referenced value: a metadata key or structured field
// is deleted (a missing one is not an error), .Key, .Payload.Before and
// .Payload.After become nil, .Payload both of them, and .Metadata becomes
// empty. .Position and .Operation cannot be deleted; a field inside raw
// data, or inside a value that is not an object, is an error.
//
// As Conduit's field.exclude does, deleting a field creates the objects on
// its way that were absent or null: .Payload.After.a.b on a record without
// .Payload.After leaves {"a":{}} there, and .Metadata.x on a record
// without metadata leaves empty metadata. Records then come out as
// Conduit writes them (a delete's payload.after becomes {}, not null).
func (r Reference) Delete(rec *record.Record) error {
	switch r.part {
	case partPosition, partOperation:
		return fmt.Errorf("cannot delete %s: every record has one", r.raw)
	case partMetadata:
		if r.path == nil || rec.Metadata == nil {
			rec.Metadata = record.Metadata{}
		} else {
			delete(rec.Metadata, r.path[0])
		}
		return nil
	case partPayload:
		rec.Payload = record.Change{}
		return nil
	}
	dp := r.data(rec)
	if dp == nil {
		return errZeroReference
	}
	if r.path == nil {
		*dp = nil
		return nil
	}
	m, err := r.structured(*dp, true)
	if err != nil {
		return err
	}
	if sd, ok := (*dp).(record.StructuredData); !ok || sd == nil {
		*dp = record.StructuredData(m)
	}
	last := len(r.path) - 1
	for i, name := range r.path[:last] {
		child, ok := m[name]
		if !ok || child == nil {
			created := make(map[string]any)
			m[name], m = created, created
			continue
		}
		parent := m
		if m, ok = asMap(child); !ok {
			return r.notObject(i, child)
		}
		if m == nil {
			m = make(map[string]any)
			parent[name] = m
		}
	}
	delete(m, r.path[last])
	return nil
}

// structured returns the map of structured data d. Absent data is a nil map,
// or with create a new one. Raw data is an error: its bytes have no fields
// until something (e.g. Conduit's json.decode) parses them.
func (r Reference) structured(d record.Data, create bool) (map[string]any, error) {
	switch x := d.(type) {
	case nil:
	case record.StructuredData:
		if x != nil {
			return x, nil
		}
	case record.RawData:
		return nil, fmt.Errorf("cannot use %s: %s holds raw data, not structured data", r.raw, partNames[r.part])
	default:
		return nil, fmt.Errorf("cannot use %s: %s holds %T, not structured data", r.raw, partNames[r.part], d)
	}
	if create {
		return make(map[string]any), nil
	}
	return nil, nil
}

// notObject is the error for a path whose segment i holds a value without
// fields.
func (r Reference) notObject(i int, v any) error {
	return fmt.Errorf("cannot use %s: %s is %s, not an object", r.raw, r.prefix(i), describe(v))
}

// prefix formats the reference up to and including path[i].
func (r Reference) prefix(i int) string {
	var b strings.Builder
	b.WriteString(partNames[r.part])
	for _, name := range r.path[:i+1] {
		if isIdent(name) {
			b.WriteByte('.')
			b.WriteString(name)
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Quote(name))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func (r Reference) wrongType(v any, want string) error {
	return fmt.Errorf("cannot set %s to %s: want %s", r.raw, describe(v), want)
}

func isIdent(s string) bool {
	for i, c := range s {
		if c != '_' && !unicode.IsLetter(c) && (i == 0 || !unicode.IsDigit(c)) {
			return false
		}
	}
	return s != ""
}

// describe names a value's kind for error messages, in the user's terms.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return "a number"
	case []any:
		return "a list"
	case []byte, record.RawData:
		return "raw data"
	case record.Change:
		return "a payload"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func asMap(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case record.StructuredData:
		return x, true
	}
	return nil, false
}

func toData(v any) (record.Data, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case record.RawData:
		return x, nil
	case record.StructuredData:
		return x, nil
	case string:
		return record.RawData(x), nil
	case []byte:
		return record.RawData(x), nil
	case map[string]any:
		return record.StructuredData(x), nil
	default:
		return nil, fmt.Errorf("want raw data (text) or structured data, got %s", describe(v))
	}
}
