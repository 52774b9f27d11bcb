package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A misspelled CONDUIT_ variable is named once, with the variable it most
// likely meant, both when the configuration is refused (no logger yet) and
// when conduit runs.
func TestRunWarnsAboutUnknownEnvVars(t *testing.T) {
	const typo = "CONDUIT_LOG_LEVLE" // misspelled on purpose
	const want = "env " + typo + ": unknown conduit environment variable, ignored; did you mean CONDUIT_LOG_LEVEL?"
	t.Setenv(typo, "debug")

	t.Run("configuration refused", func(t *testing.T) {
		t.Setenv("CONDUIT_API_HTTP_ADDRESS", "0.0.0.0:0")
		var stderr bytes.Buffer
		root := newRootCommand(&bytes.Buffer{}, &stderr)
		root.SetArgs([]string{"run", "--config.path=" + writeTempFile(t, "conduit.yml", "")})
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "api.http.address") {
			t.Fatalf("run: %v, want the refusal of api.http.address", err)
		}
		if got := strings.Count(stderr.String(), want); got != 1 {
			t.Errorf("stderr has the warning %d times, want once:\n%s", got, stderr.String())
		}
	})

	t.Run("running", func(t *testing.T) {
		dir := t.TempDir()
		var stderr bytes.Buffer
		root := newRootCommand(&bytes.Buffer{}, &stderr)
		root.SetArgs([]string{"run", "--config.path=" + writeTempFile(t, "conduit.yml", ""),
			"--db.type=inmemory", "--api.enabled=false", "--pipelines.path=" + dir})
		// Stopped before it starts: the warning comes before anything else.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		if got := strings.Count(stderr.String(), want); got != 1 {
			t.Errorf("log has the warning %d times, want once:\n%s", got, stderr.String())
		}
	})
}

func writeTempFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
