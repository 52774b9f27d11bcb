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
	found, silent, err := h.findByConduitName(context.Background(), "kafka", "")
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

// specExecutable writes an executable that prints a Conduit specification
// of name and version when asked `specs`, as Conduit's SDK v0.13 and later
// do.
func specExecutable(t *testing.T, dir, file, name, version string) string {
	t.Helper()
	path := filepath.Join(dir, file)
	script := "#!/bin/sh\nprintf 'specification:\\n  name: " + name + "\\n  version: " + version + "\\n'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A version after @ chooses among Conduit connectors of the name as Conduit
// chooses: none or @latest the highest (semantic versions above others),
// any other the one of that version, or the only one of the name.
func TestLookupChoosesTheVersion(t *testing.T) {
	dir := t.TempDir()
	v1 := specExecutable(t, dir, "kafka-1", "kafka", "v1.2.0")
	v10 := specExecutable(t, dir, "kafka-10", "kafka", "v1.10.0")
	specExecutable(t, dir, "kafka-dev", "kafka", "dev")
	specExecutable(t, dir, "other", "s3", "v9.0.0")
	twin := t.TempDir()
	a := specExecutable(t, twin, "a", "kafka", "v1.0.0")
	b := specExecutable(t, twin, "b", "kafka", "v1.0.0")
	only := t.TempDir()
	devel := specExecutable(t, only, "conduit-connector-kafka", "kafka", "(devel)")
	tests := []struct {
		name, dir, version string
		want               string
		wantErr            []string
	}{
		{name: "no version: the highest", dir: dir, version: "", want: v10},
		{name: "latest: the highest", dir: dir, version: "latest", want: v10},
		{name: "an exact version", dir: dir, version: "v1.2.0", want: v1},
		{name: "a version that is not semantic", dir: dir, version: "dev", want: filepath.Join(dir, "kafka-dev")},
		{name: "a version nobody has", dir: dir, version: "v2.0.0",
			wantErr: []string{`no Conduit connector named "kafka"`, "has version v2.0.0", "v1.10.0 (" + v10 + ")", "v1.2.0 (" + v1 + ")"}},
		{name: "the only one of the name, whatever its version", dir: only, version: "v0.10.4", want: devel},
		{name: "two of the same version", dir: twin, version: "",
			wantErr: []string{`2 executables`, `of version "v1.0.0"`, a, b, "keep one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewStandaloneHost(StandaloneConfig{Dir: tt.dir})
			found, _, err := h.findByConduitName(context.Background(), "kafka", tt.version)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("found %s, want an error", found)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil || found != tt.want {
				t.Fatalf("found %q, %v; want %q", found, err, tt.want)
			}
		})
	}
}
