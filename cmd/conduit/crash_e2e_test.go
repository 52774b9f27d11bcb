package main

import (
	"bufio"
	"bytes"
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

	"github.com/conduitry/conduit/pkg/pipeline"
)

// TestCrashDuplicatesWithAndWithoutDedup SIGKILLs a busy file -> file
// pipeline at random moments (fixed seeds), restarts it each time, lets it
// finish, and counts what the destination holds: records missing and
// records written twice. Three configurations:
//
//   - dedup on, builtin:file destination, which reports the last record it
//     holds: nothing may be missing and nothing written twice;
//   - dedup off: nothing may be missing; the duplicates are only reported;
//   - dedup on, the standalone example destination (examples/connectors/
//     flaky), which cannot report what it holds: nothing may be missing,
//     and a kill may duplicate at most the batch being written and the one
//     whose entry was being committed: 2 batches per kill.
//
// The short form runs in `make test`; the figures in docs/performance.md
// come from the full one:
//
//	CONDUIT_CRASH_RECORDS=3000000 CONDUIT_CRASH_KILLS=8 go test -run TestCrash -v ./cmd/conduit/
func TestCrashDuplicatesWithAndWithoutDedup(t *testing.T) {
	t.Parallel()
	records := envInt("CONDUIT_CRASH_RECORDS", 200_000)
	kills := envInt("CONDUIT_CRASH_KILLS", 3)
	seed := uint64(envInt("CONDUIT_CRASH_SEED", 7))

	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeInput(t, input, records)

	for _, c := range []struct {
		name        string
		dedupOn     bool
		destination string
		// maxDupsPerKill < 0: only reported.
		maxDupsPerKill int
	}{
		{"dedup on, builtin:file", true, "builtin:file", 0},
		{"dedup off, builtin:file", false, "builtin:file", -1},
		{"dedup on, standalone:flaky", true, "standalone:flaky", 2 * pipeline.DefaultBatchSize},
	} {
		// Each configuration has its own workspace, binary run and port.
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			missing, dups, done := crashRun(t, input, records, kills, c.dedupOn, c.destination, rand.New(rand.NewPCG(seed, seed)))
			t.Logf("%s: %d missing, %d duplicates after %d SIGKILLs of %d records (seed %d)", c.name, missing, dups, done, records, seed)
			if missing != 0 {
				t.Errorf("%s: %d records missing", c.name, missing)
			}
			if c.maxDupsPerKill >= 0 && dups > c.maxDupsPerKill*done {
				t.Errorf("%s: %d duplicates after %d SIGKILLs (seed %d), want at most %d", c.name, dups, done, seed, c.maxDupsPerKill*done)
			}
		})
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

// crashRun copies input to a destination of the plugin, SIGKILLed up to
// kills times while busy, then lets it finish; done is how many kills
// happened (none once little is left to copy).
func crashRun(t *testing.T, input string, records, kills int, dedupOn bool, plugin string, rng *rand.Rand) (missing, dups, done int) {
	t.Helper()
	pipelineFile := fmt.Sprintf(`version: "2.2"
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
        plugin: %s
        settings:
          path: ./out.jsonl
`, input, plugin)
	var w *workspace
	if strings.HasPrefix(plugin, "standalone:") {
		w = standaloneWorkspace(t, pipelineFile)
	} else {
		w = newWorkspace(t, pipelineFile)
	}
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
		done++
	}
	p := w.start("run")
	// The last run reads the rest; the output stops growing when it has.
	// Its size is watched and its lines counted only once it stood still:
	// counting tens of megabytes on every look would take the CPU the
	// pipeline needs.
	waitForEvent(t, p, "copy", "running", 1)
	lastSize, stable, lines := int64(-1), 0, 0
	eventually(t, 50*time.Millisecond, func() bool {
		size := fileSize(out)
		if size != lastSize {
			lastSize, stable = size, 0
			return false
		}
		if stable++; stable < 10 {
			return false
		}
		lines = countLines(t, out)
		if lines < records {
			stable = 0
			return false
		}
		return true
	}, func() string {
		return fmt.Sprintf("%s did not settle at %d lines or more (%d at the last count); output:\n%s", out, records, lines, p.stderr.String())
	})
	// A graceful stop acknowledges what is in flight.
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT; output:\n%s", code, p.stderr.String())
	}
	missing, dups = countRecords(t, out, records)
	return missing, dups, done
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
	// Polled often: the kill is meant to land while records are written.
	eventually(t, time.Millisecond, func() bool { return fileSize(path) >= n },
		func() string {
			return fmt.Sprintf("%s did not grow to %d bytes; output:\n%s", path, n, p.stderr.String())
		})
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
		id, ok := copiedID(sc.Bytes())
		if !ok {
			id = decodeCopiedID(t, sc.Bytes())
		}
		if id < 1 || id > records {
			t.Fatalf("a line of a record that is not in the input: %q", sc.Text())
		}
		seen[id]++
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

// copiedID reads the input record's id from a destination line written the
// way the file destination writes one - an OpenCDC JSON object ending with
// the payload, whose "after" is the input line in base64 - by hand: under
// the race detector, decoding every line of the output with encoding/json
// took most of the test's time. ok is false for any other line, which
// decodeCopiedID then reads strictly.
func copiedID(line []byte) (id int, ok bool) {
	const after = `,"after":"`
	if !bytes.HasPrefix(line, []byte(`{"position":`)) || bytes.Count(line, []byte(`"position":`)) != 1 ||
		!bytes.HasSuffix(line, []byte(`"}}`)) || bytes.Count(line, []byte(after)) != 1 {
		return 0, false
	}
	encoded := line[bytes.Index(line, []byte(after))+len(after) : len(line)-len(`"}}`)]
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(raw, encoded)
	if err != nil {
		return 0, false
	}
	rest, found := bytes.CutPrefix(raw[:n], []byte(`{"id":`))
	comma := bytes.IndexByte(rest, ',')
	if !found || comma < 0 {
		return 0, false
	}
	id, err = strconv.Atoi(string(rest[:comma]))
	if err != nil || string(rest[comma:]) != `,"name":"record-`+strconv.Itoa(id)+`"}` {
		return 0, false
	}
	return id, true
}

// decodeCopiedID reads a destination line with encoding/json, failing the
// test on a torn or foreign line.
func decodeCopiedID(t *testing.T, line []byte) int {
	t.Helper()
	var rec struct {
		Payload struct {
			After string `json:"after"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatalf("torn or foreign line %q: %v", line, err)
	}
	raw, err := base64.StdEncoding.DecodeString(rec.Payload.After)
	if err != nil {
		t.Fatalf("line %q: payload.after: %v", line, err)
	}
	var in struct {
		ID int `json:"id"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("line %q: unexpected payload %q", line, raw)
	}
	return in.ID
}
