package pipeline

import (
	"context"
	"fmt"
)

// read is the reader stage. It stops reading when readCtx is done (graceful
// stop) and returns nil, so the stages after it drain; it abandons the
// batch when runCtx is done. out hands a batch on and reports false when
// the run is being torn down.
func (e *Engine) read(readCtx, runCtx context.Context, free *batchPool, out func(*batch) bool) error {
	src := e.cfg.Source
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
			stampSource(b.buf[:n], e.nodes.source, e.cfg.Now)
		}
		b.fill(n)
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
