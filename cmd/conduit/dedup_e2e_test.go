package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/store"
)

// TestDedupEntriesOfSequenceNumbersAreSmall runs the binary's generator ->
// file pipeline with dedup on, SIGKILLs it while records move, and reads
// the dedup entries it left: one per batch written or about to be, each a
// few bytes, since the generator's positions are sequence numbers. Every
// batch's entry is synced before the batch is written, so its size is what
// dedup costs the records' path; a batch of 1,024 positions used to be an
// entry of about 3.2 KB.
func TestDedupEntriesOfSequenceNumbersAreSmall(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, `version: "2.2"
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
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`)
	w.write("conduit.yml", "log:\n  format: json\ndedup:\n  enabled: true\n")
	out := filepath.Join(w.dir, "out.jsonl")
	// A kill can land when every batch was acknowledged and its entry
	// deleted (the source, not the file, is the slower one under the race
	// detector): the pipeline is started again and killed again, a few
	// times at most, until entries were left.
	var entries, largest int
	for kill := 0; kill < 5 && entries == 0; kill++ {
		p := w.start("run")
		// Well past the first batches, which are small while the engine's
		// batches grow to their full size.
		waitForBytes(t, p, out, fileSize(out)+4<<20)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		n, l := dedupEntries(t, filepath.Join(w.dir, "conduit.db"))
		entries, largest = entries+n, max(largest, l)
	}
	t.Logf("%d dedup entries after the kills, the largest %d bytes", entries, largest)
	if entries == 0 {
		t.Fatal("no dedup entry after five kills while records moved: the batches in flight should have theirs")
	}
	if largest > 64 {
		t.Errorf("a dedup entry of the generator's positions takes %d bytes, want at most 64 (one position and a run)", largest)
	}
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
