package processor

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/record"
)

// Processor transforms records one at a time. The engine calls it from one
// goroutine, record by record in read order, batch after batch.
type Processor interface {
	// Process changes rec in place and returns:
	//   - nil: keep the record;
	//   - ErrFiltered: drop it (it is still acknowledged to the source);
	//   - any other error: the record is rejected. Unless the error is
	//     classified transient (a cerrors code), the record is nacked and
	//     goes to the dead-letter queue; a transient error restarts the
	//     pipeline and the record is processed again;
	//   - an error wrapped by EndRun: the processor cannot go on, and the
	//     run ends with the error, whatever its class.
	//
	// It must not keep rec, or the maps and slices in it, after it returns:
	// the engine reuses them for later records.
	Process(ctx context.Context, rec *record.Record) error
}

// Splitter is the optional ability of a processor to turn one record into
// several (Conduit's split and clone). The engine finds it by type
// assertion and calls ProcessMulti instead of Process; a Splitter's
// Process fails on a record that becomes several.
type Splitter interface {
	Processor
	// ProcessMulti runs the processor on rec. When the result is one
	// record, rec is changed in place and out is returned as it was given;
	// when it is several, they are appended to out and returned (rec is
	// left as it was, and they share no maps or bytes with it: the engine
	// reuses rec's). No record at all is ErrFiltered; other errors are as
	// Process's. The records appended keep rec's position: the engine
	// gives each its own (record.DerivedPosition).
	ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) ([]record.Record, error)
}

// ErrFiltered is what a processor returns to drop a record.
var ErrFiltered = errors.New("record filtered out")

// Config is what a processor is built from.
type Config struct {
	PipelineID  string
	ProcessorID string
	// Settings are the processor's `settings` from the pipeline file, as text.
	Settings map[string]string
	// Condition is the processor's `condition` (a Go template evaluated
	// against the record; the processor only runs when it renders "true").
	// Empty means always. Registry.New applies it; a Plugin's constructor
	// ignores it.
	Condition string
	// Logger already carries pipeline_id and processor_id. It may be nil
	// (validation, tests); the built-in processors do not log.
	Logger *zap.Logger
}

// Closer is implemented by processors that hold something for the length
// of a run, such as the instance of a standalone processor's module. The
// engine calls Close once when the run ends, after the last Process.
type Closer interface {
	Close(ctx context.Context) error
}

// EndRun marks err, returned by Process, as ending the run rather than
// rejecting the record: the processor cannot go on (its module trapped or
// ran out of memory). The engine ends the run with it, naming the record,
// and the supervisor classifies it as any processor error (fatal without a
// code). A dead-letter rule that matches it still sends the record to the
// dead-letter queue instead, and the run goes on: the processor must then
// be able to take the next record (a standalone processor makes a fresh
// instance).
func EndRun(err error) error { return &runEnding{err: err} }

// EndsRun reports whether err, returned by Process, ends the run (see
// EndRun).
func EndsRun(err error) bool {
	var re *runEnding
	return errors.As(err, &re)
}

type runEnding struct{ err error }

func (e *runEnding) Error() string { return e.err.Error() }
func (e *runEnding) Unwrap() error { return e.err }
