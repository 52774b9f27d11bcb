package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/record"
)

// Defaults for Config fields left zero.
const (
	DefaultBatchSize       = 1024
	DefaultBatchesInFlight = 8
	DefaultTeardownTimeout = 10 * time.Second
)

// Positions loads and durably saves the position a source resumes from.
// *PositionStore implements it; tests use fakes.
type Positions interface {
	Load(ctx context.Context, pipelineID, connectorID string) (record.Position, error)
	Save(ctx context.Context, pipelineID, connectorID string, pos record.Position) error
}

// Source is a source connector with the id it has in the pipeline file.
type Source struct {
	ID        string
	Connector connector.Source
}

// Destination is a destination connector with its id.
type Destination struct {
	ID        string
	Connector connector.Destination
}

// Config is everything one run of a pipeline needs.
type Config struct {
	PipelineID   string
	Source       Source
	Destinations []Destination
	Positions    Positions
	// Logger is the base logger; the engine adds pipeline_id.
	Logger *zap.Logger

	// BatchSize is the most records one batch holds (default 1024).
	BatchSize int
	// BatchesInFlight bounds how many batches exist at once, which bounds
	// memory and provides backpressure (default 8).
	BatchesInFlight int
	// TeardownTimeout bounds connector teardown after the run (default 10s).
	TeardownTimeout time.Duration
	// OnAck, if set, is called by the acker after every source
	// acknowledgement with the number of records acknowledged. The
	// supervisor uses it to learn that a record made it end to end. It must
	// not block.
	OnAck func(records int)
}

// Stats are counters of one run, safe to read while it runs.
type Stats struct {
	RecordsRead  atomic.Int64
	RecordsAcked atomic.Int64
	// PositionsSaved counts durable position writes (fewer than batches,
	// thanks to coalescing).
	PositionsSaved atomic.Int64
}

// Engine is one run of a pipeline. It is used once: New, Run, and Stop from
// any goroutine.
type Engine struct {
	cfg   Config
	log   *zap.Logger
	stats Stats

	stopOnce sync.Once
	stopping chan struct{}
}

// New validates cfg and returns an engine ready to Run.
func New(cfg Config) (*Engine, error) {
	if cfg.PipelineID == "" {
		return nil, errors.New("pipeline engine: empty pipeline id")
	}
	if cfg.Source.Connector == nil {
		return nil, fmt.Errorf("pipeline %s: no source", cfg.PipelineID)
	}
	if len(cfg.Destinations) == 0 {
		return nil, fmt.Errorf("pipeline %s: no destination", cfg.PipelineID)
	}
	for i, d := range cfg.Destinations {
		if d.Connector == nil {
			return nil, fmt.Errorf("pipeline %s: destination %d (%s) is nil", cfg.PipelineID, i, d.ID)
		}
	}
	if cfg.Positions == nil {
		return nil, fmt.Errorf("pipeline %s: no position store", cfg.PipelineID)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchesInFlight <= 0 {
		cfg.BatchesInFlight = DefaultBatchesInFlight
	}
	if cfg.TeardownTimeout <= 0 {
		cfg.TeardownTimeout = DefaultTeardownTimeout
	}
	return &Engine{
		cfg:      cfg,
		log:      cfg.Logger.With(zap.String("pipeline_id", cfg.PipelineID)),
		stopping: make(chan struct{}),
	}, nil
}

// Stats returns the run's live counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Stop asks for a graceful stop: the source stops reading, in-flight batches
// drain and are acknowledged, the position is persisted and Run returns nil.
// It does not wait; Run's return says when it is done. Safe to call more
// than once and before Run.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() { close(e.stopping) })
}

// ErrForceStopped is returned by Run when its context was cancelled: the
// run was cut short and in-flight records were dropped.
var ErrForceStopped = errors.New("pipeline was force-stopped")

// Run opens the connectors, moves records until Stop or a failure, then tears
// the connectors down. It returns nil after a graceful stop, an error
// wrapping ErrForceStopped when ctx was cancelled, and otherwise the first
// failure, as a *StageError naming the connector.
func (e *Engine) Run(ctx context.Context) error {
	err := e.run(ctx)
	if ctx.Err() != nil {
		// Whatever the stages reported, the cause is the cancellation.
		err = errors.Join(fmt.Errorf("%w: %w", ErrForceStopped, context.Cause(ctx)), err)
	}
	if tdErr := e.teardown(ctx); tdErr != nil {
		err = errors.Join(err, tdErr)
	}
	return err
}

func (e *Engine) run(ctx context.Context) error {
	src := e.cfg.Source
	for _, d := range e.cfg.Destinations {
		if err := d.Connector.Open(ctx); err != nil {
			return &StageError{Kind: KindDestination, ID: d.ID, Op: "open", Err: err}
		}
	}
	pos, err := e.cfg.Positions.Load(ctx, e.cfg.PipelineID, src.ID)
	if err != nil {
		return &StageError{Kind: KindSource, ID: src.ID, Op: "load position", Err: err}
	}
	if err := src.Connector.Open(ctx, pos); err != nil {
		return &StageError{Kind: KindSource, ID: src.ID, Op: "open", Err: err}
	}
	resume := "start (no saved position)"
	if pos != nil {
		resume = pos.String()
	}
	e.log.Info("pipeline running",
		zap.String("source", src.ID),
		zap.Int("destinations", len(e.cfg.Destinations)),
		zap.String("resume_after", resume))

	g, gctx := errgroup.WithContext(ctx)
	readCtx, cancelRead := context.WithCancel(gctx)
	defer cancelRead()

	n := e.cfg.BatchesInFlight
	free := make(chan *batch, n)
	for range n {
		free <- newBatch(e.cfg.BatchSize, len(e.cfg.Destinations))
	}
	toDest := make([]chan *batch, len(e.cfg.Destinations))
	fromDest := make([]chan *batch, len(e.cfg.Destinations))
	for i := range toDest {
		toDest[i] = make(chan *batch, n)
		fromDest[i] = make(chan *batch, n)
	}
	inflight := make(chan *batch, n)
	p := newPersister(e.cfg.Positions, e.cfg.PipelineID, src.ID, &e.stats)

	g.Go(func() error {
		select {
		case <-e.stopping:
			e.log.Info("graceful stop requested: source stops reading, in-flight records drain")
			cancelRead()
		case <-readCtx.Done():
		}
		return nil
	})
	g.Go(func() error { return e.read(readCtx, gctx, free, inflight, toDest) })
	for i, d := range e.cfg.Destinations {
		g.Go(func() error { return e.write(gctx, d, i, toDest[i], fromDest[i]) })
	}
	g.Go(func() error {
		defer p.close()
		return e.ack(gctx, inflight, fromDest, free, p)
	})
	g.Go(func() error {
		// Saves use a context that outlives a failure elsewhere: positions
		// of records already acknowledged are worth keeping whatever ends
		// the run.
		return p.run(context.WithoutCancel(ctx))
	})
	return g.Wait()
}

// read is the reader stage. It stops reading when readCtx is done (graceful
// stop) and closes its outputs so the stages after it drain; it abandons
// everything when runCtx is done.
func (e *Engine) read(readCtx, runCtx context.Context, free chan *batch, inflight chan<- *batch, toDest []chan *batch) error {
	defer func() {
		close(inflight)
		for _, ch := range toDest {
			close(ch)
		}
	}()
	src := e.cfg.Source
	for {
		var b *batch
		select {
		case b = <-free:
		case <-readCtx.Done():
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
		b.fill(n)
		e.stats.RecordsRead.Add(int64(n))
		// The channels hold every batch there is, so these sends never wait
		// for long; runCtx only matters when the run is being torn down.
		if !send(runCtx, inflight, b) {
			return nil
		}
		for _, ch := range toDest {
			if !send(runCtx, ch, b) {
				return nil
			}
		}
	}
}

// write is one destination's stage. After a failed write it stops: the acker
// reports the failure once it has acknowledged the records written before it.
func (e *Engine) write(ctx context.Context, d Destination, idx int, in <-chan *batch, out chan<- *batch) error {
	for {
		var b *batch
		var ok bool
		select {
		case b, ok = <-in:
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
		n, err := d.Connector.Write(ctx, b.records)
		if err == nil && n != len(b.records) {
			err = fmt.Errorf("connector wrote %d of %d records and returned no error", n, len(b.records))
			n = min(max(n, 0), len(b.records))
		}
		b.results[idx] = writeResult{written: n, err: err}
		if !send(ctx, out, b) || err != nil {
			return nil
		}
	}
}

// ack is the acker stage: it takes batches in read order, waits until every
// destination has written each, acknowledges them to the source and hands
// the newest position to the persister.
func (e *Engine) ack(ctx context.Context, inflight <-chan *batch, fromDest []chan *batch, free chan<- *batch, p *persister) error {
	src := e.cfg.Source
	for {
		var b *batch
		var ok bool
		select {
		case b, ok = <-inflight:
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
		acked := len(b.records)
		var failure error
		for i, ch := range fromDest {
			select {
			case got := <-ch:
				if got != b {
					// Stages are FIFO; anything else is a bug in the engine
					// and acknowledging would break the read-order promise.
					panic("pipeline: destination results out of read order")
				}
			case <-ctx.Done():
				return nil
			}
			if r := b.results[i]; r.err != nil && r.written <= acked {
				acked = r.written
				failure = &StageError{Kind: KindDestination, ID: e.cfg.Destinations[i].ID, Op: "write", Err: r.err}
			}
		}
		if acked > 0 {
			if err := src.Connector.Ack(ctx, b.positions[:acked]); err != nil {
				return &StageError{Kind: KindSource, ID: src.ID, Op: "ack", Err: err}
			}
			e.stats.RecordsAcked.Add(int64(acked))
			p.offer(b.positions[acked-1])
			if e.cfg.OnAck != nil {
				e.cfg.OnAck(acked)
			}
		}
		if failure != nil {
			return failure
		}
		b.reset()
		free <- b
	}
}

func (e *Engine) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TeardownTimeout)
	defer cancel()
	var errs []error
	if err := e.cfg.Source.Connector.Teardown(ctx); err != nil {
		errs = append(errs, &StageError{Kind: KindSource, ID: e.cfg.Source.ID, Op: "teardown", Err: err})
	}
	for _, d := range e.cfg.Destinations {
		if err := d.Connector.Teardown(ctx); err != nil {
			errs = append(errs, &StageError{Kind: KindDestination, ID: d.ID, Op: "teardown", Err: err})
		}
	}
	return errors.Join(errs...)
}

func send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}
