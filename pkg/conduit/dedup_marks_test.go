package conduit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/clocktest"
)

// TestMarkOfARemovedDestinationIsDeleted: a file destination's dedup mark
// never expires, so when the pipeline file renames the destination, the
// old one's mark goes with it.
func TestMarkOfARemovedDestinationIsDeleted(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out.jsonl")
	file := func(destination string) []byte {
		return fmt.Appendf(nil, `version: "2.2"
pipelines:
  - id: gen
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          rate: 100
          format.options.id: int
      - id: %s
        type: destination
        plugin: builtin:file
        settings:
          path: %s
`, destination, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "gen.yml"), file("out"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	rt := newFilesRuntime(t, dir, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, nil)
	defer func() {
		cancel()
		waitDone(t, done)
	}()
	marked := func() []string {
		dests, err := rt.dedup.Destinations(context.Background(), "gen")
		if err != nil {
			t.Fatal(err)
		}
		return dests
	}
	clocktest.Eventually(t, func() bool { return slices.Equal(marked(), []string{"out"}) },
		func() string {
			var msgs []string
			for _, e := range logs.All() {
				msgs = append(msgs, fmt.Sprint(e.Message, e.ContextMap()))
			}
			return fmt.Sprintf("destinations with dedup keys %q, want out's mark; log: %q", marked(), msgs)
		})

	if err := os.WriteFile(filepath.Join(dir, "gen.yml"), file("renamed"), 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded(t, rt, logs)
	clocktest.Eventually(t, func() bool { return slices.Equal(marked(), []string{"renamed"}) },
		func() string {
			return fmt.Sprintf("destinations with dedup keys %q, want renamed's mark alone", marked())
		})
}
