package conduitplugin

import (
	"context"
	"errors"
	"io"
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
