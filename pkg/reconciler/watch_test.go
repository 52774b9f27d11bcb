package reconciler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

func startWatch(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	w, err := NewWatcher(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() { changed <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return changed
}

// waitChange waits for a reload; the bound is the promise to users.
func waitChange(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no reload", what)
	}
}

func TestWatchSeesEditsRenamesAndNewDirectories(t *testing.T) {
	dir := t.TempDir()
	changed := startWatch(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "a.yml"), []byte("version: 2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a new file")

	// An editor's save: a temporary file renamed over the old one.
	tmp := filepath.Join(dir, ".a.yml.swp")
	if err := os.WriteFile(tmp, []byte("version: 2.2\npipelines: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "a.yml")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a rename over the file")

	sub := filepath.Join(dir, "team")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a new directory")
	// Its files are watched too. The directory's watch is added when its
	// creation is seen; write until a reload shows it is.
	for i := 0; ; i++ {
		if err := os.WriteFile(filepath.Join(sub, "b.yaml"), []byte("version: 2.2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(2 * Debounce):
			if i < 10 {
				continue
			}
			t.Fatal("a file in a new directory: no reload")
		}
		break
	}

	if err := os.Remove(filepath.Join(dir, "a.yml")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a removed file")
}

func TestWatchCoalescesABurst(t *testing.T) {
	dir := t.TempDir()
	changed := startWatch(t, dir)
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(dir, "p.yml"), []byte("version: 2.2\n# "+string(rune('a'+i%26))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitChange(t, changed, "a burst of writes")
	// 100 writes within a few milliseconds are one reload, perhaps two if
	// the burst straddled maxDelay; never one per write.
	time.Sleep(2 * maxDelay)
	if n := len(changed); n > 1 {
		t.Errorf("a burst of 100 writes caused %d more reloads", n)
	}
}

func TestWatchASingleFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "only.yml")
	if err := os.WriteFile(file, []byte("version: 2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := startWatch(t, file)
	if err := os.WriteFile(filepath.Join(dir, "other.yml"), []byte("version: 2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("version: 2.2\n#x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the watched file changed")
}

func TestRelevant(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   fsnotify.Op
		file string
		want bool
	}{
		{"/p/a.yml", fsnotify.Write, "", true},
		{"/p/a.YAML", fsnotify.Create, "", true},
		{"/p/team", fsnotify.Remove, "", true},
		{"/p/.a.yml.swp", fsnotify.Write, "", false},
		{"/p/a.yml~", fsnotify.Write, "", false},
		{"/p/notes.txt", fsnotify.Write, "", false},
		{"/p/a.yml", fsnotify.Chmod, "", false},
		{"/p/a.yml", fsnotify.Write, "/p/b.yml", false},
		{"/p/b.yml", fsnotify.Rename, "/p/b.yml", true},
	} {
		if got := relevant(fsnotify.Event{Name: tc.name, Op: tc.op}, tc.file); got != tc.want {
			t.Errorf("%s %s (watching %q): relevant %v, want %v", tc.op, tc.name, tc.file, got, tc.want)
		}
	}
}

// A pipelines directory removed and created again (rm -rf, a checkout) is
// watched again once it is back.
func TestWatchARemovedDirectoryComingBack(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "pipelines")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	changed := startWatch(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the directory removed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the directory back")
	if err := os.WriteFile(filepath.Join(dir, "a.yml"), []byte("version: 2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a file in the directory that came back")
}

// writeUntilSeen writes file until a reload shows its directory is
// watched (a watch added on an event is in place a moment after it).
func writeUntilSeen(t *testing.T, changed <-chan struct{}, file, what string) {
	t.Helper()
	for i := 0; ; i++ {
		if err := os.WriteFile(file, []byte("version: 2.2\n#"+string(rune('a'+i%26))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
			return
		case <-time.After(2 * maxDelay):
			if i >= 5 {
				t.Fatalf("%s: no reload", what)
			}
		}
	}
}

// A pipelines directory that is a symbolic link is watched where it
// points.
func TestWatchASymlinkedDirectory(t *testing.T) {
	parent := t.TempDir()
	rel := filepath.Join(parent, "pipelines.rel1")
	if err := os.Mkdir(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "pipelines")
	if err := os.Symlink("pipelines.rel1", link); err != nil {
		t.Fatal(err)
	}
	changed := startWatch(t, link)
	if err := os.WriteFile(filepath.Join(rel, "a.yml"), []byte("version: 2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a file written in the link's target")
}

// A deploy that moves the directory aside and puts a link in its place,
// then points the link at another release, is seen each time, and the
// files of the release the link points to are watched.
func TestWatchALinkSwappedIn(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "pipelines")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	changed := startWatch(t, dir)

	rel1 := filepath.Join(parent, "pipelines.rel1")
	if err := os.Rename(dir, rel1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipelines.rel1", dir); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the directory replaced by a link")
	writeUntilSeen(t, changed, filepath.Join(rel1, "a.yml"), "a file in the link's target")

	// An atomic swap to the next release: a new link renamed over the old.
	rel2 := filepath.Join(parent, "pipelines.rel2")
	if err := os.Mkdir(rel2, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(parent, "pipelines.tmp")
	if err := os.Symlink("pipelines.rel2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the link pointed at the next release")
	writeUntilSeen(t, changed, filepath.Join(rel2, "b.yml"), "a file in the next release")
}
