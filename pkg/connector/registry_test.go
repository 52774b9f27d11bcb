package connector

import (
	"errors"
	"strings"
	"testing"
)

func TestRegistryLookup(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	tests := []struct {
		name     string
		ref      string
		wantName string   // on success
		wantErr  []string // substrings of the error; the error wraps ErrUnknownPlugin
	}{
		{name: "builtin prefix", ref: "builtin:generator", wantName: "generator"},
		{name: "no prefix means builtin", ref: "generator", wantName: "generator"},
		{name: "version ignored", ref: "builtin:file@v0.1.0", wantName: "file"},
		{name: "latest", ref: "log@latest", wantName: "log"},
		{name: "postgres", ref: "builtin:postgres@v0.14.2", wantName: "postgres"},
		{name: "unknown", ref: "builtin:mongo",
			wantErr: []string{`"builtin:mongo"`, "builtin:file, builtin:generator, builtin:kafka, builtin:log, builtin:postgres, builtin:s3"}},
		{name: "unknown without prefix", ref: "mysql@v1",
			wantErr: []string{`"mysql@v1"`, "known connectors"}},
		{name: "kafka", ref: "builtin:kafka", wantName: "kafka"},
		{name: "kafka without prefix", ref: "kafka", wantName: "kafka"},
		{name: "s3 without prefix, with version", ref: "s3@latest", wantName: "s3"},
		{name: "empty", ref: "", wantErr: []string{`""`, "known connectors"}},
		{name: "empty name after prefix", ref: "builtin:", wantErr: []string{`"builtin:"`}},
		{name: "standalone", ref: "standalone:generator",
			wantErr: []string{`"standalone:generator"`, "standalone connectors are not supported yet"}},
		{name: "standalone with version", ref: "standalone:s3@v1.2.3",
			wantErr: []string{"standalone connectors are not supported yet"}},
		{name: "unknown type", ref: "plugin:file",
			wantErr: []string{`unknown plugin type "plugin:"`}},
		{name: "empty version", ref: "builtin:file@",
			wantErr: []string{"empty version", "builtin:file@latest"}},
		{name: "case matters", ref: "builtin:File", wantErr: []string{`"builtin:File"`}},
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
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRegistryRoles(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	fileCfg := Config{Settings: map[string]string{"path": "/tmp/x"}}
	genCfg := Config{Settings: map[string]string{"format.options.id": "int"}}
	tests := []struct {
		name    string
		build   func() (any, error)
		wantErr string // "" = success
	}{
		{name: "generator source", build: func() (any, error) { return reg.NewSource("builtin:generator", genCfg) }},
		{name: "file source", build: func() (any, error) { return reg.NewSource("file", fileCfg) }},
		{name: "file destination", build: func() (any, error) { return reg.NewDestination("builtin:file", fileCfg) }},
		{name: "log destination", build: func() (any, error) { return reg.NewDestination("builtin:log", Config{}) }},
		{name: "log as source", build: func() (any, error) { return reg.NewSource("builtin:log", Config{}) },
			wantErr: "plugin builtin:log cannot be a source"},
		{name: "generator as destination", build: func() (any, error) { return reg.NewDestination("builtin:generator", genCfg) },
			wantErr: "plugin builtin:generator cannot be a destination"},
		{name: "unknown source", build: func() (any, error) { return reg.NewSource("nope", Config{}) },
			wantErr: `unknown plugin "nope"`},
		{name: "unknown destination", build: func() (any, error) { return reg.NewDestination("nope", Config{}) },
			wantErr: `unknown plugin "nope"`},
		{name: "setting error passes through", build: func() (any, error) { return reg.NewSource("builtin:file", Config{}) },
			wantErr: `setting "path": is required`},
		{name: "kafka source", build: func() (any, error) {
			return reg.NewSource("kafka", Config{Settings: map[string]string{"servers": "127.0.0.1:9092", "topics": "orders"}})
		}},
		{name: "kafka destination, a setting its specification refuses", build: func() (any, error) {
			return reg.NewDestination("builtin:kafka", Config{Settings: map[string]string{"servers": "127.0.0.1:9092", "acks": "two"}})
		}, wantErr: `setting "acks": "two" value must be included in the list [none,one,all]`},
		{name: "s3 destination", build: func() (any, error) {
			return reg.NewDestination("s3", Config{Settings: map[string]string{"aws.bucket": "b", "aws.region": "r",
				"aws.accessKeyId": "k", "aws.secretAccessKey": "s", "format": "json"}})
		}},
		{name: "s3 source without a bucket", build: func() (any, error) {
			return reg.NewSource("builtin:s3", Config{Settings: map[string]string{"aws.region": "r", "aws.accessKeyId": "k", "aws.secretAccessKey": "s"}})
		}, wantErr: `setting "aws.bucket"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.build()
			if tt.wantErr == "" {
				if err != nil || c == nil {
					t.Fatalf("got %v, %v; want a connector", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRegistryPanicsOnWiringMistakes(t *testing.T) {
	src := func(Config) (Source, error) { return nil, nil }
	tests := []struct {
		name    string
		plugins []Plugin
	}{
		{name: "empty name", plugins: []Plugin{{NewSource: src}}},
		{name: "name with prefix", plugins: []Plugin{{Name: "builtin:x", NewSource: src}}},
		{name: "no constructor", plugins: []Plugin{{Name: "x"}}},
		{name: "duplicate", plugins: []Plugin{{Name: "x", NewSource: src}, {Name: "x", NewSource: src}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("NewRegistry did not panic")
				}
			}()
			NewRegistry(tt.plugins...)
		})
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	only := NewRegistry(Plugin{Name: "log", NewDestination: NewLogDestination})
	if _, err := only.Lookup("generator"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("Lookup(generator) in a log-only registry: %v, want ErrUnknownPlugin", err)
	}
	if _, err := NewRegistry(Builtin()...).Lookup("generator"); err != nil {
		t.Errorf("Lookup(generator) in the builtin registry: %v", err)
	}
}
