package connector

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/record"
)

func TestLogDestination(t *testing.T) {
	tests := []struct {
		name        string
		settings    map[string]string
		loggerLevel zapcore.Level
		wantLevel   zapcore.Level
		wantMessage string
		wantEntries int
	}{
		{name: "defaults", loggerLevel: zapcore.DebugLevel,
			wantLevel: zapcore.InfoLevel, wantMessage: logDefaultMessage, wantEntries: 2},
		{name: "debug with message", settings: map[string]string{"level": "debug", "message": "got it"},
			loggerLevel: zapcore.DebugLevel, wantLevel: zapcore.DebugLevel, wantMessage: "got it", wantEntries: 2},
		{name: "trace is debug", settings: map[string]string{"level": "trace"},
			loggerLevel: zapcore.DebugLevel, wantLevel: zapcore.DebugLevel, wantMessage: logDefaultMessage, wantEntries: 2},
		{name: "error", settings: map[string]string{"level": "ERROR"},
			loggerLevel: zapcore.InfoLevel, wantLevel: zapcore.ErrorLevel, wantMessage: logDefaultMessage, wantEntries: 2},
		{name: "warn", settings: map[string]string{"level": "warn"},
			loggerLevel: zapcore.InfoLevel, wantLevel: zapcore.WarnLevel, wantMessage: logDefaultMessage, wantEntries: 2},
		{name: "below the logger's level", settings: map[string]string{"level": "debug"},
			loggerLevel: zapcore.InfoLevel, wantEntries: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(tt.loggerLevel)
			logger := zap.New(core).With(zap.String("connector_id", "log-1"))
			d, err := NewLogDestination(Config{ConnectorID: "log-1", Settings: tt.settings, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := d.Open(ctx); err != nil {
				t.Fatal(err)
			}
			batch := []record.Record{
				testRecord("1", record.StructuredData{"id": 1}),
				testRecord("2", record.RawData("raw")),
			}
			if n, err := d.Write(ctx, batch); n != 2 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			// The destination must not keep the records: change them now,
			// the logged entries must not change.
			batch[0].Metadata["k"] = "changed"
			batch[0].Payload.After.(record.StructuredData)["id"] = 99
			batch[1].Position[0] = 'X'

			entries := logs.All()
			if len(entries) != tt.wantEntries {
				t.Fatalf("%d entries, want %d", len(entries), tt.wantEntries)
			}
			for i, e := range entries {
				if e.Level != tt.wantLevel || e.Message != tt.wantMessage {
					t.Errorf("entry %d: %v %q, want %v %q", i, e.Level, e.Message, tt.wantLevel, tt.wantMessage)
				}
				fields := e.ContextMap()
				if fields["connector_id"] != "log-1" {
					t.Errorf("entry %d lost the logger's fields: %v", i, fields)
				}
				raw, ok := fields["record"].(json.RawMessage)
				if !ok {
					t.Fatalf("entry %d: record field is %T", i, fields["record"])
				}
				r, err := record.ParseJSON(raw)
				if err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				if want := []string{"1", "2"}[i]; string(r.Position) != want {
					t.Errorf("entry %d position = %q, want %q", i, r.Position, want)
				}
				if r.Metadata["k"] != "v" {
					t.Errorf("entry %d metadata = %v: the logged record changed after Write", i, r.Metadata)
				}
			}
			if len(entries) == 2 {
				if got := entries[0].ContextMap()["record"].(json.RawMessage); !strings.Contains(string(got), `"after":{"id":1}`) {
					t.Errorf("entry 0 record = %s", got)
				}
				if got := entries[1].ContextMap()["record"].(json.RawMessage); !strings.Contains(string(got), `"after":"cmF3"`) {
					t.Errorf("entry 1 record = %s", got)
				}
			}
			if err := d.Teardown(ctx); err != nil {
				t.Errorf("Teardown: %v", err)
			}
		})
	}
}

func TestLogDestinationEncodeError(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	d, err := NewLogDestination(Config{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	batch := []record.Record{
		testRecord("a", nil),
		testRecord("b", record.StructuredData{"x": math.Inf(1)}),
		testRecord("c", nil),
	}
	n, err := d.Write(context.Background(), batch)
	if n != 1 || err == nil || !strings.Contains(err.Error(), `record 1 (position "b")`) || !strings.Contains(err.Error(), `field "x"`) {
		t.Fatalf("Write = %d, %v; want 1 and an error naming record 1 and field x", n, err)
	}
	if logs.Len() != 1 {
		t.Errorf("%d entries, want 1", logs.Len())
	}
}

func TestLogDestinationNilLogger(t *testing.T) {
	d, err := NewLogDestination(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Write(context.Background(), []record.Record{testRecord("1", nil)}); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}
