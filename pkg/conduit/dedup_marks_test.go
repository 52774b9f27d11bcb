package conduit

import (
	"context"
	"encoding/json"
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

// TestOutputRotatedAfterACleanStopIsNoAlarm: a file destination whose
// output was rotated away while its pipeline was stopped cleanly cannot
// read back what its last run wrote, but needs not: that run stopped
// with every record it wrote acknowledged, which its state and its dedup
// mark say together. No dedup-unverified event is written (after a crash
// it is: cmd/conduit's TestOutputRotatedAfterACrashIsAnAuditedDecision),
// and no record is written twice.
func TestOutputRotatedAfterACleanStopIsNoAlarm(t *testing.T) {
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
		if err := rt.AuditLog().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
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
	clocktest.Eventually(t, func() bool { return fileSize(t, out) > 0 }, func() string { return "nothing written after the rotation" })
	if err := m.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := unverified(); len(got) != 0 {
		t.Errorf("dedup-unverified after a clean stop and a rotation: %+v", got)
	}
	seen := map[string]bool{}
	for _, path := range []string{out + ".1", out} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r struct{ Position string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			if seen[r.Position] {
				t.Errorf("position %s written twice", r.Position)
			}
			seen[r.Position] = true
		}
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
