package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conduitry/conduit/pkg/sdk"
)

// destination appends every record as an OpenCDC JSON line to path (or
// discards it without one) and fails as its fail.* settings say.
type destination struct {
	proc process

	id   string
	path string // "" = discard
	in   *injector

	f   *os.File
	buf []byte // the lines of a batch, reused
}

func newDestination(proc process) *destination { return &destination{proc: proc} }

// Configure reads path and the fail.* settings and, with fail.state, the
// failures of earlier runs.
func (d *destination) Configure(_ context.Context, cfg sdk.Config) error {
	set := sdk.NewSettings(cfg.Settings)
	d.path = set.String("path", "")
	p := parsePolicy(set, roleDestination)
	if err := set.Err(); err != nil {
		return sdk.Fatal(err)
	}
	in, err := newInjector(p, d.proc, cfg, roleDestination)
	if err != nil {
		return sdk.Fatal(err)
	}
	d.id, d.in = cfg.ConnectorID, in
	return nil
}

// Open opens (creates) the file.
func (d *destination) Open(context.Context) error {
	fmt.Fprintf(d.proc.stderr, "flaky destination %q: opening; %s\n", d.id, d.in.p.describe())
	if d.in.active(opOpen) {
		if _, fail := d.in.plan(1); fail {
			return d.in.fail(opOpen, d.in.openAttempt())
		}
		if err := d.in.pass(1); err != nil {
			return sdk.Fatal(err)
		}
	}
	if d.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(d.path), 0o755); err != nil {
		// A path that cannot be made will not be makeable after a restart
		// either; a human has to fix it.
		return sdk.Fatal(fmt.Errorf("flaky destination %q: path: %w", d.id, err))
	}
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return sdk.Fatal(fmt.Errorf("flaky destination %q: path: %w", d.id, err))
	}
	if err := d.cutTornLine(f); err != nil {
		_ = f.Close()
		return err
	}
	d.f = f
	return nil
}

// lineStart is how every line this destination writes begins.
const lineStart = `{"position":`

// cutTornLine removes a partial last line that a process of this
// destination left when it was killed in the middle of a write, so that
// the next line does not join it: the runtime delivers those records again
// (they were never acknowledged). A file whose end is not such a line -
// someone else's text without a final newline - is left as it is, and
// the destination refuses to write after it.
func (d *destination) cutTornLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return sdk.Transient(fmt.Errorf("flaky destination %q: %w", d.id, err))
	}
	if fi.Size() == 0 {
		return nil
	}
	// A partial line is at most one batch; 4 MiB is far more.
	tail := make([]byte, min(fi.Size(), 4<<20))
	start := fi.Size() - int64(len(tail))
	if _, err := f.ReadAt(tail, start); err != nil {
		return sdk.Transient(fmt.Errorf("flaky destination %q: reading the end of %s: %w", d.id, d.path, err))
	}
	if tail[len(tail)-1] == '\n' {
		return nil
	}
	lineAt := bytes.LastIndexByte(tail, '\n') + 1
	if (lineAt == 0 && start > 0) || !bytes.HasPrefix(tail[lineAt:], []byte(lineStart)) {
		return sdk.Fatal(fmt.Errorf("flaky destination %q: %s does not end with a line break and its last line is not one this destination wrote; "+
			"refusing to append to it (end it with a line break or choose another path)", d.id, d.path))
	}
	cut := start + int64(lineAt)
	if err := f.Truncate(cut); err != nil {
		return sdk.Transient(fmt.Errorf("flaky destination %q: removing the partial last line of %s: %w", d.id, d.path, err))
	}
	fmt.Fprintf(d.proc.stderr, "flaky destination %q: removed a partial last line of %d bytes (a write cut short); its records come again\n",
		d.id, fi.Size()-cut)
	return nil
}

// Write appends the records before the failure point (all of them when no
// failure is due) with one write call, and reports how many it wrote. With
// fail.on write, a batch that reaches the failure point is a partial write:
// the records before it are written and acknowledged, the rest is
// delivered again after the restart.
func (d *destination) Write(_ context.Context, recs []sdk.Record) (int, error) {
	n, failing := len(recs), false
	if d.in.active(opWrite) {
		pass, fail := d.in.plan(int64(n))
		n, failing = int(pass), fail
	}
	d.buf = d.buf[:0]
	for i := range recs[:n] {
		line, err := sdk.AppendJSON(d.buf, &recs[i])
		if err != nil {
			// This record can never be written: fatal (422). The ones
			// before it still are.
			if werr := d.flush(); werr != nil {
				return 0, werr
			}
			_ = d.in.pass(int64(i))
			return i, sdk.WithCode(fmt.Errorf("flaky destination %q: record at position %s: %w", d.id, recs[i].Position, err),
				sdk.CodeUnprocessable)
		}
		d.buf = append(line, '\n')
	}
	if err := d.flush(); err != nil {
		return 0, err
	}
	if d.in.active(opWrite) {
		_ = d.in.pass(int64(n)) // counts in memory for write; nothing to save
	}
	if failing {
		err := d.in.fail(opWrite, fmt.Sprintf("position %s", recs[n].Position))
		if d.in.p.record {
			err = sdk.ForRecord(recs[n].Position, err)
		}
		return n, err
	}
	return n, nil
}

// flush writes buf to the file. A failed write may have written part of
// the batch; none of it is reported as written, so the runtime delivers it
// again (duplicates rather than losses).
func (d *destination) flush() error {
	if d.f == nil || len(d.buf) == 0 {
		return nil
	}
	if _, err := d.f.Write(d.buf); err != nil {
		return sdk.Transient(fmt.Errorf("flaky destination %q: %w", d.id, err))
	}
	return nil
}

// Teardown closes the file.
func (d *destination) Teardown(context.Context) error {
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("flaky destination %q: close: %w", d.id, err)
	}
	return nil
}
