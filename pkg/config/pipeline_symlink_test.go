package config

import (
	"os"
	"path/filepath"
	"testing"
)

// A pipelines directory that is a symbolic link (a release directory a
// deploy points it at) is read through the link, and its files keep the
// names they have under the configured path, whichever release it points
// to.
func TestLoadPipelinesThroughASymlinkedDirectory(t *testing.T) {
	dir := t.TempDir()
	rel := filepath.Join(dir, "pipelines.rel1")
	if err := os.MkdirAll(filepath.Join(rel, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, id string) {
		t.Helper()
		body := "version: \"2.2\"\npipelines:\n  - id: " + id + "\n    connectors:\n      - id: src\n        type: source\n        plugin: builtin:generator\n      - id: dst\n        type: destination\n        plugin: builtin:log\n"
		if err := os.WriteFile(filepath.Join(rel, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yml", "a")
	write("team/b.yaml", "b")
	link := filepath.Join(dir, "pipelines")
	if err := os.Symlink("pipelines.rel1", link); err != nil {
		t.Fatal(err)
	}
	ps := loadOK(t, link)
	got := map[string]string{}
	for _, p := range ps {
		got[p.ID] = p.File
	}
	want := map[string]string{"a": filepath.Join(link, "a.yml"), "b": filepath.Join(link, "team", "b.yaml")}
	if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("loaded %v, want %v", got, want)
	}
}
