package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

const logDefaultMessage = "record received"

// logDestination is builtin:log. See the package documentation for its
// settings.
type logDestination struct {
	logger  *zap.Logger
	level   zapcore.Level
	message string
	est     int // estimated bytes per encoded record, to size the slab
}

// NewLogDestination builds a builtin:log destination, which logs every
// record through cfg.Logger.
func NewLogDestination(cfg Config) (Destination, error) {
	s := plugin.NewSettings(cfg.Settings)
	d := &logDestination{logger: loggerOf(cfg), est: 256}
	switch lvl := strings.ToLower(strings.TrimSpace(s.String("level", "info"))); lvl {
	case "trace", "debug":
		// zap has no trace level; Conduit's trace is the most verbose, so is debug.
		d.level = zapcore.DebugLevel
	case "info":
		d.level = zapcore.InfoLevel
	case "warn":
		d.level = zapcore.WarnLevel
	case "error":
		d.level = zapcore.ErrorLevel
	default:
		s.Failf("level", "%q is not a log level (want trace, debug, info, warn or error)", lvl)
	}
	d.message = s.String("message", logDefaultMessage)
	sdkSettings(s, roleDestination)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return d, nil
}

// Open does nothing.
func (d *logDestination) Open(context.Context) error { return nil }

// Write logs each record as one entry with a "record" field holding the
// record's OpenCDC JSON. When the logger's level is above the configured
// one, records are counted as written without being encoded.
//
// The encoded JSON lives in a buffer allocated per batch and never reused,
// because a logger core may keep fields after Write returns (observers,
// asynchronous sinks); nothing of the records themselves is kept.
func (d *logDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	if !d.logger.Core().Enabled(d.level) {
		return len(batch), nil
	}
	slab := make([]byte, 0, d.est*len(batch))
	for i := range batch {
		ce := d.logger.Check(d.level, d.message)
		if ce == nil {
			continue
		}
		mark := len(slab)
		var err error
		if slab, err = record.AppendJSON(slab, &batch[i]); err != nil {
			return i, fmt.Errorf("log destination: record %d (position %q): %w", i, batch[i].Position, err)
		}
		ce.Write(zap.Reflect("record", json.RawMessage(slab[mark:len(slab):len(slab)])))
	}
	if len(batch) > 0 {
		d.est = max(d.est, len(slab)/len(batch)+16)
	}
	return len(batch), nil
}

// Teardown does nothing: the logger belongs to the runtime, which flushes
// it when the process exits.
func (d *logDestination) Teardown(context.Context) error { return nil }
