package connector

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/conduitplugin"
	"github.com/conduitry/conduit/pkg/record"
)

// standaloneSource is a source served by a standalone connector's process.
//
// It reads ahead: the fetcher goroutine keeps calling the plugin's Read
// and queues up to readAhead encoded batches, so the plugin produces the
// next batches while the engine decodes and processes this one, instead of
// the two processes taking turns. Read-ahead records that are never handed
// out (a stop) were never acknowledged either, so they are read again by
// the next run.
type standaloneSource struct {
	p      *pluginProcess
	client connectorv1connect.SourceServiceClient // nil until the handshake succeeded
	// acks is Ack's reusable request slice (Ack calls do not overlap).
	acks [][]byte

	// max is the batch size the engine asked for last; the fetcher asks
	// the plugin for that many.
	max atomic.Int32
	// fetched carries the fetcher's encoded batches (or its error) to
	// Read, which decodes them; pending holds records Read has decoded but
	// not handed out yet.
	fetched     chan fetchResult
	dec         record.BatchDecoder
	pending     []record.Record
	stopFetch   context.CancelFunc
	fetcherDone chan struct{}

	// conduit runs a plugin of Conduit's connector protocol; nil for one
	// of pkg/sdk.
	conduit *conduitplugin.Source
}

// readAhead is how many encoded batches the fetcher may hold.
const readAhead = 2

// minFetch is the fewest records the fetcher asks the plugin for. The
// engine's batches start small and grow only when a read fills them, so
// asking for just their size would keep them small, and every small batch
// costs an Ack call; Read hands a large answer out in batch-sized parts.
const minFetch = 1024

type fetchResult struct {
	batch *connectorv1.RecordBatch
	max   int
	err   error
}

// Open starts the process, completes the handshake, and configures and
// opens the plugin at pos.
func (s *standaloneSource) Open(ctx context.Context, pos record.Position) error {
	if err := s.p.start(ctx); err != nil {
		return err
	}
	if s.p.conduit != nil {
		plug, opts, err := s.p.conduitSource(ctx)
		if err != nil {
			return err
		}
		s.conduit = conduitplugin.NewSource(plug, opts)
		return s.p.conduitError(ctx, s.conduit.Open(ctx, pos))
	}
	s.client = connectorv1connect.NewSourceServiceClient(s.p.client, baseURL, s.p.clientOptions()...)
	if _, err := s.client.Configure(ctx, connect.NewRequest(&connectorv1.SourceServiceConfigureRequest{
		Config: s.p.connectorConfig(),
	})); err != nil {
		return s.p.callError(ctx, "configure", err)
	}
	if _, err := s.client.Open(ctx, connect.NewRequest(&connectorv1.SourceServiceOpenRequest{Position: pos})); err != nil {
		return s.p.callError(ctx, "open", err)
	}
	return nil
}

// Read hands out up to len(batch) records the fetcher got from the plugin.
func (s *standaloneSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.conduit != nil {
		n, err := s.conduit.Read(ctx, batch)
		return n, s.p.conduitError(ctx, err)
	}
	if s.client == nil {
		return 0, errReadBeforeOpen
	}
	s.max.Store(int32(min(len(batch), math.MaxInt32)))
	if s.fetched == nil {
		fctx, cancel := context.WithCancel(context.Background())
		s.fetched, s.stopFetch, s.fetcherDone = make(chan fetchResult, readAhead), cancel, make(chan struct{})
		go s.fetch(fctx)
	}
	if len(s.pending) == 0 {
		var f fetchResult
		select {
		case f = <-s.fetched:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if f.err != nil {
			return 0, f.err
		}
		if int(f.batch.GetCount()) <= len(batch) {
			// The usual case: decode straight into the engine's batch,
			// reusing the maps its records held.
			return s.decodeInto(f.batch, f.max, batch)
		}
		recs, err := s.decode(f.batch, f.max)
		if err != nil {
			return 0, err
		}
		s.pending = recs
	}
	n := copy(batch, s.pending)
	clear(s.pending[:n])
	s.pending = s.pending[n:]
	return n, nil
}

// fetch feeds s.fetched until ctx is done (Teardown) or the plugin fails;
// the failure is Read's to report. It reads the plugin's ReadStream, and
// falls back to calling Read batch by batch for a plugin built before
// ReadStream existed.
func (s *standaloneSource) fetch(ctx context.Context) {
	defer close(s.fetcherDone)
	if s.fetchStream(ctx) {
		return
	}
	for {
		f := s.readBatch(ctx)
		if !s.deliver(ctx, f) {
			return
		}
	}
}

// deliver hands f to Read and reports whether fetching goes on.
func (s *standaloneSource) deliver(ctx context.Context, f fetchResult) bool {
	if f.err != nil && ctx.Err() != nil {
		return false
	}
	select {
	case s.fetched <- f:
	case <-ctx.Done():
		return false
	}
	return f.err == nil
}

// fetchStream reads the plugin's ReadStream until it ends; it returns false
// only when the plugin does not have it (and sent nothing), so that fetch
// falls back to Read. With the stream the plugin produces the next batch
// while this process decodes and writes the one before, instead of the two
// taking turns once per batch; backpressure is the socket's: a stream
// nobody receives from stops the plugin's sends.
func (s *standaloneSource) fetchStream(ctx context.Context) bool {
	maxRecords := max(int(s.max.Load()), minFetch)
	stream, err := s.client.ReadStream(ctx, connect.NewRequest(&connectorv1.ReadStreamRequest{MaxRecords: int32(maxRecords)}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			return s.noStream()
		}
		s.deliver(ctx, fetchResult{err: s.streamError(ctx, err)})
		return true
	}
	defer stream.Close()
	received := false
	for stream.Receive() {
		received = true
		batch := stream.Msg().GetBatch()
		if batch.GetCount() == 0 {
			continue // as with Read: nothing to hand out yet
		}
		if !s.deliver(ctx, fetchResult{batch: batch, max: maxRecords}) {
			return true
		}
	}
	err = stream.Err()
	if !received && connect.CodeOf(err) == connect.CodeUnimplemented {
		return s.noStream()
	}
	if err == nil {
		// A plugin may not end the stream while the source is open.
		err = cerrors.Transient(fmt.Errorf("standalone connector %q: read: the plugin ended the stream", s.p.name))
	} else {
		err = s.streamError(ctx, err)
	}
	s.deliver(ctx, fetchResult{err: err})
	return true
}

// noStream notes that the plugin has no ReadStream; fetch then uses Read.
func (s *standaloneSource) noStream() bool {
	s.p.log.Debug("the plugin has no ReadStream (built with an older SDK); reading batch by batch")
	return false
}

// streamError is callError for the stream, keeping a cancellation as it is.
func (s *standaloneSource) streamError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return s.p.callError(ctx, "read", err)
}

// readBatch calls the plugin's Read once it has at least one record.
func (s *standaloneSource) readBatch(ctx context.Context) fetchResult {
	for {
		maxRecords := max(int(s.max.Load()), minFetch)
		resp, err := s.client.Read(ctx, connect.NewRequest(&connectorv1.ReadRequest{MaxRecords: int32(maxRecords)}))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return fetchResult{err: ctxErr}
			}
			return fetchResult{err: s.p.callError(ctx, "read", err)}
		}
		if resp.Msg.GetBatch().GetCount() == 0 {
			// The protocol says Read blocks until there is a record; a
			// plugin that returns empty-handed is simply asked again.
			continue
		}
		return fetchResult{batch: resp.Msg.GetBatch(), max: maxRecords}
	}
}

// decodeInto decodes a fetched batch into recs.
func (s *standaloneSource) decodeInto(b *connectorv1.RecordBatch, maxRecords int, recs []record.Record) (int, error) {
	count := int(b.GetCount())
	if count < 0 || count > maxRecords {
		return 0, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: the plugin sent %d records for a batch of %d",
			s.p.name, count, maxRecords))
	}
	n, err := s.dec.Decode(b.GetData(), count, recs)
	if err != nil {
		// A plugin that sends garbage will send it again.
		return 0, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: %w", s.p.name, err))
	}
	return n, nil
}

// decode turns a fetched batch into records. Each batch gets its own
// records: they alias the batch's bytes and are the engine's once handed
// out.
func (s *standaloneSource) decode(b *connectorv1.RecordBatch, maxRecords int) ([]record.Record, error) {
	count := int(b.GetCount())
	if count < 0 || count > maxRecords {
		return nil, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: the plugin sent %d records for a batch of %d",
			s.p.name, count, maxRecords))
	}
	recs := make([]record.Record, count)
	if _, err := s.dec.Decode(b.GetData(), count, recs); err != nil {
		// A plugin that sends garbage will send it again.
		return nil, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: %w", s.p.name, err))
	}
	return recs, nil
}

// Ack sends the positions to the plugin.
func (s *standaloneSource) Ack(ctx context.Context, positions []record.Position) error {
	if s.conduit != nil {
		return s.p.conduitError(ctx, s.conduit.Ack(ctx, positions))
	}
	if s.client == nil {
		return errReadBeforeOpen
	}
	for _, pos := range positions {
		s.acks = append(s.acks, pos)
	}
	_, err := s.client.Ack(ctx, connect.NewRequest(&connectorv1.AckRequest{Positions: s.acks}))
	clear(s.acks) // the positions are only valid during the call
	s.acks = s.acks[:0]
	if err != nil {
		return s.p.callError(ctx, "ack", err)
	}
	return nil
}

// Teardown stops the fetcher, calls the plugin's Teardown and stops the
// process.
func (s *standaloneSource) Teardown(ctx context.Context) error {
	if s.stopFetch != nil {
		s.stopFetch()
		<-s.fetcherDone
	}
	return s.p.close(ctx, func(ctx context.Context) error {
		if s.conduit != nil {
			return s.conduit.Teardown(ctx)
		}
		if s.client == nil {
			return nil
		}
		_, err := s.client.Teardown(ctx, connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{}))
		return err
	})
}

// Deleted implements Deleter: a plugin of Conduit's protocol gets its
// deleted event; one of our SDK has none.
func (s *standaloneSource) Deleted(ctx context.Context) error {
	if err := s.p.start(ctx); err != nil {
		return err
	}
	if s.p.conduit == nil {
		return nil
	}
	plug, opts, err := s.p.conduitSource(ctx)
	if err != nil {
		return err
	}
	s.conduit = conduitplugin.NewSource(plug, opts)
	return s.p.conduitError(ctx, s.conduit.Deleted(ctx))
}
