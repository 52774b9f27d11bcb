package processor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

func TestRegistryLookup(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	tests := []struct {
		name     string
		ref      string
		wantName string   // on success
		wantErr  []string // substrings of the error; the error wraps ErrUnknownPlugin
	}{
		{name: "no prefix", ref: "field.set", wantName: "field.set"},
		{name: "builtin prefix", ref: "builtin:field.exclude", wantName: "field.exclude"},
		{name: "version ignored", ref: "builtin:field.set@v0.1.0", wantName: "field.set"},
		{name: "version without prefix", ref: "filter@latest", wantName: "filter"},
		{name: "error", ref: "builtin:error", wantName: "error"},
		{name: "conduit's", ref: "builtin:json.decode", wantName: "json.decode"},
		{name: "conduit's with version", ref: "field.rename@v0.1.0", wantName: "field.rename"},
		{name: "unknown", ref: "builtin:json.decoder",
			wantErr: []string{`"builtin:json.decoder"`, "known processors: builtin:avro.decode, builtin:avro.encode, builtin:base64.decode"}},
		{name: "unknown without prefix", ref: "field.renamer@v0.1.0", wantErr: []string{`"field.renamer@v0.1.0"`, "known processors"}},
		{name: "empty", ref: "", wantErr: []string{`""`, "known processors"}},
		{name: "empty name after prefix", ref: "builtin:", wantErr: []string{`"builtin:"`}},
		{name: "standalone", ref: "standalone:my-proc",
			wantErr: []string{`"standalone:my-proc"`, "standalone processors are not supported yet", "builtin:filter"}},
		{name: "unknown type", ref: "wasm:field.set", wantErr: []string{`unknown plugin type "wasm:"`}},
		{name: "empty version", ref: "builtin:field.set@", wantErr: []string{"empty version", "builtin:field.set@latest"}},
		{name: "case matters", ref: "builtin:Field.Set", wantErr: []string{`"builtin:Field.Set"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.Lookup(tt.ref)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Lookup(%q): %v", tt.ref, err)
				}
				if p.Name != tt.wantName {
					t.Errorf("Lookup(%q).Name = %q, want %q", tt.ref, p.Name, tt.wantName)
				}
				return
			}
			if !errors.Is(err, ErrUnknownPlugin) {
				t.Fatalf("Lookup(%q) error = %v, want one wrapping ErrUnknownPlugin", tt.ref, err)
			}
			wantErr(t, err, tt.wantErr...)
		})
	}
}

func TestRegistryNew(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	t.Run("unknown plugin", func(t *testing.T) {
		_, err := reg.New("builtin:nope", Config{})
		if !errors.Is(err, ErrUnknownPlugin) {
			t.Fatalf("err = %v, want ErrUnknownPlugin", err)
		}
	})
	t.Run("setting error passes through", func(t *testing.T) {
		_, err := reg.New("builtin:field.set@v0.1.0", Config{Settings: map[string]string{"value": "x"}})
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != "field" {
			t.Fatalf("err = %v, want *SettingError for field", err)
		}
	})
	t.Run("custom plugin", func(t *testing.T) {
		var got Config
		reg := NewRegistry(Plugin{Name: "mine", New: func(c Config) (Processor, error) { got = c; return filter{}, nil }})
		cfg := Config{ProcessorID: "p1", Settings: map[string]string{"a": "b"}}
		if _, err := reg.New("builtin:mine", cfg); err != nil {
			t.Fatal(err)
		}
		if got.ProcessorID != "p1" || got.Settings["a"] != "b" {
			t.Errorf("constructor got %+v", got)
		}
		if _, err := reg.New("field.set", cfg); !errors.Is(err, ErrUnknownPlugin) {
			t.Errorf("a registry knows only its own plugins; err = %v", err)
		}
	})
}

func TestNewRegistryPanics(t *testing.T) {
	ok := func(Config) (Processor, error) { return filter{}, nil }
	tests := []struct {
		name    string
		plugins []Plugin
		want    string
	}{
		{name: "no name", plugins: []Plugin{{New: ok}}, want: "invalid plugin name"},
		{name: "prefix in name", plugins: []Plugin{{Name: "builtin:x", New: ok}}, want: "invalid plugin name"},
		{name: "version in name", plugins: []Plugin{{Name: "x@v1", New: ok}}, want: "invalid plugin name"},
		{name: "no constructor", plugins: []Plugin{{Name: "x"}}, want: "has no constructor"},
		{name: "twice", plugins: []Plugin{{Name: "x", New: ok}, {Name: "x", New: ok}}, want: "registered twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Errorf("panic = %v, want one containing %q", r, tt.want)
				}
			}()
			NewRegistry(tt.plugins...)
		})
	}
}

// TestCondition runs field.set and filter under conditions.
func TestCondition(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	set := map[string]string{"field": ".Metadata.touched", "value": "yes"}
	tests := []struct {
		name      string
		plugin    string
		settings  map[string]string
		condition string
		rec       func(*record.Record)
		wantRun   bool     // the processor changed or dropped the record
		wantErr   []string // per-record error
	}{
		{name: "true", plugin: "field.set", settings: set,
			condition: `{{ eq .Metadata.table "users" }}`, wantRun: true},
		{name: "false", plugin: "field.set", settings: set,
			condition: `{{ eq .Metadata.table "orders" }}`, wantRun: false},
		{name: "spaces trimmed, Operation.String as in Conduit", plugin: "field.set", settings: set,
			condition: "\n  {{ eq .Operation.String \"update\" }}  \n", wantRun: true},
		{name: "operation compares as text", plugin: "field.set", settings: set,
			condition: `{{ eq .Operation "update" }}`, wantRun: true},
		{name: "payload field", plugin: "field.set", settings: set,
			condition: `{{ gt .Payload.After.age 18 }}`, wantRun: true},
		{name: "raw key compares as text", plugin: "field.set", settings: set,
			condition: `{{ eq .Key "42" }}`, wantRun: true},
		{name: "missing field is false, not an error", plugin: "field.set", settings: set,
			condition: `{{ eq .Payload.Before.nope "x" }}`, wantRun: false},
		{name: "not of a missing field", plugin: "field.set", settings: set,
			condition: `{{ not .Payload.After.nope }}`, wantRun: true},
		{name: "not of a present field", plugin: "field.set", settings: set,
			condition: `{{ not .Payload.After.name }}`, wantRun: false},
		{name: "absent payload", plugin: "field.set", settings: set,
			condition: `{{ eq .Payload.Before.name "ann" }}`,
			rec:       func(r *record.Record) { r.Payload.Before = nil }, wantRun: false},
		{name: "T and F count, as in strconv.ParseBool", plugin: "field.set", settings: set, condition: `{{ if .Metadata.table }}T{{ else }}F{{ end }}`, wantRun: true},
		{name: "not a boolean", plugin: "field.set", settings: set, condition: `{{ .Metadata.table }}`,
			wantErr: []string{"condition:", `rendered "users", which is not a boolean`}},
		{name: "missing value is not a boolean", plugin: "field.set", settings: set, condition: `{{ .Payload.After.nope }}`,
			wantErr: []string{`condition: rendered ""`}},
		{name: "render error", plugin: "field.set", settings: set, condition: `{{ .Payload.After.name.first }}`,
			wantErr: []string{"condition: template: condition:1:", "name.first"}},
		{name: "filter true drops", plugin: "filter", condition: `{{ eq .Metadata.table "users" }}`, wantRun: true},
		{name: "filter false keeps", plugin: "filter", condition: `{{ ne .Metadata.table "users" }}`, wantRun: false},
		{name: "constant true", plugin: "filter", condition: "true", wantRun: true},
		{name: "constant false", plugin: "filter", condition: " false ", wantRun: false},
		{name: "blank condition means always", plugin: "filter", condition: "  ", wantRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.New(tt.plugin, Config{Settings: tt.settings, Condition: tt.condition})
			if err != nil {
				t.Fatal(err)
			}
			rec := testRecord()
			if tt.rec != nil {
				tt.rec(&rec)
			}
			err = p.Process(context.Background(), &rec)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr...)
				if _, ok := rec.Metadata["touched"]; ok {
					t.Error("the processor ran although the condition failed")
				}
				return
			}
			ran := errors.Is(err, ErrFiltered) || rec.Metadata["touched"] == "yes"
			if err != nil && !errors.Is(err, ErrFiltered) {
				t.Fatalf("Process: %v", err)
			}
			if ran != tt.wantRun {
				t.Errorf("ran = %v, want %v", ran, tt.wantRun)
			}
		})
	}
}

func TestConditionErrors(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	tests := []struct {
		name      string
		condition string
		want      []string
	}{
		{name: "bad template", condition: "{{ eq .Metadata.a ", want: []string{"condition: invalid Go template", "condition:1"}},
		{name: "unknown function", condition: `{{ uppercase .Metadata.a }}`, want: []string{`function "uppercase" not defined`}},
		{name: "constant not a boolean", condition: "yes", want: []string{`condition: rendered "yes", which is not a boolean`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reg.New("filter", Config{Condition: tt.condition})
			var ce *ConditionError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConditionError", err)
			}
			wantErr(t, err, tt.want...)
		})
	}
}
