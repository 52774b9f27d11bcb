package sdk

import (
	"context"
)

// Config is what a connector instance is configured with: the ids of the
// pipeline and the connector from the pipeline file, and its settings.
type Config struct {
	PipelineID  string
	ConnectorID string
	// Settings are the connector's `settings` from the pipeline file, every
	// value as text (YAML numbers and booleans arrive as their text). Never
	// nil. The connector owns the map.
	Settings map[string]string
}

// Source produces records in an order it can resume from.
//
// The SDK calls Configure, Open and Teardown with no other call in
// progress. Read and Ack may run at the same time (the runtime reads ahead
// while earlier records are being acknowledged), but Read never overlaps
// Read and Ack never overlaps Ack. Teardown cancels the ctx of calls still
// running and waits for them to return.
//
// Any error ends the run: the runtime classifies it by its code (see the
// package documentation), calls Teardown and stops the process; a transient
// error restarts the pipeline, which starts a new process that Opens at the
// last acknowledged position.
type Source interface {
	// Configure parses and checks the settings; it should not connect to
	// anything yet. It is called once, first. On an error the run ends and
	// Teardown is still called. An error without a code is sent as fatal
	// (400): settings do not heal on a restart. Return Transient or a
	// transient WithCode for the rare check that can.
	Configure(ctx context.Context, cfg Config) error

	// Open prepares to produce the records that follow pos, the Position
	// of the last record every destination accepted in an earlier run; nil
	// means from the beginning. On an error the run ends (classified as
	// usual) and Teardown is still called.
	Open(ctx context.Context, pos Position) error

	// Read returns the next records, at least one and at most max (max is
	// at least 1). It should block until a record is ready and return
	// ctx.Err() once ctx is done, which the runtime treats as "stop
	// reading", not as a fault. Returning no records and no error is
	// allowed (a poll that timed out): the SDK calls Read again after a
	// short pause. Returning more than max records is a bug, reported to
	// the runtime as a fatal error.
	//
	// Every record needs a Position that Open can resume after. The
	// records are encoded before Read returns to the runtime, so the
	// source may reuse their memory in the next call. Records returned
	// together with an error are dropped; they are read again after the
	// restart, since they were never acknowledged.
	Read(ctx context.Context, max int) ([]Record, error)

	// Ack confirms that every destination accepted the records at
	// positions, in the order Read returned them. The slice and the
	// positions in it are valid only during the call. On an error the run
	// ends; records not acknowledged are read again after a restart.
	Ack(ctx context.Context, positions []Position) error

	// Teardown releases resources. It is called once, last, also when
	// Configure or Open failed, so it must cope with a half-configured
	// source. Its error is reported to the runtime like any other; the
	// process exits either way.
	Teardown(ctx context.Context) error
}

// Destination writes records.
//
// The SDK calls Configure, Open and Teardown with no other call in
// progress, and never overlaps two Writes. Teardown cancels the ctx of a
// Write still running and waits for it to return.
//
// Any error ends the run: the runtime classifies it by its code (see the
// package documentation), calls Teardown and stops the process; a transient
// error restarts the pipeline in a new process.
type Destination interface {
	// Configure parses and checks the settings; it should not connect to
	// anything yet. It is called once, first. On an error the run ends and
	// Teardown is still called. An error without a code is sent as fatal
	// (400): settings do not heal on a restart.
	Configure(ctx context.Context, cfg Config) error

	// Open prepares for writing. On an error the run ends (classified as
	// usual) and Teardown is still called.
	Open(ctx context.Context) error

	// Write writes records in order and returns how many, from the first,
	// were written. (len(records), nil): all were written and will be
	// acknowledged to the source. (n, err): records[:n] were written and
	// are acknowledged, records[n] failed with err, and the run ends with
	// err; the records after n were not attempted and are delivered again
	// after a restart. Returning n < len(records) with a nil error is a
	// bug, reported to the runtime as a fatal error.
	//
	// The records, their positions, keys and raw payloads point into the
	// request's memory: Write must not keep them after it returns (use
	// Record.Clone to keep one).
	Write(ctx context.Context, records []Record) (int, error)

	// Teardown flushes and releases resources. It is called once, last,
	// also when Configure or Open failed. Its error is reported to the
	// runtime like any other; the process exits either way.
	Teardown(ctx context.Context) error
}

// PositionReporter is the optional ability of a Destination to say, once
// open, the position of the last record it holds durably (nil when it
// holds none). With dedup on, the runtime then records which records a
// batch holds before writing it, and at the next open keeps as written
// exactly those up to that position: a crash of the runtime at any moment
// writes nothing twice. ok is false when this instance cannot tell. Only
// implement it when the answer is exact (the destination reads back its
// own last record): a position too far ahead loses the records between.
type PositionReporter interface {
	LastPosition(ctx context.Context) (last Position, ok bool, err error)
}

// Plugin describes a standalone connector executable for Serve.
type Plugin struct {
	// Name is what the runtime reports the connector as; it should match
	// the executable's file name, which pipeline files refer to as
	// `standalone:<name>`.
	Name string
	// Version is free text, shown by the runtime, e.g. "v0.3.1".
	Version string
	// NewSource returns a new, unconfigured source; nil when the connector
	// is not a source. It is called once per process, by Configure.
	NewSource func() Source
	// NewDestination returns a new, unconfigured destination; nil when the
	// connector is not a destination. It is called once per process, by
	// Configure.
	NewDestination func() Destination
}
