package record

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the record as one OpenCDC JSON object (no trailing
// newline), the shape Conduit's file destination writes:
//
//	{"position":"<base64>","operation":"create","metadata":{...},
//	 "key":<data>,"payload":{"before":<data>,"after":<data>}}
//
// Raw data is base64 text, structured data a JSON object, absent data null.
// Map keys are sorted so the output is deterministic. It is hand-written
// because it runs once per record on the hot path: encoding/json would
// reflect over every map and allocate for every value.
func AppendJSON(dst []byte, r *Record) ([]byte, error) {
	dst = append(dst, `{"position":`...)
	dst = appendBase64(dst, r.Position)
	dst = append(dst, `,"operation":"`...)
	dst = append(dst, r.Operation.String()...)
	dst = append(dst, `","metadata":`...)
	dst = appendMetadata(dst, r.Metadata)
	dst = append(dst, `,"key":`...)
	var err error
	if dst, err = appendData(dst, r.Key); err != nil {
		return dst, fmt.Errorf("key: %w", err)
	}
	dst = append(dst, `,"payload":{"before":`...)
	if dst, err = appendData(dst, r.Payload.Before); err != nil {
		return dst, fmt.Errorf("payload.before: %w", err)
	}
	dst = append(dst, `,"after":`...)
	if dst, err = appendData(dst, r.Payload.After); err != nil {
		return dst, fmt.Errorf("payload.after: %w", err)
	}
	return append(dst, "}}"...), nil
}

func appendBase64(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func appendMetadata(dst []byte, m Metadata) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	// A stack buffer covers the usual handful of keys without allocating.
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

func appendData(dst []byte, d Data) ([]byte, error) {
	switch x := d.(type) {
	case nil:
		return append(dst, "null"...), nil
	case RawData:
		return appendBase64(dst, x), nil
	case StructuredData:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, x)
	default:
		return dst, fmt.Errorf("unsupported data type %T", d)
	}
}

func appendObject(dst []byte, m map[string]any) ([]byte, error) {
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendJSONValue(dst, m[k]); err != nil {
			return dst, fmt.Errorf("field %q: %w", k, err)
		}
	}
	return append(dst, '}'), nil
}

// appendJSONValue encodes the value types records carry without reflection
// and falls back to encoding/json for anything else.
func appendJSONValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, x), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float32:
		return appendFloat(dst, float64(x), 32)
	case float64:
		return appendFloat(dst, x, 64)
	case time.Time:
		dst = append(dst, '"')
		dst = x.AppendFormat(dst, time.RFC3339Nano)
		return append(dst, '"'), nil
	case []byte:
		return appendBase64(dst, x), nil
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, x)
	case StructuredData:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, x)
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		var err error
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendJSONValue(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
}

var errNonFinite = errors.New("NaN and infinite numbers have no JSON form")

func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, errNonFinite
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits), nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Like encoding/json it escapes <, >
// and & so the output is safe to embed in HTML, and replaces invalid UTF-8
// with U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// wireRecord is the decoding side of AppendJSON.
type wireRecord struct {
	Position  []byte            `json:"position"`
	Operation string            `json:"operation"`
	Metadata  map[string]string `json:"metadata"`
	Key       json.RawMessage   `json:"key"`
	Payload   struct {
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"payload"`
}

// ParseJSON decodes one OpenCDC JSON object as written by AppendJSON. It is
// used off the hot path (tests, tools, reading records back).
func ParseJSON(line []byte) (Record, error) {
	var w wireRecord
	if err := json.Unmarshal(line, &w); err != nil {
		return Record{}, fmt.Errorf("decode OpenCDC record: %w", err)
	}
	op, err := ParseOperation(w.Operation)
	if err != nil {
		return Record{}, fmt.Errorf("decode OpenCDC record: operation: %w", err)
	}
	r := Record{Position: w.Position, Operation: op, Metadata: w.Metadata}
	if r.Key, err = parseData(w.Key); err != nil {
		return Record{}, fmt.Errorf("decode OpenCDC record: key: %w", err)
	}
	if r.Payload.Before, err = parseData(w.Payload.Before); err != nil {
		return Record{}, fmt.Errorf("decode OpenCDC record: payload.before: %w", err)
	}
	if r.Payload.After, err = parseData(w.Payload.After); err != nil {
		return Record{}, fmt.Errorf("decode OpenCDC record: payload.after: %w", err)
	}
	return r, nil
}

func parseData(raw json.RawMessage) (Data, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var b []byte
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, err
		}
		return RawData(b), nil
	case '{':
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		return StructuredData(m), nil
	default:
		return nil, fmt.Errorf("want base64 text, an object or null, got %.20s", raw)
	}
}
