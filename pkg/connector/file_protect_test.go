package connector

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
)

// conduitFiles lays out a store, a configuration file and pipeline files
// as conduit has them, and returns the protected paths naming them.
func conduitFiles(t *testing.T) (dir string, protected []ProtectedPath) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range map[string]string{
		"db/MANIFEST":     "manifest",
		"db/000001.sst":   "table",
		"conduit.yml":     "log:\n  level: info\n",
		"pipelines/p.yml": "version: \"2.2\"\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, []ProtectedPath{
		{Path: filepath.Join(dir, "db"), What: "the store's directory (db.badger.path)"},
		{Path: filepath.Join(dir, "conduit.yml"), What: "the configuration file"},
		{Path: filepath.Join(dir, "pipelines"), What: "the pipeline files (pipelines.path)"},
	}
}

// snapshot is every file under dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			files[path] = "directory"
			return nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			files[path] = "-> " + target
			return nil
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestFileDestinationRefusesConduitsOwnFiles(t *testing.T) {
	tests := []struct {
		name string
		// setup plants links in dir and returns the destination's path.
		setup    func(t *testing.T, dir string) string
		wantWhat string
		// byName: the path as written names a protected path, and the
		// pipeline is refused when it is loaded (a setting error on path),
		// before it runs; the others are refused by Open.
		byName bool
	}{
		{"the store's MANIFEST", func(_ *testing.T, dir string) string { return filepath.Join(dir, "db/MANIFEST") }, "store", true},
		{"a new file in the store", func(_ *testing.T, dir string) string { return filepath.Join(dir, "db/out.jsonl") }, "store", true},
		{"a new directory in the store", func(_ *testing.T, dir string) string { return filepath.Join(dir, "db/sub/out.jsonl") }, "store", true},
		{"the store by a path with ..", func(_ *testing.T, dir string) string { return filepath.Join(dir, "pipelines/../db/MANIFEST") }, "store", true},
		{"the configuration file", func(_ *testing.T, dir string) string { return filepath.Join(dir, "conduit.yml") }, "configuration", true},
		{"a pipeline file", func(_ *testing.T, dir string) string { return filepath.Join(dir, "pipelines/p.yml") }, "pipeline files", true},
		{"a new pipeline file", func(_ *testing.T, dir string) string { return filepath.Join(dir, "pipelines/new.yml") }, "pipeline files", true},
		{"the store through a symlinked directory", func(t *testing.T, dir string) string {
			if err := os.Symlink(filepath.Join(dir, "db"), filepath.Join(dir, "out")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "out/MANIFEST")
		}, "store", false},
		{"the configuration by a hard link", func(t *testing.T, dir string) string {
			if err := os.Link(filepath.Join(dir, "conduit.yml"), filepath.Join(dir, "innocent.jsonl")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "innocent.jsonl")
		}, "configuration", false},
		{"a store file by a hard link", func(t *testing.T, dir string) string {
			if err := os.Link(filepath.Join(dir, "db/000001.sst"), filepath.Join(dir, "out.jsonl")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "out.jsonl")
		}, "store", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, protected := conduitFiles(t)
			path := tt.setup(t, dir)
			before := snapshot(t, dir)
			d, err := NewFileDestination(Config{Settings: map[string]string{"path": path, "follow-symlinks": "true"}, Protected: protected})
			if tt.byName {
				var se *SettingError
				if !errors.As(err, &se) || se.Setting != "path" {
					t.Fatalf("building the destination: %v, want a setting error on path", err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantWhat) {
					t.Errorf("the error names neither the path nor what it is (%q): %v", tt.wantWhat, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = d.Open(context.Background())
			if err == nil {
				_ = d.Teardown(context.Background())
				t.Fatalf("Open of %s succeeded", path)
			}
			if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal {
				t.Errorf("the error is %v, want fatal: %v", c.Class, err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantWhat) {
				t.Errorf("the error names neither the path nor what it is (%q): %v", tt.wantWhat, err)
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func TestFileDestinationWritesBesideConduitsOwnFiles(t *testing.T) {
	dir, protected := conduitFiles(t)
	for _, name := range []string{"out.jsonl", "dbx/out.jsonl", "pipelines.jsonl", "conduit.yml.out"} {
		path := filepath.Join(dir, name)
		d, err := NewFileDestination(Config{Settings: map[string]string{"path": path}, Protected: protected})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Open(context.Background()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = d.Teardown(context.Background())
	}
}

func TestFileDestinationDoesNotFollowASymlinkAtItsPath(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "out.jsonl")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	d, err := NewFileDestination(Config{Settings: map[string]string{"path": link}})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Open(context.Background())
	if err == nil {
		t.Fatal("Open followed the symbolic link")
	}
	if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal {
		t.Errorf("the error is %v, want fatal: %v", c.Class, err)
	}
	for _, want := range []string{link, "symbolic link", secret, "follow-symlinks: true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only\n" {
		t.Fatalf("the link's target changed: %q", b)
	}

	// A dangling link would be created through, too.
	dangling := filepath.Join(dir, "dangling.jsonl")
	if err := os.Symlink(filepath.Join(dir, "created-elsewhere"), dangling); err != nil {
		t.Fatal(err)
	}
	d, _ = NewFileDestination(Config{Settings: map[string]string{"path": dangling}})
	if err := d.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a dangling link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dangling link's target was created: %v", err)
	}

	// With follow-symlinks the link is written through.
	d = openFileDestination(t, map[string]string{"path": link, "follow-symlinks": "true"})
	if _, err := d.Write(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = d.Teardown(context.Background())
}

// The check after opening catches what the check before it cannot: a
// link to conduit's files swapped in between. Here the pre-check is given
// a harmless path and the opened file is the store's.
func TestFileDestinationChecksTheOpenedFile(t *testing.T) {
	dir, protected := conduitFiles(t)
	f, err := os.OpenFile(filepath.Join(dir, "db/MANIFEST"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	err = checkProtectedFile(filepath.Join(dir, "harmless.jsonl"), openedPath(f, filepath.Join(dir, "harmless.jsonl")), fi, protected)
	if !errors.Is(err, errProtected) || !strings.Contains(err.Error(), "db/MANIFEST") {
		t.Fatalf("the opened MANIFEST under another name: %v", err)
	}
}

// The directory above the opened file is compared by identity too: the
// store reached by another name (a bind mount, a different case on a file
// system that ignores case) is still the store.
func TestFileDestinationKnowsTheStoreByIdentity(t *testing.T) {
	dir, _ := conduitFiles(t)
	fi, err := os.Stat(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	if !inDir(filepath.Join(dir, "db", "MANIFEST"), fi) {
		t.Fatal("the store's MANIFEST is not found in the store by identity")
	}
	if inDir(filepath.Join(dir, "out.jsonl"), fi) {
		t.Fatal("a file beside the store is found in it")
	}
}

// Every protected path may itself be a symbolic link (db.badger.path set
// to a link, a pipelines directory that is a release link, a
// configuration file linked from elsewhere): a hard link to a file behind
// it is still refused, and the store keeps its protection when its link
// is pointed elsewhere after start.
func TestFileDestinationRefusesConduitsOwnFilesBehindSymlinks(t *testing.T) {
	tests := []struct {
		name string
		// target is the file, under the real directories, that the
		// destination's path is made a hard link of; swap runs first.
		target   string
		swap     func(t *testing.T, dir string)
		wantWhat string
	}{
		{name: "a store table", target: "realdb/000001.sst", wantWhat: "store"},
		{name: "the store's MANIFEST", target: "realdb/MANIFEST", wantWhat: "store"},
		{name: "the configuration file", target: "etc/conduit.yml", wantWhat: "configuration"},
		{name: "a pipeline file", target: "rel1/p.yml", wantWhat: "pipeline files"},
		{name: "a pipeline file linked into the pipelines directory", target: "common/q.yml", wantWhat: "pipeline files"},
		{name: "a connector executable", target: "realconnectors/conn", wantWhat: "connector"},
		{name: "the store after its link was pointed elsewhere", target: "realdb/000001.sst", wantWhat: "store",
			swap: func(t *testing.T, dir string) {
				mustDo(t, os.Mkdir(filepath.Join(dir, "otherdb"), 0o755))
				mustDo(t, os.Remove(filepath.Join(dir, "dblink")))
				mustDo(t, os.Symlink("otherdb", filepath.Join(dir, "dblink")))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range map[string]string{
				"realdb/MANIFEST":     "manifest",
				"realdb/000001.sst":   "table",
				"etc/conduit.yml":     "log:\n  level: info\n",
				"rel1/p.yml":          "version: \"2.2\"\n",
				"common/q.yml":        "version: \"2.2\"\n",
				"realconnectors/conn": "#!/bin/sh\n",
				"dst/keep":            "",
			} {
				path := filepath.Join(dir, name)
				mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
				mustDo(t, os.WriteFile(path, []byte(content), 0o644))
			}
			for link, target := range map[string]string{
				"dblink":      "realdb",
				"conduit.yml": "etc/conduit.yml",
				"pipelines":   "rel1",
				"rel1/q.yml":  "../common/q.yml",
				"connectors":  "realconnectors",
			} {
				mustDo(t, os.Symlink(target, filepath.Join(dir, link)))
			}
			protected := []ProtectedPath{
				NewProtectedPath(filepath.Join(dir, "dblink"), "the store's directory (db.badger.path)"),
				NewProtectedPath(filepath.Join(dir, "conduit.yml"), "the configuration file"),
				NewProtectedPath(filepath.Join(dir, "pipelines"), "the pipeline files (pipelines.path)"),
				NewProtectedPath(filepath.Join(dir, "connectors"), "the connector executables (connectors.path)"),
			}
			if tt.swap != nil {
				tt.swap(t, dir)
			}
			path := filepath.Join(dir, "dst", "hard.jsonl")
			mustDo(t, os.Link(filepath.Join(dir, tt.target), path))
			before := snapshot(t, dir)
			d, err := NewFileDestination(Config{Settings: map[string]string{"path": path}, Protected: protected})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Open(context.Background())
			if err == nil {
				_, _ = d.Write(context.Background(), nil)
				_ = d.Teardown(context.Background())
				t.Fatalf("Open of a hard link to %s succeeded", tt.target)
			}
			if !errors.Is(err, errProtected) || !strings.Contains(err.Error(), tt.wantWhat) {
				t.Errorf("the error does not name %q: %v", tt.wantWhat, err)
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
