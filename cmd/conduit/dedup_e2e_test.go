package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/store"
)

// generatorPipeline is a generator -> destination pipeline writing
// ./out.jsonl as fast as it can.
func generatorPipeline(destination string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: gen
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          rate: 0
          format.type: structured
          format.options.id: int
          format.options.name: string
          operations: create
      - id: out
        type: destination
        plugin: %s
        settings:
          path: ./out.jsonl
`, destination)
}

// killWhileMoving starts the workspace's conduit, SIGKILLs it once the
// destination grew by 4 MiB (well past the first batches, which are small
// while the engine's batches grow to their full size), and returns the
// dedup keys the store then holds and the size of the largest.
func killWhileMoving(t *testing.T, w *workspace) (keys, largest int) {
	t.Helper()
	p := w.start("run")
	waitForBytes(t, p, filepath.Join(w.dir, "out.jsonl"), fileSize(filepath.Join(w.dir, "out.jsonl"))+4<<20)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	return dedupEntries(t, filepath.Join(w.dir, "conduit.db"))
}

// TestDedupEntriesOfSequenceNumbersAreSmall runs the binary's generator ->
// destination pipeline with dedup on, SIGKILLs it while records move, and
// reads the dedup keys it left.
//
// The file destination reads back what it wrote: nothing is recorded on
// its records' path, and the store holds its mark and at most the entry a
// start read back of what the kill before it left in flight.
//
// The standalone example destination cannot: each batch it wrote is
// remembered before its source is acknowledged, and those entries are what
// dedup costs its records' path. The generator's positions are sequence
// numbers, so each entry is a few bytes; a batch of 1,024 positions used to
// be an entry of about 3.2 KB.
func TestDedupEntriesOfSequenceNumbersAreSmall(t *testing.T) {
	t.Parallel()
	t.Run("builtin:file", func(t *testing.T) {
		t.Parallel()
		w := newWorkspace(t, generatorPipeline("builtin:file"))
		w.write("conduit.yml", "log:\n  format: json\ndedup:\n  enabled: true\n")
		// The first run starts with nothing to read back; the second reads
		// back what the first had in flight, as one entry that is deleted
		// once the saved position passes it, which may still be ahead when
		// the kill lands (position saves lag behind on a loaded machine).
		for kill, most := range []int{1, 2} {
			keys, _ := killWhileMoving(t, w)
			if keys < 1 || keys > most {
				t.Fatalf("kill %d: %d dedup keys, want the file destination's mark and at most %d entry read back", kill+1, keys, most-1)
			}
		}
	})
	t.Run("standalone destination", func(t *testing.T) {
		t.Parallel()
		w := standaloneWorkspace(t, generatorPipeline("standalone:flaky"))
		w.write("conduit.yml", "log:\n  format: json\ndedup:\n  enabled: true\n")
		// A kill can land when every batch was acknowledged and its entry
		// deleted (an entry lives from the end of its batch's write to the
		// position save after it, a short window while the next batch is
		// written): the pipeline is started again and killed again, ten
		// times at most, until entries were left.
		var entries, largest int
		for kill := 0; kill < 10 && entries == 0; kill++ {
			n, l := killWhileMoving(t, w)
			entries, largest = entries+n, max(largest, l)
		}
		t.Logf("%d dedup entries after the kills, the largest %d bytes", entries, largest)
		if entries == 0 {
			t.Fatal("no dedup entry after ten kills while records moved: the batches in flight should have theirs")
		}
		if largest > 64 {
			t.Errorf("a dedup entry of the generator's positions takes %d bytes, want at most 64 (one position and a run)", largest)
		}
	})
}

// dedupEntries opens the store of a conduit that is not running and
// returns how many dedup entries it holds and the size of the largest.
func dedupEntries(t *testing.T, path string) (entries, largest int) {
	t.Helper()
	db, err := store.OpenBadger(context.Background(), path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Scan(context.Background(), []byte(store.PrefixDedup), func(_, value []byte) error {
		entries++
		largest = max(largest, len(value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, largest
}
