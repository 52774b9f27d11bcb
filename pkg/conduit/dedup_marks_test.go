package conduit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/clocktest"
)

// generatorToFile is a pipeline file of one pipeline, gen: a generator of
// 100 records a second into a file destination called destination that
// writes to out.
func generatorToFile(destination, out string) []byte {
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

// TestMarkOfARemovedDestinationIsDeleted: a file destination's dedup mark
// never expires, so when the pipeline file renames the destination, the
// old one's mark goes with it.
func TestMarkOfARemovedDestinationIsDeleted(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out.jsonl")
	file := func(destination string) []byte { return generatorToFile(destination, out) }
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

// TestOutputReplacedBetweenRunsIsAnAuditedDecision: a file destination
// whose output was replaced while its pipeline was stopped cannot read
// back what its last run wrote; that dedup can then not skip those
// records is said in the pipeline's audit log, not only in the process
// log.
func TestOutputReplacedBetweenRunsIsAnAuditedDecision(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(filepath.Join(dir, "gen.yml"), generatorToFile("out", out), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := newFilesRuntime(t, dir, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, nil)
	defer func() {
		cancel()
		waitDone(t, done)
	}()
	unverified := func() []auditlog.Event {
		events, err := rt.AuditLog().List(context.Background(), "gen", auditlog.Query{Kinds: []auditlog.Kind{auditlog.KindDedupUnverified}})
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	clocktest.Eventually(t, func() bool { return fileSize(t, out) > 0 }, func() string { return "nothing written" })
	m := supervised(rt, "gen")
	if err := m.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := unverified(); len(got) != 0 {
		t.Fatalf("before the output was replaced: %+v", got)
	}
	// Rotated away while stopped: a new file at the path.
	if err := os.Rename(out, out+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clocktest.Eventually(t, func() bool { return len(unverified()) == 1 }, func() string {
		return fmt.Sprintf("dedup-unverified events after the replaced output was opened: %+v", unverified())
	})
	e := unverified()[0]
	if e.Component != "out" || !strings.Contains(e.Message, "could not say what it holds of the last run") {
		t.Errorf("event %+v", e)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
