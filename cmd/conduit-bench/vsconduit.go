package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conduitry/conduit/pkg/pgtest"
)

// The side-by-side comparison with Conduit: our binary and Conduit's
// (built from its module, the version below) run the same pipeline file,
// each with its defaults and a fresh directory, one after the other, round
// after round, so that a ratio within a round compares runs on the same
// machine state. Three pipelines:
//
//   - json: builtin:generator (raw JSON payloads) -> json.decode ->
//     field.rename -> json.encode -> builtin:file, records/s;
//   - snapshot: builtin:postgres's snapshot of a table -> builtin:file,
//     rows/s and the process's peak RSS;
//   - cdc: builtin:postgres's logical replication -> builtin:file, a row
//     inserted every interval, the time from the insert's commit to its
//     line in the file.
//
// Everything is read from outside, as a user reads it: the output file,
// and the process's rusage once it exited.

// conduitVersion is the Conduit release compared against.
const conduitVersion = "v0.14.0"

// vsConfig holds the comparison's flags.
type vsConfig struct {
	rounds      int
	records     int64         // records of the json pipeline
	rows        int64         // rows of the snapshot
	cdcFor      time.Duration // how long rows are inserted in the cdc pipeline
	cdcEvery    time.Duration // one row per cdcEvery
	ours        string        // our binary ("" builds it)
	conduit     string        // Conduit's binary ("" builds it, cached)
	postgresURL string        // a server with wal_level=logical ("" starts one)
	only        map[string]bool
}

// product is one of the two binaries and how it is started.
type product struct {
	name string
	bin  string
	args func(dir, pipelines string) ([]string, error)
}

func ourProduct(bin string) product {
	return product{name: "conduit", bin: bin, args: func(dir, pipelines string) ([]string, error) {
		addr, err := freeLoopbackAddress()
		if err != nil {
			return nil, err
		}
		// conduit.yml's defaults; the working directory is dir, so no
		// conduit.yml is read.
		return []string{"run",
			"--db.type", "badger",
			"--db.badger.path", filepath.Join(dir, "db"),
			"--pipelines.path", pipelines,
			"--connectors.path", filepath.Join(dir, "connectors"),
			"--api.http.address", addr,
		}, nil
	}}
}

func conduitProduct(bin string) product {
	return product{name: "Conduit " + conduitVersion, bin: bin, args: func(dir, pipelines string) ([]string, error) {
		httpAddr, err := freeLoopbackAddress()
		if err != nil {
			return nil, err
		}
		grpcAddr, err := freeLoopbackAddress()
		if err != nil {
			return nil, err
		}
		return []string{"run",
			"--config.path", filepath.Join(dir, "conduit.yaml"), // absent: defaults
			"--db.type", "badger",
			"--db.badger.path", filepath.Join(dir, "db"),
			"--pipelines.path", pipelines,
			"--connectors.path", filepath.Join(dir, "connectors"),
			"--processors.path", filepath.Join(dir, "processors"),
			"--api.http.address", httpAddr,
			"--api.grpc.address", grpcAddr,
		}, nil
	}}
}

// conduitBinary returns Conduit's binary: built from its module once and
// kept under the user's cache directory, keyed by version.
func conduitBinary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "conduit-bench", "conduit-"+conduitVersion)
	bin := filepath.Join(dir, "conduit")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mod, err := os.MkdirTemp("", "conduit-bench-conduit-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	goMod := "module benchconduit\n\ngo 1.24\n\nrequire github.com/conduitio/conduit " + conduitVersion + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644); err != nil {
		return "", err
	}
	fmt.Printf("building Conduit %s from its module into %s (once; takes minutes)\n", conduitVersion, dir)
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, "github.com/conduitio/conduit/cmd/conduit")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/conduitio,buf.build", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build Conduit %s: %v\n%s", conduitVersion, err, out)
	}
	// Renamed into place, so that an interrupted build is not taken for
	// a finished one next time.
	return bin, os.Rename(tmp, bin)
}

// vsConduitParent runs the comparison.
func vsConduitParent(cfg vsConfig) error {
	tmp, err := os.MkdirTemp("", "conduit-bench-vs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if cfg.ours == "" {
		cfg.ours = filepath.Join(tmp, "conduit")
		if out, err := exec.Command("go", "build", "-o", cfg.ours, "./cmd/conduit").CombinedOutput(); err != nil {
			return fmt.Errorf("building conduit (run the bench from the repository root): %v\n%s", err, out)
		}
	}
	if cfg.conduit == "" {
		if cfg.conduit, err = conduitBinary(); err != nil {
			return err
		}
	}
	// The processes run in directories of their own.
	for _, bin := range []*string{&cfg.ours, &cfg.conduit} {
		if *bin, err = filepath.Abs(*bin); err != nil {
			return err
		}
	}
	products := []product{ourProduct(cfg.ours), conduitProduct(cfg.conduit)}
	want := func(name string) bool { return len(cfg.only) == 0 || cfg.only[name] }

	var pg string
	if want("snapshot") || want("cdc") {
		if cfg.postgresURL == "" {
			// Commits flushed at once, as on a production server: with
			// pgtest's synchronous_commit=off, logical replication sends a
			// commit only when the WAL writer flushes it, every 200ms.
			c, stop, err := pgtest.Launch("synchronous_commit = on")
			if err != nil {
				return fmt.Errorf("the snapshot and cdc pipelines need a PostgreSQL server with wal_level=logical (initdb and pg_ctl to start one, or -vs-conduit-postgres-url): %w", err)
			}
			defer stop()
			cfg.postgresURL = c.URL("postgres")
		}
		dbURL, drop, err := createBenchDatabase(context.Background(), cfg.postgresURL)
		if err != nil {
			return err
		}
		defer drop()
		pg = dbURL
	}

	fmt.Printf("\nside by side with Conduit %s (%s): the same pipeline file, each product's defaults, Badger state,\n", conduitVersion, cfg.conduit)
	fmt.Printf("a fresh process and directory each run, %d rounds, the two products alternating within a round\n", cfg.rounds)
	type figures struct{ rate, rss, cpu, p50, p99 [2][]float64 }
	var js, snap, cdc figures
	if want("snapshot") {
		if err := createSnapshotTable(pg, cfg.rows); err != nil {
			return err
		}
	}
	if want("cdc") {
		if err := execSQL(pg, "CREATE TABLE bench_cdc (id bigint PRIMARY KEY, tag text NOT NULL, at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return err
		}
	}
	for round := range cfg.rounds {
		// The order flips every round: neither product always runs on
		// the caches the other warmed.
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, p := range order {
			prod := products[p]
			if want("json") {
				r, err := runJSONPipeline(prod, filepath.Join(tmp, fmt.Sprintf("json-%d-%d", round, p)), cfg.records)
				if err != nil {
					return fmt.Errorf("json pipeline, round %d, %s: %w", round+1, prod.name, err)
				}
				js.rate[p], js.rss[p], js.cpu[p] = append(js.rate[p], r.rate), append(js.rss[p], r.rssMiB), append(js.cpu[p], r.cpu.Seconds())
				fmt.Printf("round %d json     %-15s %9.0f records/s  peak RSS %6.1f MiB  CPU %5.2fs\n", round+1, prod.name, r.rate, r.rssMiB, r.cpu.Seconds())
			}
			if want("snapshot") {
				r, err := runSnapshotPipeline(prod, filepath.Join(tmp, fmt.Sprintf("snap-%d-%d", round, p)), pg, cfg.rows, fmt.Sprintf("bench_snap_%d_%d", round, p))
				if err != nil {
					return fmt.Errorf("snapshot pipeline, round %d, %s: %w", round+1, prod.name, err)
				}
				snap.rate[p], snap.rss[p], snap.cpu[p] = append(snap.rate[p], r.rate), append(snap.rss[p], r.rssMiB), append(snap.cpu[p], r.cpu.Seconds())
				fmt.Printf("round %d snapshot %-15s %9.0f rows/s     peak RSS %6.1f MiB  CPU %5.2fs\n", round+1, prod.name, r.rate, r.rssMiB, r.cpu.Seconds())
			}
			if want("cdc") {
				r, err := runCDCPipeline(prod, filepath.Join(tmp, fmt.Sprintf("cdc-%d-%d", round, p)), pg, cfg.cdcFor, cfg.cdcEvery, fmt.Sprintf("bench_cdc_%d_%d", round, p), int64(round*2+p)*1_000_000)
				if err != nil {
					return fmt.Errorf("cdc pipeline, round %d, %s: %w", round+1, prod.name, err)
				}
				cdc.p50[p], cdc.p99[p], cdc.rss[p] = append(cdc.p50[p], r.p50), append(cdc.p99[p], r.p99), append(cdc.rss[p], r.rssMiB)
				fmt.Printf("round %d cdc      %-15s p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  (%d rows)  peak RSS %6.1f MiB\n", round+1, prod.name, r.p50, r.p99, r.max, r.rows, r.rssMiB)
			}
		}
	}
	fmt.Println()
	for p, prod := range products {
		if want("json") {
			fmt.Printf("median json     %-15s %9.0f records/s (spread %.0f-%.0f), CPU %.2fs, peak RSS %.1f MiB\n", prod.name, median(js.rate[p]), slices.Min(js.rate[p]), slices.Max(js.rate[p]), median(js.cpu[p]), median(js.rss[p]))
		}
		if want("snapshot") {
			fmt.Printf("median snapshot %-15s %9.0f rows/s (spread %.0f-%.0f), CPU %.2fs, peak RSS %.1f MiB (spread %.1f-%.1f)\n", prod.name, median(snap.rate[p]), slices.Min(snap.rate[p]), slices.Max(snap.rate[p]), median(snap.cpu[p]), median(snap.rss[p]), slices.Min(snap.rss[p]), slices.Max(snap.rss[p]))
		}
		if want("cdc") {
			fmt.Printf("median cdc      %-15s p50 %.2f ms (spread %.2f-%.2f), p99 %.2f ms (spread %.2f-%.2f)\n", prod.name, median(cdc.p50[p]), slices.Min(cdc.p50[p]), slices.Max(cdc.p50[p]), median(cdc.p99[p]), slices.Min(cdc.p99[p]), slices.Max(cdc.p99[p]))
		}
	}
	if want("json") {
		fmt.Printf("ratio json records/s conduit / Conduit:  %.2f (target >= 5); per round %s\n", median(js.rate[0])/median(js.rate[1]), roundRatios(js.rate[0], js.rate[1]))
		// The process's CPU for the same records moves least with what
		// else the machine does.
		fmt.Printf("ratio json CPU Conduit / conduit:        %.2f (the same records); per round %s\n", median(js.cpu[1])/median(js.cpu[0]), roundRatios(js.cpu[1], js.cpu[0]))
	}
	if want("snapshot") {
		fmt.Printf("ratio snapshot rows/s conduit / Conduit: %.2f; per round %s; CPU Conduit / conduit %.2f\n", median(snap.rate[0])/median(snap.rate[1]), roundRatios(snap.rate[0], snap.rate[1]), median(snap.cpu[1])/median(snap.cpu[0]))
		fmt.Printf("ratio snapshot peak RSS conduit / Conduit: %.2f (target <= 1); per round %s\n", median(snap.rss[0])/median(snap.rss[1]), roundRatios(snap.rss[0], snap.rss[1]))
	}
	if want("cdc") {
		fmt.Printf("ratio cdc p50 conduit / Conduit: %.2f (target <= 1); per round %s; our p99 median %.2f ms (target < 20)\n", median(cdc.p50[0])/median(cdc.p50[1]), roundRatios(cdc.p50[0], cdc.p50[1]), median(cdc.p99[0]))
	}
	return nil
}

// vsRun is what one run of a product measured.
type vsRun struct {
	rate          float64 // records per second, first line to last
	rssMiB        float64 // the process's peak resident set
	cpu           time.Duration
	p50, p99, max float64 // cdc latencies, ms
	rows          int
}

// started is a product's process running one pipeline file.
type started struct {
	cmd    *exec.Cmd
	exited chan error
	log    string
}

// start writes pipeline as the only pipeline file in dir and starts prod
// on it.
func start(prod product, dir, pipeline string) (*started, error) {
	pipelines := filepath.Join(dir, "pipelines")
	if err := os.MkdirAll(pipelines, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pipelines, "bench.yml"), []byte(pipeline), 0o644); err != nil {
		return nil, err
	}
	args, err := prod.args(dir, pipelines)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(prod.bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = childAttributes()
	s := &started{cmd: cmd, exited: make(chan error, 1), log: filepath.Join(dir, "process.log")}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.exited <- cmd.Wait() }()
	return s, nil
}

// stop interrupts the process, waits for it (killing it after 30s) and
// returns its peak RSS and CPU time.
func (s *started) stop() (rssMiB float64, cpu time.Duration) {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return float64(ru.Maxrss) / 1024, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return 0, 0
}

func (s *started) failure(err error) error {
	return fmt.Errorf("%w (log: %s)", err, readTail(s.log))
}

// waitLines waits until the file at path holds n lines and returns when
// the first and the n-th appeared.
func (s *started) waitLines(path string, n int64, timeout time.Duration) (first, last time.Time, err error) {
	t := &tailer{path: path}
	defer t.close()
	deadline := time.Now().Add(timeout)
	var lines int64
	for lines < n {
		select {
		case err := <-s.exited:
			s.exited <- err
			return first, last, s.failure(fmt.Errorf("exited after %d of %d lines: %v", lines, n, err))
		case <-time.After(binaryPoll):
		}
		got, err := t.lines(func([]byte) {})
		if err != nil {
			return first, last, err
		}
		if lines == 0 && got > 0 {
			first = time.Now()
		}
		lines += got
		if time.Now().After(deadline) {
			return first, last, s.failure(fmt.Errorf("%d of %d lines after %s", lines, n, timeout))
		}
	}
	return first, time.Now(), nil
}

// tailer reads the lines appended to a file.
type tailer struct {
	path string
	f    *os.File
	part []byte // the start of a line not ended yet
	buf  []byte
}

// lines calls each for every complete line appended since the last call
// and returns how many there were; a file not created yet has none.
func (t *tailer) lines(each func(line []byte)) (int64, error) {
	if t.f == nil {
		f, err := os.Open(t.path)
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		t.f, t.buf = f, make([]byte, 1<<20)
	}
	var n int64
	for {
		k, err := t.f.Read(t.buf)
		chunk := t.buf[:k]
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				t.part = append(t.part, chunk...)
				break
			}
			if len(t.part) > 0 {
				t.part = append(t.part, chunk[:i]...)
				each(t.part)
				t.part = t.part[:0]
			} else {
				each(chunk[:i])
			}
			n++
			chunk = chunk[i+1:]
		}
		if errors.Is(err, io.EOF) || k == 0 {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (t *tailer) close() {
	if t.f != nil {
		_ = t.f.Close()
	}
}

// jsonPipeline is the pipeline file of the json comparison.
const jsonPipeline = `version: "2.2"
pipelines:
  - id: bench
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          rate: 0
          recordCount: %d
          format.type: raw
          format.options.id: int
          format.options.name: string
          operations: create
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: %s
    processors:
      - id: decode
        plugin: json.decode
        settings:
          field: .Payload.After
      - id: rename
        plugin: field.rename
        settings:
          mapping: .Payload.After.name:title
      - id: encode
        plugin: json.encode
        settings:
          field: .Payload.After
`

func runJSONPipeline(prod product, dir string, records int64) (vsRun, error) {
	out := filepath.Join(dir, "out.jsonl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return vsRun{}, err
	}
	s, err := start(prod, dir, fmt.Sprintf(jsonPipeline, records, out))
	if err != nil {
		return vsRun{}, err
	}
	first, last, err := s.waitLines(out, records, max(2*time.Minute, time.Duration(records)*100*time.Microsecond))
	rss, cpu := s.stop()
	if err != nil {
		return vsRun{}, err
	}
	if err := checkJSONOutput(out); err != nil {
		return vsRun{}, err
	}
	r := vsRun{rate: float64(records-1) / last.Sub(first).Seconds(), rssMiB: rss, cpu: cpu}
	return r, os.RemoveAll(dir)
}

// checkJSONOutput makes sure the processors ran: the first record's
// payload has the renamed field and not the old one.
func checkJSONOutput(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return err
	}
	// json.encode leaves raw bytes, which the file destination writes
	// base64-encoded (Conduit's OpenCDC JSON) or as they are.
	if !bytes.Contains(line, []byte(`title`)) && !bytes.Contains(line, []byte(`dGl0bG`)) && !bytes.Contains(line, []byte(`InRpdGxl`)) {
		return fmt.Errorf("the output's first line has no renamed field: %.300s", line)
	}
	return nil
}

// createSnapshotTable fills bench_snapshot with rows rows of a few
// columns of common types.
func createSnapshotTable(url string, rows int64) error {
	return execSQL(url,
		"CREATE TABLE bench_snapshot (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2) NOT NULL, score double precision, active boolean NOT NULL, created timestamptz NOT NULL)",
		fmt.Sprintf(`INSERT INTO bench_snapshot
			SELECT i, 'customer-' || i, (i %% 100000) / 100.0, i * 0.5, i %% 2 = 0, timestamptz '2026-01-01' + i * interval '1 second'
			FROM generate_series(1, %d) AS i`, rows),
		"VACUUM ANALYZE bench_snapshot")
}

func execSQL(url string, sql ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range sql {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// postgresPipeline is the pipeline file of the snapshot and cdc
// comparisons: a replication slot and publication per run, dropped after.
const postgresPipeline = `version: "2.2"
pipelines:
  - id: bench
    status: running
    connectors:
      - id: pg
        type: source
        plugin: builtin:postgres
        settings:
          url: %s
          tables: %s
          snapshotMode: %s
          cdcMode: logrepl
          logrepl.slotName: %s
          logrepl.publicationName: %s
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: %s
`

// dropReplication drops what a run's source created on the server.
func dropReplication(url, name string) error {
	return execSQL(url,
		fmt.Sprintf("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '%s'", name),
		"DROP PUBLICATION IF EXISTS "+name)
}

func runSnapshotPipeline(prod product, dir, url string, rows int64, name string) (vsRun, error) {
	out := filepath.Join(dir, "out.jsonl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return vsRun{}, err
	}
	defer func() { _ = dropReplication(url, name) }()
	s, err := start(prod, dir, fmt.Sprintf(postgresPipeline, url, "bench_snapshot", "initial", name, name, out))
	if err != nil {
		return vsRun{}, err
	}
	first, last, err := s.waitLines(out, rows, max(2*time.Minute, time.Duration(rows)*200*time.Microsecond))
	rss, cpu := s.stop()
	if err != nil {
		return vsRun{}, err
	}
	r := vsRun{rate: float64(rows-1) / last.Sub(first).Seconds(), rssMiB: rss, cpu: cpu}
	return r, os.RemoveAll(dir)
}

// runCDCPipeline starts prod on bench_cdc without a snapshot, waits until
// a first row comes through, then inserts a row every every for span and
// measures, for each, the time from its commit to its line in the file.
// ids start at base, so that runs do not collide in the table.
func runCDCPipeline(prod product, dir, url string, span, every time.Duration, name string, base int64) (vsRun, error) {
	out := filepath.Join(dir, "out.jsonl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return vsRun{}, err
	}
	defer func() { _ = dropReplication(url, name) }()
	s, err := start(prod, dir, fmt.Sprintf(postgresPipeline, url, "bench_cdc", "never", name, name, out))
	if err != nil {
		return vsRun{}, err
	}
	r, err := measureCDC(s, out, url, span, every, base)
	rss, cpu := s.stop()
	if err != nil {
		return vsRun{}, err
	}
	r.rssMiB, r.cpu = rss, cpu
	return r, os.RemoveAll(dir)
}

// cdcTag marks the rows of the cdc comparison; the number after it is the
// row's index.
const cdcTag = "cdc-row-"

func measureCDC(s *started, out, url string, span, every time.Duration, base int64) (vsRun, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return vsRun{}, err
	}
	defer conn.Close(context.Background())
	total := int(span / every)
	committed := make([]time.Time, total)
	seen := make([]time.Time, total)
	t := &tailer{path: out}
	defer t.close()
	record := func(line []byte) {
		i := bytes.Index(line, []byte(cdcTag))
		if i < 0 {
			return
		}
		rest := line[i+len(cdcTag):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		k, err := strconv.Atoi(string(rest[:j]))
		if err == nil && k >= 0 && k < total && seen[k].IsZero() {
			seen[k] = time.Now()
		}
	}
	// The pipeline is up once a warm-up row comes through (index -1 is
	// not recorded): the slot exists from then on.
	deadline := time.Now().Add(2 * time.Minute)
	warm := false
	for n := int64(0); !warm; n++ {
		if time.Now().After(deadline) {
			return vsRun{}, s.failure(errors.New("no warm-up row reached the file within 2 minutes"))
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return vsRun{}, s.failure(fmt.Errorf("exited before the first row: %v", err))
		default:
		}
		if _, err := conn.Exec(ctx, "INSERT INTO bench_cdc (id, tag) VALUES ($1, $2)", base+n, "warm-up"); err != nil {
			return vsRun{}, err
		}
		for range 50 {
			time.Sleep(10 * time.Millisecond)
			got, err := t.lines(func([]byte) {})
			if err != nil {
				return vsRun{}, err
			}
			if got > 0 {
				warm = true
				break
			}
		}
	}
	base += 1000
	// The inserter runs beside the tailer, which reads the file whenever
	// the directory reports a write.
	changed, unwatch, err := watchDir(out)
	if err != nil {
		return vsRun{}, err
	}
	defer unwatch()
	insertErr := make(chan error, 1)
	go func() {
		next := time.Now()
		for i := range total {
			time.Sleep(time.Until(next))
			next = next.Add(every)
			if _, err := conn.Exec(ctx, "INSERT INTO bench_cdc (id, tag) VALUES ($1, $2)", base+int64(i), cdcTag+strconv.Itoa(i)); err != nil {
				insertErr <- err
				return
			}
			committed[i] = time.Now()
		}
		insertErr <- nil
	}()
	inserting := true
	lastSeen := time.Now()
	for {
		if _, err := t.lines(record); err != nil {
			return vsRun{}, err
		}
		if inserting {
			select {
			case err := <-insertErr:
				if err != nil {
					return vsRun{}, err
				}
				inserting = false
				lastSeen = time.Now()
			default:
			}
		} else if !slices.ContainsFunc(seen, time.Time.IsZero) || time.Since(lastSeen) > 10*time.Second {
			break
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Millisecond):
		}
	}
	var lat []time.Duration
	for i := range total {
		if seen[i].IsZero() {
			return vsRun{}, s.failure(fmt.Errorf("row %d of %d never reached the file", i, total))
		}
		lat = append(lat, seen[i].Sub(committed[i]))
	}
	slices.Sort(lat)
	return vsRun{p50: ms(percentile(lat, 0.50)), p99: ms(percentile(lat, 0.99)), max: ms(lat[len(lat)-1]), rows: total}, nil
}

// parseVsPipelines reads -vs-conduit-pipelines.
func parseVsPipelines(list string) (map[string]bool, error) {
	only := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name != "json" && name != "snapshot" && name != "cdc" {
			return nil, fmt.Errorf("-vs-conduit-pipelines: unknown pipeline %q (known: json, snapshot, cdc)", name)
		}
		only[name] = true
	}
	return only, nil
}
