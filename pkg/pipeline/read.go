package pipeline

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// readAll runs a reader per source, all handing their batches to out, and
// returns once every one of them stopped: nil after a graceful stop, else
// the first failure. A source that fails stops the others (the pipeline
// runs as one unit); they stop as on a graceful stop, so that what they
// read drains until the failure ends the run.
func (e *Engine) readAll(readCtx, runCtx context.Context, free *batchPool, out func(*batch) bool) error {
	if len(e.sources) == 1 {
		return e.read(readCtx, runCtx, 0, free, out)
	}
	g, gctx := errgroup.WithContext(readCtx)
	for i := range e.sources {
		g.Go(func() error { return e.read(gctx, runCtx, i, free, out) })
	}
	return g.Wait()
}

// read is the reader stage of sources[i]. It stops reading when readCtx
// is done (graceful stop) and returns nil, so the stages after it drain;
// it abandons the batch when runCtx is done. out hands a batch on and
// reports false when the run is being torn down.
func (e *Engine) read(readCtx, runCtx context.Context, i int, free *batchPool, out func(*batch) bool) error {
	src := e.sources[i]
	_, stamped := src.Connector.(sourceMetadataStamper)
	for {
		b := free.get(readCtx)
		if b == nil {
			return nil
		}
		n, err := src.Connector.Read(readCtx, b.buf)
		if readCtx.Err() != nil && (err != nil || n == 0) {
			return nil
		}
		if err != nil {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "read", Err: err}
		}
		if n <= 0 || n > len(b.buf) {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "read",
				Err: fmt.Errorf("connector returned %d records for a batch of %d", n, len(b.buf))}
		}
		if !stamped {
			stampSource(b.buf[:n], e.nodes.sources[i], e.cfg.Now)
		}
		b.fill(n)
		b.source = i
		free.grow(b, n)
		e.stats.RecordsRead.Add(int64(n))
		if !out(b) {
			_ = runCtx
			return nil
		}
	}
}

// dispatch hands a batch to the acker (first, to keep read order) and to
// every destination. The channels hold every batch there is, so these sends
// never wait for long; ctx only matters when the run is torn down.
func dispatch(ctx context.Context, b *batch, inflight chan<- *batch, toDest []chan *batch) bool {
	if !send(ctx, inflight, b) {
		return false
	}
	for _, ch := range toDest {
		if !send(ctx, ch, b) {
			return false
		}
	}
	return true
}

// receive takes the next batch of a stage's input; ok is false when the
// input is closed (the stage before has drained) or the run is torn down.
func receive(ctx context.Context, in <-chan *batch) (b *batch, ok bool) {
	select {
	case b, ok = <-in:
		return b, ok
	case <-ctx.Done():
		return nil, false
	}
}

func closeOutputs(inflight chan *batch, toDest []chan *batch) {
	close(inflight)
	for _, ch := range toDest {
		close(ch)
	}
}
