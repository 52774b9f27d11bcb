//go:build unix

package connector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
)

// TestFileDestinationReadsBackOnlyItsOwnFile: a named pipe or a link put
// at the path after Open (by someone who may write the directory) is not
// read: the destination cannot tell what it holds, and it does not wait
// on the pipe.
func TestFileDestinationReadsBackOnlyItsOwnFile(t *testing.T) {
	for _, swap := range []string{"named pipe", "symbolic link"} {
		t.Run(swap, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.jsonl")
			d, _ := fileDestRun(t, path, &memState{})
			defer crash(t, d)
			writeRecords(t, d, "1")
			if err := os.Rename(path, path+".moved"); err != nil {
				t.Fatal(err)
			}
			if swap == "named pipe" {
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(path+".moved", path); err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 1)
			go func() {
				ok, err := d.HeldSince(context.Background(), 0, func(record.Position, string) error { return nil })
				last, lastOK, lastErr := d.LastPosition(context.Background())
				done <- fmt.Sprint(ok, err, last, lastOK, lastErr)
			}()
			select {
			case got := <-done:
				if got != fmt.Sprint(false, nil, record.Position(nil), false, nil) {
					t.Fatalf("HeldSince and LastPosition = %s; want both unable to tell", got)
				}
			case <-time.After(clocktest.Timeout):
				t.Fatal("reading back blocked on what was put at the path")
			}
		})
	}
}
