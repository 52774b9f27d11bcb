package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// init and pipelines init never write through a symbolic link, even with
// --force: not one at a file's own path (dangling or not), not a directory
// link planted in a directory every user may write to (/tmp). A refusal
// writes nothing.
func TestInitDoesNotWriteThroughSymlinks(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	secret := filepath.Join(w.dir, "secret")
	w.write("secret", "root only\n")
	victim := filepath.Join(w.dir, "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(w.dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		args  func(dir string) []string
		want  string
	}{
		{"conduit.yml is a link", func(dir string) { link(secret, filepath.Join(dir, "conduit.yml")) },
			func(dir string) []string { return []string{"init", "--force", dir} }, "conduit.yml is a symbolic link (to " + secret + ")"},
		{"example.yml is a link", func(dir string) { link(secret, filepath.Join(dir, "pipelines", "example.yml")) },
			func(dir string) []string { return []string{"init", "--force", dir} }, "example.yml is a symbolic link"},
		{"a dangling link", func(dir string) { link(filepath.Join(victim, "created"), filepath.Join(dir, "conduit.yml")) },
			func(dir string) []string { return []string{"init", "--force", dir} }, "is a symbolic link"},
		{"the directory is a link planted in a shared directory", func(string) { link(victim, filepath.Join(shared, "project")) },
			func(string) []string { return []string{"init", "--force", filepath.Join(shared, "project")} }, "in a directory every user may write to"},
		{"a pipeline file is a link", func(dir string) { link(secret, filepath.Join(dir, "mine.yaml")) },
			func(dir string) []string {
				return []string{"pipelines", "init", "mine", "--force", "--pipelines.path", dir}
			}, "mine.yaml is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(w.dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(dir)
			p := w.start(tc.args(dir)...)
			if code := p.wait(t); code == 0 || !strings.Contains(p.stderr.String(), tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant a refusal saying %q", code, p.stderr.String(), tc.want)
			}
			if b, _ := os.ReadFile(secret); string(b) != "root only\n" {
				t.Fatalf("the link's target was written: %q", b)
			}
			if entries, _ := os.ReadDir(victim); len(entries) != 0 {
				t.Fatalf("files were created through the link: %v", entries)
			}
			if _, err := os.Stat(filepath.Join(dir, "pipelines", "example.yml")); err == nil && tc.name != "example.yml is a link" {
				t.Error("a refusal wrote the example pipeline")
			}
		})
	}

	// Without links, --force replaces the files, leaving no temporary
	// file behind.
	dir := filepath.Join(w.dir, "plain")
	for range 2 {
		p := w.start("init", "--force", dir)
		if code := p.wait(t); code != 0 {
			t.Fatalf("init --force: %s", p.stderr.String())
		}
	}
	for _, sub := range []string{dir, filepath.Join(dir, "pipelines")} {
		entries, _ := os.ReadDir(sub)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("a temporary file was left: %s", filepath.Join(sub, e.Name()))
			}
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "conduit.yml")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("conduit.yml: %v %v", fi, err)
	}
}
