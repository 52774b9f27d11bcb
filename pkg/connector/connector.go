package connector

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/record"
)

// Source produces records in an order it can resume from.
//
// The engine calls Open once, then Read and Ack from two different
// goroutines (reads and acks overlap), then Teardown once after both stopped.
type Source interface {
	// Open prepares the source to produce the records that follow pos. A nil
	// pos means "from the beginning".
	Open(ctx context.Context, pos record.Position) error
	// Read fills batch[:n] with the next records and returns n >= 1. It blocks
	// until at least one record is ready. It returns ctx.Err() once ctx is
	// done, which the engine treats as "stop reading", not as a fault. Records
	// must be fully owned by the engine once returned (no aliasing of buffers
	// the source reuses later); their fields in batch may be overwritten.
	Read(ctx context.Context, batch []record.Record) (int, error)
	// Ack confirms that every destination accepted the records at positions,
	// in read order. The slice is only valid during the call.
	Ack(ctx context.Context, positions []record.Position) error
	// Teardown releases resources. It is called even when Open failed.
	Teardown(ctx context.Context) error
}

// Destination writes records.
type Destination interface {
	// Open prepares the destination for writing.
	Open(ctx context.Context) error
	// Write writes records in order and returns how many were written. When
	// it returns an error, batch[:n] were written and batch[n] failed; the
	// records after it were not attempted. The destination must not keep a
	// reference to batch or its records after Write returns.
	Write(ctx context.Context, batch []record.Record) (int, error)
	// Teardown flushes and releases resources. It is called even when Open
	// failed.
	Teardown(ctx context.Context) error
}

// Config is what a connector is built from.
type Config struct {
	PipelineID  string
	ConnectorID string
	// Settings are the connector's `settings` from the pipeline file, every
	// value as text (YAML numbers and booleans are turned into their text).
	Settings map[string]string
	// Logger already carries pipeline_id and connector_id.
	Logger *zap.Logger
	// State is the connector's own durable memory, kept by the runtime
	// across runs and process restarts. Nil means the connector has none
	// (tests, validation-only construction); a connector must then make
	// only decisions that are safe without it.
	State State
	// Protected are conduit's own files and directories (its store, its
	// configuration, the pipeline files), which the file destination
	// refuses to write to.
	Protected []ProtectedPath
}

// NodeID is the connector's id as Conduit writes it into records'
// conduit.source.connector.id: "pipeline:connector".
func (c Config) NodeID() string { return record.NodeID(c.PipelineID, c.ConnectorID) }

// State is a small durable value the runtime keeps for one connector of
// one pipeline, for facts a connector must remember across a crash (the
// file destination remembers which bytes of its file it wrote). It is
// meant for a few writes per run, not one per batch: every Save is a
// durable write.
type State interface {
	// Load returns the value last saved, or nil when nothing was saved.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the value and returns once it is durable. The caller
	// may reuse value after Save returns.
	Save(ctx context.Context, value []byte) error
}

// ErrUnknownPlugin is returned by the registry for a plugin it does not know.
var ErrUnknownPlugin = errors.New("unknown plugin")

// loggerOf returns cfg.Logger, or a no-op logger when the caller gave none
// (tests, validation-only construction).
func loggerOf(cfg Config) *zap.Logger {
	if cfg.Logger == nil {
		return zap.NewNop()
	}
	return cfg.Logger
}

// PositionReporter is the optional ability of a destination to say, once it
// is open, the position of the last record it holds durably (nil when it
// holds none); ok is false when this instance cannot tell (the file
// destination writing to a pipe), and the engine then treats it as a
// destination without the ability. With dedup on, the engine then records which records it is
// about to write before each write, instead of which it wrote after it, and
// at the next open keeps as written exactly those up to that position: a
// crash at any moment duplicates nothing, and no sync sits between two
// writes. Implement it only when the answer is exact: a destination that
// reads back its own last record (the file destination reads its last line)
// can; one that cannot tell should not, and the engine then remembers each
// batch after writing it.
type PositionReporter interface {
	LastPosition(ctx context.Context) (last record.Position, ok bool, err error)
}

// Ability returns the optional ability T of d (PositionReporter,
// HoldingReporter, SyncReporter...), looking through wrappers that have an
// Unwrap() Destination method: a wrapper that only watches writes (the
// inspector's tap) need not repeat every ability of what it wraps.
func Ability[T any](d Destination) (T, bool) {
	for {
		if a, ok := d.(T); ok {
			return a, true
		}
		w, ok := d.(interface{ Unwrap() Destination })
		if !ok {
			var zero T
			return zero, false
		}
		d = w.Unwrap()
	}
}

// HoldingReporter is the optional ability of a destination to read back
// what it wrote: where the record it writes next begins, and the records
// it holds from a point on. With dedup on, the engine then records nothing
// on the records' path: it saves, with each source position, the point in
// the destination's output before the first record that position does not
// cover, and at the next open takes as written the records the destination
// holds from there on. A crash at any moment duplicates nothing, and no
// commit of the store sits before a write. The file destination has it
// (the point is an offset in its file); implement it only when the answer
// is exact.
type HoldingReporter interface {
	// Offset is where the record written next begins; ok is false when
	// this instance cannot read its output back (the file destination
	// writing to a pipe): the engine then treats it as a destination
	// without the ability. Called after Open, from the destination's
	// stage.
	Offset() (offset int64, ok bool)
	// HeldSince calls visit, in the order they were written, with the
	// position and conduit.source.connector.id ("" when it names none) of
	// every record it holds from offset on. ok is false when it cannot
	// tell (the output is not the one an earlier run wrote the offset in,
	// and that run may have written after it): the engine then takes none
	// as written. Called once, after Open and before the first Write.
	HeldSince(ctx context.Context, offset int64, visit func(pos record.Position, source string) error) (ok bool, err error)
}

// SyncReporter is the optional ability of a destination to say how
// durable a Write that returned nil is. The engine keeps the destination's
// dedup entries (intents, written positions) as durable as its writes: of
// a destination that does not sync, without a sync (they then survive a
// crash of the process, as its records do, and a power loss may take
// either), so that no sync of the store sits on its records' path. A
// destination without the ability gets synced entries.
type SyncReporter interface {
	// SyncsWrites is false when a Write that returned has handed its
	// records to the operating system but not to the disk (the file
	// destination without its sync setting).
	SyncsWrites() bool
}

// SourceReporter is the optional ability of a PositionReporter to say
// which source the record it holds last came from: that record's
// conduit.source.connector.id ("pipeline:connector"), "" when it cannot
// tell. In a pipeline of several sources, positions are unique only within
// a source, so the last position alone cannot say how far the last run got;
// with its source it can, and a crash then duplicates nothing there too.
// Without it, the engine takes none of a pipeline of several sources'
// intents as written (it may write records again, never lose one).
type SourceReporter interface {
	LastSource(ctx context.Context) (node string, err error)
}

// Deleter is a connector that cleans up after its pipeline is deleted: a
// connector of Conduit's SDK gets its LifecycleOnDeleted event (Conduit's
// PostgreSQL source drops the replication slot and publication it made).
// The runtime builds the connector anew, calls Deleted without opening it,
// then Teardown.
type Deleter interface {
	Deleted(ctx context.Context) error
}
