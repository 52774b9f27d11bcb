package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/record"
)

// role is what the process's one connector instance is.
type role int

const (
	roleNone role = iota
	roleSource
	roleDestination
)

func (r role) String() string {
	switch r {
	case roleSource:
		return "source"
	case roleDestination:
		return "destination"
	default:
		return "nothing"
	}
}

// Read pauses this long, doubling up to maxReadPause, between calls of a
// Source.Read that returned no records, so a source that polls with a
// timeout of its own neither spins nor adds much latency.
const (
	minReadPause = time.Millisecond
	maxReadPause = 100 * time.Millisecond
)

// server adapts the one connector instance of a plugin process to the
// services of proto/conduitry/connector/v1. It is the bridge between the stable
// Source/Destination surface and the wire; nothing about the wire leaks
// into those interfaces.
type server struct {
	plugin Plugin
	stderr io.Writer
	// onTeardown is called once Teardown has been handled (before its
	// response is written), so that Serve can shut down gracefully.
	onTeardown func()

	// life is cancelled when the instance is torn down, so that calls
	// still running (a Read waiting for data) stop waiting and Teardown
	// does not wait for them forever.
	life       context.Context
	cancelLife context.CancelFunc

	// mu orders the lifecycle: Configure, Open and Teardown hold it
	// exclusively, Read, Ack and Write shared. That gives connector authors
	// the guarantees the Source and Destination docs promise.
	mu         sync.RWMutex
	role       role
	configured bool // Configure succeeded
	tornDown   bool
	src        Source
	dst        Destination

	// readMu is held over a whole Read exchange, including connect's
	// marshalling of the response after the handler returned, because the
	// response points into one of bufs, which a later Read reuses.
	readMu sync.Mutex
	// bufs are the two encode buffers: one answers the current request
	// while the read ahead fills the other. next is the one to fill next.
	bufs [2][]byte
	next int
	// ahead is the Source.Read running ahead of the next request (nil when
	// none); pending holds records read but not yet sent, when a request
	// asked for fewer than the read ahead got or they did not fit in one
	// message (both guarded by readMu). Source.Read is not called again
	// before pending is empty, so records in it may still point into the
	// source's memory.
	ahead   *readAhead
	pending []Record
	// maxData bounds the encoded records of one message (MaxMessageBytes
	// less the message's own few bytes); tests lower it.
	maxData int

	ackMu  sync.Mutex
	ackBuf []Position

	writeMu sync.Mutex
	dec     record.BatchDecoder
	recs    []Record
}

func newServer(p Plugin, stderr io.Writer, onTeardown func()) *server {
	life, cancel := context.WithCancel(context.Background())
	if onTeardown == nil {
		onTeardown = func() {}
	}
	return &server{plugin: p, stderr: stderr, onTeardown: onTeardown, life: life, cancelLife: cancel,
		maxData: MaxMessageBytes - messageOverhead}
}

// handler serves PluginService and the services the plugin implements.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(connectorv1connect.NewPluginServiceHandler(pluginService{s}))
	if s.plugin.NewSource != nil {
		path, h := connectorv1connect.NewSourceServiceHandler(sourceService{s})
		mux.Handle(path, h)
		// The more specific pattern wins, so every Read, whatever the
		// protocol (Connect, gRPC, gRPC-Web), goes through the lock.
		mux.Handle(connectorv1connect.SourceServiceReadProcedure, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.readMu.Lock()
			defer s.readMu.Unlock()
			h.ServeHTTP(w, r)
		}))
	}
	if s.plugin.NewDestination != nil {
		mux.Handle(connectorv1connect.NewDestinationServiceHandler(destinationService{s}))
	}
	return mux
}

// bind returns ctx, also cancelled when the instance is torn down.
func (s *server) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// ready reports why method cannot run now, if it cannot. Callers hold mu.
// These are fatal: they mean the runtime broke the protocol, and a restart
// of the same runtime would do the same.
func (s *server) ready(r role, method string) error {
	switch {
	case s.tornDown:
		return cerrors.Fatalf("%s %s called after Teardown", r, method)
	case s.role != roleNone && s.role != r:
		return cerrors.Fatalf("%s %s called, but this plugin process runs a %s", r, method, s.role)
	case !s.configured:
		return cerrors.Fatalf("%s %s called before a successful Configure", r, method)
	}
	return nil
}

// guard runs fn, turning a panic into an error without a code (transient,
// as the runtime treats a crashed plugin) and writing the stack to stderr,
// so that one bad record does not take the connection down mid-response.
func (s *server) guard(method string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(s.stderr, "%s: panic in %s: %v\n%s", s.plugin.Name, method, v, debug.Stack())
			err = fmt.Errorf("%s: panic: %v", method, v)
		}
	}()
	return fn()
}

// wireError turns err into the Connect error the runtime receives: its
// message is the wire JSON of err, so a code anywhere in err's chain
// survives the process boundary. The Connect code only tells transport
// stories (cancelled or not); the runtime decides by the JSON.
func wireError(ctx context.Context, err error) error {
	code := connect.CodeUnknown
	if ctx.Err() != nil {
		switch {
		case errors.Is(err, context.Canceled):
			code = connect.CodeCanceled
		case errors.Is(err, context.DeadlineExceeded):
			code = connect.CodeDeadlineExceeded
		}
	}
	return connect.NewError(code, errors.New(string(cerrors.MarshalWire(err))))
}

// configure builds the instance and configures it.
func (s *server) configure(ctx context.Context, r role, pc *connectorv1.ConnectorConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.tornDown:
		return cerrors.Fatalf("%s Configure called after Teardown", r)
	case s.role != roleNone:
		return cerrors.Fatalf("%s Configure called, but this plugin process was already configured as a %s "+
			"(the runtime starts a new process for every connector and run)", r, s.role)
	}
	s.role = r
	ctx, done := s.bind(ctx)
	defer done()

	cfg := Config{
		PipelineID:  pc.GetPipelineId(),
		ConnectorID: pc.GetConnectorId(),
		Settings:    pc.GetSettings(),
	}
	if cfg.Settings == nil {
		cfg.Settings = make(map[string]string)
	}
	var err error
	switch r {
	case roleSource:
		if s.src = s.plugin.NewSource(); s.src == nil {
			return cerrors.Fatalf("%s: Plugin.NewSource returned nil", s.plugin.Name)
		}
		err = s.guard("Configure", func() error { return s.src.Configure(ctx, cfg) })
	case roleDestination:
		if s.dst = s.plugin.NewDestination(); s.dst == nil {
			return cerrors.Fatalf("%s: Plugin.NewDestination returned nil", s.plugin.Name)
		}
		err = s.guard("Configure", func() error { return s.dst.Configure(ctx, cfg) })
	}
	if err != nil {
		// Settings do not heal on a restart: without a code of its own, a
		// Configure error is fatal (as proto/conduitry/connector/v1 says).
		if cerrors.Classify(err).Source == cerrors.SourceDefault {
			err = cerrors.Fatal(err)
		}
		return err
	}
	s.configured = true
	return nil
}

// open opens the instance.
func (s *server) open(ctx context.Context, r role, pos Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(r, "Open"); err != nil {
		return err
	}
	ctx, done := s.bind(ctx)
	defer done()
	if r == roleSource {
		return s.guard("Open", func() error { return s.src.Open(ctx, pos) })
	}
	return s.guard("Open", func() error { return s.dst.Open(ctx) })
}

// teardown tears the instance down, once; later calls do nothing. It
// cancels the calls still running first and waits for them.
func (s *server) teardown(ctx context.Context) error {
	s.cancelLife()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tornDown {
		return nil
	}
	s.tornDown = true
	switch {
	case s.src != nil:
		return s.guard("Teardown", func() error { return s.src.Teardown(ctx) })
	case s.dst != nil:
		return s.guard("Teardown", func() error { return s.dst.Teardown(ctx) })
	}
	return nil
}

// messageOverhead is more than a Read or ReadStream response adds to its
// encoded records (field tags, the count and the length of the data).
const messageOverhead = 64

// readAhead is one Source.Read run ahead of the next request: while the
// runtime receives and decodes a batch, the source already produces the
// next, so the two processes work at the same time instead of taking
// turns. Records read ahead and never sent (the run ended) were never
// acknowledged, so the next run reads them again.
type readAhead struct {
	done  chan struct{}
	max   int
	batch *connectorv1.RecordBatch
	// rest are the records that did not fit in batch (see encode); they
	// become pending.
	rest []Record
	err  error
}

// read answers a Read request: with the batch read ahead when there is
// one, else by calling Source.Read now; then it starts reading the next
// batch ahead. The caller holds readMu (see handler).
func (s *server) read(ctx context.Context, maxRecords int) (*connectorv1.RecordBatch, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.ready(roleSource, "Read"); err != nil {
		return nil, err
	}
	if maxRecords < 1 {
		return nil, cerrors.Fatalf("source Read called with max_records %d, want at least 1", maxRecords)
	}
	if a := s.ahead; a != nil && len(s.pending) == 0 {
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, ctx.Err() // the read ahead stays for the next request
		}
		s.ahead = nil
		if a.err != nil {
			return nil, a.err
		}
		if int(a.batch.GetCount()) <= maxRecords {
			s.pending = a.rest
			if len(s.pending) == 0 {
				s.startReadAhead(maxRecords)
			}
			return a.batch, nil
		}
		// This request asks for fewer than the one before: send part of
		// the batch and keep the rest for the next requests.
		recs := make([]Record, a.batch.GetCount())
		if _, err := record.DecodeBatch(a.batch.GetData(), len(recs), recs); err != nil {
			return nil, cerrors.Fatal(fmt.Errorf("source Read: split read-ahead batch: %w", err))
		}
		for i := range recs {
			recs[i] = recs[i].Clone() // they alias a buffer that gets reused
		}
		s.pending = append(recs, a.rest...)
	}
	var batch *connectorv1.RecordBatch
	if len(s.pending) > 0 {
		b, n, err := s.encode(s.pending[:min(len(s.pending), maxRecords)])
		if err != nil {
			return nil, err
		}
		clear(s.pending[:n])
		s.pending, batch = s.pending[n:], b
	} else {
		recs, err := s.readNow(ctx, maxRecords)
		if err != nil {
			return nil, err
		}
		b, n, err := s.encode(recs)
		if err != nil {
			return nil, err
		}
		batch, s.pending = b, recs[n:]
	}
	if len(s.pending) == 0 {
		s.startReadAhead(maxRecords)
	}
	return batch, nil
}

// startReadAhead reads the next batch on its own goroutine, which ends
// with that one Read (or with the instance's teardown).
func (s *server) startReadAhead(maxRecords int) {
	a := &readAhead{done: make(chan struct{}), max: maxRecords}
	s.ahead = a
	go func() {
		defer close(a.done)
		s.mu.RLock()
		defer s.mu.RUnlock()
		if err := s.ready(roleSource, "Read"); err != nil {
			a.err = err
			return
		}
		recs, err := s.readNow(s.life, maxRecords)
		if err != nil {
			a.err = err
			return
		}
		var n int
		if a.batch, n, a.err = s.encode(recs); a.err == nil {
			a.rest = recs[n:]
		}
	}()
}

// readNow calls Source.Read until it returns records or an error.
func (s *server) readNow(ctx context.Context, maxRecords int) ([]Record, error) {
	pause := minReadPause
	for {
		var recs []Record
		err := s.guard("Read", func() (err error) {
			recs, err = s.src.Read(ctx, maxRecords)
			return err
		})
		switch {
		case err != nil:
			return nil, err
		case len(recs) > maxRecords:
			return nil, cerrors.Fatalf("source Read returned %d records, more than the %d asked for (a bug in the source)",
				len(recs), maxRecords)
		case len(recs) > 0:
			return recs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, maxReadPause)
	}
}

// encode checks what the runtime would reject later, far from the cause,
// and encodes recs into the next of the two buffers: all of them, or as
// many as fit in one message (at least one); n says how many.
func (s *server) encode(recs []Record) (batch *connectorv1.RecordBatch, n int, err error) {
	for i := range recs {
		r := &recs[i]
		switch {
		case len(r.Position) == 0:
			return nil, 0, cerrors.Fatalf("source Read: record %d of %d has no position (a bug in the source)", i, len(recs))
		case r.Operation < OperationCreate || r.Operation > OperationSnapshot:
			return nil, 0, cerrors.Fatalf("source Read: record %d (position %q) has no valid operation (%s; a bug in the source)",
				i, r.Position, r.Operation)
		}
	}
	n = len(recs)
	buf := s.bufs[s.next]
	for {
		if buf, err = record.AppendBatch(buf[:0], recs[:n]); err != nil {
			return nil, 0, cerrors.Fatal(fmt.Errorf("source Read: encode records: %w", err))
		}
		if len(buf) <= s.maxData {
			break
		}
		if n == 1 {
			return nil, 0, cerrors.Fatalf("source Read: record (position %q) takes %d bytes encoded, more than the %d one message to the runtime may carry",
				recs[0].Position, len(buf), s.maxData)
		}
		// Rare (records of megabytes): guess from the average size, a
		// little low, and never keep n.
		n = max(1, min(n-1, int(float64(n)*float64(s.maxData)/float64(len(buf))*0.9)))
	}
	s.bufs[s.next] = buf
	s.next = 1 - s.next
	return &connectorv1.RecordBatch{Count: int32(n), Data: buf}, n, nil
}

// ack hands the positions to Source.Ack.
func (s *server) ack(ctx context.Context, positions [][]byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.ready(roleSource, "Ack"); err != nil {
		return err
	}
	if len(positions) == 0 {
		return nil
	}
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	for _, p := range positions {
		s.ackBuf = append(s.ackBuf, p)
	}
	defer func() { clear(s.ackBuf); s.ackBuf = s.ackBuf[:0] }() // keep no request memory alive
	return s.guard("Ack", func() error { return s.src.Ack(ctx, s.ackBuf) })
}

// write decodes the batch and hands it to Destination.Write. A problem with
// the call itself is returned as callErr; what the destination reports goes
// into the response (written, and the wire JSON of its error).
func (s *server) write(ctx context.Context, batch *connectorv1.RecordBatch) (resp *connectorv1.WriteResponse, callErr error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.ready(roleDestination, "Write"); err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	count, data := int(batch.GetCount()), batch.GetData()
	// Every record takes several bytes, so a count above the data's length
	// is a lie; checking it first bounds what a bad batch can allocate.
	if count < 0 || count > len(data) {
		return nil, cerrors.Fatalf("destination Write: batch of %d records in %d bytes: %v", count, len(data), record.ErrBadBatch)
	}
	if count == 0 {
		return &connectorv1.WriteResponse{}, nil
	}
	if cap(s.recs) < count {
		s.recs = make([]Record, count)
	}
	recs := s.recs[:count]
	defer clear(recs) // the records alias the request; let it go
	if _, err := s.dec.Decode(data, count, recs); err != nil {
		// The runtime encoded it; a restart would send the same bytes.
		return nil, cerrors.Fatal(fmt.Errorf("destination Write: %w", err))
	}

	var n int
	err := s.guard("Write", func() (err error) {
		n, err = s.dst.Write(ctx, recs)
		return err
	})
	switch {
	case err == nil && n >= count:
		return &connectorv1.WriteResponse{Written: int32(count)}, nil
	case err == nil:
		err = cerrors.Fatalf("destination Write wrote %d of %d records and returned no error (a bug in the destination)", n, count)
	}
	n = max(0, min(n, count))
	return &connectorv1.WriteResponse{Written: int32(n), Error: string(cerrors.MarshalWire(err))}, nil
}

// pluginService is PluginService: the handshake.
type pluginService struct{ s *server }

func (p pluginService) Info(context.Context, *connect.Request[connectorv1.InfoRequest]) (*connect.Response[connectorv1.InfoResponse], error) {
	pl := p.s.plugin
	return connect.NewResponse(&connectorv1.InfoResponse{
		Name:            pl.Name,
		Version:         pl.Version,
		ProtocolVersion: ProtocolVersion,
		Source:          pl.NewSource != nil,
		Destination:     pl.NewDestination != nil,
	}), nil
}

// sourceService is SourceService.
type sourceService struct{ s *server }

func (ss sourceService) Configure(ctx context.Context, req *connect.Request[connectorv1.SourceServiceConfigureRequest]) (*connect.Response[connectorv1.SourceServiceConfigureResponse], error) {
	if err := ss.s.configure(ctx, roleSource, req.Msg.GetConfig()); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.SourceServiceConfigureResponse{}), nil
}

func (ss sourceService) Open(ctx context.Context, req *connect.Request[connectorv1.SourceServiceOpenRequest]) (*connect.Response[connectorv1.SourceServiceOpenResponse], error) {
	pos := Position(req.Msg.GetPosition())
	if len(pos) == 0 {
		pos = nil // an empty position and none are the same: the beginning
	}
	if err := ss.s.open(ctx, roleSource, pos); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.SourceServiceOpenResponse{}), nil
}

func (ss sourceService) Read(ctx context.Context, req *connect.Request[connectorv1.ReadRequest]) (*connect.Response[connectorv1.ReadResponse], error) {
	ctx, done := ss.s.bind(ctx)
	defer done()
	batch, err := ss.s.read(ctx, int(req.Msg.GetMaxRecords()))
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.ReadResponse{Batch: batch}), nil
}

// ReadStream sends batch after batch until the call ends or the source
// fails. Each batch is read and sent under readMu, like a whole Read: the
// batch points into an encode buffer that the next read reuses, and Send
// has marshalled it once it returns.
func (ss sourceService) ReadStream(ctx context.Context, req *connect.Request[connectorv1.ReadStreamRequest], stream *connect.ServerStream[connectorv1.ReadStreamResponse]) error {
	ctx, done := ss.s.bind(ctx)
	defer done()
	maxRecords := int(req.Msg.GetMaxRecords())
	resp := &connectorv1.ReadStreamResponse{}
	for {
		err := func() error {
			ss.s.readMu.Lock()
			defer ss.s.readMu.Unlock()
			batch, err := ss.s.read(ctx, maxRecords)
			if err != nil {
				return wireError(ctx, err)
			}
			resp.Batch = batch
			err = stream.Send(resp)
			resp.Batch = nil
			return err
		}()
		if err != nil {
			return err
		}
	}
}

func (ss sourceService) Ack(ctx context.Context, req *connect.Request[connectorv1.AckRequest]) (*connect.Response[connectorv1.AckResponse], error) {
	ctx, done := ss.s.bind(ctx)
	defer done()
	if err := ss.s.ack(ctx, req.Msg.GetPositions()); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.AckResponse{}), nil
}

func (ss sourceService) Teardown(ctx context.Context, _ *connect.Request[connectorv1.SourceServiceTeardownRequest]) (*connect.Response[connectorv1.SourceServiceTeardownResponse], error) {
	defer ss.s.onTeardown()
	if err := ss.s.teardown(ctx); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.SourceServiceTeardownResponse{}), nil
}

// destinationService is DestinationService.
type destinationService struct{ s *server }

func (ds destinationService) Configure(ctx context.Context, req *connect.Request[connectorv1.DestinationServiceConfigureRequest]) (*connect.Response[connectorv1.DestinationServiceConfigureResponse], error) {
	if err := ds.s.configure(ctx, roleDestination, req.Msg.GetConfig()); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.DestinationServiceConfigureResponse{}), nil
}

func (ds destinationService) Open(ctx context.Context, _ *connect.Request[connectorv1.DestinationServiceOpenRequest]) (*connect.Response[connectorv1.DestinationServiceOpenResponse], error) {
	if err := ds.s.open(ctx, roleDestination, nil); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.DestinationServiceOpenResponse{}), nil
}

func (ds destinationService) Write(ctx context.Context, req *connect.Request[connectorv1.WriteRequest]) (*connect.Response[connectorv1.WriteResponse], error) {
	ctx, done := ds.s.bind(ctx)
	defer done()
	resp, err := ds.s.write(ctx, req.Msg.GetBatch())
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(resp), nil
}

func (ds destinationService) LastPosition(ctx context.Context, _ *connect.Request[connectorv1.LastPositionRequest]) (*connect.Response[connectorv1.LastPositionResponse], error) {
	resp := &connectorv1.LastPositionResponse{}
	r, ok := ds.s.dst.(PositionReporter)
	if !ok {
		return connect.NewResponse(resp), nil
	}
	err := ds.s.guard("LastPosition", func() error {
		last, known, err := r.LastPosition(ctx)
		if err != nil {
			return err
		}
		resp.Known = known
		if known && last != nil {
			resp.Position = last
		}
		return nil
	})
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(resp), nil
}

func (ds destinationService) Teardown(ctx context.Context, _ *connect.Request[connectorv1.DestinationServiceTeardownRequest]) (*connect.Response[connectorv1.DestinationServiceTeardownResponse], error) {
	defer ds.s.onTeardown()
	if err := ds.s.teardown(ctx); err != nil {
		return nil, wireError(ctx, err)
	}
	return connect.NewResponse(&connectorv1.DestinationServiceTeardownResponse{}), nil
}
