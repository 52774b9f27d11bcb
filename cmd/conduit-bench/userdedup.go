package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The dedup comparison as a user sees it: the real binary (`conduit run`,
// built by the bench) runs one generator -> file pipeline of n records
// with dedup on, then the same with dedup off, round after round, each in
// a fresh directory; the figures are read from outside, as a user reads
// them: the time until the output file holds the last record, and the
// process's CPU time. Everything `conduit run` does is in it - the API,
// the supervisor, the audit log, the store opened and closed - which the
// in-process scenarios leave out.

// binaryRun is one run of the real binary.
type binaryRun struct {
	// Total is from the process's start to the last record in the file;
	// Moving from the first record in the file to the last.
	Total, Moving time.Duration
	// CPU is the process's user+system time from the first record in the
	// file to the last (read from /proc; over its whole life where there
	// is no /proc).
	CPU time.Duration
	// PeakRSSMiB is the process's peak resident set.
	PeakRSSMiB float64
}

// binaryPoll is how often the output file is looked at: a run of
// 2,000,000 records takes a second or more, so the error is under 1%.
const binaryPoll = 5 * time.Millisecond

// binaryDedupParent builds the binary and alternates dedup on and off for
// rounds rounds of records records each, then prints every run, the
// medians, the spread and the ratios. bin, when set, is the binary to run
// instead.
func binaryDedupParent(rounds int, records int64, bin string) error {
	dir, err := os.MkdirTemp("", "conduit-bench-binary-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "conduit")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/conduit").CombinedOutput(); err != nil {
			return fmt.Errorf("building conduit (run the bench from the repository root): %v\n%s", err, out)
		}
	}
	fmt.Printf("\ndedup as a user sees it: %s runs one builtin:generator -> builtin:file pipeline of %d records\n", bin, records)
	fmt.Printf("(conduit.yml defaults, Badger state), dedup on then off, %d rounds, a fresh process and directory each run;\n", rounds)
	fmt.Printf("rate: records / time from the first record in the file to the last (the total from the process's start in brackets);\n")
	fmt.Printf("CPU: the process's user+system time over the same span\n")
	type series struct{ moving, total, cpu, rss []float64 }
	var on, off series
	var roundRatios []float64
	for i := range rounds {
		var rates [2]float64
		for k, enabled := range []bool{true, false} {
			r, err := runBinary(bin, filepath.Join(dir, fmt.Sprintf("run-%d-%v", i+1, enabled)), records, enabled)
			if err != nil {
				return fmt.Errorf("round %d, dedup %v: %w", i+1, enabled, err)
			}
			s := &off
			name := "dedup off"
			if enabled {
				s, name = &on, "dedup on "
			}
			rate := float64(records) / r.Moving.Seconds()
			rates[k] = rate
			s.moving = append(s.moving, rate)
			s.total = append(s.total, float64(records)/r.Total.Seconds())
			s.cpu = append(s.cpu, r.CPU.Seconds())
			s.rss = append(s.rss, r.PeakRSSMiB)
			fmt.Printf("round %d %s %10.0f records/s (%10.0f)  CPU %5.2fs  peak RSS %6.1f MiB\n",
				i+1, name, rate, float64(records)/r.Total.Seconds(), r.CPU.Seconds(), r.PeakRSSMiB)
		}
		roundRatios = append(roundRatios, rates[0]/rates[1])
	}
	for _, x := range []struct {
		name string
		s    series
	}{{"dedup on ", on}, {"dedup off", off}} {
		fmt.Printf("median %s %10.0f records/s (spread %.0f-%.0f; from the start %.0f), CPU %.2fs (%.2f-%.2f), peak RSS %.1f MiB\n",
			x.name, median(x.s.moving), slices.Min(x.s.moving), slices.Max(x.s.moving), median(x.s.total),
			median(x.s.cpu), slices.Min(x.s.cpu), slices.Max(x.s.cpu), median(x.s.rss))
	}
	parts := make([]string, len(roundRatios))
	for i, r := range roundRatios {
		parts[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	fmt.Printf("ratio dedup on / off, the binary: %.3f (ratio of medians; target >= 0.90); per round %s; from the start %.3f\n",
		median(on.moving)/median(off.moving), strings.Join(parts, " "), median(on.total)/median(off.total))
	fmt.Printf("CPU dedup on / off, the binary: %.3f (medians; the machine's load moves it least)\n", median(on.cpu)/median(off.cpu))
	return nil
}

// runBinary runs one pipeline of records records in dir and stops the
// process once the file holds the last one.
func runBinary(bin, dir string, records int64, dedup bool) (binaryRun, error) {
	if err := os.MkdirAll(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		return binaryRun{}, err
	}
	out := filepath.Join(dir, "out.jsonl")
	pipeline := fmt.Sprintf(`version: "2.2"
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
          format.type: structured
          format.options.id: int
          format.options.name: string
          operations: create
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: %s
`, records, out)
	if err := os.WriteFile(filepath.Join(dir, "pipelines", "bench.yml"), []byte(pipeline), 0o644); err != nil {
		return binaryRun{}, err
	}
	addr, err := freeLoopbackAddress()
	if err != nil {
		return binaryRun{}, err
	}
	cmd := exec.Command(bin, "run",
		"--db.badger.path", filepath.Join(dir, "db"),
		"--pipelines.path", filepath.Join(dir, "pipelines"),
		"--connectors.path", filepath.Join(dir, "connectors"),
		"--api.http.address", addr,
		"--dedup.enabled="+strconv.FormatBool(dedup))
	cmd.Dir = dir
	cmd.SysProcAttr = childAttributes()
	logFile, err := os.Create(filepath.Join(dir, "conduit.log"))
	if err != nil {
		return binaryRun{}, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	exited := make(chan error, 1)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return binaryRun{}, err
	}
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	last := []byte(`"id":` + strconv.FormatInt(records, 10))
	var first, done time.Time
	var cpuFirst, cpuDone time.Duration
	cpuKnown := true
	deadline := start.Add(max(time.Minute, time.Duration(records)*5*time.Microsecond))
	for done.IsZero() {
		select {
		case err := <-exited:
			return binaryRun{}, fmt.Errorf("conduit exited before the last record was written: %v (log: %s)", err, readTail(filepath.Join(dir, "conduit.log")))
		case <-time.After(binaryPoll):
		}
		now := time.Now()
		size, tail, err := fileTail(out)
		if err != nil {
			continue // not created yet
		}
		if first.IsZero() && size > 0 {
			first = now
			cpuFirst, err = processCPU(cmd.Process.Pid)
			cpuKnown = cpuKnown && err == nil
		}
		if lastLineHas(tail, last) {
			done = now
			cpuDone, err = processCPU(cmd.Process.Pid)
			cpuKnown = cpuKnown && err == nil
		}
		if now.After(deadline) {
			stop()
			return binaryRun{}, fmt.Errorf("the last record was not written after %s (log: %s)", now.Sub(start), readTail(filepath.Join(dir, "conduit.log")))
		}
	}
	stop()
	r := binaryRun{Total: done.Sub(start), Moving: done.Sub(first)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.PeakRSSMiB = float64(ru.Maxrss) / 1024
	}
	if cpuKnown {
		r.CPU = cpuDone - cpuFirst
	}
	lines, err := countLines(out)
	if err != nil {
		return r, err
	}
	if lines != records {
		return r, fmt.Errorf("output holds %d lines, want %d", lines, records)
	}
	return r, os.RemoveAll(dir)
}

// fileTail returns the file's size and its last few KiB.
func fileTail(path string) (int64, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	n := min(fi.Size(), 4<<10)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, fi.Size()-n); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	return fi.Size(), buf, nil
}

// lastLineHas reports whether the last complete line of tail holds want
// followed by the end of a JSON value.
func lastLineHas(tail, want []byte) bool {
	if len(tail) == 0 || tail[len(tail)-1] != '\n' {
		return false
	}
	line := tail[bytes.LastIndexByte(tail[:len(tail)-1], '\n')+1:]
	i := bytes.Index(line, want)
	if i < 0 || i+len(want) >= len(line) {
		return false
	}
	c := line[i+len(want)]
	return c == ',' || c == '}'
}

func readTail(path string) string {
	_, tail, err := fileTail(path)
	if err != nil {
		return err.Error()
	}
	return string(tail)
}

// freeLoopbackAddress returns a loopback address no one listens on now.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTicks = 100

// processCPU returns the user+system CPU time of a running process, from
// /proc/<pid>/stat (Linux).
func processCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis. utime and stime are fields 14
	// and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
