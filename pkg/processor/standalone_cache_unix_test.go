//go:build unix

package processor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The compilation cache holds native code conduit runs: only a directory
// of conduit's own user that no one else can write to is used.
func TestPrivateCacheDir(t *testing.T) {
	root := t.TempDir()

	fresh := filepath.Join(root, "fresh", "wasm")
	if err := privateCacheDir(fresh); err != nil {
		t.Fatalf("a missing directory: %v, want it made", err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v (%v), want mode 0700", fi.Mode().Perm(), err)
	}

	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := privateCacheDir(open); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a world-writable directory: %v, want it refused", err)
	}

	link := filepath.Join(root, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := privateCacheDir(link); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlink: %v, want it refused", err)
	}

	if os.Geteuid() == 0 {
		// Root can give a directory away: one of another user is refused.
		other := filepath.Join(root, "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := privateCacheDir(other); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("another user's directory: %v, want it refused", err)
		}
	}
}
