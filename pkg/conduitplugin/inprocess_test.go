package conduitplugin

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conduitio/conduit-connector-protocol/pconnector"
)

// startingSource is a source plugin whose Run reports what a run stopped
// the moment it began looks like before it first receives.
type startingSource struct {
	pconnector.SourcePlugin
	started, proceed chan struct{}
	ctxErrBeforeRecv chan error
}

func (s startingSource) Run(ctx context.Context, stream pconnector.SourceRunStream) error {
	close(s.started)
	<-s.proceed
	s.ctxErrBeforeRecv <- ctx.Err()
	_, err := stream.Server().Recv()
	return err
}

// The end of a run's context reaches an in-process source only once it
// receives: the SDK's source panics when its reading goroutine ends
// before its acknowledging one started.
func TestInProcessSourceSeesTheEndOnceItReceives(t *testing.T) {
	p := startingSource{started: make(chan struct{}), proceed: make(chan struct{}), ctxErrBeforeRecv: make(chan error, 1)}
	src := InProcessSource(p)
	ctx, cancel := context.WithCancel(context.Background())
	stream := src.NewStream()
	if err := src.Run(ctx, stream); err != nil {
		t.Fatal(err)
	}
	<-p.started
	cancel()
	close(p.proceed)
	if err := <-p.ctxErrBeforeRecv; err != nil {
		t.Fatalf("the plugin's context ended before it received: %v", err)
	}
	// Then the stream ends, and the run with it.
	if _, err := stream.Client().Recv(); !errors.Is(err, io.EOF) && !errors.Is(err, errStreamClosed) {
		t.Fatalf("the host's Recv after the run ended: %v, want the end of the stream", err)
	}
}

// streamRecorder keeps the last stream its plugin made.
type streamRecorder struct {
	SourcePlugin
	mu   sync.Mutex
	last sourcePipe
}

func (r *streamRecorder) NewStream() pconnector.SourceRunStream {
	st := r.SourcePlugin.NewStream()
	r.mu.Lock()
	r.last = st.(sourcePipe)
	r.mu.Unlock()
	return st
}

// A compiled-in source of Conduit's SDK reads only once its run's
// acknowledging side receives: the SDK's plugin panics, taking the process
// down, when its reading goroutine ends (a read failing at once) before
// its acknowledging one started.
func TestInProcessSDKSourceReadsOnceTheRunReceives(t *testing.T) {
	for run := range 20 {
		impl := &countingSource{}
		rec := &streamRecorder{SourcePlugin: InProcessSDKSource(impl, pconnector.PluginConfig{ConnectorID: "p:src"}, countingParams)}
		var reads, early atomic.Int32
		impl.beforeRead = func() {
			reads.Add(1)
			rec.mu.Lock()
			receiving := rec.last.receiving
			rec.mu.Unlock()
			select {
			case <-receiving:
			default:
				early.Add(1)
			}
		}
		src := NewSource(rec, Options{PipelineID: "p", ConnectorID: "src", Plugin: "builtin:counting",
			Settings: map[string]string{"limit": "1"}, Params: countingParams})
		ctx := context.Background()
		if err := src.Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		readRecords(t, src, 3)
		if err := src.Teardown(ctx); err != nil {
			t.Fatal(err)
		}
		if reads.Load() == 0 || early.Load() != 0 {
			t.Fatalf("run %d: %d of %d reads before the run's acknowledging side received", run, early.Load(), reads.Load())
		}
	}
}

// Until it is opened, a read gate holds reads back; a read whose context
// ends meanwhile gives up.
func TestReadGate(t *testing.T) {
	var g readGate
	if err := g.wait(context.Background()); err != nil {
		t.Fatalf("a gate no run set holds reads back: %v", err)
	}
	open := make(chan struct{})
	g.open.Store(&open)
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- g.wait(ctx) }()
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with its context ended = %v, want context.Canceled", err)
	}
	go func() { waited <- g.wait(context.Background()) }()
	close(open)
	if err := <-waited; err != nil {
		t.Fatalf("wait once open = %v", err)
	}
}
