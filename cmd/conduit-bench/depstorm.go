package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/conduit"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/record"
)

// The dependency storm: n pipelines depend on `deps` dependencies (a
// connector's dependency:), which all go down for an outage and come back.
// It counts the restarts issued during the outage, with and without
// breakers, and the time from the end of the outage until every pipeline
// runs again.

type depStormResult struct {
	Pipelines       int     `json:"pipelines"`
	Dependencies    int     `json:"dependencies"`
	Breakers        bool    `json:"breakers"`
	OutageSecs      float64 `json:"outage_secs"`
	RestartsOutage  int64   `json:"restarts_outage"`
	AllRunningAfter float64 `json:"all_running_after_secs"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"`
}

// depSource delivers a record per second while its dependency is up and
// fails with a transient 503 while it is down.
type depSource struct {
	down *atomic.Bool
	next time.Time
}

func (s *depSource) Open(context.Context, record.Position) error  { return nil }
func (s *depSource) Ack(context.Context, []record.Position) error { return nil }
func (s *depSource) Teardown(context.Context) error               { return nil }

func (s *depSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.down.Load() {
		return 0, cerrors.WithCode(errors.New("dependency unavailable"), cerrors.CodeUnavailable)
	}
	if wait := time.Until(s.next); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if s.down.Load() {
			return 0, cerrors.WithCode(errors.New("dependency unavailable"), cerrors.CodeUnavailable)
		}
	}
	s.next = time.Now().Add(time.Second)
	batch[0] = record.Record{Position: record.Position("1"), Operation: record.OperationCreate, Payload: record.Change{After: record.RawData("ok")}}
	return 1, nil
}

// depStormObserver counts restarts and tracks which pipelines run.
type depStormObserver struct {
	restarts atomic.Int64
	mu       sync.Mutex
	running  map[string]bool
	changed  chan struct{}
}

func (o *depStormObserver) PipelineEvent(e auditlog.Event) {
	switch e.Kind {
	case auditlog.KindRestarted:
		o.restarts.Add(1)
	case auditlog.KindRunning, auditlog.KindRecovered, auditlog.KindRecovering, auditlog.KindDegraded:
		o.mu.Lock()
		o.running[e.PipelineID] = e.Kind == auditlog.KindRunning || e.Kind == auditlog.KindRecovered
		o.mu.Unlock()
		select {
		case o.changed <- struct{}{}:
		default:
		}
	}
}

func (o *depStormObserver) countRunning() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.running {
		if r {
			n++
		}
	}
	return n
}

func measureDepStorm(n, deps int, outage time.Duration, breakers bool) (depStormResult, error) {
	dir, err := os.MkdirTemp("", "conduit-depstorm-")
	if err != nil {
		return depStormResult{}, err
	}
	defer os.RemoveAll(dir)
	var b strings.Builder
	b.WriteString("version: \"2.2\"\npipelines:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: dep-%05d\n    connectors:\n"+
			"      - {id: src, type: source, plugin: builtin:depsource, dependency: db-%d}\n"+
			"      - {id: dst, type: destination, plugin: builtin:discard}\n", i, i%deps)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		return depStormResult{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pipelines", "deps.yml"), []byte(b.String()), 0o644); err != nil {
		return depStormResult{}, err
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Badger.Path = filepath.Join(dir, "db")
	cfg.Pipelines.Path = filepath.Join(dir, "pipelines")
	cfg.Pipelines.Watch = false
	cfg.Pipelines.Breakers.Enabled = breakers
	var down atomic.Bool
	reg := connector.NewRegistry(append(connector.Builtin(),
		connector.Plugin{Name: "depsource", NewSource: func(connector.Config) (connector.Source, error) { return &depSource{down: &down}, nil }},
		connector.Plugin{Name: "discard", NewDestination: func(connector.Config) (connector.Destination, error) { return discard{}, nil }},
	)...)
	obs := &depStormObserver{running: make(map[string]bool, n), changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := conduit.New(ctx, cfg, zap.NewNop(), conduit.Options{Connectors: reg, Observer: obs})
	if err != nil {
		return depStormResult{}, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- rt.Run(ctx, nil) }()
	waitAll := func(what string) error {
		deadline := time.NewTimer(5 * time.Minute)
		defer deadline.Stop()
		for obs.countRunning() < n {
			select {
			case <-obs.changed:
			case <-time.After(50 * time.Millisecond):
			case err := <-runDone:
				return fmt.Errorf("runtime ended while waiting for %s: %v", what, err)
			case <-deadline.C:
				return fmt.Errorf("%s: %d of %d after 5 minutes", what, obs.countRunning(), n)
			}
		}
		return nil
	}
	if err := waitAll("every pipeline running"); err != nil {
		return depStormResult{}, err
	}
	before := obs.restarts.Load()
	down.Store(true)
	time.Sleep(outage) // the outage itself is the measurement's length
	down.Store(false)
	res := depStormResult{Pipelines: n, Dependencies: deps, Breakers: breakers, OutageSecs: outage.Seconds(),
		RestartsOutage: obs.restarts.Load() - before}
	up := time.Now()
	if err := waitAll("every pipeline running again"); err != nil {
		return depStormResult{}, err
	}
	res.AllRunningAfter = time.Since(up).Seconds()
	cancel()
	if err := <-runDone; err != nil {
		return depStormResult{}, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.PeakRSSMiB = float64(ru.Maxrss) / 1024
	}
	return res, nil
}

func depStormParent(n, deps int, outage time.Duration) error {
	fmt.Printf("\ndependency storm: %d pipelines on %d dependencies, all down for %s and back; default policy (1s x2 up to 1m),\n", n, deps, outage)
	fmt.Printf("breakers with their defaults (threshold 3, window 1m, stagger 5s); each run in its own process\n")
	results := map[bool]depStormResult{}
	for _, breakers := range []bool{true, false} {
		out, err := runChild("-records", "0", "-storm", "0", "-reload", "0", "-dep-storm", strconv.Itoa(n),
			"-dep-storm-deps", strconv.Itoa(deps), "-dep-storm-outage", outage.String(), "-dep-storm-breakers="+strconv.FormatBool(breakers))
		if err != nil {
			return fmt.Errorf("dependency storm (breakers %v): %w", breakers, err)
		}
		var r depStormResult
		if err := json.Unmarshal(out, &r); err != nil {
			return err
		}
		results[breakers] = r
		fmt.Printf("breakers %-5v: %6d restarts during the outage, all %d running again %.1fs after it ended, peak RSS %.0f MiB\n",
			breakers, r.RestartsOutage, n, r.AllRunningAfter, r.PeakRSSMiB)
	}
	if with, without := results[true], results[false]; without.RestartsOutage > 0 {
		fmt.Printf("restarts during the outage with breakers: %.1f%% of those without\n", 100*float64(with.RestartsOutage)/float64(without.RestartsOutage))
	}
	return nil
}
