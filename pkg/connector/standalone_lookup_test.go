package connector

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A connector built with Conduit's SDK before v0.10 speaks version 1 of
// Conduit's protocol: it cannot be run here, and a lookup that finds no
// connector of the name says so, naming the executable and the SDK
// version to rebuild with, instead of "not found".
func TestLookupNamesConnectorsOfOldConduitSDKs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginDir, "testplugin"), filepath.Join(dir, "conduitv1")); err != nil {
		t.Fatal(err)
	}
	h := NewStandaloneHost(StandaloneConfig{Dir: dir, StartTimeout: 10 * time.Second})
	found, silent, err := h.findByConduitName(context.Background(), "kafka")
	if found != "" || len(silent) > 0 {
		t.Fatalf("found %q, silent %v", found, silent)
	}
	if err == nil {
		t.Fatal("no error, want one naming the executable of an old SDK")
	}
	for _, want := range []string{filepath.Join(dir, "conduitv1"), "version 1 of Conduit's connector protocol", "SDK before v0.10", `named "kafka"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// A reference without a prefix resolves as Conduit resolves it: to the
// standalone connector of the name when connectors.path has one, else to
// the built-in connector; a prefix decides alone.
func TestUnprefixedNamesPreferStandaloneConnectors(t *testing.T) {
	withChaos := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginDir, "testplugin"), filepath.Join(withChaos, "chaos")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		dir            string
		ref            string
		wantStandalone bool
	}{
		{name: "unprefixed, a standalone connector of the name", dir: withChaos, ref: "chaos", wantStandalone: true},
		{name: "unprefixed with a version", dir: withChaos, ref: "chaos@latest", wantStandalone: true},
		{name: "unprefixed, none of the name", dir: t.TempDir(), ref: "chaos", wantStandalone: false},
		{name: "builtin: prefix", dir: withChaos, ref: "builtin:chaos", wantStandalone: false},
		{name: "standalone: prefix", dir: withChaos, ref: "standalone:chaos", wantStandalone: true},
		{name: "a built-in name that no executable has", dir: withChaos, ref: "generator", wantStandalone: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The test plugin does not answer `specs`: a short start timeout
			// bounds the probe that looks for a generator among them.
			reg := NewRegistry(Builtin()...).WithStandalone(NewStandaloneHost(StandaloneConfig{Dir: tt.dir, StartTimeout: time.Second}))
			settings := map[string]string{"format.options.id": "int"}
			if tt.wantStandalone || tt.ref == "builtin:chaos" {
				settings = map[string]string{}
			}
			src, err := reg.NewSource(tt.ref, Config{PipelineID: "p", ConnectorID: "c", Settings: settings})
			if err != nil {
				t.Fatal(err)
			}
			if _, standalone := src.(*standaloneSource); standalone != tt.wantStandalone {
				t.Errorf("%s resolved to %T, want standalone %v", tt.ref, src, tt.wantStandalone)
			}
		})
	}
}
