// Package record defines the OpenCDC-shaped record that moves through a
// pipeline and its JSON wire shape (the one Conduit's file destination writes).
//
// It is deliberately small: connectors, processors and the engine all import
// it, so it must not import any of them.
package record

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"
	"time"
)

// Operation says what caused a record. The zero value is invalid so that a
// record nobody filled in is caught instead of being written as "create".
type Operation int

// Operations, with the names OpenCDC uses on the wire.
const (
	OperationCreate Operation = iota + 1
	OperationUpdate
	OperationDelete
	OperationSnapshot
)

var operationNames = [...]string{
	OperationCreate:   "create",
	OperationUpdate:   "update",
	OperationDelete:   "delete",
	OperationSnapshot: "snapshot",
}

// String returns the OpenCDC name of the operation.
func (o Operation) String() string {
	if o >= OperationCreate && o <= OperationSnapshot {
		return operationNames[o]
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}

// ParseOperation turns an OpenCDC operation name into an Operation.
func ParseOperation(name string) (Operation, error) {
	for op := OperationCreate; op <= OperationSnapshot; op++ {
		if operationNames[op] == name {
			return op, nil
		}
	}
	return 0, fmt.Errorf("unknown operation %q (want create, update, delete or snapshot)", name)
}

// Position is an opaque, source-defined marker that the source can resume
// from. Only the source that produced it may interpret its bytes.
type Position []byte

// String returns the position as text, for logs.
func (p Position) String() string { return string(p) }

// Metadata holds string annotations of a record. Keys that start with
// "opencdc." or "conduit." are reserved for the runtime.
type Metadata map[string]string

// Standard metadata keys.
const (
	MetadataReadAt            = "opencdc.readAt"
	MetadataCreatedAt         = "opencdc.createdAt"
	MetadataVersion           = "opencdc.version"
	MetadataSourceConnectorID = "conduit.source.connector.id"
	MetadataFilePath          = "file.path"

	// OpenCDCVersion is the value of MetadataVersion for a connector that
	// sets it. The runtime does not: Conduit does not either.
	OpenCDCVersion = "v1"
)

// NodeID is how Conduit names a pipeline's connector or processor in
// record metadata (conduit.source.connector.id, conduit.dlq.nack.node.id):
// the ids from the pipeline file joined by colons, pipeline first
// ("orders:pg", "orders:pg:rename"). Empty parts are left out.
func NodeID(pipelineID string, ids ...string) string {
	n := pipelineID
	for _, id := range ids {
		switch {
		case id == "":
		case n == "":
			n = id
		default:
			n += ":" + id
		}
	}
	return n
}

// SetReadAt records when the source read the record (Unix nanoseconds, as
// Conduit writes it).
func (m Metadata) SetReadAt(t time.Time) {
	m[MetadataReadAt] = strconv.FormatInt(t.UnixNano(), 10)
}

// Data is a record's key or payload: either RawData or StructuredData. A nil
// Data means "absent" and is written as JSON null.
type Data interface {
	// Bytes returns the data as bytes: raw data as is, structured data as JSON.
	Bytes() []byte
	// Clone returns a deep copy (structured values are copied one level deep,
	// nested maps and slices are copied too).
	Clone() Data
	isData()
}

// RawData is uninterpreted bytes. On the wire it is base64 text.
type RawData []byte

// Bytes returns the raw bytes.
func (d RawData) Bytes() []byte { return d }

// Clone copies the bytes.
func (d RawData) Clone() Data { return RawData(bytes.Clone(d)) }

func (RawData) isData() {}

// StructuredData is a JSON-like object. On the wire it is a JSON object.
type StructuredData map[string]any

// Bytes returns the object encoded as JSON, keys sorted.
func (d StructuredData) Bytes() []byte {
	b, err := appendJSONValue(nil, map[string]any(d))
	if err != nil {
		// Values that cannot be JSON (channels, funcs) have no byte form;
		// returning nil is what "absent" means and keeps Bytes total.
		return nil
	}
	return b
}

// Clone deep-copies the object.
func (d StructuredData) Clone() Data {
	if d == nil {
		return StructuredData(nil)
	}
	return StructuredData(cloneMap(d))
}

func (StructuredData) isData() {}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case StructuredData:
		return StructuredData(cloneMap(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []byte:
		return bytes.Clone(x)
	default:
		return v
	}
}

// Change holds the state of the entity before and after the operation.
type Change struct {
	Before Data
	After  Data
}

// Record is one change read from a source.
type Record struct {
	Position  Position
	Operation Operation
	Metadata  Metadata
	Key       Data
	Payload   Change
}

// Clone returns a deep copy of the record, for stages that must keep a record
// beyond the call that handed it to them.
func (r Record) Clone() Record {
	out := Record{
		Position:  bytes.Clone(r.Position),
		Operation: r.Operation,
		Metadata:  maps.Clone(r.Metadata),
	}
	if r.Key != nil {
		out.Key = r.Key.Clone()
	}
	if r.Payload.Before != nil {
		out.Payload.Before = r.Payload.Before.Clone()
	}
	if r.Payload.After != nil {
		out.Payload.After = r.Payload.After.Clone()
	}
	return out
}

// Map returns the record as a structured value in OpenCDC's shape, the
// form in which Conduit stores a record inside another (a dead-letter
// record's payload): position as bytes, operation by name, metadata as a
// map, key and payloads as bytes (raw) or maps (structured), nil when
// absent. The values are shared with r, not copied.
func (r Record) Map() map[string]any {
	var md map[string]any
	if r.Metadata != nil {
		md = make(map[string]any, len(r.Metadata))
		for k, v := range r.Metadata {
			md[k] = v
		}
	}
	return map[string]any{
		"position":  []byte(r.Position),
		"operation": r.Operation.String(),
		"metadata":  md,
		"key":       mapData(r.Key),
		"payload": map[string]any{
			"before": mapData(r.Payload.Before),
			"after":  mapData(r.Payload.After),
		},
	}
}

func mapData(d Data) any {
	switch x := d.(type) {
	case StructuredData:
		return map[string]any(x)
	case RawData:
		return []byte(x)
	}
	return nil
}
