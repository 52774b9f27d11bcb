package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// twoGeneratorsToFile is a pipeline of two sources: two generators
// counting from 1 - their positions are the same numbers - into one file.
// Each has its own rate and record count (%d each).
const twoGeneratorsToFile = `version: "2.2"
pipelines:
  - id: two
    connectors:
      - id: gen-a
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: %d
          recordCount: %d
      - id: gen-b
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          rate: %d
          recordCount: %d
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`

// sourcedIDs reads the file destination's lines: for each source node
// (conduit.source.connector.id), how often each generator id was written.
func sourcedIDs(t *testing.T, path string) map[string]map[int]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var rec struct {
			Metadata map[string]string `json:"metadata"`
			Payload  struct {
				After struct {
					ID int `json:"id"`
				} `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d is torn or foreign: %q: %v", line, sc.Text(), err)
		}
		src := rec.Metadata["conduit.source.connector.id"]
		if out[src] == nil {
			out[src] = map[int]int{}
		}
		out[src][rec.Payload.After.ID]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// exactlyOnce fails the test unless the file holds ids 1..n of each source
// once each, and nothing else.
func exactlyOnce(t *testing.T, got map[string]map[int]int, n int, sources ...string) {
	t.Helper()
	if len(got) != len(sources) {
		t.Errorf("records of %d sources, want %d: %v", len(got), len(sources), keys(got))
	}
	for _, src := range sources {
		ids := got[src]
		missing, dups := 0, 0
		for id := 1; id <= n; id++ {
			switch c := ids[id]; {
			case c == 0:
				missing++
			case c > 1:
				dups += c - 1
			}
		}
		if missing > 0 || dups > 0 || len(ids) != n {
			t.Errorf("source %s: %d of %d ids missing, %d written twice, %d distinct ids", src, missing, n, dups, len(ids))
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTwoSourcesSurviveSIGKILLs runs a pipeline of two generators into a
// file, SIGKILLs it at random moments (fixed seed) while records move,
// restarts it each time and lets it finish: the file must hold every
// record of each source exactly once, although both sources' positions
// are the same numbers - each source resumes from its own position, and
// the dedup entries and the file's last line are read per source.
func TestTwoSourcesSurviveSIGKILLs(t *testing.T) {
	t.Parallel()
	n := envInt("CONDUIT_CRASH_TWO_SOURCES_RECORDS", 40_000)
	kills := envInt("CONDUIT_CRASH_TWO_SOURCES_KILLS", 4)
	seed := uint64(envInt("CONDUIT_CRASH_SEED", 7))
	rng := rand.New(rand.NewPCG(seed, seed))
	// Both at one rate: their positions stay close, so that the records
	// in flight at a kill hold equal positions of both; the rate leaves
	// the kills time to land while records move.
	w := newWorkspace(t, fmt.Sprintf(twoGeneratorsToFile, 20_000, n, 20_000, n))
	out := filepath.Join(w.dir, "out.jsonl")

	done := 0
	for range kills {
		before := countLines(t, out)
		if 2*n-before < 4096 {
			break
		}
		p := w.start("run")
		waitForBytes(t, p, out, fileSize(out)+int64(min(2*n/(kills+2), (2*n-before)/2))*approxGeneratorLineBytes)
		time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		done++
	}
	p := w.start("run")
	// Running before it is stopped: a signal that came before conduit
	// handles signals would kill it.
	waitForEvent(t, p, "two", "running", 1)
	waitForRecords(t, p, out, 2*n)
	// Anything written twice would come in the moments after the last
	// record: the stop below drains the run, and the file is read after.
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT; output:\n%s", code, p.stderr.String())
	}
	t.Logf("%d SIGKILLs of a two-source pipeline of %d records each (seed %d)", done, n, seed)
	if done == 0 {
		t.Fatal("no kill landed while records moved")
	}
	exactlyOnce(t, sourcedIDs(t, out), n, "two:gen-a", "two:gen-b")
}

// approxGeneratorLineBytes is about how long one line of a structured
// generator record is.
const approxGeneratorLineBytes = 250

// TestChangingOneSourceKeepsTheOthersPosition: a running two-source
// pipeline whose one source's settings change is drained and rebuilt; the
// other source resumes where it was (no record of it is written again),
// and so does the changed one.
func TestChangingOneSourceKeepsTheOthersPosition(t *testing.T) {
	t.Parallel()
	const n = 3000
	w := newWorkspace(t, fmt.Sprintf(twoGeneratorsToFile, 1000, n, 1000, n))
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 600)
	w.writeLikeAnEditor("pipelines/p.yml", fmt.Sprintf(twoGeneratorsToFile, 1000, n, 5000, n))
	waitForEvent(t, p, "two", "stopped", 1)
	waitForLog(t, p, `"fields":["connectors[gen-b].settings.rate"]`)
	waitForEvent(t, p, "two", "running", 2)
	waitForRecords(t, p, out, 2*n)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGINT; output:\n%s", code, p.stderr.String())
	}
	exactlyOnce(t, sourcedIDs(t, out), n, "two:gen-a", "two:gen-b")
}

// TestConduitExamplePipelinesOfTwoSources runs Conduit's two example
// pipelines of two sources, unchanged: both generators' records reach the
// file (1 and 2 of them), a pipeline processor sets the department of
// all, a source's processor only of its own source's.
func TestConduitExamplePipelinesOfTwoSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		// department is what each source's records carry.
		department map[string]string
	}{
		{"multiple-sources-with-processor.yml", map[string]string{
			"multiple-source-with-processor:employees-1": "finance", "multiple-source-with-processor:employees-2": "finance"}},
		{"source-processor.yml", map[string]string{
			"add-department:employees-1": "finance", "add-department:employees-2": ""}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			yml, err := os.ReadFile(filepath.Join("testdata", "conduit-pipelines", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			w := newWorkspace(t, string(yml))
			p := w.start("run")
			out := filepath.Join(w.dir, "example.out")
			waitForRecords(t, p, out, 3)
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != 0 {
				t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			count := map[string]int{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var rec struct {
					Metadata map[string]string `json:"metadata"`
					Payload  struct {
						After map[string]any `json:"after"`
					} `json:"payload"`
				}
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				src := rec.Metadata["conduit.source.connector.id"]
				count[src]++
				want, known := tc.department[src]
				got, _ := rec.Payload.After["department"].(string)
				if !known || got != want {
					t.Errorf("record of %q has department %q, want %q", src, got, want)
				}
			}
			var got []string
			for src, n := range count {
				got = append(got, fmt.Sprintf("%s=%d", src, n))
			}
			if len(count) != 2 || count[keysOf(tc.department, "employees-1")] != 1 || count[keysOf(tc.department, "employees-2")] != 2 {
				t.Errorf("records per source %v, want 1 of employees-1 and 2 of employees-2", got)
			}
		})
	}
}

// keysOf returns the key of m that ends with suffix.
func keysOf(m map[string]string, suffix string) string {
	for k := range m {
		if len(k) > len(suffix) && k[len(k)-len(suffix):] == suffix {
			return k
		}
	}
	return ""
}
