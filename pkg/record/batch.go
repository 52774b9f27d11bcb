package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The batch encoding carries records between the runtime and standalone
// connectors (RecordBatch.data in proto/conduitry/connector/v1). It is compact and
// decodes without a message per record:
//
//	batch    = version:byte(1) record*
//	record   = bytes(position) operation:byte metadata data(key) data(before) data(after)
//	metadata = uvarint(n) (string(key) string(value))*
//	data     = 0 (absent) | 1 bytes (raw) | 2 value (structured, a map)
//	value    = 0 nil | 1 false | 2 true | 3 varint (int64, zigzag)
//	         | 4 uvarint (uint64) | 5 float64 (8 bytes, little endian)
//	         | 6 string | 7 bytes | 8 varint (time, Unix nanoseconds, UTC)
//	         | 9 uvarint(n) (string value)* (map)
//	         | 10 uvarint(n) value* (list)
//	bytes, string = uvarint(length) octets
//
// WARNING: this is a wire format between separately built programs; a
// change needs a new version byte and a decoder for the old one.
const batchVersion = 1

const (
	dataAbsent     = 0
	dataRaw        = 1
	dataStructured = 2
)

const (
	valNil = iota
	valFalse
	valTrue
	valInt
	valUint
	valFloat
	valString
	valBytes
	valTime
	valMap
	valList
)

// maxNesting bounds how deep structured values may nest, so that a hostile
// batch cannot exhaust the stack.
const maxNesting = 64

// ErrBadBatch is wrapped by DecodeBatch's errors.
var ErrBadBatch = errors.New("malformed record batch")

// AppendBatch appends recs in the batch encoding.
func AppendBatch(dst []byte, recs []Record) ([]byte, error) {
	dst = append(dst, batchVersion)
	for i := range recs {
		r := &recs[i]
		dst = appendBytes(dst, r.Position)
		dst = append(dst, byte(r.Operation))
		dst = binary.AppendUvarint(dst, uint64(len(r.Metadata)))
		for k, v := range r.Metadata {
			dst = appendStr(dst, k)
			dst = appendStr(dst, v)
		}
		var err error
		for _, d := range [3]Data{r.Key, r.Payload.Before, r.Payload.After} {
			if dst, err = appendBatchData(dst, d); err != nil {
				return dst, fmt.Errorf("record %d (position %q): %w", i, r.Position, err)
			}
		}
	}
	return dst, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBatchData(dst []byte, d Data) ([]byte, error) {
	switch x := d.(type) {
	case nil:
		return append(dst, dataAbsent), nil
	case RawData:
		if x == nil {
			return append(dst, dataAbsent), nil
		}
		return appendBytes(append(dst, dataRaw), x), nil
	case StructuredData:
		if x == nil {
			return append(dst, dataAbsent), nil
		}
		return appendValue(append(dst, dataStructured), map[string]any(x), 0)
	default:
		return dst, fmt.Errorf("unsupported data type %T", d)
	}
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxNesting {
		return dst, fmt.Errorf("structured data nests deeper than %d levels", maxNesting)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, valNil), nil
	case bool:
		if x {
			return append(dst, valTrue), nil
		}
		return append(dst, valFalse), nil
	case int:
		return binary.AppendVarint(append(dst, valInt), int64(x)), nil
	case int8:
		return binary.AppendVarint(append(dst, valInt), int64(x)), nil
	case int16:
		return binary.AppendVarint(append(dst, valInt), int64(x)), nil
	case int32:
		return binary.AppendVarint(append(dst, valInt), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(dst, valInt), x), nil
	case uint:
		return binary.AppendUvarint(append(dst, valUint), uint64(x)), nil
	case uint8:
		return binary.AppendUvarint(append(dst, valUint), uint64(x)), nil
	case uint16:
		return binary.AppendUvarint(append(dst, valUint), uint64(x)), nil
	case uint32:
		return binary.AppendUvarint(append(dst, valUint), uint64(x)), nil
	case uint64:
		return binary.AppendUvarint(append(dst, valUint), x), nil
	case float32:
		return binary.LittleEndian.AppendUint64(append(dst, valFloat), math.Float64bits(float64(x))), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(dst, valFloat), math.Float64bits(x)), nil
	case string:
		return appendStr(append(dst, valString), x), nil
	case []byte:
		return appendBytes(append(dst, valBytes), x), nil
	case time.Time:
		return binary.AppendVarint(append(dst, valTime), x.UnixNano()), nil
	case map[string]any:
		return appendMap(dst, x, depth)
	case StructuredData:
		return appendMap(dst, x, depth)
	case []any:
		dst = binary.AppendUvarint(append(dst, valList), uint64(len(x)))
		var err error
		for _, e := range x {
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return dst, nil
	default:
		return dst, fmt.Errorf("unsupported value type %T", v)
	}
}

func appendMap(dst []byte, m map[string]any, depth int) ([]byte, error) {
	dst = binary.AppendUvarint(append(dst, valMap), uint64(len(m)))
	var err error
	for k, v := range m {
		dst = appendStr(dst, k)
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, fmt.Errorf("field %q: %w", k, err)
		}
	}
	return dst, nil
}

// DecodeBatch decodes the records of data into recs, which must be long
// enough for count records, and returns how many it decoded. Positions,
// keys and raw payloads alias data, so data must not be changed while the
// records are in use. The metadata and structured-payload maps recs
// already hold are cleared and reused. It never panics on malformed input.
func DecodeBatch(data []byte, count int, recs []Record) (int, error) {
	var bd BatchDecoder
	return bd.Decode(data, count, recs)
}

// maxInterned bounds a BatchDecoder's table of field names.
const maxInterned = 4096

// maxRepeated is the longest value a name's entry keeps to hand out again;
// longer values are rarely repeated and would only pin memory.
const maxRepeated = 128

// BatchDecoder decodes batches one after another and keeps the field and
// metadata names it has seen, so that the same names in every record of a
// stream are allocated once, not once per record. For each name it also
// keeps the last short string value: metadata such as the connector id,
// the OpenCDC version or a batch's read time repeats from record to record,
// and a repeated value is handed out again instead of allocated. It is not
// safe for concurrent use.
type BatchDecoder struct {
	names map[string]*nameEntry
}

// nameEntry is an interned name and the last string value it had.
type nameEntry struct {
	name string
	// last is the last value (at most maxRepeated bytes) read for this
	// name; boxed is the same string as a structured value, so that a
	// repeated field value costs neither a string nor an interface
	// allocation. Strings are immutable, so records may share them.
	last  string
	boxed any
}

// Decode is DecodeBatch with the decoder's name table.
func (bd *BatchDecoder) Decode(data []byte, count int, recs []Record) (int, error) {
	if count < 0 || count > len(recs) {
		return 0, fmt.Errorf("%w: %d records do not fit a batch of %d", ErrBadBatch, count, len(recs))
	}
	if bd.names == nil {
		bd.names = make(map[string]*nameEntry)
	}
	d := decoder{b: data, names: bd.names}
	if v := d.byte(); d.err == nil && v != batchVersion {
		return 0, fmt.Errorf("%w: version %d, this build reads version %d", ErrBadBatch, v, batchVersion)
	}
	for i := range count {
		// The maps of what recs held before are reused: a caller that
		// decodes into the same records batch after batch (the engine's
		// pool) then allocates no map per record.
		oldMeta := recs[i].Metadata
		oldAfter, _ := recs[i].Payload.After.(StructuredData)
		r := Record{Position: d.bytes()}
		if len(r.Position) == 0 {
			r.Position = nil // no position and an empty one are the same
		}
		r.Operation = Operation(d.byte())
		if n := d.uvarint(); n > 0 && d.err == nil {
			if n > uint64(len(d.b)) {
				d.fail("metadata count exceeds the batch")
				break
			}
			if oldMeta != nil {
				clear(oldMeta)
				r.Metadata = oldMeta
			} else {
				r.Metadata = make(Metadata, n)
			}
			for range n {
				e := d.name()
				r.Metadata[e.name] = d.repeatedStr(e)
			}
		}
		r.Key = d.data(nil)
		r.Payload.Before = d.data(nil)
		r.Payload.After = d.data(oldAfter)
		if d.err != nil {
			return i, fmt.Errorf("%w: record %d: %w", ErrBadBatch, i, d.err)
		}
		if r.Operation < OperationCreate || r.Operation > OperationSnapshot {
			return i, fmt.Errorf("%w: record %d: invalid operation %d", ErrBadBatch, i, r.Operation)
		}
		recs[i] = r
	}
	if d.err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadBatch, d.err)
	}
	if len(d.b) != 0 {
		return count, fmt.Errorf("%w: %d bytes left after %d records", ErrBadBatch, len(d.b), count)
	}
	return count, nil
}

type decoder struct {
	b     []byte
	err   error
	names map[string]*nameEntry
}

// name reads a string that is likely to repeat (a field or metadata name)
// through the name table.
func (d *decoder) name() *nameEntry {
	b := d.bytes()
	if e, ok := d.names[string(b)]; ok {
		return e
	}
	e := &nameEntry{name: string(b)}
	if len(d.names) < maxInterned {
		d.names[e.name] = e
	}
	return e
}

// repeatedStr reads a string value of name e, reusing e's last value when
// it is the same.
func (d *decoder) repeatedStr(e *nameEntry) string {
	b := d.bytes()
	switch {
	case d.err != nil:
		return ""
	case len(b) > maxRepeated:
		return string(b)
	case string(b) != e.last:
		e.last, e.boxed = string(b), nil
	}
	return e.last
}

// fieldValue reads the value of field e of a structured map: a string
// the field had in the record before is shared, boxed once.
func (d *decoder) fieldValue(e *nameEntry, depth int) any {
	if d.err != nil || len(d.b) == 0 || d.b[0] != valString {
		return d.value(depth)
	}
	d.b = d.b[1:]
	s := d.repeatedStr(e)
	if d.err != nil {
		return nil
	}
	if e.boxed == nil || len(s) > maxRepeated {
		box := any(s)
		if len(s) > maxRepeated {
			return box
		}
		e.boxed = box
	}
	return e.boxed
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = errors.New(msg)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("unexpected end")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad length or number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length exceeds the batch")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

// data reads a key or payload; reuse, when not nil, is a map to decode a
// structured value into instead of a new one.
func (d *decoder) data(reuse map[string]any) Data {
	switch tag := d.byte(); {
	case d.err != nil:
		return nil
	case tag == dataAbsent:
		return nil
	case tag == dataRaw:
		return RawData(d.bytes())
	case tag == dataStructured:
		if d.byte() != valMap {
			d.fail("structured data is not a map")
			return nil
		}
		return StructuredData(d.mapInto(reuse, 0))
	default:
		d.fail(fmt.Sprintf("unknown data tag %d", tag))
		return nil
	}
}

func (d *decoder) mapValue(depth int) map[string]any { return d.mapInto(nil, depth) }

func (d *decoder) mapInto(m map[string]any, depth int) map[string]any {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("map size exceeds the batch")
		return nil
	}
	if m != nil {
		clear(m)
	} else {
		m = make(map[string]any, n)
	}
	for range n {
		e := d.name()
		m[e.name] = d.fieldValue(e, depth+1)
		if d.err != nil {
			return nil
		}
	}
	return m
}

func (d *decoder) value(depth int) any {
	if depth > maxNesting {
		d.fail("structured data nests too deep")
		return nil
	}
	switch tag := d.byte(); tag {
	case valNil:
		return nil
	case valFalse:
		return false
	case valTrue:
		return true
	case valInt:
		return d.varint()
	case valUint:
		return d.uvarint()
	case valFloat:
		if len(d.b) < 8 {
			d.fail("unexpected end")
			return nil
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
		return v
	case valString:
		return d.str()
	case valBytes:
		return d.bytes()
	case valTime:
		return time.Unix(0, d.varint()).UTC()
	case valMap:
		return d.mapValue(depth)
	case valList:
		n := d.uvarint()
		if d.err != nil || n > uint64(len(d.b)) {
			d.fail("list size exceeds the batch")
			return nil
		}
		l := make([]any, n)
		for i := range l {
			l[i] = d.value(depth + 1)
		}
		return l
	default:
		if d.err == nil {
			d.fail(fmt.Sprintf("unknown value tag %d", tag))
		}
		return nil
	}
}
