package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
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

// stormResult is what one fault-storm run measured.
type stormResult struct {
	Pipelines     int     `json:"pipelines"`
	Restarted     int     `json:"restarted"`
	Recovered     int     `json:"recovered"`
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`
	// BackP50Ms and BackP99Ms are from each pipeline's scheduled restart
	// to its first record end to end (recovered): the restart's lateness
	// plus building the run, opening its connectors and one record.
	BackP50Ms      float64 `json:"back_p50_ms"`
	BackP99Ms      float64 `json:"back_p99_ms"`
	AllRunningSecs float64 `json:"all_running_secs"`
	// ScheduledSpreadP50Ms is how far after the first scheduled restart
	// the median one was scheduled: how bunched the restarts were.
	ScheduledSpreadP50Ms float64 `json:"scheduled_spread_p50_ms"`
	// SinceFaultP50Ms is from the moment the storm's fault began to each
	// pipeline's recovery, median: what an operator waits, whatever the
	// restarts' schedule.
	SinceFaultP50Ms float64 `json:"since_fault_p50_ms"`
	// ScheduledSinceFaultP50Ms is from the fault to each pipeline's
	// scheduled restart, median: how soon the faults were handled (the
	// backoff, 1s, plus the time to take each failure in).
	ScheduledSinceFaultP50Ms float64 `json:"scheduled_since_fault_p50_ms"`
	// Phases of "back", each p50 and p99 over the pipelines: from the
	// restart's launch to its source's open (building the run), to the
	// first read, to the destination's write, and to the supervisor's
	// recovered (acknowledgement, position, first-ack message).
	PhaseOpenMs    [2]float64 `json:"phase_launch_to_open_ms"`
	PhaseReadMs    [2]float64 `json:"phase_open_to_read_ms"`
	PhaseWriteMs   [2]float64 `json:"phase_read_to_write_ms"`
	PhaseRecoverMs [2]float64 `json:"phase_write_to_recovered_ms"`
	// Goroutines, HeapInuseMiB and StackInuseMiB are taken when every
	// pipeline is running, right before the storm.
	Goroutines    int     `json:"goroutines"`
	HeapInuseMiB  float64 `json:"heap_inuse_mib"`
	StackInuseMiB float64 `json:"stack_inuse_mib"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	// PeakRSSBeforeStormMiB is the peak RSS when every pipeline runs,
	// before the storm: what loading and starting them took.
	PeakRSSBeforeStormMiB float64 `json:"peak_rss_before_storm_mib"`
	CPUSeconds            float64 `json:"cpu_seconds"`
	StormCPUSecs          float64 `json:"storm_cpu_seconds"`
	Collector             string  `json:"collector"`
}

// stormPlugins are the bench's own connectors: a source that blocks until
// the storm starts, then fails once with a transient error (per pipeline),
// and after the restart delivers one record; and a destination that
// discards. The failure state lives here, not in the connector, because
// every restart builds a new connector.
type stormPlugins struct {
	trigger chan struct{}
	mu      sync.Mutex
	failed  map[string]bool
	// waiting counts sources blocked before the storm; ready is closed
	// when all of them are.
	waiting, want int
	ready         chan struct{}
	// When each restarted run got to a step on its way back: its source
	// opened, read the record, and the destination wrote it. With the
	// supervisor's events they break "back" into phases.
	opened, read, written map[string]time.Time
}

// mark records when pipeline key's restarted run got to a step; the first
// time counts.
func (s *stormPlugins) mark(step map[string]time.Time, key string) {
	now := time.Now()
	s.mu.Lock()
	if _, ok := step[key]; !ok && s.failed[key] {
		step[key] = now
	}
	s.mu.Unlock()
}

func (s *stormPlugins) plugins() []connector.Plugin {
	return []connector.Plugin{
		{Name: "storm", NewSource: func(cfg connector.Config) (connector.Source, error) {
			return &stormSource{plugins: s, key: cfg.PipelineID}, nil
		}},
		{Name: "discard", NewDestination: func(cfg connector.Config) (connector.Destination, error) {
			return discard{plugins: s, key: cfg.PipelineID}, nil
		}},
	}
}

type stormSource struct {
	plugins *stormPlugins
	key     string
	sent    bool
}

func (s *stormSource) Open(context.Context, record.Position) error {
	s.plugins.mark(s.plugins.opened, s.key)
	return nil
}
func (s *stormSource) Ack(context.Context, []record.Position) error { return nil }
func (s *stormSource) Teardown(context.Context) error               { return nil }

func (s *stormSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	p := s.plugins
	p.mu.Lock()
	failed := p.failed[s.key]
	p.mu.Unlock()
	if !failed {
		p.mu.Lock()
		if p.waiting++; p.waiting == p.want {
			close(p.ready)
		}
		p.mu.Unlock()
		select {
		case <-p.trigger:
			p.mu.Lock()
			p.failed[s.key] = true
			p.mu.Unlock()
			return 0, cerrors.WithCode(errors.New("storm: upstream unavailable"), cerrors.CodeUnavailable)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if !s.sent {
		s.sent = true
		p.mark(p.read, s.key)
		batch[0] = record.Record{Position: record.Position("1"), Operation: record.OperationCreate,
			Payload: record.Change{After: record.RawData("ok")}}
		return 1, nil
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// discard takes every record; in the fault storm it marks the pipeline's
// first write (plugins set), in the dependency storm it only takes them.
type discard struct {
	plugins *stormPlugins
	key     string
}

func (discard) Open(context.Context) error { return nil }
func (d discard) Write(_ context.Context, b []record.Record) (int, error) {
	if d.plugins != nil {
		d.plugins.mark(d.plugins.written, d.key)
	}
	return len(b), nil
}
func (discard) Teardown(context.Context) error { return nil }

// stormObserver collects restart lateness and the time back to running,
// and counts recoveries.
type stormObserver struct {
	mu        sync.Mutex
	lateness  []time.Duration
	scheduled map[string]time.Time // pipeline -> its restart's scheduled time
	restarted map[string]time.Time // pipeline -> when its restart was launched
	back2     map[string]time.Time // pipeline -> when it recovered
	back      []time.Duration
	backAt    []time.Time
	recovered int
	want      int
	allBack   chan time.Time
	faults    int
	allFailed chan struct{}
}

func (o *stormObserver) PipelineEvent(e auditlog.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.Kind {
	case auditlog.KindRecovering:
		o.faults++
		if o.faults == o.want {
			close(o.allFailed)
		}
	case auditlog.KindRestarted:
		o.lateness = append(o.lateness, e.Time.Sub(e.NextAttemptAt))
		o.scheduled[e.PipelineID] = e.NextAttemptAt
		o.restarted[e.PipelineID] = e.Time
	case auditlog.KindRecovered:
		if at, ok := o.scheduled[e.PipelineID]; ok {
			o.back = append(o.back, e.Time.Sub(at))
		}
		o.backAt = append(o.backAt, e.Time)
		o.back2[e.PipelineID] = e.Time
		o.recovered++
		if o.recovered == o.want {
			o.allBack <- e.Time
		}
	}
}

// measureStorm runs one storm of n pipelines with rules global recovery
// rules that the storm's error does not match; profile, when set,
// receives a CPU profile of the storm phase (and profile+".trace" an
// execution trace of it).
func measureStorm(n, rules int, profile string) (stormResult, error) {
	dir, err := os.MkdirTemp("", "conduit-storm-")
	if err != nil {
		return stormResult{}, err
	}
	defer os.RemoveAll(dir)
	if err := writeStormPipelines(filepath.Join(dir, "pipelines", "storm.yml"), n); err != nil {
		return stormResult{}, err
	}
	cfg := config.Default()
	cfg.API.Enabled = false
	cfg.DB.Badger.Path = filepath.Join(dir, "db")
	cfg.Pipelines.Path = filepath.Join(dir, "pipelines")
	cfg.Pipelines.ErrorRecovery.Rules = nonMatchingRules(rules)

	plugins := &stormPlugins{trigger: make(chan struct{}), failed: make(map[string]bool, n), want: n, ready: make(chan struct{}),
		opened: make(map[string]time.Time, n), read: make(map[string]time.Time, n), written: make(map[string]time.Time, n)}
	obs := &stormObserver{want: n, allBack: make(chan time.Time, 1), allFailed: make(chan struct{}),
		scheduled: make(map[string]time.Time, n), restarted: make(map[string]time.Time, n), back2: make(map[string]time.Time, n)}
	reg := connector.NewRegistry(append(connector.Builtin(), plugins.plugins()...)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := conduit.New(ctx, cfg, zap.NewNop(), conduit.Options{Connectors: reg, Observer: obs})
	if err != nil {
		return stormResult{}, err
	}
	if got := len(rt.Pipelines()); got != n {
		return stormResult{}, fmt.Errorf("%d of %d pipelines are valid", got, n)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- rt.Run(ctx, nil) }()
	// The storm starts once every pipeline is running and reading, and
	// what their start wrote (states, events) is durable: in a process
	// whose pipelines ran for a while, as a storm finds them, no start-up
	// writes are queued. Without the flush the storm's figures measured
	// how far the store's writer had got with ten thousand starts.
	select {
	case <-plugins.ready:
	case err := <-runDone:
		return stormResult{}, fmt.Errorf("runtime ended before the storm: %v", err)
	}
	if err := rt.AuditLog().Flush(ctx); err != nil {
		return stormResult{}, fmt.Errorf("writing what the pipelines' start wrote: %w", err)
	}
	// And the start-up's garbage is collected, as a long-running process's
	// has been: otherwise whether a collection falls into the storm
	// depends on how far the start-up's allocations got towards the next
	// one, which has nothing to do with the storm.
	runtime.GC()

	if profile != "" {
		if f, err := os.Create(profile + ".heap"); err == nil {
			runtime.GC()
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		f, err := os.Create(profile)
		if err != nil {
			return stormResult{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return stormResult{}, err
		}
		defer pprof.StopCPUProfile()
		// An execution trace too: `go tool trace -pprof=sync` on it shows
		// where restarting runs wait.
		tf, err := os.Create(profile + ".trace")
		if err != nil {
			return stormResult{}, err
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return stormResult{}, err
		}
		defer trace.Stop()
	}
	goroutines := runtime.NumGoroutine()
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	cpuBefore := cpuSeconds()
	start := time.Now()
	close(plugins.trigger)
	var allBack time.Time
	select {
	case allBack = <-obs.allBack:
	case <-time.After(5 * time.Minute):
		return stormResult{}, fmt.Errorf("only %d of %d pipelines recovered within 5 minutes", obs.recovered, n)
	}
	stormCPU := cpuSeconds() - cpuBefore
	if profile != "" {
		// The profile and the trace cover the storm, not what the bench
		// does after it (the collection before the allocation profile was
		// a second of the profile's CPU).
		pprof.StopCPUProfile()
		trace.Stop()
		// What stays live once every pipeline is back: compare it with the
		// heap profile taken before the storm.
		if f, err := os.Create(profile + ".heap-after"); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	if profile != "" {
		if f, err := os.Create(profile + ".allocs"); err == nil {
			// A profile counts the allocations up to the last collection,
			// and at gc-percent 400 none may have run since the storm
			// began: collect, so that diffing with .heap (-base) shows
			// what the storm allocated.
			runtime.GC()
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	cancel()
	if err := <-runDone; err != nil {
		return stormResult{}, err
	}

	obs.mu.Lock()
	late := slices.Clone(obs.lateness)
	back := slices.Clone(obs.back)
	recovered := obs.recovered
	var spread, since, schedSince []time.Duration
	first := time.Time{}
	for _, at := range obs.scheduled {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	for _, at := range obs.scheduled {
		spread = append(spread, at.Sub(first))
		schedSince = append(schedSince, at.Sub(start))
	}
	for _, at := range obs.backAt {
		since = append(since, at.Sub(start))
	}
	plugins.mu.Lock()
	phaseOpen := phase(obs.restarted, plugins.opened)
	phaseRead := phase(plugins.opened, plugins.read)
	phaseWrite := phase(plugins.read, plugins.written)
	phaseRecover := phase(plugins.written, obs.back2)
	plugins.mu.Unlock()
	obs.mu.Unlock()
	slices.Sort(spread)
	slices.Sort(since)
	slices.Sort(schedSince)
	slices.Sort(late)
	slices.Sort(back)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return stormResult{
		Pipelines:                n,
		Restarted:                len(late),
		Recovered:                recovered,
		LatenessP50Ms:            ms(percentile(late, 0.50)),
		LatenessP99Ms:            ms(percentile(late, 0.99)),
		LatenessMaxMs:            ms(late[len(late)-1]),
		BackP50Ms:                ms(percentile(back, 0.50)),
		BackP99Ms:                ms(percentile(back, 0.99)),
		AllRunningSecs:           allBack.Sub(start).Seconds(),
		ScheduledSpreadP50Ms:     ms(percentile(spread, 0.50)),
		SinceFaultP50Ms:          ms(percentile(since, 0.50)),
		ScheduledSinceFaultP50Ms: ms(percentile(schedSince, 0.50)),
		PhaseOpenMs:              phaseOpen,
		PhaseReadMs:              phaseRead,
		PhaseWriteMs:             phaseWrite,
		PhaseRecoverMs:           phaseRecover,
		Goroutines:               goroutines,
		HeapInuseMiB:             float64(mem.HeapInuse) / (1 << 20),
		StackInuseMiB:            float64(mem.StackInuse) / (1 << 20),
		PeakRSSMiB:               float64(ru.Maxrss) / 1024,
		PeakRSSBeforeStormMiB:    float64(before.Maxrss) / 1024,
		CPUSeconds:               cpuSeconds(),
		StormCPUSecs:             stormCPU,
		Collector:                collector,
	}, nil
}

// nonMatchingRules are n rules of the kinds operators write (a code and a
// message, a component, a plugin) that the storm's 503 "upstream
// unavailable" from source src does not match: every fault tries them all
// before the code decides.
func nonMatchingRules(n int) []config.Rule {
	rules := make([]config.Rule, n)
	for i := range rules {
		m := config.RuleMatch{Message: fmt.Sprintf("no such failure %d", i)}
		switch i % 3 {
		case 0:
			m.Codes = []config.CodeRange{{From: 400 + i%100, To: 400 + i%100}}
		case 1:
			m.Components = []string{fmt.Sprintf("pg-%d-*", i)}
		default:
			m.Plugins = []string{fmt.Sprintf("standalone:partner-%d", i)}
		}
		rules[i] = config.Rule{Name: fmt.Sprintf("rule-%03d", i), Match: m, Action: config.ActionRetry,
			Priority: m.Specificity()}
	}
	return rules
}

func writeStormPipelines(path string, n int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("version: \"2.2\"\npipelines:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: storm-%05d\n    connectors:\n"+
			"      - {id: src, type: source, plugin: builtin:storm}\n"+
			"      - {id: dst, type: destination, plugin: builtin:discard}\n", i)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// phase returns the p50 and p99, in milliseconds, of the time from each
// pipeline's from to its to.
func phase(from, to map[string]time.Time) [2]float64 {
	var d []time.Duration
	for id, a := range from {
		if b, ok := to[id]; ok {
			d = append(d, b.Sub(a))
		}
	}
	slices.Sort(d)
	return [2]float64{ms(percentile(d, 0.50)), ms(percentile(d, 0.99))}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
