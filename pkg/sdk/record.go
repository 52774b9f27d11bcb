package sdk

import (
	"github.com/conduitry/conduit/pkg/record"
)

// The record types are aliases of pkg/record's, so a record a connector
// builds is the record the runtime moves, with no conversion. Their shape is
// OpenCDC's.
type (
	// Record is one change: position, operation, metadata, key and payload.
	Record = record.Record
	// Position is an opaque marker a source can resume after. Only the
	// source that produced it interprets its bytes; the runtime stores the
	// one of the last acknowledged record and hands it to Source.Open.
	Position = record.Position
	// Operation says what caused a record. The zero value is invalid: a
	// record with it is rejected by the runtime.
	Operation = record.Operation
	// Metadata holds string annotations. Keys that start with "opencdc."
	// or "conduit." are reserved; the runtime may overwrite them.
	Metadata = record.Metadata
	// Change holds the state before and after the operation.
	Change = record.Change
	// Data is a key or a payload: RawData, StructuredData, or nil for
	// absent.
	Data = record.Data
	// RawData is uninterpreted bytes (base64 in OpenCDC JSON).
	RawData = record.RawData
	// StructuredData is a JSON-like object. Values may be nil, bool, the
	// integer and float types, string, []byte, time.Time, map[string]any
	// and []any; anything else fails to encode and Read reports a fatal
	// error. Integers arrive at a destination as int64 (unsigned as
	// uint64), floats as float64.
	StructuredData = record.StructuredData
)

// Operations, named as in OpenCDC. Every record a source returns needs one
// of them; Read reports a record without one as a fatal error.
const (
	OperationCreate   = record.OperationCreate
	OperationUpdate   = record.OperationUpdate
	OperationDelete   = record.OperationDelete
	OperationSnapshot = record.OperationSnapshot
)

// Standard metadata keys and values a source may set.
const (
	// MetadataCreatedAt is when the change happened upstream, as Unix
	// nanoseconds in decimal.
	MetadataCreatedAt = record.MetadataCreatedAt
	// MetadataReadAt is when the source read the change (Metadata.SetReadAt).
	MetadataReadAt = record.MetadataReadAt
	// MetadataVersion is the OpenCDC version. Neither conduit nor
	// Conduit sets it; a connector may (to OpenCDCVersion).
	MetadataVersion = record.MetadataVersion
	// MetadataSourceConnectorID names the source that read the record.
	// Leave it empty: the runtime sets it to "pipeline:connector", as
	// Conduit does, where a source did not.
	MetadataSourceConnectorID = record.MetadataSourceConnectorID
	// OpenCDCVersion is the value of MetadataVersion.
	OpenCDCVersion = record.OpenCDCVersion
)

// AppendJSON appends r as one OpenCDC JSON object without a newline, the
// line Conduit's file destination writes (position and raw data as base64,
// structured data as objects, map keys sorted). A destination that writes
// records as text can use it to match what the runtime's own connectors
// write.
func AppendJSON(dst []byte, r *Record) ([]byte, error) {
	return record.AppendJSON(dst, r)
}
