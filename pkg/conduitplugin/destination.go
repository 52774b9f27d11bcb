package conduitplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// Destination runs a destination plugin of Conduit's protocol as an engine
// destination (connector.Destination). Each Write sends the engine's batch
// as one message and waits for its acks, which the plugin sends in order.
type Destination struct {
	plugin DestinationPlugin
	opts   Options
	log    *zap.Logger

	// Set by a successful Open.
	stream    pconnector.DestinationRunStreamClient
	runCancel context.CancelFunc
	acks      chan destinationMessage
	stop      chan struct{}
	recvDone  chan struct{}

	pending      []pconnector.DestinationRunResponseAck // received, not yet matched
	lastPosition opencdc.Position                       // of the last record sent
	broken       error                                  // set once the run failed; every later call returns it
	torn         bool
}

type destinationMessage struct {
	acks []pconnector.DestinationRunResponseAck
	err  error
}

// NewDestination returns the adapter for plugin; it does no I/O.
func NewDestination(plugin DestinationPlugin, opts Options) *Destination {
	return &Destination{plugin: plugin, opts: opts, log: opts.logger()}
}

func (d *Destination) errorf(format string, args ...any) error {
	return fmt.Errorf("connector %s (%s): "+format, append([]any{d.opts.ConnectorID, d.opts.Plugin}, args...)...)
}

// engineBatchSettings are the SDK's write batching settings. The engine
// already hands a destination its batches, one Write each; a plugin that
// batched again would hold records back from a Write that waits for their
// acks. They are accepted (a file written for Conduit keeps working) and
// not passed on.
var engineBatchSettings = []string{"sdk.batch.size", "sdk.batch.delay"}

// pluginSettings are the settings the plugin is configured with.
func (d *Destination) pluginSettings() config.Config {
	out := maps.Clone(config.Config(d.opts.Settings))
	if out == nil {
		out = config.Config{}
	}
	for _, k := range engineBatchSettings {
		if v, ok := out[k]; ok {
			delete(out, k)
			d.log.Info("setting left to the engine, which writes its own batches", zap.String("setting", k), zap.String("value", v))
		}
	}
	return out
}

// Open configures the plugin, sends its lifecycle event, opens it and
// starts its run.
func (d *Destination) Open(ctx context.Context) error {
	if d.stream != nil || d.torn {
		return d.errorf("open called twice or after teardown")
	}
	ctx = withLogger(ctx, d.log)
	if _, err := d.plugin.Configure(ctx, pconnector.DestinationConfigureRequest{Config: d.pluginSettings()}); err != nil {
		return cerrors.Fatal(d.errorf("configure: %w", err))
	}
	err := lifecycleEvent(ctx, d.opts,
		func(ctx context.Context, c config.Config) error {
			_, err := d.plugin.LifecycleOnCreated(ctx, pconnector.DestinationLifecycleOnCreatedRequest{Config: c})
			return err
		},
		func(ctx context.Context, before, after config.Config) error {
			_, err := d.plugin.LifecycleOnUpdated(ctx, pconnector.DestinationLifecycleOnUpdatedRequest{ConfigBefore: before, ConfigAfter: after})
			return err
		})
	if err != nil {
		return d.errorf("%w", err)
	}
	if _, err := d.plugin.Open(ctx, pconnector.DestinationOpenRequest{}); err != nil {
		return d.errorf("open: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream := d.plugin.NewStream()
	if err := d.plugin.Run(runCtx, stream); err != nil {
		cancel()
		return d.errorf("starting its run: %w", err)
	}
	d.stream, d.runCancel = stream.Client(), cancel
	d.acks = make(chan destinationMessage, 1)
	d.stop = make(chan struct{})
	d.recvDone = make(chan struct{})
	go d.receive()
	return nil
}

// receive moves the acks the run sends to Write; once Teardown began it
// drops what still comes, until the run ends.
func (d *Destination) receive() {
	defer close(d.recvDone)
	for {
		resp, err := d.stream.Recv()
		if err != nil {
			select {
			case d.acks <- destinationMessage{err: err}:
			case <-d.stop:
			}
			return
		}
		if len(resp.Acks) == 0 {
			continue
		}
		select {
		case d.acks <- destinationMessage{acks: resp.Acks}:
		case <-d.stop:
		}
	}
}

// Write sends batch to the plugin and waits for an ack of each record.
// When the plugin acks a record with an error, the records before it were
// written and the error names the record.
func (d *Destination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if d.stream == nil {
		return 0, d.errorf("write called before a successful open")
	}
	if d.broken != nil {
		return 0, d.broken
	}
	if len(batch) == 0 {
		return 0, nil
	}
	recs := make([]opencdc.Record, len(batch))
	for i := range batch {
		recs[i] = record.ToOpenCDC(&batch[i])
	}
	// After the conversion, which takes time: see pkg/writeguard.
	if err := writeguard.Check(ctx); err != nil {
		return 0, d.errorf("write: %w", err)
	}
	if err := d.stream.Send(pconnector.DestinationRunRequest{Records: recs}); err != nil {
		return 0, d.fail(d.errorf("write: %w", err))
	}
	d.lastPosition = recs[len(recs)-1].Position
	for i := range recs {
		ack, err := d.nextAck(ctx)
		if err != nil {
			return i, err
		}
		if !bytes.Equal(ack.Position, recs[i].Position) {
			// The protocol acks in order; anything else would make the
			// engine's record of what was written wrong.
			return i, d.fail(cerrors.Fatal(d.errorf("the connector acked position %q where %q was next: acks must follow the order of the records",
				ack.Position, recs[i].Position)))
		}
		if ack.Error != "" {
			// The plugin's run ends after a failed write; the acks of the
			// rest of the batch, if sent, are not read.
			return i, d.fail(cerrors.ForRecord(batch[i].Position, d.errorf("write: %s", ack.Error)))
		}
	}
	return len(batch), nil
}

func (d *Destination) nextAck(ctx context.Context) (pconnector.DestinationRunResponseAck, error) {
	for len(d.pending) == 0 {
		select {
		case m := <-d.acks:
			if m.err != nil {
				if errors.Is(m.err, io.EOF) {
					return pconnector.DestinationRunResponseAck{}, d.fail(cerrors.Transient(d.errorf("the connector ended its run while records were unacknowledged")))
				}
				return pconnector.DestinationRunResponseAck{}, d.fail(d.errorf("%w", m.err))
			}
			d.pending = m.acks
		case <-ctx.Done():
			// Whether the batch was written is unknown; the engine
			// restarts the destination, which must not see this stream
			// again.
			return pconnector.DestinationRunResponseAck{}, d.fail(ctx.Err())
		}
	}
	ack := d.pending[0]
	d.pending = d.pending[1:]
	return ack, nil
}

func (d *Destination) fail(err error) error {
	if d.broken == nil {
		d.broken = err
	}
	return err
}

// Teardown tells the plugin the last record it was sent, lets it flush,
// and tears it down. It is safe to call without Open and more than once.
func (d *Destination) Teardown(ctx context.Context) error {
	if d.torn {
		return nil
	}
	d.torn = true
	ctx = withLogger(ctx, d.log)
	if d.stream != nil {
		close(d.stop)
		if d.broken == nil {
			if _, err := d.plugin.Stop(ctx, pconnector.DestinationStopRequest{LastPosition: d.lastPosition}); err != nil {
				d.log.Warn("stopping the connector failed", zap.Error(err))
			}
		}
		d.runCancel()
		<-d.recvDone
	}
	if _, err := d.plugin.Teardown(ctx, pconnector.DestinationTeardownRequest{}); err != nil {
		return d.errorf("teardown: %w", err)
	}
	return nil
}

// Deleted is Source.Deleted for a destination.
func (d *Destination) Deleted(ctx context.Context) error {
	ctx = withLogger(ctx, d.log)
	err := deletedEvent(ctx, d.opts, func(ctx context.Context, c config.Config) error {
		_, err := d.plugin.LifecycleOnDeleted(ctx, pconnector.DestinationLifecycleOnDeletedRequest{Config: c})
		return err
	})
	if err != nil {
		return d.errorf("%w", err)
	}
	return nil
}
