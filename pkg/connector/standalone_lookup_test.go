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
