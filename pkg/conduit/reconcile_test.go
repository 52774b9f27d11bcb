package conduit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

func stoppedPipelineFile(id string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    status: stopped
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
      - id: out
        type: destination
        plugin: builtin:log
`, id)
}

// newFilesRuntime is a runtime on an in-memory store for the pipeline
// files in dir, not watching them: the tests ask for reloads, so that they
// know when one happened.
func newFilesRuntime(t *testing.T, dir string, log *zap.Logger) *Runtime {
	t.Helper()
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	cfg.Pipelines.Watch = false
	rt, err := New(context.Background(), cfg, log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// reloaded asks for a reload and waits until it was applied. The wait
// only bounds a hang: a reload of a thousand files under the race
// detector took more than 30 s on a machine shared with other work.
func reloaded(t *testing.T, rt *Runtime, logs *observer.ObservedLogs) {
	t.Helper()
	before := logs.FilterMessage("pipeline files applied").Len()
	rt.Reload()
	clocktest.Wait{Timeout: 3 * time.Minute, MaxPause: 5 * time.Millisecond}.Until(t,
		func() bool { return logs.FilterMessage("pipeline files applied").Len() != before },
		func() string { return "the reload was not applied" })
}

func invalidIDs(rt *Runtime) []string {
	var ids []string
	for _, ce := range rt.pipes.Invalid() {
		ids = append(ids, ce.PipelineID+": "+ce.Err.Error())
	}
	return ids
}

// A directory of a thousand files, and the ways files go wrong while
// conduit runs: half a file, an id defined twice, an id renamed in place.
func TestReconcileThousandFilesAndBadInput(t *testing.T) {
	dir := t.TempDir()
	const n = 1000
	for i := range n {
		id := fmt.Sprintf("p-%04d", i)
		if err := os.WriteFile(filepath.Join(dir, id+".yml"), []byte(stoppedPipelineFile(id)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.InfoLevel)
	rt := newFilesRuntime(t, dir, zap.New(core))
	if got := len(rt.Pipelines()); got != n {
		t.Fatalf("loaded %d pipelines, want %d", got, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, nil)
	defer func() {
		cancel()
		waitDone(t, done)
	}()

	// Half a file: the pipeline in it stays as it was.
	full := stoppedPipelineFile("p-0001")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p-0001.yml", full[:len(full)/2])
	reloaded(t, rt, logs)
	if supervised(rt, "p-0001") == nil || len(rt.Pipelines()) != n {
		t.Fatalf("half a file removed its pipeline: %d pipelines", len(rt.Pipelines()))
	}
	if inv := invalidIDs(rt); len(inv) != 1 || !strings.Contains(inv[0], "p-0001.yml") {
		t.Fatalf("half a file is reported as %v", inv)
	}
	write("p-0001.yml", full)
	reloaded(t, rt, logs)
	if inv := invalidIDs(rt); len(inv) != 0 {
		t.Fatalf("fixed, still invalid: %v", inv)
	}

	// The same id in a second file: the first definition runs on.
	write("zz-dup.yml", strings.Replace(stoppedPipelineFile("p-0002"), "builtin:log", "builtin:file", 1))
	reloaded(t, rt, logs)
	if m := supervised(rt, "p-0002"); m == nil || !strings.HasSuffix(m.Info().File, "p-0002.yml") {
		t.Fatalf("a duplicate id took p-0002 over: %v", m)
	}
	if inv := invalidIDs(rt); len(inv) != 1 || !strings.Contains(inv[0], "duplicate pipeline id") {
		t.Fatalf("the duplicate is reported as %v", inv)
	}
	if err := os.Remove(filepath.Join(dir, "zz-dup.yml")); err != nil {
		t.Fatal(err)
	}

	// An id renamed in place: the old pipeline is deleted, the new one
	// created.
	write("p-0003.yml", stoppedPipelineFile("p-0003-renamed"))
	reloaded(t, rt, logs)
	if supervised(rt, "p-0003") != nil || supervised(rt, "p-0003-renamed") == nil || len(rt.Pipelines()) != n {
		t.Fatalf("after renaming p-0003: old %v, new %v, %d pipelines", supervised(rt, "p-0003"), supervised(rt, "p-0003-renamed"), len(rt.Pipelines()))
	}
	if logs.FilterMessage("pipeline deleted: stopping it").Len() != 1 {
		t.Errorf("deleted %d pipelines, want p-0003 only", logs.FilterMessage("pipeline deleted: stopping it").Len())
	}
}

// Pipelines applied through the API keep the file they came from once,
// while one of them needs it.
func TestAppliedPipelinesShareTheirFile(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rt := newFilesRuntime(t, dir, zap.NewNop())
	defer rt.Close()
	two := stoppedPipelineFile("a") + strings.TrimPrefix(stoppedPipelineFile("b"), "version: \"2.2\"\npipelines:\n")
	plan, err := rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "two.yml", Data: []byte(two)}}, false, false)
	if err != nil || plan.Count(reconciler.Create) != 2 {
		t.Fatalf("apply: %+v %v", plan, err)
	}
	countKeys := func(prefix string) int {
		n := 0
		if err := rt.db.Scan(ctx, []byte(prefix), func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if p, f := countKeys(store.PrefixAPIPipeline), countKeys(store.PrefixAPIPipelineFile); p != 2 || f != 1 {
		t.Fatalf("stored %d pipelines and %d files, want 2 and 1", p, f)
	}
	if err := rt.pipes.Changes().Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if p, f := countKeys(store.PrefixAPIPipeline), countKeys(store.PrefixAPIPipelineFile); p != 1 || f != 1 {
		t.Fatalf("after deleting a: %d pipelines and %d files, want 1 and 1", p, f)
	}
	// Applied again from another file: the first is no longer needed.
	if _, err := rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "b.yml", Data: []byte(stoppedPipelineFile("b"))}}, false, false); err != nil {
		t.Fatal(err)
	}
	if p, f := countKeys(store.PrefixAPIPipeline), countKeys(store.PrefixAPIPipelineFile); p != 1 || f != 1 {
		t.Fatalf("after applying b again: %d pipelines and %d files, want 1 and 1", p, f)
	}
	if err := rt.pipes.Changes().Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if p, f := countKeys(store.PrefixAPIPipeline), countKeys(store.PrefixAPIPipelineFile); p != 0 || f != 0 {
		t.Fatalf("after deleting everything: %d pipelines and %d files", p, f)
	}
	if err := rt.pipes.Changes().Delete(ctx, "b"); !errors.Is(err, api.ErrPipelineNotFound) {
		t.Fatalf("deleting b twice: %v", err)
	}
}

// An id that an invalid file entry claims cannot be applied through the
// API: fixed, the file would take the id over.
func TestApplyRefusesAnIdAnInvalidFileClaims(t *testing.T) {
	dir := t.TempDir()
	broken := strings.Replace(stoppedPipelineFile("orders"), "builtin:log", "builtin:nosuch", 1)
	if err := os.WriteFile(filepath.Join(dir, "orders.yml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	// An entry that does not even parse claims its id too.
	unparsable := strings.Replace(stoppedPipelineFile("billing"), "type: source", "type: sauce", 1)
	if err := os.WriteFile(filepath.Join(dir, "billing.yml"), []byte(unparsable), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := newFilesRuntime(t, dir, zap.NewNop())
	defer rt.Close()
	plan, err := rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "mine.yml", Data: []byte(stoppedPipelineFile("orders"))}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Changes) != 1 || plan.Changes[0].Action != reconciler.Invalid || !strings.Contains(plan.Changes[0].Problems[0].Err.Error(), "is defined in "+filepath.Join(dir, "orders.yml")) {
		t.Fatalf("plan %+v", plan)
	}
	if supervised(rt, "orders") != nil {
		t.Fatal("the API's pipeline was created under an id a file claims")
	}
	plan, err = rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "mine.yml", Data: []byte(stoppedPipelineFile("billing"))}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Changes) != 1 || plan.Changes[0].Action != reconciler.Invalid || !strings.Contains(fmt.Sprint(plan.Changes[0].Problems), "invalid there now") {
		t.Fatalf("plan %+v", plan)
	}
	if supervised(rt, "billing") != nil {
		t.Fatal("the API's pipeline was created under an id an unparsable file entry claims")
	}
}

func TestConsoleURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/ui/",
		"0.0.0.0:8080":   "http://localhost:8080/ui/",
		"[::]:8080":      "http://localhost:8080/ui/",
		"[::1]:9000":     "http://[::1]:9000/ui/",
	} {
		if got := consoleURL(addr); got != want {
			t.Errorf("consoleURL(%q) = %s, want %s", addr, got, want)
		}
	}
}

// supervised returns the pipeline id as the API sees it, nil when it does
// not run here.
func supervised(rt *Runtime, id string) api.Supervised {
	s, _ := rt.pipes.Supervised(id)
	return s
}
