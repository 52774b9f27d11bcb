package main

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/record"
)

// TestSplitSurvivesSIGKILLExactlyOnce runs generator -> json.decode ->
// split -> file with dedup on, SIGKILLs the binary three times while
// records move and stops it gracefully the fourth time. Every record the
// generator made becomes three lines (one per element of its users
// array), and every one of them is in the file exactly once: the derived
// records have positions of their own, which dedup and the file
// destination's reading of its last line use as any other.
func TestSplitSurvivesSIGKILLExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
pipelines:
  - id: orders
    status: running
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          rate: 0
          format.type: file
          format.options.path: ./order.json
          operations: create
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: decode
        plugin: json.decode
        settings:
          field: .Payload.After
      - id: split-users
        plugin: builtin:split
        settings:
          field: .Payload.After.users
`)
	w.write("order.json", `{"order":7,"users":[{"name":"u0"},{"name":"u1"},{"name":"u2"}]}`)
	w.write("conduit.yml", "log:\n  format: json\ndedup:\n  enabled: true\npipelines:\n  graceful-stop-timeout: 20s\n")
	out := filepath.Join(w.dir, "out.jsonl")
	rng := rand.New(rand.NewPCG(32, 3))
	for kill := range 3 {
		p := w.start("run")
		waitForBytes(t, p, out, fileSize(out)+int64(kill+1)<<20)
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
	}
	p := w.start("run")
	waitForBytes(t, p, out, fileSize(out)+1<<20)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; output:\n%s", code, p.stderr.String())
	}

	// seen[n] has bit i set when the line of the n-th generated record's
	// element i was read.
	seen := map[int]uint8{}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		var rec struct {
			Position []byte            `json:"position"`
			Metadata map[string]string `json:"metadata"`
			Payload  struct {
				After struct {
					Order int `json:"order"`
					Users struct {
						Name string `json:"name"`
					} `json:"users"`
				} `json:"after"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d %q: %v", lines, sc.Text(), err)
		}
		parent, i, ok := record.ParseDerived(rec.Position)
		n, err := strconv.Atoi(string(parent))
		if !ok || err != nil || i > 2 {
			t.Fatalf("line %d: position %q is not one derived from a generator's record", lines, rec.Position)
		}
		if idx := strconv.Itoa(i); rec.Metadata["split.index"] != idx || rec.Payload.After.Users.Name != "u"+idx || rec.Payload.After.Order != 7 {
			t.Fatalf("line %d (record %d, element %d) is not the element split off: %s", lines, n, i, sc.Text())
		}
		if seen[n]&(1<<i) != 0 {
			t.Fatalf("line %d: record %d, element %d is in the file twice", lines, n, i)
		}
		seen[n] |= 1 << i
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// A graceful stop writes and acknowledges everything read: every
	// record from the first to the last has all three elements.
	for n := 1; n <= len(seen); n++ {
		if seen[n] != 0b111 {
			t.Fatalf("record %d has elements %03b of 111 (%d records, %d lines)", n, seen[n], len(seen), lines)
		}
	}
	t.Logf("%d records split into %d lines across 3 SIGKILLs, each once", len(seen), lines)
}
