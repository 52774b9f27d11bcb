// Command conduit-bench measures end-to-end throughput of the engine:
// builtin:generator (structured, an int and a string field) -> builtin:file
// writing OpenCDC JSON lines, with positions persisted in Badger, exactly
// the parts `conduit run` wires together; then the dedup comparison as a
// user sees it, on the real binary (userdedup.go); then a fault storm
// (storm.go) and the time to apply a changed pipeline file (reload.go).
//
// Every run happens in a fresh child process so that its peak RSS is its
// own. It prints each run, then the median records/s and peak RSS.
//
//	go run ./cmd/conduit-bench -runs 5 -records 3000000
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/pkg/assembly"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/gctuning"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/store"
)

// collector describes the child's garbage-collector settings; it is part
// of every result so that the parent can print what was measured.
var collector string

type result struct {
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	PositionSaves int64   `json:"position_saves"`
	// DedupWaitSeconds is how long the destination waited for dedup
	// entries to be durable before writing (0 without dedup).
	DedupWaitSeconds float64 `json:"dedup_wait_seconds"`
	// CPUSeconds is the process's user+system CPU time while records
	// moved: unlike records/s it barely changes with what else the machine
	// is doing.
	CPUSeconds float64 `json:"cpu_seconds"`
	Collector  string  `json:"collector"`
}

func main() {
	runs := flag.Int("runs", 5, "number of runs, each in its own process")
	records := flag.Int64("records", 3_000_000, "records per run")
	storm := flag.Int("storm", 10_000, "pipelines in the fault-storm benchmark (0 skips it)")
	stormRuns := flag.Int("storm-runs", 5, "fault-storm runs, each in its own process")
	stormRules := flag.Int("storm-rules", 100, "also run the fault storm with this many global recovery rules that do not match, alternating with runs without (0: only without)")
	cpuProfile := flag.String("cpuprofile", "", "with -child: write a CPU profile of the measured phase to this file")
	traceFile := flag.String("trace", "", "with -child: write an execution trace of the measured phase to this file (go tool trace -pprof=sync shows where stages wait)")
	scenario := flag.String("scenario", "", "with -child: builtin, dedup or standalone (internal)")
	pluginDir := flag.String("plugin-dir", "", "with -child: directory holding the flaky standalone connector (internal)")
	postgresURL := flag.String("postgres-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL server for the postgres scenario: the bench creates a database there per run and drops it")
	child := flag.Bool("child", false, "run one measurement in this process and print it as JSON (internal)")
	reload := flag.Int("reload", 1000, "pipelines running in the reload benchmark (0 skips it)")
	reloadRuns := flag.Int("reload-runs", 3, "reload runs of each kind, each in its own process")
	reloadWatch := flag.Bool("reload-watch", true, "with -child -reload: change files under the watcher (false: reload explicitly) (internal)")
	depStorm := flag.Int("dep-storm", 10_000, "pipelines in the dependency storm (0 skips it)")
	depStormDeps := flag.Int("dep-storm-deps", 10, "dependencies the dependency storm's pipelines share")
	depStormOutage := flag.Duration("dep-storm-outage", 30*time.Second, "how long the dependencies are down in the dependency storm")
	depStormBreakers := flag.Bool("dep-storm-breakers", true, "with -child -dep-storm: breakers on (internal)")
	clusterPipelines := flag.Int("cluster", 1000, "pipelines in the cluster benchmark: three conduit processes on one PostgreSQL database (-postgres-url); 0 skips it")
	clusterTTL := flag.Duration("cluster-ttl", 5*time.Second, "cluster.lease-ttl of the cluster benchmark")
	clusterKills := flag.Int("cluster-kills", 5, "instances SIGKILLed (and started again), one after the other, in the cluster benchmark")
	binaryRounds := flag.Int("binary-dedup", 5, "rounds of the dedup comparison as a user sees it: the real binary (built by the bench) runs a generator -> file pipeline with dedup on, then off, each round (0 skips it)")
	binaryRecords := flag.Int64("binary-dedup-records", 2_000_000, "records per run of the binary dedup comparison")
	binaryPath := flag.String("binary-dedup-bin", "", "conduit binary for the binary dedup comparison (default: built from this checkout), e.g. one built at another commit")
	vsRounds := flag.Int("vs-conduit", 3, "rounds of the side-by-side comparison with Conduit "+conduitVersion+" (built from its module, cached): json processors, a PostgreSQL snapshot and PostgreSQL CDC, each product in its own process (0 skips it)")
	vsRecords := flag.Int64("vs-conduit-records", 500_000, "records of the json pipeline of the comparison with Conduit")
	vsRows := flag.Int64("vs-conduit-rows", 500_000, "rows of the table the comparison with Conduit snapshots")
	vsCDCFor := flag.Duration("vs-conduit-cdc-for", 30*time.Second, "how long the CDC comparison with Conduit inserts rows")
	vsCDCEvery := flag.Duration("vs-conduit-cdc-every", 50*time.Millisecond, "one row per this in the CDC comparison with Conduit")
	vsConduitBin := flag.String("vs-conduit-bin", "", "Conduit's binary for the comparison (default: built from its module once, kept in the user's cache directory)")
	vsOursBin := flag.String("vs-conduit-ours", "", "our binary for the comparison with Conduit (default: built from this checkout)")
	vsPostgresURL := flag.String("vs-conduit-postgres-url", "", "PostgreSQL server with wal_level=logical for the comparison with Conduit, which creates a database there and drops it (default: a private server the bench starts with initdb and pg_ctl)")
	vsPipelines := flag.String("vs-conduit-pipelines", "", "comma-separated pipelines of the comparison with Conduit: json, snapshot, cdc (default: all)")
	only := flag.String("scenarios", "", "comma-separated throughput scenarios to run (default: all; builtin always runs, ratios need it)")
	flag.Parse()

	if *child {
		// A child runs with the collector settings `conduit run` applies
		// from conduit.yml's defaults (the environment's GOGC/GOMEMLIMIT
		// win, as they do there).
		def := config.Default()
		applied, err := gctuning.Apply(gctuning.Settings{GCPercent: def.Runtime.GCPercent, MemoryLimit: def.Runtime.MemoryLimit, Headroom: def.Runtime.GCHeadroom}, zap.NewNop())
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
		collector = applied.String()
	}
	if *child && *depStorm > 0 && *records == 0 && *storm == 0 && *reload == 0 {
		res, err := measureDepStorm(*depStorm, *depStormDeps, *depStormOutage, *depStormBreakers)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if *child && *reload > 0 && *records == 0 && *storm == 0 {
		res, err := measureReload(*reload, *reloadWatch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if *child && *storm > 0 && *records == 0 {
		res, err := measureStorm(*storm, *stormRules, *cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if *child {
		res, err := measure(*records, *scenario, *pluginDir, *cpuProfile, *traceFile, *postgresURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if *runs > 0 {
		selected, err := selectScenarios(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(2)
		}
		if err := parent(*runs, *records, selected, *postgresURL); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *binaryRounds > 0 && *binaryRecords > 0 {
		if err := binaryDedupParent(*binaryRounds, *binaryRecords, *binaryPath); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *vsRounds > 0 {
		vsOnly, err := parseVsPipelines(*vsPipelines)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(2)
		}
		err = vsConduitParent(vsConfig{
			rounds: *vsRounds, records: *vsRecords, rows: *vsRows, cdcFor: *vsCDCFor, cdcEvery: *vsCDCEvery,
			ours: *vsOursBin, conduit: *vsConduitBin, postgresURL: *vsPostgresURL, only: vsOnly,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *storm > 0 && *stormRuns > 0 {
		if err := stormParent(*stormRuns, *storm, *stormRules); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *reload > 0 && *reloadRuns > 0 {
		if err := reloadParent(*reloadRuns, *reload); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *depStorm > 0 {
		if err := depStormParent(*depStorm, *depStormDeps, *depStormOutage); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
	if *clusterPipelines > 0 {
		if err := clusterParent(*clusterPipelines, *clusterTTL, *clusterKills, *postgresURL); err != nil {
			fmt.Fprintln(os.Stderr, "conduit-bench:", err)
			os.Exit(1)
		}
	}
}

func runChild(args ...string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(self, append([]string{"-child"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return nil, err
	}
	return out, nil
}

func stormParent(runs, pipelines, rules int) error {
	fmt.Printf("\nfault storm: %d pipelines (source -> discard) fail at the same moment with a transient 503\n", pipelines)
	fmt.Printf("and recover (default policy: restart after 1s), Badger state on; %d runs, each in its own process\n", runs)
	fmt.Printf("restart lateness: launch minus scheduled time; back: scheduled restart to the first record end to end; half back: from the fault until half the pipelines are back\n")
	variants := []int{0}
	if rules > 0 {
		// Alternated run by run, so that both see the same machine.
		variants = append(variants, rules)
		fmt.Printf("alternating runs without rules and with %d global recovery rules that the error does not match (each fault tries them all)\n", rules)
	}
	type series struct{ p50, p99, back, backP50, backP99, half, rss, cpu []float64 }
	all := make([]series, len(variants))
	for i := range runs {
		for v, n := range variants {
			out, err := runChild("-records", "0", "-storm", strconv.Itoa(pipelines), "-storm-rules", strconv.Itoa(n))
			if err != nil {
				return fmt.Errorf("storm run %d: %w", i+1, err)
			}
			var r stormResult
			if err := json.Unmarshal(out, &r); err != nil {
				return fmt.Errorf("storm run %d: %w", i+1, err)
			}
			if i == 0 && v == 0 {
				fmt.Printf("go collector: %s\n", r.Collector)
			}
			fmt.Printf("run %d, %3d rules: restart lateness p50 %5.1f ms  p99 %5.1f ms  max %5.1f ms | back p50 %5.0f ms  p99 %5.0f ms | half back %5.0f ms | all %d running again after %.2fs | peak RSS %6.1f MiB | CPU %.1fs (storm %.1fs)\n",
				i+1, n, r.LatenessP50Ms, r.LatenessP99Ms, r.LatenessMaxMs, r.BackP50Ms, r.BackP99Ms, r.SinceFaultP50Ms, r.Recovered, r.AllRunningSecs, r.PeakRSSMiB, r.CPUSeconds, r.StormCPUSecs)
			if r.Recovered != pipelines {
				return fmt.Errorf("storm run %d: only %d of %d pipelines recovered", i+1, r.Recovered, pipelines)
			}
			s := &all[v]
			s.p50, s.p99 = append(s.p50, r.LatenessP50Ms), append(s.p99, r.LatenessP99Ms)
			s.backP50, s.backP99 = append(s.backP50, r.BackP50Ms), append(s.backP99, r.BackP99Ms)
			s.half = append(s.half, r.SinceFaultP50Ms)
			s.back, s.rss, s.cpu = append(s.back, r.AllRunningSecs), append(s.rss, r.PeakRSSMiB), append(s.cpu, r.StormCPUSecs)
		}
	}
	for v, n := range variants {
		s := all[v]
		fmt.Printf("median, %3d rules: lateness p50 %.1f ms, p99 %.1f ms; back p50 %.0f ms, p99 %.0f ms; half back after %.0f ms; all running again after %.2fs; peak RSS %.1f MiB; storm CPU %.1fs\n",
			n, median(s.p50), median(s.p99), median(s.backP50), median(s.backP99), median(s.half), median(s.back), median(s.rss), median(s.cpu))
	}
	return nil
}

// scenarios are measured round by round, interleaved, so that their
// ratios compare runs made under the same conditions.
//
// The plugins of Conduit's SDK send every record through Avro and gRPC and
// are an order of magnitude slower; they run a tenth of the records
// (their rate is what is compared).
type scenario struct {
	name, what string
	fraction   int64 // runs records/fraction records
}

var scenarios = []scenario{
	{"builtin", "generator -> file", 1},
	{"dedup", "generator -> file with the dedup store on", 1},
	{"standalone", "standalone source (examples/connectors/flaky, its own process) -> file", 1},
	{"postgres", "generator -> file with positions in PostgreSQL (db.type postgres) instead of Badger", 1},
	{"conduit", "standalone source of Conduit's SDK (Conduit's generator " + conduitGeneratorVersion + ", its own process) -> file", 10},
}

// stallTimeout is how long a run may go without acknowledging a record.
const stallTimeout = 30 * time.Second

// selectScenarios picks the scenarios named in list (all when empty), in
// their usual order, with builtin always first: every ratio is against it.
func selectScenarios(list string) ([]scenario, error) {
	if strings.TrimSpace(list) == "" {
		return scenarios, nil
	}
	want := map[string]bool{"builtin": true}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.name == name }) {
			var known []string
			for _, sc := range scenarios {
				known = append(known, sc.name)
			}
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (known: %s)", name, strings.Join(known, ", "))
		}
		want[name] = true
	}
	var out []scenario
	for _, sc := range scenarios {
		if want[sc.name] {
			out = append(out, sc)
		}
	}
	return out, nil
}

// conduitGeneratorVersion is the version of Conduit's generator connector
// the bench builds, the one Conduit ships.
const conduitGeneratorVersion = "v0.10.4"

// buildConduitGenerator builds Conduit's generator connector from its
// module into dir, in a module of its own so the runtime's go.mod stays
// out of it.
func buildConduitGenerator(dir string) error {
	mod, err := os.MkdirTemp("", "conduit-bench-conduit-generator-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(mod)
	goMod := "module benchgenerator\n\ngo 1.24\n\nrequire github.com/conduitio/conduit-connector-generator " + conduitGeneratorVersion + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "conduit-connector-generator"),
		"github.com/conduitio/conduit-connector-generator/cmd/connector")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/conduitio", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build Conduit's generator connector: %v\n%s", err, out)
	}
	return nil
}

func parent(runs int, records int64, selected []scenario, postgresURL string) error {
	has := func(name string) bool {
		return slices.ContainsFunc(selected, func(sc scenario) bool { return sc.name == name })
	}
	pluginDir, err := os.MkdirTemp("", "conduit-bench-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pluginDir)
	if out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "flaky"), "./examples/connectors/flaky").CombinedOutput(); err != nil {
		return fmt.Errorf("build the example connector (run from the repository root): %v\n%s", err, out)
	}
	if has("conduit") {
		if err := buildConduitGenerator(pluginDir); err != nil {
			return err
		}
	}
	fmt.Printf("throughput: structured records (id int, name string) written as OpenCDC JSON lines, Badger positions\n")
	fmt.Printf("%d rounds x %d records per scenario (Conduit's plugins: a tenth), each run in its own process, GOMAXPROCS=%d, %s\n", runs, records, runtime.GOMAXPROCS(0), runtime.Version())
	rates := map[string][]float64{}
	rss := map[string][]float64{}
	cpus := map[string][]float64{}
	for i := range runs {
		for _, sc := range selected {
			out, err := runChild("-records", strconv.FormatInt(max(records/sc.fraction, 1), 10), "-scenario", sc.name, "-plugin-dir", pluginDir,
				"-postgres-url", postgresURL)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", sc.name, i+1, err)
			}
			var r result
			if err := json.Unmarshal(out, &r); err != nil {
				return fmt.Errorf("%s run %d: %w", sc.name, i+1, err)
			}
			if i == 0 && sc.name == selected[0].name {
				fmt.Printf("go collector: %s\n", r.Collector)
			}
			waited := ""
			if sc.name == "dedup" {
				waited = fmt.Sprintf("  waited for dedup entries %.2fs", r.DedupWaitSeconds)
			}
			fmt.Printf("round %d %-15s %10.0f records/s  %6.2fs  CPU %5.2fs  peak RSS %6.1f MiB  position saves %d%s\n",
				i+1, sc.name, r.RecordsPerSec, r.Seconds, r.CPUSeconds, r.PeakRSSMiB, r.PositionSaves, waited)
			rates[sc.name] = append(rates[sc.name], r.RecordsPerSec)
			cpus[sc.name] = append(cpus[sc.name], r.CPUSeconds)
			rss[sc.name] = append(rss[sc.name], r.PeakRSSMiB)
		}
	}
	fmt.Println()
	for _, sc := range selected {
		fmt.Printf("median %-15s %10.0f records/s (spread %.0f-%.0f), CPU %.2fs (%.2f-%.2f), peak RSS median %.1f MiB (max %.1f)  [%s]\n",
			sc.name, median(rates[sc.name]), slices.Min(rates[sc.name]), slices.Max(rates[sc.name]),
			median(cpus[sc.name]), slices.Min(cpus[sc.name]), slices.Max(cpus[sc.name]),
			median(rss[sc.name]), slices.Max(rss[sc.name]), sc.what)
	}
	base := median(rates["builtin"])
	ratios := []struct{ name, label, note string }{
		{"dedup", "dedup on / off", "(target >= 0.90)"},
		{"postgres", "postgres / badger", "(positions in PostgreSQL against Badger)"},
		{"standalone", "standalone / builtin", "(our SDK's protocol; target >= 0.50)"},
		{"conduit", "conduit / builtin", "(Conduit's protocol)"},
	}
	for _, r := range ratios {
		if has(r.name) {
			fmt.Printf("ratio %-26s %.3f %s; per round %s\n",
				r.label+":", median(rates[r.name])/base, r.note, roundRatios(rates[r.name], rates["builtin"]))
		}
	}
	// The host's CPU per record shows where a standalone plugin's time
	// goes: the runtime's side is a fraction of it; the rest is the plugin.
	var perRecord []string
	for _, sc := range selected {
		perRecord = append(perRecord, fmt.Sprintf("%s %.2f us", sc.name, perRecordMicros(cpus[sc.name], max(records/sc.fraction, 1))))
	}
	fmt.Printf("runtime CPU per record: %s\n", strings.Join(perRecord, ", "))
	if has("dedup") {
		// CPU per record is the cost without the machine's noise: records/s
		// of one scenario swings by a third between rounds on a shared
		// machine.
		fmt.Printf("CPU builtin / dedup:           %.2f (the share of dedup's CPU a dedup-off run needs)\n",
			median(cpus["builtin"])/median(cpus["dedup"]))
	}
	return nil
}

// createBenchDatabase creates a database for one run on the server at
// admin and returns its URL and a function that drops it.
func createBenchDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("the postgres scenario needs PostgreSQL at %s (-postgres-url): %w", admin, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("conduit_bench_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		if c, err := pgx.Connect(context.Background(), admin); err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	}
	return u.String(), drop, nil
}

// perRecordMicros is the median CPU per record, in microseconds.
func perRecordMicros(cpu []float64, records int64) float64 {
	return median(cpu) / float64(max(records, 1)) * 1e6
}

// roundRatios lists a/b of each round and their median: rounds run
// back to back, so a ratio within a round shares the machine's state.
func roundRatios(a, b []float64) string {
	rs := make([]float64, len(a))
	var parts []string
	for i := range a {
		rs[i] = a[i] / b[i]
		parts = append(parts, strconv.FormatFloat(rs[i], 'f', 2, 64))
	}
	return strings.Join(parts, " ") + ", median " + strconv.FormatFloat(median(rs), 'f', 2, 64)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func measure(records int64, scenario, pluginDir, profile, traceFile, postgresURL string) (result, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "conduit-bench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)

	log := zap.NewNop()
	var db store.Store
	if scenario == "postgres" {
		dbURL, drop, err := createBenchDatabase(ctx, postgresURL)
		if err != nil {
			return result{}, err
		}
		defer drop()
		if db, err = store.OpenPostgres(ctx, dbURL, log, store.PostgresOptions{Exclusive: true}); err != nil {
			return result{}, err
		}
	} else if db, err = store.OpenBadger(ctx, filepath.Join(dir, "db"), log); err != nil {
		return result{}, err
	}
	defer db.Close()

	writer := store.NewBatcher(db, nil)
	defer writer.Close()
	reg := connector.NewRegistry(connector.Builtin()...).WithStandalone(
		connector.NewStandaloneHost(connector.StandaloneConfig{Dir: pluginDir}))
	plugin, settings := "builtin:generator", map[string]string{
		"format.type":         "structured",
		"format.options.id":   "int",
		"format.options.name": "string",
		"operations":          "create",
		"rate":                "0",
		"recordCount":         strconv.FormatInt(records, 10),
	}
	switch scenario {
	case "standalone":
		plugin, settings = "standalone:flaky", map[string]string{"rate": "0", "recordCount": strconv.FormatInt(records, 10)}
	case "conduit":
		// Found by the name in its specification, as Conduit finds it;
		// the same settings as the built-in generator's, which are
		// Conduit's.
		plugin = "standalone:generator"
		delete(settings, "operations")
	}
	// The run is built from a pipeline file, through the package the
	// runtime builds its runs with: what is measured is what runs.
	outPath := filepath.Join(dir, "out.jsonl")
	file, err := json.Marshal(map[string]any{"version": "2.2", "pipelines": []any{map[string]any{
		"id": "bench",
		"connectors": []any{
			map[string]any{"id": "gen", "type": "source", "plugin": plugin, "settings": settings},
			map[string]any{"id": "file", "type": "destination", "plugin": "builtin:file", "settings": map[string]string{"path": outPath}},
		},
	}}})
	if err != nil {
		return result{}, err
	}
	parsed, errs := config.ParsePipelines(config.FileContent{Name: "bench.yml", Data: file})
	if len(errs) > 0 {
		return result{}, errors.Join(errs...)
	}
	opts := assembly.Options{
		Connectors: reg,
		Processors: processor.NewRegistry(processor.Builtin()...),
		Positions:  pipeline.NewPositionStore(db, writer, nil),
		DB:         db,
		Writer:     writer,
		Logger:     log,
	}
	if scenario == "dedup" {
		opts.Dedup = dedup.New(db, writer, dedup.Options{})
	}
	cfg, err := assembly.New(opts).Build(parsed[0])
	if err != nil {
		return result{}, err
	}

	done := make(chan struct{})
	var acked int64
	var progress atomic.Int64
	cfg.OnAck = func(n int) {
		// Only the acker goroutine calls OnAck; the watchdog reads
		// progress through the atomic.
		acked += int64(n)
		progress.Store(acked)
		if acked == records {
			close(done)
		}
	}
	engine, err := pipeline.New(cfg)
	if err != nil {
		return result{}, err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return result{}, err
		}
		defer trace.Stop()
	}
	runErr := make(chan error, 1)
	cpuBefore := cpuSeconds()
	start := time.Now()
	go func() { runErr <- engine.Run(ctx) }()
	// A run that stops making progress (a plugin that stopped sending)
	// fails instead of hanging make bench.
	watchdog := time.NewTicker(stallTimeout)
	defer watchdog.Stop()
	// stalled stops the pipeline, so that its plugin process is stopped
	// too rather than left running beside the next measurement.
	stalled := func(err error) (result, error) {
		engine.Stop()
		select {
		case <-runErr:
		case <-time.After(stallTimeout):
		}
		return result{}, err
	}
	last := int64(-1)
wait:
	for {
		select {
		case <-done:
			break wait
		case err := <-runErr:
			return result{}, fmt.Errorf("pipeline ended early: %v", err)
		case <-watchdog.C:
			now := progress.Load()
			if now == last {
				return stalled(fmt.Errorf("no record acknowledged for %s after %d of %d", stallTimeout, now, records))
			}
			last = now
		}
	}
	elapsed := time.Since(start)
	cpu := cpuSeconds() - cpuBefore
	engine.Stop()
	if err := <-runErr; err != nil {
		return result{}, err
	}

	lines, err := countLines(outPath)
	if err != nil {
		return result{}, err
	}
	if lines != records {
		return result{}, fmt.Errorf("output holds %d lines, want %d", lines, records)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return result{}, err
	}
	return result{
		Records:          records,
		Seconds:          elapsed.Seconds(),
		RecordsPerSec:    float64(records) / elapsed.Seconds(),
		PeakRSSMiB:       float64(ru.Maxrss) / 1024, // Linux reports KiB
		PositionSaves:    engine.Stats().PositionsSaved.Load(),
		DedupWaitSeconds: time.Duration(engine.Stats().DedupWaitNanos.Load()).Seconds(),
		CPUSeconds:       cpu,
		Collector:        collector,
	}, nil
}

func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
