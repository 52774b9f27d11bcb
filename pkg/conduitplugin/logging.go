package conduitplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Connectors of Conduit's SDK log with zerolog, found in the context of
// every call. The runtime logs with zap. withLogger puts a zerolog logger
// in ctx whose lines end up in log, with their level and fields, so a
// connector's messages sit beside the engine's with pipeline_id and
// connector_id.
func withLogger(ctx context.Context, log *zap.Logger) context.Context {
	zl := zerolog.New(zapWriter{log: log}).Level(zerologLevel(log))
	return zl.WithContext(ctx)
}

// zerologLevel is the lowest level log writes, so that lines it would drop
// are not even formatted.
func zerologLevel(log *zap.Logger) zerolog.Level {
	for _, l := range []struct {
		zap zapcore.Level
		zl  zerolog.Level
	}{{zapcore.DebugLevel, zerolog.TraceLevel}, {zapcore.InfoLevel, zerolog.InfoLevel}, {zapcore.WarnLevel, zerolog.WarnLevel}} {
		if log.Core().Enabled(l.zap) {
			return l.zl
		}
	}
	return zerolog.ErrorLevel
}

type zapWriter struct{ log *zap.Logger }

func (w zapWriter) Write(p []byte) (int, error) {
	LogLine(w.log, p)
	return len(p), nil
}

// LogLine logs one line a connector wrote. A JSON object (zerolog's and
// hclog's format, with their names for level, message and time) becomes an
// entry at its level with its fields; anything else is logged as it is, at
// info.
func LogLine(log *zap.Logger, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var fields map[string]any
	if line[0] != '{' || json.Unmarshal(line, &fields) != nil {
		log.Info(string(line))
		return
	}
	level := zapcore.InfoLevel
	msg := ""
	zf := make([]zap.Field, 0, len(fields))
	for k, v := range fields {
		switch k {
		case "level", "@level":
			level = parseLevel(v)
		case "message", "@message", "msg":
			msg, _ = v.(string)
		case "time", "@timestamp", "@module":
			// The runtime's logger stamps its own time; hclog's module
			// name only repeats that this is a plugin.
		default:
			zf = append(zf, zap.Any(k, v))
		}
	}
	if ce := log.Check(level, msg); ce != nil {
		ce.Write(zf...)
	}
}

func parseLevel(v any) zapcore.Level {
	s, _ := v.(string)
	switch strings.ToLower(s) {
	case "trace", "debug":
		return zapcore.DebugLevel
	case "warn", "warning":
		return zapcore.WarnLevel
	case "error", "fatal", "panic":
		// A connector's fatal or panic line does not stop the runtime.
		return zapcore.ErrorLevel
	}
	return zapcore.InfoLevel
}
