package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/conduit"
	"github.com/conduitry/conduit/pkg/config"
)

// The reload benchmark: n pipelines run, one file at a time is changed,
// and the time is taken from the change to the pipeline running with the
// new configuration - through the file watcher (what a user editing a
// file sees, its debounce included) or through an explicit reload (SIGHUP,
// the reconciler's own cost).

type reloadResult struct {
	Pipelines  int       `json:"pipelines"`
	Watch      bool      `json:"watch"`
	Millis     []float64 `json:"millis"`
	LoadSecs   float64   `json:"load_secs"`
	PeakRSSMiB float64   `json:"peak_rss_mib"`
}

// reloadChanges is how many changes one child makes.
const reloadChanges = 5

func reloadPipelineFile(id string, rate int) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          rate: %d
      - id: out
        type: destination
        plugin: builtin:log
`, id, rate)
}

// runningObserver reports each pipeline's running events.
type runningObserver struct {
	mu      sync.Mutex
	running map[string]int
	changed chan string
}

func (o *runningObserver) PipelineEvent(e auditlog.Event) {
	if e.Kind != auditlog.KindRunning {
		return
	}
	o.mu.Lock()
	o.running[e.PipelineID]++
	o.mu.Unlock()
	select {
	case o.changed <- e.PipelineID:
	default:
	}
}

func (o *runningObserver) count(id string) (n, distinct int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running[id], len(o.running)
}

func measureReload(n int, watch bool) (reloadResult, error) {
	dir, err := os.MkdirTemp("", "conduit-reload-")
	if err != nil {
		return reloadResult{}, err
	}
	defer os.RemoveAll(dir)
	pipelines := filepath.Join(dir, "pipelines")
	if err := os.MkdirAll(pipelines, 0o755); err != nil {
		return reloadResult{}, err
	}
	file := func(i int) string { return filepath.Join(pipelines, fmt.Sprintf("p-%04d.yml", i)) }
	for i := range n {
		if err := os.WriteFile(file(i), []byte(reloadPipelineFile(fmt.Sprintf("p-%04d", i), 1)), 0o644); err != nil {
			return reloadResult{}, err
		}
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Badger.Path = filepath.Join(dir, "db")
	cfg.Pipelines.Path = pipelines
	cfg.Pipelines.Watch = watch
	obs := &runningObserver{running: map[string]int{}, changed: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	rt, err := conduit.New(ctx, cfg, zap.NewNop(), conduit.Options{Observer: obs})
	if err != nil {
		return reloadResult{}, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- rt.Run(ctx, nil) }()
	wait := func(done func() bool, what string) error {
		deadline := time.NewTimer(time.Minute)
		defer deadline.Stop()
		for !done() {
			select {
			case <-obs.changed:
			case <-time.After(10 * time.Millisecond):
			case err := <-runDone:
				return fmt.Errorf("runtime ended while waiting for %s: %v", what, err)
			case <-deadline.C:
				return fmt.Errorf("%s: not within a minute", what)
			}
		}
		return nil
	}
	if err := wait(func() bool { _, d := obs.count(""); return d >= n }, "every pipeline running"); err != nil {
		return reloadResult{}, err
	}
	res := reloadResult{Pipelines: n, Watch: watch, LoadSecs: time.Since(start).Seconds()}
	for c := range reloadChanges {
		i := (c*397 + 11) % n
		id := fmt.Sprintf("p-%04d", i)
		before, _ := obs.count(id)
		// Written beside and renamed over, as editors save.
		tmp := filepath.Join(pipelines, ".tmp-"+strconv.Itoa(c))
		if err := os.WriteFile(tmp, []byte(reloadPipelineFile(id, 2+c)), 0o644); err != nil {
			return reloadResult{}, err
		}
		t0 := time.Now()
		if err := os.Rename(tmp, file(i)); err != nil {
			return reloadResult{}, err
		}
		if !watch {
			rt.Reload()
		}
		if err := wait(func() bool { now, _ := obs.count(id); return now > before }, id+" running with its new configuration"); err != nil {
			return reloadResult{}, err
		}
		res.Millis = append(res.Millis, float64(time.Since(t0).Microseconds())/1000)
	}
	cancel()
	if err := <-runDone; err != nil {
		return reloadResult{}, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.PeakRSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	return res, nil
}

func reloadParent(runs, n int) error {
	fmt.Printf("\nreload: %d running pipelines (generator -> log, one file each, Badger state); %d files changed one after\n", n, reloadChanges)
	fmt.Printf("the other (written beside and renamed over); time from the change to the pipeline running its new configuration\n")
	all := map[bool][]float64{}
	for i := range runs {
		for _, watch := range []bool{true, false} {
			args := []string{"-records", "0", "-storm", "0", "-reload", strconv.Itoa(n)}
			if !watch {
				args = append(args, "-reload-watch=false")
			}
			out, err := runChild(args...)
			if err != nil {
				return fmt.Errorf("reload run %d: %w", i+1, err)
			}
			var r reloadResult
			if err := json.Unmarshal(out, &r); err != nil {
				return fmt.Errorf("reload run %d: %w", i+1, err)
			}
			how := "explicit reload (SIGHUP)"
			if watch {
				how = "file watcher"
			}
			fmt.Printf("run %d, %-24s: median %6.0f ms, max %6.0f ms (%s) | %d pipelines loaded and running after %.1fs | peak RSS %.1f MiB\n",
				i+1, how, median(r.Millis), slices.Max(r.Millis), joinMillis(r.Millis), r.Pipelines, r.LoadSecs, r.PeakRSSMiB)
			all[watch] = append(all[watch], r.Millis...)
		}
	}
	fmt.Printf("median over all changes: file watcher %.0f ms (max %.0f ms; target: within 2 s), explicit reload %.0f ms (max %.0f ms)\n",
		median(all[true]), slices.Max(all[true]), median(all[false]), slices.Max(all[false]))
	return nil
}

func joinMillis(ms []float64) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatFloat(m, 'f', 0, 64)
	}
	return s
}
