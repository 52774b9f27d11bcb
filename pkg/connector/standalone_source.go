package connector

import (
	"context"
	"fmt"
	"math"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/record"
)

// standaloneSource is a source served by a standalone connector's process.
type standaloneSource struct {
	p      *pluginProcess
	client connectorv1connect.SourceServiceClient // nil until the handshake succeeded
	// dec is used by Read only (one goroutine); records alias each Read's
	// own response, so nothing is reused under the engine's feet.
	dec record.BatchDecoder
	// acks is Ack's reusable request slice (Ack calls do not overlap).
	acks [][]byte
}

// Open starts the process, completes the handshake, and configures and
// opens the plugin at pos.
func (s *standaloneSource) Open(ctx context.Context, pos record.Position) error {
	if err := s.p.start(ctx); err != nil {
		return err
	}
	s.client = connectorv1connect.NewSourceServiceClient(s.p.client, baseURL, clientOptions()...)
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

// Read asks the plugin for up to len(batch) records.
func (s *standaloneSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.client == nil {
		return 0, errReadBeforeOpen
	}
	maxRecords := min(len(batch), math.MaxInt32)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		resp, err := s.client.Read(ctx, connect.NewRequest(&connectorv1.ReadRequest{MaxRecords: int32(maxRecords)}))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return 0, ctxErr
			}
			return 0, s.p.callError(ctx, "read", err)
		}
		b := resp.Msg.GetBatch()
		count := int(b.GetCount())
		if count == 0 {
			// The protocol says Read blocks until there is a record; a
			// plugin that returns empty-handed is simply asked again.
			continue
		}
		if count < 0 || count > maxRecords {
			return 0, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: the plugin sent %d records for a batch of %d",
				s.p.name, count, maxRecords))
		}
		n, err := s.dec.Decode(b.GetData(), count, batch[:maxRecords])
		if err != nil {
			// A plugin that sends garbage will send it again.
			return 0, cerrors.Fatal(fmt.Errorf("standalone connector %q: read: %w", s.p.name, err))
		}
		return n, nil
	}
}

// Ack sends the positions to the plugin.
func (s *standaloneSource) Ack(ctx context.Context, positions []record.Position) error {
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

// Teardown calls the plugin's Teardown and stops the process.
func (s *standaloneSource) Teardown(ctx context.Context) error {
	return s.p.close(ctx, func(ctx context.Context) error {
		_, err := s.client.Teardown(ctx, connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{}))
		return err
	})
}
