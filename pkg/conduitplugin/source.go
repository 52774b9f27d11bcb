package conduitplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// Source runs a source plugin of Conduit's protocol as an engine source
// (connector.Source). Open configures and opens the plugin and starts its
// run; a goroutine owned by the Source receives what the run sends until
// Teardown.
type Source struct {
	plugin SourcePlugin
	opts   Options
	log    *zap.Logger

	// Set by a successful Open.
	stream    pconnector.SourceRunStreamClient
	runCancel context.CancelFunc
	received  chan sourceMessage
	stop      chan struct{} // closed by Teardown: the receiver stops
	recvDone  chan struct{} // closed when the receiver returned

	// ahead counts the records the receiver passed on that Read has not
	// converted yet; taken wakes the receiver when Read brought it under
	// receiveAheadRecords.
	ahead atomic.Int64
	taken chan struct{}

	pending []opencdc.Record // received, not yet handed to the engine
	runErr  error            // the run's end, once Read saw it
	torn    bool
}

// receiveAhead is how many messages the receiver holds for Read: enough
// for an engine batch of a plugin that sends one record a message.
const receiveAhead = 256

// receiveAheadRecords bounds the records received and not yet read, so
// that a plugin sending large messages cannot run ahead of the engine by
// many of them: Conduit's PostgreSQL source sends its snapshot in
// messages of a whole fetch (50,000 rows by default), and 256 of those
// would hold a large table in memory at once. The receiver stops taking
// messages while this many records wait; what the plugin prepares
// meanwhile waits in the plugin.
const receiveAheadRecords = 4096

type sourceMessage struct {
	records []opencdc.Record
	err     error
}

// NewSource returns the adapter for plugin; it does no I/O.
func NewSource(plugin SourcePlugin, opts Options) *Source {
	return &Source{plugin: plugin, opts: opts, log: opts.logger()}
}

func (s *Source) errorf(format string, args ...any) error {
	return fmt.Errorf("connector %s (%s): "+format, append([]any{s.opts.ConnectorID, s.opts.Plugin}, args...)...)
}

// Open configures the plugin, sends its lifecycle event, opens it at pos
// and starts its run.
func (s *Source) Open(ctx context.Context, pos record.Position) error {
	if s.stream != nil || s.torn {
		return s.errorf("open called twice or after teardown")
	}
	ctx = withLogger(ctx, s.log)
	if _, err := s.plugin.Configure(ctx, pconnector.SourceConfigureRequest{Config: s.opts.sourceSettings()}); err != nil {
		return cerrors.Fatal(s.errorf("configure: %w", err))
	}
	err := lifecycleEvent(ctx, s.opts,
		func(ctx context.Context, c config.Config) error {
			_, err := s.plugin.LifecycleOnCreated(ctx, pconnector.SourceLifecycleOnCreatedRequest{Config: c})
			return err
		},
		func(ctx context.Context, before, after config.Config) error {
			_, err := s.plugin.LifecycleOnUpdated(ctx, pconnector.SourceLifecycleOnUpdatedRequest{ConfigBefore: before, ConfigAfter: after})
			return err
		})
	if err != nil {
		return s.errorf("%w", err)
	}
	if _, err := s.plugin.Open(ctx, pconnector.SourceOpenRequest{Position: opencdc.Position(pos)}); err != nil {
		return s.errorf("open: %w", err)
	}
	// The run lives until Teardown, not until the end of Open's call.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream := s.plugin.NewStream()
	if err := s.plugin.Run(runCtx, stream); err != nil {
		cancel()
		return s.errorf("starting its run: %w", err)
	}
	s.stream, s.runCancel = stream.Client(), cancel
	s.received = make(chan sourceMessage, receiveAhead)
	s.taken = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.recvDone = make(chan struct{})
	go s.receive()
	return nil
}

// receive moves what the run sends to Read, so that Read can give up when
// its context ends while the stream's Recv cannot. Once Teardown began it
// drops what still comes, so that a plugin blocked in sending can see its
// Stop, until the run ends.
func (s *Source) receive() {
	defer close(s.recvDone)
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			select {
			case s.received <- sourceMessage{err: err}:
			case <-s.stop:
			}
			return
		}
		if len(resp.Records) == 0 {
			continue
		}
		select {
		case s.received <- sourceMessage{records: resp.Records}:
		case <-s.stop:
			continue
		}
		s.ahead.Add(int64(len(resp.Records)))
		s.waitRead()
	}
}

// waitRead waits until Read brought the records waiting under
// receiveAheadRecords, or Teardown began.
func (s *Source) waitRead() {
	for s.ahead.Load() >= receiveAheadRecords {
		select {
		case <-s.taken:
		case <-s.stop:
			return
		}
	}
}

// Read hands over the records the plugin sent, at most len(batch).
func (s *Source) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.stream == nil {
		return 0, s.errorf("read called before a successful open")
	}
	for len(s.pending) == 0 {
		if s.runErr != nil {
			return 0, s.runErr
		}
		select {
		case m := <-s.received:
			if m.err != nil {
				s.runErr = s.runEnded(m.err)
				return 0, s.runErr
			}
			s.pending = m.records
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	n := 0
	for n < len(batch) {
		k, err := s.take(ctx, batch[n:])
		n += k
		if err != nil {
			return n, err
		}
		// A plugin without batching sends one record a message; the
		// messages already here fill the batch, so that acks and position
		// saves go by batch, not by record.
		if n == len(batch) || !s.more() {
			break
		}
	}
	return n, nil
}

// take converts pending records into batch.
func (s *Source) take(ctx context.Context, batch []record.Record) (int, error) {
	n := min(len(batch), len(s.pending))
	for i := range n {
		if err := decodeRecord(ctx, &s.pending[i]); err != nil {
			// The same bytes would fail again after a restart.
			return i, cerrors.Fatal(s.errorf("record at position %q: %w", s.pending[i].Position, err))
		}
		record.FromOpenCDC(&s.pending[i], &batch[i])
	}
	// The slice is the plugin's message: the SDK still reads its last
	// record's position after sending it, so that one is kept; the others
	// are cleared, so that the records the engine is done with can be
	// collected before the whole message is read (a snapshot's fetch is
	// 50,000 rows).
	clear(s.pending[:min(n, len(s.pending)-1)])
	s.pending = s.pending[n:]
	if s.ahead.Add(-int64(n)) < receiveAheadRecords {
		select {
		case s.taken <- struct{}{}:
		default: // the receiver has a wake-up waiting already
		}
	}
	return n, nil
}

// more moves the next message into pending if one is already here; an
// error stays for the next Read.
func (s *Source) more() bool {
	if len(s.pending) > 0 {
		return true
	}
	select {
	case m := <-s.received:
		if m.err != nil {
			s.runErr = s.runEnded(m.err)
			return false
		}
		s.pending = m.records
		return true
	default:
		return false
	}
}

// runEnded is the error for the end of the plugin's run while the engine
// still reads: its own error, or a transient one when it ended without.
func (s *Source) runEnded(err error) error {
	if errors.Is(err, io.EOF) {
		return cerrors.Transient(s.errorf("the connector ended its run without an error"))
	}
	return s.errorf("%w", err)
}

// Ack passes the positions the destinations accepted to the plugin.
func (s *Source) Ack(_ context.Context, positions []record.Position) error {
	if s.stream == nil {
		return s.errorf("ack called before a successful open")
	}
	ps := make([]opencdc.Position, len(positions))
	for i, p := range positions {
		ps[i] = opencdc.Position(p)
	}
	if err := s.stream.Send(pconnector.SourceRunRequest{AckPositions: ps}); err != nil {
		if s.runErr != nil {
			return s.runErr
		}
		return s.errorf("ack: %w", err)
	}
	return nil
}

// Teardown stops the plugin's run and tears it down. It is safe to call
// without Open and more than once.
func (s *Source) Teardown(ctx context.Context) error {
	if s.torn {
		return nil
	}
	s.torn = true
	ctx = withLogger(ctx, s.log)
	if s.stream != nil {
		close(s.stop)
		if resp, err := s.plugin.Stop(ctx, pconnector.SourceStopRequest{}); err != nil {
			s.log.Warn("stopping the connector failed", zap.Error(err))
		} else {
			s.log.Debug("connector stopped", zap.String("last_position", string(resp.LastPosition)))
		}
		s.runCancel()
		<-s.recvDone
	}
	if _, err := s.plugin.Teardown(ctx, pconnector.SourceTeardownRequest{}); err != nil {
		return s.errorf("teardown: %w", err)
	}
	return nil
}

// Deleted tells the connector that its pipeline was deleted
// (LifecycleOnDeleted): Conduit's PostgreSQL source, for one, drops the
// replication slot and publication it created, which would otherwise
// keep PostgreSQL's write-ahead log from being recycled. Call it on a
// Source that was not opened, then Teardown.
func (s *Source) Deleted(ctx context.Context) error {
	ctx = withLogger(ctx, s.log)
	err := deletedEvent(ctx, s.opts, func(ctx context.Context, c config.Config) error {
		_, err := s.plugin.LifecycleOnDeleted(ctx, pconnector.SourceLifecycleOnDeletedRequest{Config: c})
		return err
	})
	if err != nil {
		return s.errorf("%w", err)
	}
	return nil
}
