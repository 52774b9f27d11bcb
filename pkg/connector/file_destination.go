package connector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	if err := d.dropTornLine(); err != nil {
		return fmt.Errorf("file destination %s: %w", d.path, err)
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

// dropTornLine cuts off a last line without its newline. Only a process
// that died in the middle of a write leaves one (a large write can stop
// part way when the process is killed), and its records were never
// acknowledged, so they are delivered again: appending after the torn
// bytes would glue them to the next record and corrupt both lines.
func (d *fileDestination) dropTornLine() error {
	f, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return err
	}
	// Look for the last newline from the end, a chunk at a time.
	buf := make([]byte, 64<<10)
	end := fi.Size()
	for off := end; off > 0; {
		n := int64(len(buf))
		if off < n {
			n = off
		}
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := off + int64(i) + 1
			if keep == end {
				return nil // the file ends with a whole line
			}
			return d.truncate(f, keep, end)
		}
	}
	return d.truncate(f, 0, end)
}

func (d *fileDestination) truncate(f *os.File, keep, size int64) error {
	d.log.Warn("file destination: cutting off a partial last line left by a process that died while writing; its records are written again",
		zap.String("path", d.path), zap.Int64("bytes", size-keep))
	if err := f.Truncate(keep); err != nil {
		return err
	}
	return f.Sync()
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
