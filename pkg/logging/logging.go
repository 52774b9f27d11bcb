// Package logging builds the process logger from `log.level` and
// `log.format`: zap's JSON encoder for machines, a console encoder for
// people. Every logger about a pipeline carries the field pipeline_id (the
// engine and the runtime add it); this package only builds the root.
package logging

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Formats accepted by New.
const (
	FormatCLI  = "cli"
	FormatJSON = "json"
)

// New returns a logger writing to w (os.Stderr when nil) at level in format.
func New(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	if w == nil {
		w = os.Stderr
	}
	var enc zapcore.Encoder
	switch format {
	case FormatJSON:
		cfg := zap.NewProductionEncoderConfig()
		cfg.TimeKey = "time"
		cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		// "20s" reads better than 20 and is what conduit.yml uses.
		cfg.EncodeDuration = zapcore.StringDurationEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case FormatCLI:
		cfg := zap.NewDevelopmentEncoderConfig()
		// The date too: the same encoder writes time fields such as
		// next_attempt_at, which may be days away (a schedule, a clock
		// that was wrong).
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		cfg.CallerKey = ""
		cfg.StacktraceKey = ""
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("log.format: unknown format %q (want %s or %s)", format, FormatCLI, FormatJSON)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core), nil
}
