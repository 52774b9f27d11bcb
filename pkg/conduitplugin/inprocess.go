package conduitplugin

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-connector-sdk"
)

// SourcePlugin is a source of Conduit's protocol as the adapter drives it:
// Run only starts the stream and returns; the stream's client side then
// carries records and acks, and Recv reports the end of the run. That is
// how the protocol's gRPC client behaves; InProcessSource gives a plugin
// compiled in the same shape.
type SourcePlugin interface {
	pconnector.SourcePlugin
	NewStream() pconnector.SourceRunStream
}

// DestinationPlugin is the destination counterpart of SourcePlugin.
type DestinationPlugin interface {
	pconnector.DestinationPlugin
	NewStream() pconnector.DestinationRunStream
}

// errStreamClosed is what the plugin's side of an in-process stream gets
// once the host closed it.
var errStreamClosed = errors.New("stream closed by the host")

// pipe is an in-process stream: messages up (plugin to host) and down
// (host to plugin), the end of the plugin's run, and the host's close.
type pipe[Up, Down any] struct {
	up   chan Up
	down chan Down

	endOnce sync.Once
	ended   chan struct{} // closed when the plugin's Run returned
	runErr  error         // set before ended is closed

	closeOnce sync.Once
	closed    chan struct{} // closed when the host is done with the stream

	receivingOnce sync.Once
	receiving     chan struct{} // closed when the plugin first receives
}

// newPipe returns a pipe holding upAhead messages from the plugin and one
// to it.
func newPipe[Up, Down any](upAhead int) *pipe[Up, Down] {
	return &pipe[Up, Down]{
		up:        make(chan Up, upAhead),
		down:      make(chan Down, 1),
		ended:     make(chan struct{}),
		closed:    make(chan struct{}),
		receiving: make(chan struct{}),
	}
}

func (p *pipe[Up, Down]) end(err error) {
	p.endOnce.Do(func() {
		p.runErr = err
		close(p.ended)
	})
}

func (p *pipe[Up, Down]) close() { p.closeOnce.Do(func() { close(p.closed) }) }

// closeWhenDone closes the stream when the run's context ends, as a gRPC
// stream ends with its context: a plugin waiting to receive then sees the
// end of the stream even if its Run does not watch the context. It
// returns when either happened.
func (p *pipe[Up, Down]) closeWhenDone(ctx context.Context) {
	select {
	case <-ctx.Done():
		p.close()
	case <-p.ended:
	}
}

// closeOnceReceiving is closeWhenDone that, when ctx ends, waits until
// the plugin receives from the stream (or its Run ended) before it closes
// the stream and calls cancel.
func (p *pipe[Up, Down]) closeOnceReceiving(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	select {
	case <-ctx.Done():
	case <-p.ended:
		return
	}
	select {
	case <-p.receiving:
	case <-p.ended:
	}
	p.close()
}

// hostSend sends a message to the plugin.
func (p *pipe[Up, Down]) hostSend(m Down) error {
	select {
	case p.down <- m:
		return nil
	case <-p.ended:
		return p.endErr()
	case <-p.closed:
		return p.closedErr()
	}
}

// closedErr is the error for a stream the host closed, or the run's error
// when the run ended first (its end closes the stream too).
func (p *pipe[Up, Down]) closedErr() error {
	select {
	case <-p.ended:
		return p.endErr()
	default:
		return errStreamClosed
	}
}

// hostRecv receives a message from the plugin; once the run ended and its
// messages are drained it returns the run's error, or io.EOF.
func (p *pipe[Up, Down]) hostRecv() (Up, error) {
	select {
	case m := <-p.up:
		return m, nil
	default:
	}
	select {
	case m := <-p.up:
		return m, nil
	case <-p.ended:
		select {
		case m := <-p.up:
			return m, nil
		default:
		}
		var zero Up
		return zero, p.endErr()
	case <-p.closed:
		var zero Up
		return zero, p.closedErr()
	}
}

func (p *pipe[Up, Down]) endErr() error {
	if p.runErr != nil {
		return p.runErr
	}
	return io.EOF
}

// pluginSend sends a message to the host.
func (p *pipe[Up, Down]) pluginSend(m Up) error {
	select {
	case p.up <- m:
		return nil
	case <-p.closed:
		return errStreamClosed
	}
}

// pluginRecv receives a message from the host; io.EOF once the host closed
// the stream, which is how the SDK's plugins learn that the run is over.
func (p *pipe[Up, Down]) pluginRecv() (Down, error) {
	p.receivingOnce.Do(func() { close(p.receiving) })
	select {
	case m := <-p.down:
		return m, nil
	case <-p.closed:
		var zero Down
		return zero, io.EOF
	}
}

// InProcessSource gives a source plugin compiled into this process (one
// made by sdk.NewSourcePlugin) the shape of SourcePlugin: its Run goes on
// in a goroutine until it returns, which it does once the stream is
// closed or the context given to Run is done.
func InProcessSource(p pconnector.SourcePlugin) SourcePlugin {
	return &inProcessSource{SourcePlugin: p}
}

type inProcessSource struct {
	pconnector.SourcePlugin
	gate *readGate // nil: the plugin's reads are not held back
}

// InProcessSDKSource is InProcessSource for impl, a source written with
// Conduit's SDK and compiled into this process, made into a plugin here.
// The SDK's plugin starts its reading goroutine and then its acknowledging
// one in one tomb, and panics - which takes the whole process down - when
// the reading goroutine has already ended by the time the second starts:
// a connector whose first read fails at once, or that reads a few records
// and fails while the scheduler runs nothing else. impl's reads therefore
// wait until the run's acknowledging side receives from the stream; until
// then, nothing can end the reading goroutine either. impl's methods are
// guarded against panics (see guard).
func InProcessSDKSource(impl sdk.Source, cfg pconnector.PluginConfig, params config.Parameters) SourcePlugin {
	gate := &readGate{}
	return &inProcessSource{SourcePlugin: sdk.NewSourcePlugin(gatedSource{Source: impl, gate: gate}, cfg, params), gate: gate}
}

// readGate holds a source's reads back until the current run's plugin
// side receives.
type readGate struct {
	open atomic.Pointer[chan struct{}] // the run's receiving channel; nil before the first run
}

func (g *readGate) wait(ctx context.Context) error {
	ch := g.open.Load()
	if ch == nil {
		return nil
	}
	select {
	case <-*ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedSource is an SDK source whose reads wait for its readGate, and
// whose methods return a panic as their error (see guard).
type gatedSource struct {
	sdk.Source
	gate *readGate
}

func (s gatedSource) Read(ctx context.Context) (_ opencdc.Record, err error) {
	if err := s.gate.wait(ctx); err != nil {
		return opencdc.Record{}, err
	}
	defer guard(&err)
	return s.Source.Read(ctx)
}

func (s gatedSource) ReadN(ctx context.Context, n int) (_ []opencdc.Record, err error) {
	if err := s.gate.wait(ctx); err != nil {
		return nil, err
	}
	defer guard(&err)
	return s.Source.ReadN(ctx, n)
}

type sourcePipe struct {
	*pipe[pconnector.SourceRunResponse, pconnector.SourceRunRequest]
}

func (s sourcePipe) Client() pconnector.SourceRunStreamClient { return sourceClient(s) }
func (s sourcePipe) Server() pconnector.SourceRunStreamServer { return sourceServer(s) }

type sourceClient sourcePipe

func (c sourceClient) Send(m pconnector.SourceRunRequest) error    { return c.hostSend(m) }
func (c sourceClient) Recv() (pconnector.SourceRunResponse, error) { return c.hostRecv() }

type sourceServer sourcePipe

func (s sourceServer) Send(m pconnector.SourceRunResponse) error  { return s.pluginSend(m) }
func (s sourceServer) Recv() (pconnector.SourceRunRequest, error) { return s.pluginRecv() }

func (s *inProcessSource) NewStream() pconnector.SourceRunStream {
	// No message waits in the pipe: the plugin still prepares its next
	// one while the engine works on the last (it holds it while it
	// sends), and a source whose messages are large (a snapshot's fetch of
	// 50,000 rows) keeps one fewer of them in memory. The Source's
	// receiver is what reads ahead, by records.
	return sourcePipe{newPipe[pconnector.SourceRunResponse, pconnector.SourceRunRequest](0)}
}

// Run starts the plugin's run. The goroutines it starts are owned by the
// stream: they end when the plugin's Run returns, which ending ctx brings
// about.
func (s *inProcessSource) Run(ctx context.Context, stream pconnector.SourceRunStream) error {
	sp, ok := stream.(sourcePipe)
	if !ok {
		return errors.New("in-process source: stream not made by NewStream")
	}
	// The SDK's source starts a reading and an acknowledging goroutine in
	// a tomb, and panics when the first ended before the second started
	// (a run stopped the moment it began): the end of ctx reaches the
	// plugin once it receives - its acknowledging goroutine runs - or its
	// Run ended.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if s.gate != nil {
		s.gate.open.Store(&sp.receiving)
	}
	go func() {
		defer sp.close()
		defer cancel()
		sp.end(s.SourcePlugin.Run(runCtx, stream))
	}()
	go sp.closeOnceReceiving(ctx, cancel)
	return nil
}

// InProcessDestination is InProcessSource for destinations.
func InProcessDestination(p pconnector.DestinationPlugin) DestinationPlugin {
	return &inProcessDestination{DestinationPlugin: p}
}

type inProcessDestination struct {
	pconnector.DestinationPlugin
}

type destinationPipe struct {
	*pipe[pconnector.DestinationRunResponse, pconnector.DestinationRunRequest]
}

func (d destinationPipe) Client() pconnector.DestinationRunStreamClient {
	return destinationClient(d)
}

func (d destinationPipe) Server() pconnector.DestinationRunStreamServer {
	return destinationServer(d)
}

type destinationClient destinationPipe

func (c destinationClient) Send(m pconnector.DestinationRunRequest) error { return c.hostSend(m) }
func (c destinationClient) Recv() (pconnector.DestinationRunResponse, error) {
	return c.hostRecv()
}

type destinationServer destinationPipe

func (s destinationServer) Send(m pconnector.DestinationRunResponse) error { return s.pluginSend(m) }
func (s destinationServer) Recv() (pconnector.DestinationRunRequest, error) {
	return s.pluginRecv()
}

func (d *inProcessDestination) NewStream() pconnector.DestinationRunStream {
	// One ack of read-ahead: the plugin goes on writing while the host
	// takes the last acks.
	return destinationPipe{newPipe[pconnector.DestinationRunResponse, pconnector.DestinationRunRequest](1)}
}

// Run is InProcessSource's Run for the destination.
func (d *inProcessDestination) Run(ctx context.Context, stream pconnector.DestinationRunStream) error {
	dp, ok := stream.(destinationPipe)
	if !ok {
		return errors.New("in-process destination: stream not made by NewStream")
	}
	go func() {
		defer dp.close()
		dp.end(d.DestinationPlugin.Run(ctx, stream))
	}()
	go dp.closeWhenDone(ctx)
	return nil
}
