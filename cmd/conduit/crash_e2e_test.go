package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCrashDuplicatesWithAndWithoutDedup SIGKILLs a busy file -> file
// pipeline at random moments, restarts it each time, lets it finish, and
// counts what the destination holds: records missing (must be 0: nothing is
// lost, and no torn line is left) and records written twice, with dedup on
// and off. The duplicates are measured, not asserted: how many records sit
// between a write and its durable dedup entry (or its saved position) when
// the kill lands depends on the moment and on how fast the disk syncs, so
// a handful of kills cannot rank the two. What dedup guarantees exactly is
// tested in dedup/stress_test.go.
//
// The figures in docs/performance.md come from this test with a larger run:
//
//	CONDUIT_CRASH_RECORDS=1000000 CONDUIT_CRASH_KILLS=10 go test -run TestCrash -v ./cmd/conduit/
func TestCrashDuplicatesWithAndWithoutDedup(t *testing.T) {
	records := envInt("CONDUIT_CRASH_RECORDS", 200_000)
	kills := envInt("CONDUIT_CRASH_KILLS", 3)
	seed := uint64(envInt("CONDUIT_CRASH_SEED", int(time.Now().UnixNano()%1000)))
	t.Logf("%d records, %d kills, seed %d", records, kills, seed)

	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeInput(t, input, records)

	for _, dedupOn := range []bool{false, true} {
		missing, dups := crashRun(t, input, records, kills, dedupOn, rand.New(rand.NewPCG(seed, seed)))
		t.Logf("dedup %-5v: %d missing, %d duplicates after %d SIGKILLs of %d records", dedupOn, missing, dups, kills, records)
		if missing != 0 {
			t.Errorf("dedup %v: %d records missing", dedupOn, missing)
		}
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func writeInput(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, `{"id":%d,"name":"record-%d"}`+"\n", i, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func crashRun(t *testing.T, input string, records, kills int, dedupOn bool, rng *rand.Rand) (missing, dups int) {
	t.Helper()
	w := newWorkspace(t, fmt.Sprintf(`version: "2.2"
pipelines:
  - id: copy
    connectors:
      - id: in
        type: source
        plugin: builtin:file
        settings:
          path: %s
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`, input))
	w.write("conduit.yml", fmt.Sprintf("log:\n  format: json\ndedup:\n  enabled: %v\n", dedupOn))
	out := filepath.Join(w.dir, "out.jsonl")

	for range kills {
		before := countLines(t, out)
		left := records - before // roughly: duplicates count as lines too
		if left < 4096 {
			break
		}
		p := w.start("run")
		// Kill while records are moving: once this run has added a good
		// part of what is left, at a random moment of the next
		// milliseconds.
		waitForBytes(t, p, out, fileSize(out)+int64(min(records/(kills+2), left/2))*approxLineBytes)
		time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
	}
	p := w.start("run")
	// The last run reads the rest; the output stops growing when it has.
	waitForEvent(t, p, "copy", "running", 1)
	deadline := time.Now().Add(e2eTimeout)
	last, stable := -1, 0
	for stable < 10 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n := countLines(t, out)
		if n == last && n >= records {
			stable++
		} else {
			stable = 0
		}
		last = n
	}
	// A graceful stop acknowledges what is in flight.
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT; output:\n%s", code, p.stderr.String())
	}
	return countRecords(t, out, records)
}

// approxLineBytes is about how long one output line is; waiting on the
// file's size instead of counting lines is what lets the kill land while
// records are still moving.
const approxLineBytes = 280

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func waitForBytes(t *testing.T, p *process, path string, n int64) {
	t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for fileSize(path) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not grow to %d bytes; output:\n%s", path, n, p.stderr.String())
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// countRecords reads the destination's OpenCDC lines; the payload is the
// input line, base64 raw data.
func countRecords(t *testing.T, path string, records int) (missing, dups int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]int, records+1)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Payload struct {
				After string `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("torn or foreign line %q: %v", sc.Text(), err)
		}
		raw, err := base64.StdEncoding.DecodeString(rec.Payload.After)
		if err != nil {
			t.Fatal(err)
		}
		var in struct {
			ID int `json:"id"`
		}
		if err := json.Unmarshal(raw, &in); err != nil || in.ID < 1 || in.ID > records {
			t.Fatalf("unexpected payload %q", raw)
		}
		seen[in.ID]++
	}
	for _, c := range seen[1:] {
		switch {
		case c == 0:
			missing++
		case c > 1:
			dups += c - 1
		}
	}
	return missing, dups
}
