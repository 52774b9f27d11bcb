package conduitplugin

import (
	"github.com/conduitio/conduit-commons/opencdc"

	"github.com/conduitry/conduit/pkg/record"
)

// Both record types are OpenCDC: the same operations with the same numbers,
// metadata as a map of strings, data either raw bytes or a map. So a record
// changes type without copying a field: the maps and byte slices are
// handed over as they are. That is safe because ownership moves with the
// record: a source's plugin no longer touches a record it sent, and a
// destination's plugin no longer touches a record once it acked it.

// toRecord converts a record a plugin sent.
func toRecord(in *opencdc.Record, out *record.Record) {
	out.Position = record.Position(in.Position)
	out.Operation = record.Operation(in.Operation)
	out.Metadata = record.Metadata(in.Metadata)
	out.Key = toData(in.Key)
	out.Payload.Before = toData(in.Payload.Before)
	out.Payload.After = toData(in.Payload.After)
}

func toData(d opencdc.Data) record.Data {
	switch v := d.(type) {
	case opencdc.RawData:
		return record.RawData(v)
	case opencdc.StructuredData:
		return record.StructuredData(v)
	}
	return nil
}

// fromRecord converts a record for a plugin.
func fromRecord(in *record.Record) opencdc.Record {
	return opencdc.Record{
		Position:  opencdc.Position(in.Position),
		Operation: opencdc.Operation(in.Operation),
		Metadata:  opencdc.Metadata(in.Metadata),
		Key:       fromData(in.Key),
		Payload: opencdc.Change{
			Before: fromData(in.Payload.Before),
			After:  fromData(in.Payload.After),
		},
	}
}

func fromData(d record.Data) opencdc.Data {
	switch v := d.(type) {
	case record.RawData:
		return opencdc.RawData(v)
	case record.StructuredData:
		return opencdc.StructuredData(v)
	}
	return nil
}
