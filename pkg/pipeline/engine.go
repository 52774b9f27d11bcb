package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// Defaults for Config fields left zero.
const (
	DefaultBatchSize       = 1024
	DefaultBatchesInFlight = 16
	// DefaultBatchesInFlightWithIntents is the default when a destination
	// records dedup intents (see write): each batch's intent must be
	// durable before the batch is written, so the batches read ahead are
	// what hides a commit's sync from the writes. 16 left the file
	// destination waiting for intents for a sixth of a run on a busy disk
	// (syncs of 10-30 ms); batches are made only when a pipeline is busy,
	// so an idle one does not hold them.
	DefaultBatchesInFlightWithIntents = 32
	DefaultTeardownTimeout            = 10 * time.Second
	// DefaultAbandonAfter is how long the stages may take to return once
	// they were told to end before the ones still running are abandoned.
	DefaultAbandonAfter = 5 * time.Second
)

// Positions loads and durably saves the position a source resumes from.
// *PositionStore implements it; tests use fakes.
type Positions interface {
	Load(ctx context.Context, pipelineID, connectorID string) (record.Position, error)
	// SaveLater submits pos to be persisted and, in the same commit, the
	// writes in with (the deletion of the dedup entries of the records pos
	// acknowledges, the marks of destinations that read back what they
	// wrote), without waiting; done is called with the result once it is
	// durable. Saves land in the order they were submitted. It may keep
	// with's keys and values until done, not pos or the slice.
	SaveLater(pipelineID, connectorID string, pos record.Position, with []store.Op, done func(error)) error
}

// Dedup is the acked-position dedup store (dedup/): it lets a restarted
// run skip records a destination already wrote in an earlier run whose
// source acknowledgement never completed.
type Dedup interface {
	// Open loads what earlier runs left for one destination; intents of
	// earlier runs are resolved against what it holds (see Held).
	Open(ctx context.Context, pipelineID, destinationID string, held Held) (DedupDestination, error)
}

// Held is what a destination said it holds when it opened.
type Held struct {
	// Reports says that the destination reports what it holds
	// (connector.PositionReporter).
	Reports bool
	// Last is the position of the last record it holds (nil for nothing).
	Last record.Position
	// LastSource is the dedup source (see DedupDestination) of that
	// record, "" when the pipeline has one source or the destination
	// cannot tell (connector.SourceReporter).
	LastSource string
	// Since, when set, reads back what the destination holds from an
	// offset on (connector.HoldingReporter): visit gets the dedup source
	// and the position of each record of this pipeline's sources. Offset
	// is where it writes next. Such a destination records no intent: its
	// stage notes where each batch begins and ends in its output, and the
	// position saves carry that as its mark (see holdingDedup).
	Since  func(offset int64, visit func(source string, pos record.Position)) (ok bool, err error)
	Offset int64
	// Unsynced says that the destination does not sync what it writes
	// (connector.SyncReporter): its entries need survive only what its
	// records survive, a crash of the process.
	Unsynced bool
}

// DedupDestination is one destination's dedup view for one run; the
// destination's stage is its only user.
//
// Positions are only unique within a source: every method takes the
// source of the positions it is given, the source connector's id in a
// pipeline of several sources and "" in a pipeline of one (whose entries
// are then what they were before pipelines had several sources).
type DedupDestination interface {
	// Pending is how many positions of earlier runs may still be skipped.
	Pending() int
	// Hits is how many records were skipped in this run.
	Hits() int64
	// Skip reports whether the record at pos was written by an earlier
	// run; done, when not nil, is an entry to delete once pos is
	// acknowledged.
	Skip(source string, pos record.Position) (skip bool, done []byte)
	// Remember makes the written positions durable; the source must not be
	// acknowledged, nor the next batch written, before wait returned nil.
	// key is deleted once they are acknowledged.
	Remember(ctx context.Context, source string, positions []record.Position) (key []byte, wait func() error, err error)
	// Intend makes the positions a destination that reports what it holds
	// is about to write durable, in write order; the batch must not be
	// written before wait returned nil. key is deleted once they are
	// acknowledged.
	Intend(ctx context.Context, source string, positions []record.Position) (key []byte, wait func() error, err error)
}

// unverifiedDedup is the optional ability of the DedupDestination of a
// destination that reads back what it wrote to say that it could not this
// time (its output was replaced or cut): records the last run wrote
// without seeing them acknowledged may be written again
// (Config.OnDedupUnverified).
type unverifiedDedup interface {
	Unverified() bool
}

// holdingDedup is the ability of the DedupDestination of a destination
// that reads back what it wrote (Held.Since): Mark is the write that moves
// the destination's mark to an offset, committed with a position save. A
// mark says that every record before it in the destination's output is
// covered by the saved positions. It may be called from any goroutine.
type holdingDedup interface {
	Mark(offset int64) store.Op
}

// writableDedup is the optional ability of a DedupDestination to say that
// Remember would fail now (the store's disk is full), so that a batch is
// not written only to be written again after the restart.
type writableDedup interface{ Writable() error }

// Source is a source connector with the id it has in the pipeline file
// and the processors that run only on its records, before the pipeline's.
type Source struct {
	ID         string
	Connector  connector.Source
	Processors []Processor
}

// Destination is a destination connector with its id and the processors
// that run only on its records.
type Destination struct {
	ID         string
	Connector  connector.Destination
	Processors []Processor
}

// Processor is a processor with its id from the pipeline file.
type Processor struct {
	ID        string
	Processor processor.Processor
	// Connector is the id of the connector whose processors it is part of,
	// empty for one of the pipeline's: Conduit names the processor's node
	// (in a dead-letter record's conduit.dlq.nack.node.id)
	// "pipeline:connector:processor" or "pipeline:processor".
	Connector string
}

// DeadLetterQueue is where nacked records go: records a processor rejects
// and records a destination refuses with a fatal error. When more than
// WindowNackThreshold of the last WindowSize records were nacked, the run
// ends with the nack's error, which is fatal (DESIGN.md section 3).
// WindowSize 0 means no limit.
type DeadLetterQueue struct {
	Connector           connector.Destination
	WindowSize          int
	WindowNackThreshold int
}

// QuarantinedRecord is a record a run sends to the dead-letter queue
// without processing or writing it.
type QuarantinedRecord struct {
	// Kind and ID are the component it failed in; Err what it failed with.
	Kind Kind
	ID   string
	Err  error
}

// Config is everything one run of a pipeline needs.
type Config struct {
	PipelineID string
	// Source is the pipeline's source, and Sources more of them: a
	// pipeline may read several (as Conduit's do), each from its own
	// position, acknowledged in its own read order; destinations get the
	// records of all of them, and one failing ends the run. Source, when
	// set, comes first.
	Source       Source
	Sources      []Source
	Destinations []Destination
	// Processors run on every record after its source's own processors,
	// in order.
	Processors []Processor
	// DLQ defaults to no connector, window 1 and threshold 0: the first
	// nack ends the run.
	DLQ       DeadLetterQueue
	Positions Positions
	// Dedup, when set, makes restarts skip records destinations already
	// wrote (see Dedup).
	Dedup Dedup
	// DeadLetter, if set, is asked about an error that names the record it
	// is about (every processor error does; a destination's through
	// cerrors.ForRecord): ok sends that record to the dead-letter queue,
	// with rule in its metadata, and the run goes on - for a transient
	// error instead of ending. Recovery rules with action dead-letter
	// answer it.
	DeadLetter func(err error, kind Kind, componentID string) (rule string, ok bool)
	// Quarantine holds the records (by position) that failed the same way
	// run after run: they go to the dead-letter queue as they are read,
	// with the error they kept failing with.
	Quarantine map[string]QuarantinedRecord
	// OnDedupSkipped, if set, is called once per destination and run when
	// records were skipped: when the last pending position was skipped, or
	// at the end of the run.
	OnDedupSkipped func(destinationID string, skipped int64)
	// OnDedupUnverified, if set, is called when a destination that reads
	// back what it wrote could not say what it holds of the last run, as
	// the run opens (see unverifiedDedup).
	OnDedupUnverified func(destinationID string)
	// OnDeadLettered, if set, is called from the acknowledging stage once
	// records a dead-letter rule or quarantine took are in the dead-letter
	// queue: once per rule and batch. It must not block.
	OnDeadLettered func(DeadLettered)
	// WriteGuard, if set, is called right before every Write to a
	// destination connector and to the dead-letter queue; nil means no
	// guard. Destinations are not fenced the way the database is, so this
	// is where an instance that lost the pipeline's lease (paused past it,
	// while another instance took over) learns that it must not write. An
	// error means that Write does not happen: the run ends with a
	// transient StageError for the destination (or the queue), operation
	// "write", wrapping the error, as after a failed write; what every
	// destination wrote before is acknowledged, the rest is not. It is
	// called once per Write call, not per record, from every
	// destination's goroutine and the acker's at once: it must be cheap
	// and safe for concurrent use. Write's context carries it too, for
	// destinations that check it again right before their records become
	// visible (pkg/writeguard).
	WriteGuard func() error
	// Logger is the base logger; the engine adds pipeline_id.
	Logger *zap.Logger
	// Now is the clock for the times written into records (opencdc.readAt
	// of a record its source left without one, opencdc.createdAt of a
	// dead-letter record); nil means time.Now.
	Now func() time.Time

	// BatchSize is the most records one batch holds (default 1024).
	BatchSize int
	// BatchesInFlight bounds how many batches exist at once, which bounds
	// memory and provides backpressure (default 16: enough to keep the
	// stages busy while one batch waits for a disk sync; 32 when a
	// destination records dedup intents).
	BatchesInFlight int
	// TeardownTimeout bounds connector teardown after the run (default 10s).
	TeardownTimeout time.Duration
	// AbandonAfter bounds the wait for the stages once they were told to
	// end (a forced stop, a failure; default 5s): a stage still running
	// then is stuck in code that ignores its context - a processor's
	// script in an endless loop - and is abandoned, so that the run ends
	// and its connectors are torn down (see waitStages).
	AbandonAfter time.Duration
	// OnOpen, if set, is called once per run when its connectors are open,
	// or when opening them failed (the run is ending then).
	OnOpen func()
	// OnAck, if set, is called by the acker after every source
	// acknowledgement with the number of records acknowledged that were
	// not sent to the dead-letter queue (each record derived from one
	// read counted, see Stats). The
	// supervisor uses it to learn that a record made it end to end. It must
	// not block.
	OnAck func(records int)
}

// Stats are counters of one run, safe to read while it runs. RecordsRead
// and RecordsAcked count the records the sources produced; the others count
// records after the processors of their source and the pipeline's, where a
// record they turned into several (split, clone) counts as each of them
// (the records a destination's own processors derive count as the one
// they came from, but in RecordsNacked, which counts dead-letter records).
type Stats struct {
	RecordsRead  atomic.Int64
	RecordsAcked atomic.Int64
	// RecordsWritten counts acknowledged records that were not nacked. It
	// grows with the acknowledgement, whereas a record is counted nacked
	// before it is acknowledged: RecordsAcked - RecordsNacked can go down
	// for a while, and a counter exported from it would too.
	RecordsWritten atomic.Int64
	// RecordsFiltered counts records a processor dropped (acked, not written).
	RecordsFiltered atomic.Int64
	// RecordsNacked counts records sent to the dead-letter queue.
	RecordsNacked atomic.Int64
	// DedupSkipped counts records a destination did not write again
	// because an earlier run already had.
	DedupSkipped atomic.Int64
	// DedupWaitNanos is how long destinations waited, in all, for dedup
	// entries to be durable before they could write: what dedup on costs
	// a pipeline in time, whatever else the machine does.
	DedupWaitNanos atomic.Int64
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
	nodes nodeIDs
	// sources are Config.Source and Config.Sources; chains[i] are the
	// processors the records of sources[i] go through (its own, then the
	// pipeline's).
	sources []Source
	chains  [][]Processor
	// splits[i]: a processor of chains[i] may turn one record into
	// several (see batch.acks).
	splits []bool

	// stopCtx is cancelled by Stop; the run turns that into "stop reading"
	// with context.AfterFunc, so no goroutine waits for it.
	stopCtx context.Context
	stop    context.CancelFunc

	// reading, processing, writing count the stages of each kind still
	// running, and abandoned says the run ended without some of them
	// (waitStages): teardown leaves alone what they may still be using.
	reading, processing, writing atomic.Int32
	abandoned                    atomic.Bool
}

// stage runs f in g as a stage of the kind live counts.
func stage(g *errgroup.Group, live *atomic.Int32, f func() error) {
	live.Add(1)
	g.Go(func() error {
		defer live.Add(-1)
		return f()
	})
}

// New validates cfg and returns an engine ready to Run.
func New(cfg Config) (*Engine, error) {
	if cfg.PipelineID == "" {
		return nil, errors.New("pipeline engine: empty pipeline id")
	}
	var sources []Source
	if cfg.Source.Connector != nil || cfg.Source.ID != "" {
		sources = append(sources, cfg.Source)
	}
	sources = append(sources, cfg.Sources...)
	if len(sources) == 0 {
		return nil, fmt.Errorf("pipeline %s: no source", cfg.PipelineID)
	}
	for i, s := range sources {
		if s.Connector == nil {
			return nil, fmt.Errorf("pipeline %s: source %d (%s) is nil", cfg.PipelineID, i, s.ID)
		}
		if slices.ContainsFunc(sources[:i], func(o Source) bool { return o.ID == s.ID }) {
			// Positions are kept per source id.
			return nil, fmt.Errorf("pipeline %s: two sources with id %q", cfg.PipelineID, s.ID)
		}
	}
	chains := make([][]Processor, len(sources))
	for i, s := range sources {
		if len(s.Processors) == 0 {
			chains[i] = cfg.Processors
			continue
		}
		chains[i] = append(slices.Clip(s.Processors), cfg.Processors...)
	}
	splits := make([]bool, len(chains))
	for i, procs := range chains {
		splits[i] = slices.ContainsFunc(procs, func(p Processor) bool {
			_, ok := p.Processor.(processor.Splitter)
			return ok
		})
	}
	if len(cfg.Destinations) == 0 {
		return nil, fmt.Errorf("pipeline %s: no destination", cfg.PipelineID)
	}
	for i, d := range cfg.Destinations {
		if d.Connector == nil {
			return nil, fmt.Errorf("pipeline %s: destination %d (%s) is nil", cfg.PipelineID, i, d.ID)
		}
	}
	if cfg.DLQ.WindowSize < 0 || cfg.DLQ.WindowNackThreshold < 0 {
		return nil, fmt.Errorf("pipeline %s: negative dead-letter queue window", cfg.PipelineID)
	}
	if cfg.DLQ.WindowSize == 0 && cfg.DLQ.Connector == nil {
		cfg.DLQ.WindowSize = 1
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
	if cfg.TeardownTimeout <= 0 {
		cfg.TeardownTimeout = DefaultTeardownTimeout
	}
	if cfg.AbandonAfter <= 0 {
		cfg.AbandonAfter = DefaultAbandonAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	stopCtx, stop := context.WithCancel(context.Background())
	return &Engine{
		cfg:     cfg,
		log:     cfg.Logger.With(zap.String("pipeline_id", cfg.PipelineID)),
		nodes:   newNodeIDs(cfg, sources),
		sources: sources,
		chains:  chains,
		splits:  splits,
		stopCtx: stopCtx,
		stop:    stop,
	}, nil
}

// batchesInFlight is Config.BatchesInFlight, or its default for a run
// whose destinations record intents or not.
func (e *Engine) batchesInFlight(intents bool) int {
	switch {
	case e.cfg.BatchesInFlight > 0:
		return e.cfg.BatchesInFlight
	case intents:
		return DefaultBatchesInFlightWithIntents
	default:
		return DefaultBatchesInFlight
	}
}

// Stats returns the run's live counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Stop asks for a graceful stop: the source stops reading, in-flight batches
// drain and are acknowledged, the position is persisted and Run returns nil.
// It does not wait; Run's return says when it is done. Safe to call more
// than once and before Run.
func (e *Engine) Stop() {
	e.stop()
}

// ErrForceStopped is returned by Run when its context was cancelled: the
// run was cut short and in-flight records were dropped.
var ErrForceStopped = errors.New("pipeline was force-stopped")

// Run opens the connectors, moves records until Stop or a failure, then tears
// the connectors down. It returns nil after a graceful stop, an error
// wrapping ErrForceStopped when ctx was cancelled, and otherwise the first
// failure, as a *StageError naming the connector.
func (e *Engine) Run(ctx context.Context) error {
	// The connectors are opened with a context a Stop also cancels
	// (run): a stop while they open - a standalone connector's handshake,
	// a database that does not answer - has nothing to drain and must not
	// wait for them. It lives until the connectors were torn down, since
	// a connector may keep the context Open was given.
	openCtx, cancelOpen := context.WithCancel(ctx)
	defer cancelOpen()
	stopOpening := context.AfterFunc(e.stopCtx, cancelOpen)
	err := e.run(ctx, openCtx, stopOpening)
	if ctx.Err() != nil {
		// Whatever the stages reported, the cause is the cancellation.
		err = errors.Join(fmt.Errorf("%w: %w", ErrForceStopped, context.Cause(ctx)), err)
	}
	if tdErr := e.teardown(ctx); tdErr != nil {
		err = errors.Join(err, tdErr)
	}
	return err
}

// run opens the connectors with openCtx, which a Stop cancels until
// stopOpening is called, and moves records.
func (e *Engine) run(ctx, openCtx context.Context, stopOpening func() bool) (err error) {
	// A Stop that cut the opening short ends the run as a graceful stop
	// does, having moved nothing: whatever the connectors said of being
	// cancelled is no failure.
	allOpen := false
	defer func() {
		if err != nil && !allOpen && openCtx.Err() != nil && ctx.Err() == nil && e.stopCtx.Err() != nil {
			e.log.Info("graceful stop requested while the connectors were opening: opening cancelled", zap.NamedError("open_error", err))
			err = nil
		}
	}()
	// Destinations check the guard again at their last moment before
	// writing (pkg/writeguard).
	ctx = writeguard.With(ctx, e.cfg.WriteGuard)
	openCtx = writeguard.With(openCtx, e.cfg.WriteGuard)
	opened := false
	notifyOpen := func() {
		if !opened && e.cfg.OnOpen != nil {
			opened = true
			e.cfg.OnOpen()
		}
	}
	defer notifyOpen()
	for _, d := range e.cfg.Destinations {
		if err := d.Connector.Open(openCtx); err != nil {
			return &StageError{Kind: KindDestination, ID: d.ID, Op: "open", Err: err}
		}
	}
	if dlq := e.cfg.DLQ.Connector; dlq != nil {
		if err := dlq.Open(openCtx); err != nil {
			// The queue is part of the pipeline: without it a nack would
			// have nowhere to go. Not being able to open it now says
			// nothing about the next attempt, so it is transient.
			return &StageError{Kind: KindDLQ, ID: DLQID, Op: "open", Err: cerrors.Transient(err)}
		}
	}
	dedups := make([]DedupDestination, len(e.cfg.Destinations))
	modes := make([]dedupMode, len(e.cfg.Destinations))
	if e.cfg.Dedup != nil {
		for i, d := range e.cfg.Destinations {
			held, err := e.held(openCtx, d)
			if err != nil {
				// Without the answer, intents of the last run cannot be
				// resolved; guessing would lose records or write them
				// twice.
				return &StageError{Kind: KindDestination, ID: d.ID, Op: "report the last position held", Err: cerrors.Transient(err)}
			}
			switch {
			case held.Since != nil:
				modes[i] = markOutput
			case held.Reports:
				modes[i] = intendBefore
			}
			if dedups[i], err = e.cfg.Dedup.Open(ctx, e.cfg.PipelineID, d.ID, held); err != nil {
				return &StageError{Kind: KindDestination, ID: d.ID, Op: "load dedup entries", Err: cerrors.Transient(err)}
			}
			if u, ok := dedups[i].(unverifiedDedup); ok && u.Unverified() && e.cfg.OnDedupUnverified != nil {
				e.cfg.OnDedupUnverified(d.ID)
			}
		}
	}
	ids, resume := make([]string, len(e.sources)), make([]string, len(e.sources))
	for i, src := range e.sources {
		pos, err := e.cfg.Positions.Load(ctx, e.cfg.PipelineID, src.ID)
		if err != nil {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "load position", Err: err}
		}
		if err := src.Connector.Open(openCtx, pos); err != nil {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "open", Err: err}
		}
		ids[i], resume[i] = src.ID, "start (no saved position)"
		if pos != nil {
			resume[i] = pos.String()
		}
	}
	if !stopOpening() {
		// A Stop came while they opened (and some opened all the same):
		// nothing was read, nothing drains.
		e.log.Info("graceful stop requested while the connectors were opening: the run ends before reading")
		return nil
	}
	allOpen = true
	if len(e.sources) == 1 {
		e.log.Info("pipeline run started: connectors open", zap.String("source", ids[0]),
			zap.Int("destinations", len(e.cfg.Destinations)), zap.String("resume_after", resume[0]))
	} else {
		e.log.Info("pipeline run started: connectors open", zap.Strings("sources", ids),
			zap.Int("destinations", len(e.cfg.Destinations)), zap.Strings("resume_after", resume))
	}
	notifyOpen()

	// The acker runs on this goroutine and the other stages in g; either
	// side's failure cancels the other through runCtx.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	g, gctx := errgroup.WithContext(runCtx)
	readCtx, cancelRead := context.WithCancel(gctx)
	defer cancelRead()
	unregister := context.AfterFunc(e.stopCtx, func() {
		e.log.Info("graceful stop requested: source stops reading, in-flight records drain")
		cancelRead()
	})
	defer unregister()

	n := e.batchesInFlight(slices.Contains(modes, intendBefore))
	// Batches are made on demand, up to n, and start small (see
	// batchPool): a quiet pipeline holds a few hundred bytes, a busy one
	// grows to n full batches. Ten thousand pipelines in one process stay
	// cheap that way.
	free := newBatchPool(n, e.cfg.BatchSize, len(e.cfg.Destinations))
	toDest := make([]chan *batch, len(e.cfg.Destinations))
	fromDest := make([]chan *batch, len(e.cfg.Destinations))
	for i := range toDest {
		toDest[i] = make(chan *batch, n)
		fromDest[i] = make(chan *batch, n)
	}
	inflight := make(chan *batch, n)
	read := make(chan *batch, n)
	persisters := make([]*persister, len(e.sources))
	for i, src := range e.sources {
		persisters[i] = newPersister(e.cfg.Positions, e.cfg.PipelineID, src.ID, &e.stats)
	}

	if len(e.sources) == 1 && len(e.chains[0]) == 0 && len(e.cfg.Quarantine) == 0 {
		// Without processors (or a record to quarantine) the reader of a
		// single source hands batches straight out.
		stage(g, &e.reading, func() error {
			defer closeOutputs(inflight, toDest)
			return e.read(readCtx, gctx, 0, free, func(b *batch) bool { return dispatch(gctx, b, inflight, toDest) })
		})
	} else {
		// The readers of several sources meet in one channel: the
		// processor stage hands their batches on in one order, the same
		// for the acker and every destination.
		stage(g, &e.reading, func() error {
			defer close(read)
			return e.readAll(readCtx, gctx, free, func(b *batch) bool { return send(gctx, read, b) })
		})
		stage(g, &e.processing, func() error {
			defer closeOutputs(inflight, toDest)
			return e.process(gctx, read, inflight, toDest)
		})
	}
	for i, d := range e.cfg.Destinations {
		stage(g, &e.writing, func() error {
			return e.write(gctx, d, i, dedups[i], modes[i], intentsAhead(n), toDest[i], fromDest[i])
		})
	}
	for _, p := range persisters {
		g.Go(func() error {
			// Saves use a context that outlives a failure elsewhere:
			// positions of records already acknowledged are worth keeping
			// whatever ends the run.
			return p.run(context.WithoutCancel(ctx))
		})
	}
	ackErr := e.ack(gctx, inflight, fromDest, free, persisters, markers(dedups, modes), newNackWindow(e.cfg.DLQ.WindowSize, e.cfg.DLQ.WindowNackThreshold))
	// Whoever failed first names the cause. If another stage had already
	// failed (gctx is cancelled), whatever the acker saw since is a
	// consequence of that, such as a write cut short by the cancellation.
	ackFirst := ackErr != nil && gctx.Err() == nil
	for _, p := range persisters {
		p.close()
	}
	if ackFirst {
		cancelRun()
		if err := e.waitStages(gctx, g); errors.Is(err, ErrStagesAbandoned) {
			return errors.Join(ackErr, err)
		}
		return ackErr
	}
	return e.waitStages(gctx, g)
}

// ErrStagesAbandoned is part of Run's error when a stage did not return
// within AbandonAfter of being told to end.
var ErrStagesAbandoned = errors.New("a stage of the pipeline did not return after it was told to end (a processor or connector ignores cancellation); it was abandoned")

// waitStages waits for the stages of g. Once gctx is done every stage was
// told to end; one that has not returned AbandonAfter later is stuck in
// code that ignores its context, such as a processor's script in an
// endless loop. The run does not wait for it: the stuck goroutine is left
// to return on its own or to end with the process, the goroutine that
// waits for g with it. Nothing of the run it could still touch is used
// again: its channels are read by nobody, its batches belong to this run,
// and its processors are not closed under it (teardown).
func (e *Engine) waitStages(gctx context.Context, g *errgroup.Group) error {
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		return err
	case <-gctx.Done():
	}
	timer := time.NewTimer(e.cfg.AbandonAfter)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		e.abandoned.Store(true)
		e.log.Warn("a stage of the pipeline did not return after it was told to end; the run ends without it, and it keeps running until it returns or conduit exits",
			zap.Duration("waited", e.cfg.AbandonAfter))
		return ErrStagesAbandoned
	}
}

func (e *Engine) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TeardownTimeout)
	defer cancel()
	var errs []error
	// After waitStages abandoned a stage, what it may still be calling is
	// not torn down under it.
	stuck := e.abandoned.Load()
	for _, src := range e.sources {
		if stuck && e.reading.Load() > 0 {
			break
		}
		if err := src.Connector.Teardown(ctx); err != nil {
			errs = append(errs, &StageError{Kind: KindSource, ID: src.ID, Op: "teardown", Err: err})
		}
	}
	for _, d := range e.cfg.Destinations {
		if stuck && e.writing.Load() > 0 {
			break
		}
		if err := d.Connector.Teardown(ctx); err != nil {
			errs = append(errs, &StageError{Kind: KindDestination, ID: d.ID, Op: "teardown", Err: err})
		}
	}
	if dlq := e.cfg.DLQ.Connector; dlq != nil {
		if err := dlq.Teardown(ctx); err != nil {
			errs = append(errs, &StageError{Kind: KindDLQ, ID: DLQID, Op: "teardown", Err: err})
		}
	}
	closeProcs := func(procs []Processor) {
		if stuck {
			// One of them may still be running in the abandoned stage.
			return
		}
		for _, p := range procs {
			if c, ok := p.Processor.(processor.Closer); ok {
				if err := c.Close(ctx); err != nil {
					errs = append(errs, &StageError{Kind: KindProcessor, ID: p.ID, Op: "teardown", Err: err})
				}
			}
		}
	}
	for _, src := range e.sources {
		closeProcs(src.Processors)
	}
	closeProcs(e.cfg.Processors)
	for _, d := range e.cfg.Destinations {
		closeProcs(d.Processors)
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

// dedupSource is the source the dedup store files positions of sources[i]
// under (see DedupDestination): "" when the pipeline has one.
func (e *Engine) dedupSource(i int) string {
	if len(e.sources) == 1 {
		return ""
	}
	return e.sources[i].ID
}

// dedupSourceOfNode maps the conduit.source.connector.id of a record a
// destination holds to its dedup source; ours is false for a record of
// another pipeline (another pipeline's records in the same output must
// not be taken for this one's). A record that names no source counts as
// the only source's in a pipeline of one: a processor may have removed
// the metadata.
func (e *Engine) dedupSourceOfNode(node string) (source string, ours bool) {
	for i, n := range e.nodes.sources {
		if n == node {
			return e.dedupSource(i), true
		}
	}
	return "", node == "" && len(e.sources) == 1
}

// held asks destination d what it holds, when it can tell. In a pipeline
// of several sources, positions are unique only within a source: the
// source of the last record is what makes its position say how far the
// intents of the last run were written.
func (e *Engine) held(ctx context.Context, d Destination) (Held, error) {
	sr, ok := connector.Ability[connector.SyncReporter](d.Connector)
	unsynced := ok && !sr.SyncsWrites()
	base := Held{Unsynced: unsynced}
	if hr, ok := connector.Ability[connector.HoldingReporter](d.Connector); ok {
		if offset, ok := hr.Offset(); ok {
			base.Offset = offset
			base.Since = func(offset int64, visit func(source string, pos record.Position)) (bool, error) {
				return hr.HeldSince(ctx, offset, func(pos record.Position, node string) error {
					if source, ours := e.dedupSourceOfNode(node); ours {
						visit(source, pos)
					}
					return nil
				})
			}
		}
	}
	r, ok := connector.Ability[connector.PositionReporter](d.Connector)
	if !ok {
		return base, nil
	}
	last, reports, err := r.LastPosition(ctx)
	if err != nil {
		return Held{}, err
	}
	if !reports {
		return base, nil
	}
	// The last position still resolves intents an earlier build recorded.
	held := base
	held.Reports, held.Last = true, last
	if len(e.sources) == 1 || last == nil {
		return held, nil
	}
	if sr, ok := connector.Ability[connector.SourceReporter](d.Connector); ok {
		node, err := sr.LastSource(ctx)
		if err != nil {
			return Held{}, err
		}
		// A node that is not one of this pipeline's sources (a processor
		// changed the metadata, or the record came from elsewhere) says
		// nothing: the dedup store then takes no intent as written.
		for i, n := range e.nodes.sources {
			if n == node {
				held.LastSource = e.dedupSource(i)
			}
		}
	}
	return held, nil
}
