package connector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

// fileDestBufferKeep is the largest encode buffer kept between batches; a
// buffer grown beyond it by an unusually large batch is released.
const fileDestBufferKeep = 16 << 20

// fileDestination is the destination side of builtin:file. See the package
// documentation for its settings.
type fileDestination struct {
	path string
	sync bool
	log  *zap.Logger

	f    *os.File
	buf  []byte // encoded batch, reused
	ends []int  // ends[i]: length of buf after record i, reused
}

// NewFileDestination builds the destination side of builtin:file. It only
// parses the settings; the file is created or opened by Open.
func NewFileDestination(cfg Config) (Destination, error) {
	s := plugin.NewSettings(cfg.Settings)
	path := s.Required("path", "the file to append records to")
	sync := s.Bool("sync", false)
	sdkSettings(s, roleDestination)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return &fileDestination{path: path, sync: sync, log: loggerOf(cfg)}, nil
}

// Open creates the file and its directory if needed and opens it for
// appending.
func (d *fileDestination) Open(context.Context) error {
	if dir := filepath.Dir(d.path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("file destination: %w", err)
		}
	}
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("file destination: %w", err)
	}
	d.f = f
	// Name the file people should look at; a relative path alone does not
	// say relative to what.
	abs, _ := filepath.Abs(d.path)
	d.log.Info("file destination appending OpenCDC JSON lines", zap.String("path", abs), zap.Bool("sync", d.sync))
	return nil
}

// Write appends one OpenCDC JSON line per record with a single write call
// (and an fsync when the sync setting is on). A record that cannot be
// encoded stops the batch: the records before it are written.
func (d *fileDestination) Write(_ context.Context, batch []record.Record) (int, error) {
	if d.f == nil {
		return 0, fmt.Errorf("file destination %s: write called before a successful open", d.path)
	}
	buf, ends := d.buf[:0], d.ends[:0]
	var encErr error
	for i := range batch {
		mark := len(buf)
		var err error
		if buf, err = record.AppendJSON(buf, &batch[i]); err != nil {
			buf = buf[:mark]
			encErr = fmt.Errorf("file destination %s: record %d (position %q): %w", d.path, i, batch[i].Position, err)
			break
		}
		buf = append(buf, '\n')
		ends = append(ends, len(buf))
	}
	if cap(buf) <= fileDestBufferKeep {
		d.buf = buf
	} else {
		d.buf = nil
	}
	d.ends = ends

	if len(buf) > 0 {
		n, err := d.f.Write(buf)
		if err != nil {
			// Lines that made it completely are written; report those.
			done := 0
			for done < len(ends) && ends[done] <= n {
				done++
			}
			return done, fmt.Errorf("file destination: %w", err)
		}
		if d.sync {
			if err := d.f.Sync(); err != nil {
				// The data may or may not be durable; claim nothing.
				return 0, fmt.Errorf("file destination: sync %s: %w", d.path, err)
			}
		}
	}
	if encErr != nil {
		return len(ends), encErr
	}
	return len(batch), nil
}

// Teardown syncs and closes the file. Nothing is buffered between Write
// calls; the sync makes a graceful stop durable even without the sync
// setting, at the cost of one fsync per run.
func (d *fileDestination) Teardown(context.Context) error {
	if d.f == nil {
		return nil
	}
	f := d.f
	d.f = nil
	var syncErr error
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		// Only regular files: syncing /dev/stdout or a pipe fails with EINVAL.
		syncErr = f.Sync()
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("file destination: %w", err)
	}
	if syncErr != nil {
		return fmt.Errorf("file destination: sync %s: %w", d.path, syncErr)
	}
	return nil
}
