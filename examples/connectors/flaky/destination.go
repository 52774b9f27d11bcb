package main

import (
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
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return sdk.Fatal(fmt.Errorf("flaky destination %q: path: %w", d.id, err))
	}
	d.f = f
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
