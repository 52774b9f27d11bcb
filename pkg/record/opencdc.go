package record

import "github.com/conduitio/conduit-commons/opencdc"

// Both record types are OpenCDC: the same operations with the same numbers,
// metadata as a map of strings, data either raw bytes or a map. So a record
// changes type without copying a field: the maps and byte slices are
// handed over as they are. That is safe only while ownership moves with the
// record (a plugin no longer touches a record it sent or acked; a processor
// works on one record at a time), which callers must see to.

// ToOpenCDC converts in to the OpenCDC record of Conduit's libraries
// (connector plugins, processors), sharing its maps and bytes.
func ToOpenCDC(in *Record) opencdc.Record {
	return opencdc.Record{
		Position:  opencdc.Position(in.Position),
		Operation: opencdc.Operation(in.Operation),
		Metadata:  opencdc.Metadata(in.Metadata),
		Key:       toOpenCDCData(in.Key),
		Payload: opencdc.Change{
			Before: toOpenCDCData(in.Payload.Before),
			After:  toOpenCDCData(in.Payload.After),
		},
	}
}

// FromOpenCDC stores in, a record of Conduit's libraries, in out, sharing
// its maps and bytes.
func FromOpenCDC(in *opencdc.Record, out *Record) {
	out.Position = Position(in.Position)
	out.Operation = Operation(in.Operation)
	out.Metadata = Metadata(in.Metadata)
	out.Key = fromOpenCDCData(in.Key)
	out.Payload.Before = fromOpenCDCData(in.Payload.Before)
	out.Payload.After = fromOpenCDCData(in.Payload.After)
}

func toOpenCDCData(d Data) opencdc.Data {
	switch v := d.(type) {
	case RawData:
		return opencdc.RawData(v)
	case StructuredData:
		return opencdc.StructuredData(v)
	}
	return nil
}

func fromOpenCDCData(d opencdc.Data) Data {
	switch v := d.(type) {
	case opencdc.RawData:
		return RawData(v)
	case opencdc.StructuredData:
		return StructuredData(v)
	}
	return nil
}
