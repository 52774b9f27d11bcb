package connector

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/conduitplugin"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// errWriteBeforeOpen is returned by Write without a successful Open.
var errWriteBeforeOpen = errors.New("write called before a successful open")

// standaloneDestination is a destination served by a standalone
// connector's process.
type standaloneDestination struct {
	p      *pluginProcess
	client connectorv1connect.DestinationServiceClient // nil until the handshake succeeded
	// buf is the reused encoding buffer (Write calls do not overlap).
	buf []byte
	// conduit runs a plugin of Conduit's connector protocol; nil for one
	// of pkg/sdk.
	conduit *conduitplugin.Destination
}

// Open starts the process, completes the handshake, and configures and
// opens the plugin.
func (d *standaloneDestination) Open(ctx context.Context) error {
	if err := d.p.start(ctx); err != nil {
		return err
	}
	if d.p.conduit != nil {
		plug, opts, err := d.p.conduitDestination(ctx)
		if err != nil {
			return err
		}
		d.conduit = conduitplugin.NewDestination(plug, opts)
		return d.p.conduitError(ctx, d.conduit.Open(ctx))
	}
	d.client = connectorv1connect.NewDestinationServiceClient(d.p.client, baseURL, d.p.clientOptions()...)
	if _, err := d.client.Configure(ctx, connect.NewRequest(&connectorv1.DestinationServiceConfigureRequest{
		Config: d.p.connectorConfig(),
	})); err != nil {
		return d.p.callError(ctx, "configure", err)
	}
	if _, err := d.client.Open(ctx, connect.NewRequest(&connectorv1.DestinationServiceOpenRequest{})); err != nil {
		return d.p.callError(ctx, "open", err)
	}
	return nil
}

// LastPosition implements PositionReporter by asking the plugin; a plugin
// that cannot tell, or was built before the call existed, does not report.
func (d *standaloneDestination) LastPosition(ctx context.Context) (record.Position, bool, error) {
	if d.conduit != nil {
		return nil, false, nil // Conduit's protocol cannot tell
	}
	if d.client == nil {
		return nil, false, errWriteBeforeOpen
	}
	resp, err := d.client.LastPosition(ctx, connect.NewRequest(&connectorv1.LastPositionRequest{}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, d.p.callError(ctx, "last position", err)
	}
	if !resp.Msg.GetKnown() || resp.Msg.Position == nil {
		return nil, resp.Msg.GetKnown(), nil
	}
	return record.Position(resp.Msg.GetPosition()), true, nil
}

// Write sends the batch to the plugin. When the plugin wrote only some
// records, its error (the error JSON) is returned with their count.
func (d *standaloneDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if d.conduit != nil {
		n, err := d.conduit.Write(ctx, batch)
		return n, d.p.conduitError(ctx, err)
	}
	if d.client == nil {
		return 0, errWriteBeforeOpen
	}
	if len(batch) == 0 {
		return 0, nil
	}
	buf, err := record.AppendBatch(d.buf[:0], batch)
	if err != nil {
		return d.writeUnencodable(ctx, batch)
	}
	d.buf = buf
	return d.write(ctx, batch, buf)
}

func (d *standaloneDestination) write(ctx context.Context, batch []record.Record, data []byte) (int, error) {
	// After the encoding, which takes time: see pkg/writeguard.
	if err := writeguard.Check(ctx); err != nil {
		return 0, fmt.Errorf("standalone connector %q: write: %w", d.p.name, err)
	}
	resp, err := d.client.Write(ctx, connect.NewRequest(&connectorv1.WriteRequest{
		Batch: &connectorv1.RecordBatch{Count: int32(len(batch)), Data: data},
	}))
	if err != nil {
		return 0, d.p.callError(ctx, "write", err)
	}
	n := min(max(int(resp.Msg.GetWritten()), 0), len(batch))
	if msg := resp.Msg.GetError(); msg != "" {
		return n, fmt.Errorf("standalone connector %q: write: %w", d.p.name, cerrors.FromWire(msg))
	}
	return n, nil
}

// writeUnencodable handles a batch with a record the batch encoding cannot
// carry: the records before it are written, and it fails fatally (it will
// never be encodable), so that the engine nacks exactly that record.
func (d *standaloneDestination) writeUnencodable(ctx context.Context, batch []record.Record) (int, error) {
	bad, encErr := 0, error(nil)
	for i := range batch {
		if _, err := record.AppendBatch(d.buf[:0], batch[i:i+1]); err != nil {
			bad, encErr = i, err
			break
		}
	}
	if bad > 0 {
		buf, err := record.AppendBatch(d.buf[:0], batch[:bad])
		if err != nil { // cannot happen: each of them encoded alone
			return 0, cerrors.Fatal(fmt.Errorf("standalone connector %q: write: %w", d.p.name, err))
		}
		d.buf = buf
		if n, err := d.write(ctx, batch[:bad], buf); err != nil || n < bad {
			return n, err
		}
	}
	return bad, cerrors.Fatal(fmt.Errorf("standalone connector %q: write: %w", d.p.name, encErr))
}

// Teardown calls the plugin's Teardown and stops the process.
func (d *standaloneDestination) Teardown(ctx context.Context) error {
	return d.p.close(ctx, func(ctx context.Context) error {
		if d.conduit != nil {
			return d.conduit.Teardown(ctx)
		}
		if d.client == nil {
			return nil
		}
		_, err := d.client.Teardown(ctx, connect.NewRequest(&connectorv1.DestinationServiceTeardownRequest{}))
		return err
	})
}

// Deleted implements Deleter, as standaloneSource.Deleted.
func (d *standaloneDestination) Deleted(ctx context.Context) error {
	if err := d.p.start(ctx); err != nil {
		return err
	}
	if d.p.conduit == nil {
		return nil
	}
	plug, opts, err := d.p.conduitDestination(ctx)
	if err != nil {
		return err
	}
	d.conduit = conduitplugin.NewDestination(plug, opts)
	return d.p.conduitError(ctx, d.conduit.Deleted(ctx))
}
