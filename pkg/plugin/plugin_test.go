package plugin

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref     string
		want    Ref
		wantErr string
	}{
		{ref: "generator", want: Ref{Type: TypeBuiltin, Name: "generator", Unprefixed: true}},
		{ref: "builtin:file", want: Ref{Type: TypeBuiltin, Name: "file"}},
		{ref: "builtin:log@v0.1.0", want: Ref{Type: TypeBuiltin, Name: "log", Version: "v0.1.0"}},
		{ref: "standalone:pg@latest", want: Ref{Type: TypeStandalone, Name: "pg", Version: "latest"}},
		{ref: "field.set", want: Ref{Type: TypeBuiltin, Name: "field.set", Unprefixed: true}},
		{ref: "", wantErr: "no plugin name"},
		{ref: "builtin:", wantErr: "no plugin name"},
		{ref: "file@", wantErr: "empty version"},
		{ref: "wasm:thing", wantErr: `unknown plugin type "wasm:"`},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := ParseRef(tt.ref)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadRef) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an ErrBadRef containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestSettingsReadAndReport(t *testing.T) {
	s := NewSettings(map[string]string{"rate": "2.5", "count": "7", "wait": "1s", "on": "true", "Path": "x", "sdk.a": "1"})
	if s.Float("rate", 0) != 2.5 || s.Int("count", 0, 0) != 7 || s.Duration("wait", 0) != time.Second || !s.Bool("on", false) {
		t.Fatal("typed readers returned wrong values")
	}
	s.Prefixed("sdk.", "sdk.*")
	s.String("path", "")
	err := s.Done()
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "Path" || !strings.Contains(err.Error(), `did you mean "path"`) ||
		!strings.Contains(err.Error(), "known settings: count, on, path, rate, sdk.*, wait") {
		t.Fatalf("got %v, want an unknown-setting error for Path with a suggestion and the known list", err)
	}

	bad := NewSettings(map[string]string{"n": "-1", "d": "soon"})
	bad.Int("n", 0, 0)
	bad.Duration("d", 0)
	if err := bad.Done(); !errors.As(err, &se) || se.Setting != "n" {
		t.Fatalf("got %v, want the first problem (n)", err)
	}

	none := NewSettings(map[string]string{"x": "1"})
	none.Document("sdk.schema.*")
	if err := none.Done(); err == nil || !strings.Contains(err.Error(), "has no settings") {
		t.Fatalf("got %v, want 'has no settings'", err)
	}
}
