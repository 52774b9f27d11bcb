package conduitplugin

import (
	"context"
	"fmt"

	"github.com/conduitio/conduit-commons/opencdc"
	sdkschema "github.com/conduitio/conduit-connector-sdk/schema"
)

// A connector may send its key or payload encoded with a schema it
// registered (Avro bytes, with the schema's subject and version in the
// metadata), as Conduit's SDK does when schema extraction is on or the
// connector attaches schemas itself. The engine, its processors and its
// destinations work on structured data, so such records are decoded as
// they are read, with the schema from the registry the connector wrote to:
// the SDK's, in this process, which standalone plugins reach through the
// connector utilities service. The schema metadata stays on the record, so
// a Conduit destination further on sees what it would under Conduit.

// decodeRecord decodes rec's key and payload where they are encoded.
func decodeRecord(ctx context.Context, rec *opencdc.Record) error {
	if len(rec.Metadata) == 0 {
		return nil
	}
	if subject, err := rec.Metadata.GetKeySchemaSubject(); err == nil && subject != "" {
		version, err := rec.Metadata.GetKeySchemaVersion()
		if err != nil {
			return fmt.Errorf("key schema version: %w", err)
		}
		if rec.Key, err = decodeData(ctx, rec.Key, subject, version); err != nil {
			return fmt.Errorf("decoding the key with schema %s v%d: %w", subject, version, err)
		}
	}
	if subject, err := rec.Metadata.GetPayloadSchemaSubject(); err == nil && subject != "" {
		version, err := rec.Metadata.GetPayloadSchemaVersion()
		if err != nil {
			return fmt.Errorf("payload schema version: %w", err)
		}
		if rec.Payload.Before, err = decodeData(ctx, rec.Payload.Before, subject, version); err != nil {
			return fmt.Errorf("decoding payload.before with schema %s v%d: %w", subject, version, err)
		}
		if rec.Payload.After, err = decodeData(ctx, rec.Payload.After, subject, version); err != nil {
			return fmt.Errorf("decoding payload.after with schema %s v%d: %w", subject, version, err)
		}
	}
	return nil
}

func decodeData(ctx context.Context, d opencdc.Data, subject string, version int) (opencdc.Data, error) {
	raw, ok := d.(opencdc.RawData)
	if !ok || len(raw) == 0 {
		return d, nil
	}
	sch, err := sdkschema.Get(ctx, subject, version)
	if err != nil {
		return nil, err
	}
	var out opencdc.StructuredData
	if err := sch.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
