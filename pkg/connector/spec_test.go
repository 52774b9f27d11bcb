package connector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The registry describes every built-in connector, in the roles it plays,
// and the executables of connectors.path as Conduit lists standalone
// connectors.
func TestSpecifications(t *testing.T) {
	dir := t.TempDir()
	conduitConnector := "#!/bin/sh\nif [ \"$1\" = specs ]; then printf 'specification:\\n  name: mine\\n  version: v1.2.3\\n'; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "conduit-connector-mine"), []byte(conduitConnector), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a connector"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(Builtin()...).WithStandalone(NewStandaloneHost(StandaloneConfig{Dir: dir}))
	got := map[string]bool{}
	for _, s := range r.Specifications() {
		got[s.Name] = true
		switch {
		case strings.HasPrefix(s.Name, "builtin:log@"):
			if s.SourceParams != nil || s.DestinationParams["level"].Default != "info" {
				t.Errorf("log: %+v", s)
			}
		case strings.HasPrefix(s.Name, "builtin:file@"):
			if len(s.SourceParams["path"].Validations) != 1 || s.DestinationParams["sync"].Default != "false" {
				t.Errorf("file: %+v", s)
			}
		case strings.HasPrefix(s.Name, "builtin:postgres@"):
			if s.Summary == "" || len(s.SourceParams) == 0 || len(s.DestinationParams) == 0 {
				t.Errorf("postgres, Conduit's own specification: %+v", s)
			}
		}
	}
	for _, want := range []string{"builtin:generator@v0.1.0", "builtin:file@v0.1.0", "builtin:log@v0.1.0", "builtin:chaos@v0.1.0",
		"builtin:postgres@v0.1.0", "standalone:mine@v1.2.3", "standalone:plain@unknown"} {
		if !got[want] {
			t.Errorf("no %s in %v", want, got)
		}
	}
	if got["standalone:README@unknown"] {
		t.Error("a file that is not executable is listed")
	}
}
