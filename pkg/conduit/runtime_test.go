package conduit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/catalog"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
	"github.com/conduitry/conduit/pkg/supervision"
)

// stuckDestination accepts nothing until its context is cancelled, like a
// destination whose network peer hangs. written reports the first write.
type stuckDestination struct{ writing chan struct{} }

func (d *stuckDestination) Open(context.Context) error { return nil }
func (d *stuckDestination) Write(ctx context.Context, _ []record.Record) (int, error) {
	select {
	case d.writing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return 0, ctx.Err()
}
func (d *stuckDestination) Teardown(context.Context) error { return nil }

const stuckPipeline = `version: "2.2"
pipelines:
  - id: stuck
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
      - id: hang
        type: destination
        plugin: builtin:stuck
`

func newStuckRuntime(t *testing.T, gracefulTimeout time.Duration) (*Runtime, *stuckDestination, *observer.ObservedLogs) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yml"), []byte(stuckPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	cfg.Pipelines.GracefulStopTimeout = gracefulTimeout

	dst := &stuckDestination{writing: make(chan struct{}, 1)}
	plugins := append(connector.Builtin(), connector.Plugin{
		Name:           "stuck",
		NewDestination: func(connector.Config) (connector.Destination, error) { return dst, nil },
	})
	core, logs := observer.New(zap.InfoLevel)
	rt, err := New(context.Background(), cfg, zap.New(core), Options{Connectors: connector.NewRegistry(plugins...)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Pipelines()) != 1 {
		t.Fatalf("loaded %d pipelines, want 1: %v", len(rt.Pipelines()), logs.All())
	}
	return rt, dst, logs
}

func runInBackground(rt *Runtime, ctx context.Context, force <-chan struct{}) chan error {
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx, force) }()
	return done
}

func waitDone(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestSecondSignalForcesAStuckPipeline(t *testing.T) {
	rt, dst, logs := newStuckRuntime(t, time.Hour)
	ctx, stop := context.WithCancel(context.Background())
	force := make(chan struct{})
	done := runInBackground(rt, ctx, force)
	<-dst.writing

	stop() // first signal: graceful, which cannot finish
	select {
	case <-done:
		t.Fatal("Run returned while a destination still held records and no force came")
	case <-time.After(50 * time.Millisecond):
	}
	close(force) // second signal
	waitDone(t, done)
	if logs.FilterMessage("second signal: force-stopping pipelines").Len() != 1 {
		t.Fatalf("no log line for the forced stop: %v", logs.All())
	}
	if logs.FilterMessageSnippet("force-stopped").FilterField(zap.String("pipeline_id", "stuck")).Len() == 0 {
		t.Fatalf("the pipeline's forced stop was not logged with its id: %v", logs.All())
	}
}

func TestGracefulStopTimeoutForces(t *testing.T) {
	rt, dst, logs := newStuckRuntime(t, 20*time.Millisecond)
	ctx, stop := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, make(chan struct{}))
	<-dst.writing
	stop()
	waitDone(t, done)
	// The pipeline's supervisor bounds its own stop with the same timeout
	// (lifecycle.Config.StopTimeout), so either it or the process's timer
	// forces it first.
	if logs.FilterMessage("graceful stop timed out: force-stopping pipelines").Len() != 1 &&
		logs.FilterMessageSnippet("graceful stop did not finish within 20ms").FilterField(zap.String("pipeline_id", "stuck")).Len() != 1 {
		t.Fatalf("no timeout log line: %v", logs.All())
	}
}

func TestStoppedPipelinesAreNotStartedAndInvalidOnesReported(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stopped.yml", strings.Replace(strings.Replace(stuckPipeline, "id: stuck", "id: idle\n    status: stopped", 1), "builtin:stuck", "builtin:log", 1))
	write("unknown.yml", strings.Replace(strings.Replace(stuckPipeline, "id: stuck", "id: nope", 1), "builtin:stuck", "builtin:nope", 1))
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	core, logs := observer.New(zap.InfoLevel)
	var mu sync.Mutex
	var events []auditlog.Event
	rt, err := New(context.Background(), cfg, zap.New(core), Options{Observer: lifecycle.ObserverFunc(func(e auditlog.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})})
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Pipelines(); len(got) != 1 || got[0] != "idle" {
		t.Fatalf("valid pipelines %v, want only idle", got)
	}
	invalid := logs.FilterMessageSnippet("invalid pipeline").All()
	if len(invalid) != 1 {
		t.Fatalf("want one invalid pipeline reported, got %v", logs.All())
	}
	msg := invalid[0].ContextMap()["error"].(string)
	if !strings.Contains(msg, "unknown.yml:") || !strings.Contains(msg, `pipeline "nope"`) || !strings.Contains(msg, "connectors[hang].plugin") {
		t.Fatalf("error does not name file, pipeline and field: %s", msg)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, nil)
	stop()
	waitDone(t, done)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Kind == auditlog.KindRunning {
			t.Fatalf("the pipeline whose file says stopped ran: %+v", e)
		}
	}
}

func TestPipelineRemovedFromTheFilesIsDeleted(t *testing.T) {
	dir := t.TempDir()
	pipelines := filepath.Join(dir, "pipelines")
	if err := os.MkdirAll(pipelines, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(pipelines, "gone.yml")
	body := strings.Replace(strings.Replace(stuckPipeline, "id: stuck", "id: gone", 1), "builtin:stuck", "builtin:log", 1)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Badger.Path = filepath.Join(dir, "db")
	cfg.Pipelines.Path = pipelines
	run := func() *observer.ObservedLogs {
		core, logs := observer.New(zap.InfoLevel)
		rt, err := New(context.Background(), cfg, zap.New(core), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := runInBackground(rt, ctx, nil)
		stop()
		waitDone(t, done)
		return logs
	}
	run() // the pipeline runs once and has state
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	// The files define nothing any more: forgetting every pipeline at
	// once is held until pipelines.allow-delete-all says it is meant.
	logs := run()
	if logs.FilterMessageSnippet("not forgotten").FilterLevelExact(zap.ErrorLevel).Len() != 1 ||
		logs.FilterMessageSnippet("deleted").FilterField(zap.String("pipeline_id", "gone")).Len() != 0 {
		t.Fatalf("the deletion of every pipeline was not held: %v", logs.All())
	}
	cfg.Pipelines.AllowDeleteAll = true
	logs = run()
	if logs.FilterMessageSnippet("deleted").FilterField(zap.String("pipeline_id", "gone")).Len() != 1 {
		t.Fatalf("no deletion logged: %v", logs.All())
	}
	// The deletion is in the audit log, and the state is gone.
	rt, err := New(context.Background(), cfg, zap.NewNop(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	events, err := rt.AuditLog().List(context.Background(), "gone", auditlog.Query{Kinds: []auditlog.Kind{auditlog.KindDeleted}})
	if err != nil || len(events) != 1 || events[0].StatusBefore != "stopped" { // stopped by the shutdown before
		t.Fatalf("deleted events %+v, %v", events, err)
	}
	if ids, _ := rt.states.IDs(context.Background()); len(ids) != 0 {
		t.Fatalf("state of the deleted pipeline kept: %v", ids)
	}
}

// TestConnectorsGetADurableState: every connector gets its own state, kept
// in the store under store.PrefixConnectorState, so that the file
// destination knows after a crash which bytes it wrote.
func TestConnectorsGetADurableState(t *testing.T) {
	rt, _, _ := newStuckRuntime(t, time.Second)
	defer rt.Close()
	ctx := context.Background()
	p := config.Pipeline{ID: "orders/eu"}
	a := rt.assembler.ConnectorConfig(p, "file-out", nil).State
	b := rt.assembler.ConnectorConfig(p, "dlq", nil).State
	if a == nil || b == nil {
		t.Fatal("a connector config without a state")
	}
	if v, err := a.Load(ctx); v != nil || err != nil {
		t.Fatalf("Load before any Save = %q, %v; want nil, nil", v, err)
	}
	if err := a.Save(ctx, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if v, err := rt.assembler.ConnectorConfig(p, "file-out", nil).State.Load(ctx); string(v) != `{"v":1}` || err != nil {
		t.Errorf("Load in a later run = %q, %v", v, err)
	}
	if v, _ := b.Load(ctx); v != nil {
		t.Errorf("another connector's state = %q, want none", v)
	}
	v, err := rt.db.Get(ctx, []byte("conduit/connector-state/orders%2Feu/file-out"))
	if err != nil || string(v) != `{"v":1}` {
		t.Errorf("store key = %q, %v", v, err)
	}
}

// A port that cannot be had stops the process before the store is opened:
// nothing is created or written.
func TestTakenPortStopsBeforeTheStoreIsOpened(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.API.HTTP.Address = ln.Addr().String()
	cfg.DB.Badger.Path = filepath.Join(dir, "db")
	cfg.Pipelines.Path = filepath.Join(dir, "pipelines")
	if _, err := New(context.Background(), cfg, zap.NewNop(), Options{}); err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("New on a taken port: %v, want an error naming the address", err)
	}
	if _, err := os.Stat(cfg.DB.Badger.Path); !os.IsNotExist(err) {
		t.Fatalf("the store was opened before the port was refused: %v", err)
	}
}

// Short of file descriptors, a run does not open its connectors: the
// pipeline goes recovering with a transient error that says what to do,
// and the descriptors the store keeps are left alone.
func TestShortOfDescriptorsARunWaits(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yml"),
		[]byte(strings.Replace(stuckPipeline, "builtin:stuck", "builtin:log", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = dir
	recovering := make(chan auditlog.Event, 10)
	rt, err := New(context.Background(), cfg, zap.NewNop(), Options{
		DescriptorsLeft: func() (int, error) { return supervision.RunDescriptors + supervision.RunDescriptorsKept - 1, nil },
		Observer: lifecycle.ObserverFunc(func(e auditlog.Event) {
			if e.Kind == auditlog.KindRecovering {
				recovering <- e
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := runInBackground(rt, ctx, nil)
	defer func() { stop(); waitDone(t, done) }()
	select {
	case e := <-recovering:
		if !e.HasError() || e.ErrorCode != 503 || e.ErrorClass != "transient" || !strings.Contains(e.ErrorMessage, "ulimit -n") {
			t.Fatalf("recovering %+v, want a transient 503 about file descriptors", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline did not go recovering")
	}
}

// A start refused after the store was opened (here: a pipeline still
// degraded with exit-on-degraded on) releases everything it took: the
// port, the store's lock, and the process marker, so the next start does
// not report a crash.
func TestRefusedStartReleasesWhatItOpened(t *testing.T) {
	dir := t.TempDir()
	pipelines := filepath.Join(dir, "pipelines")
	if err := os.MkdirAll(pipelines, 0o755); err != nil {
		t.Fatal(err)
	}
	pipelineFile := strings.Replace(stuckPipeline, "builtin:stuck", "builtin:log", 1)
	if err := os.WriteFile(filepath.Join(pipelines, "p.yml"), []byte(pipelineFile), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, errs := config.LoadPipelines(pipelines)
	if len(errs) != 0 || len(loaded) != 1 {
		t.Fatalf("loading the pipeline: %v %v", loaded, errs)
	}
	hash, err := reconciler.Fingerprint(loaded[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dbPath := filepath.Join(dir, "db")
	db, err := store.OpenBadger(ctx, dbPath, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	w := store.NewBatcher(db, nil)
	degraded := lifecycle.State{Status: lifecycle.StatusDegraded, DegradedReason: lifecycle.ReasonFatal, ConfigHash: hash}
	if err := lifecycle.NewStateStore(db, w).Save(ctx, "stuck", degraded); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	_ = ln.Close()

	cfg := config.Default()
	cfg.API.HTTP.Address = address
	cfg.DB.Badger.Path = dbPath
	cfg.Pipelines.Path = pipelines
	cfg.Pipelines.ExitOnDegraded = true
	if _, err := New(ctx, cfg, zap.NewNop(), Options{}); !errors.Is(err, ErrPipelineDegraded) {
		t.Fatalf("New with a degraded pipeline and exit-on-degraded: %v, want ErrPipelineDegraded", err)
	}

	ln, err = net.Listen("tcp", address)
	if err != nil {
		t.Fatalf("the refused start kept the API port: %v", err)
	}
	_ = ln.Close()
	db, err = store.OpenBadger(ctx, dbPath, zap.NewNop())
	if err != nil {
		t.Fatalf("the refused start left the store locked: %v", err)
	}
	defer db.Close()
	if _, err := db.Get(ctx, []byte(store.KeyProcess)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused start left its process marker (the next start would report a crash): %v", err)
	}
}

// The runtime's clock is the clock of everything the process writes down:
// an audit event appended without a time gets the runtime's now, not the
// wall clock's, the recovery summary counts from the runtime's start, and a
// pipeline applied through the API is stored with the runtime's now.
func TestOneClockReachesTheAuditLog(t *testing.T) {
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Type = config.DBTypeInMemory
	cfg.Pipelines.Path = t.TempDir()
	then := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	rt, err := New(context.Background(), cfg, zap.NewNop(), Options{Clock: clocktest.NewAt(then)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	e, err := rt.audit.Append(context.Background(), auditlog.Event{PipelineID: "p", Kind: auditlog.KindCreated,
		StatusBefore: "stopped", StatusAfter: "stopped", Actor: "config", Message: "created"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Time.Equal(then) {
		t.Errorf("event time %s, want the runtime's clock: %s", e.Time, then)
	}
	if since := rt.pipes.RecoverySummary().Since; !since.Equal(then) {
		t.Errorf("recovery summary since %s, want the runtime's clock: %s", since, then)
	}
	ctx := context.Background()
	if _, err := rt.pipes.Changes().Apply(ctx, []config.FileContent{{Name: "a.yml", Data: []byte(stoppedPipelineFile("a"))}}, false, false); err != nil {
		t.Fatal(err)
	}
	applied, _, err := catalog.LoadPipelines(ctx, rt.db)
	if err != nil || len(applied) != 1 {
		t.Fatalf("pipelines applied through the API: %+v, %v", applied, err)
	}
	if !applied[0].AppliedAt.Equal(then) {
		t.Errorf("pipeline applied at %s, want the runtime's clock: %s", applied[0].AppliedAt, then)
	}
}
