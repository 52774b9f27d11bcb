package connector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// fileDestBufferKeep is the largest encode buffer kept between batches; a
// buffer grown beyond it by an unusually large batch is released.
const fileDestBufferKeep = 16 << 20

// fileDestination is the destination side of builtin:file. See the package
// documentation for its settings.
//
// It never changes bytes it did not write. What it wrote is known from its
// connector state (fileDestState): at every open, before the first write,
// it records the file's identity and the size it starts appending at; at a
// clean stop it records that the run ended. Only a run that did not end
// cleanly (a crash) can have left a partial last line, and only after the
// offset it recorded: the next open cuts that off, in that file and nowhere
// else. Any other file content that does not end with a newline is kept,
// and the records start on a new line after it.
type fileDestination struct {
	path  string
	sync  bool
	log   *zap.Logger
	state State
	// followSymlinks lets path be a symbolic link (follow-symlinks).
	followSymlinks bool
	// protected are conduit's own files, never written to.
	protected []ProtectedPath

	f       *os.File
	regular bool         // f is a regular file (not /dev/stdout, a pipe)
	id      fileIdentity // f's identity; known when regular and idOK
	idOK    bool
	// sameAsBefore: the connector state says the last run of this
	// destination wrote this very file, so offsets it recorded are offsets
	// in it.
	sameAsBefore bool
	// lastEnd is where the last run stopped writing, when it ended cleanly
	// and said so (fileDestState.StoppedAt); nil when unknown.
	lastEnd *int64
	from    int64 // the offset this run started appending at
	// size is the file's size after this run's last write, as far as its
	// own writes tell (regular files only).
	size int64
	// broken is set when a failed write left a partial line that could not
	// be removed: later writes would glue their records to it.
	broken error
	buf    []byte // encoded batch, reused
	// maxLastLine is maxLastLine, smaller in tests.
	maxLastLine int64
	ends        []int // ends[i]: length of buf after record i, reused
}

// fileIdentity tells one file from another across runs: the device and
// inode, and the birth time where the file system records one (inode
// numbers are reused soon after a file is deleted).
type fileIdentity struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Birth int64  `json:"birth,omitempty"`
}

// fileDestStateVersion is the version of fileDestState's JSON.
const fileDestStateVersion = 1

// fileDestState is what the file destination keeps in its connector state.
//
// WARNING: this is persisted (testdata/file_destination_state.json pins
// it). A change needs a new version, and reading the old one.
type fileDestState struct {
	Version int `json:"version"`
	fileIdentity
	// OwnedFrom is the offset from which the bytes of the file are this
	// destination's (the size of the file when the run opened it).
	OwnedFrom int64 `json:"owned_from"`
	// Stopped: the run ended cleanly, so it left no partial line.
	Stopped bool `json:"stopped,omitempty"`
	// StoppedAt is where a run that ended cleanly stopped writing (the
	// file's size then): a dedup mark there means every record it wrote
	// was acknowledged. Absent in states written before it was recorded,
	// which then say nothing of it.
	StoppedAt *int64 `json:"stopped_at,omitempty"`
}

// NewFileDestination builds the destination side of builtin:file. It only
// parses the settings; the file is created or opened by Open.
func NewFileDestination(cfg Config) (Destination, error) {
	s := plugin.NewSettings(cfg.Settings)
	path := s.Required("path", "the file to append records to")
	sync := s.Bool("sync", false)
	follow := s.Bool("follow-symlinks", false)
	sdkSettings(s, roleDestination)
	if err := s.Done(); err != nil {
		return nil, err
	}
	if err := protectedByName(path, cfg.Protected); err != nil {
		return nil, &SettingError{Setting: "path", Err: err}
	}
	return &fileDestination{path: path, sync: sync, log: loggerOf(cfg), state: cfg.State, maxLastLine: maxLastLine,
		followSymlinks: follow, protected: cfg.Protected}, nil
}

// Open creates the file and its directory if needed, opens it for
// appending, repairs a partial last line that an earlier run of this
// destination left when it died, and records where this run starts.
//
// It refuses, as a fatal error, a path that is or lies under one of
// conduit's own files (checked before anything is created, and again on
// the opened file, so a symbolic link or hard link swapped in between
// does not get through), and a symbolic link at path unless
// follow-symlinks is set.
func (d *fileDestination) Open(ctx context.Context) error {
	if err := checkProtectedPath(d.path, d.protected); err != nil {
		return err
	}
	if dir := filepath.Dir(d.path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("file destination: %w", err)
		}
	}
	// Checked before opening too: opening a block device for writing is
	// already more than this destination should do to one.
	if fi, err := os.Lstat(d.path); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 && !d.followSymlinks {
			return d.symlinkError()
		}
		if fi, err := os.Stat(d.path); err == nil {
			if err := checkAppendable(fi); err != nil {
				return fmt.Errorf("file destination %s: %w", d.path, err)
			}
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !d.followSymlinks {
		// A link planted between the check above and here is refused
		// by the open itself.
		flags |= openNoFollow
	}
	f, err := os.OpenFile(d.path, flags, 0o644)
	if err != nil {
		if !d.followSymlinks && isSymlinkRefusal(err) {
			return d.symlinkError()
		}
		return fmt.Errorf("file destination: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkProtectedFile(d.path, openedPath(f, d.path), fi, d.protected)
	}
	if err == nil {
		err = checkAppendable(fi)
	}
	if err == nil && fi.Mode().IsRegular() {
		err = d.claim(ctx, f, fi)
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, errProtected) {
			return err
		}
		return fmt.Errorf("file destination %s: %w", d.path, err)
	}
	d.f = f
	// Name the file people should look at; a relative path alone does not
	// say relative to what.
	abs, _ := filepath.Abs(d.path)
	d.log.Info("file destination appending OpenCDC JSON lines", zap.String("path", abs), zap.Bool("sync", d.sync))
	return nil
}

// symlinkError refuses a symbolic link at path: someone who may write to
// its directory could point it at any file conduit may write.
func (d *fileDestination) symlinkError() error {
	target, _ := os.Readlink(d.path)
	return cerrors.Fatal(fmt.Errorf("file destination path %s is a symbolic link (to %s): the destination does not follow one, "+
		"since whoever planted it chooses the file conduit appends to; set follow-symlinks: true on the destination to write through it", d.path, target))
}

// checkAppendable refuses what appending to would harm or cannot work:
// character devices (/dev/stdout, /dev/null, a terminal) and named pipes
// are fine, a block device is a disk whose data appending would overwrite.
// Each refusal is fatal: a restart finds the same thing at the path.
func checkAppendable(fi os.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return cerrors.Fatal(errors.New("is a directory; path must name a file"))
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return cerrors.Fatal(errors.New("is a block device; writing to it would overwrite the data on it"))
	case m&fs.ModeSocket != 0:
		return cerrors.Fatal(errors.New("is a unix socket; path must name a file"))
	}
	return nil
}

// claim decides, for the regular file f, which bytes are this
// destination's, repairs a torn last line among them, and records where
// this run starts before anything is written.
func (d *fileDestination) claim(ctx context.Context, f *os.File, fi os.FileInfo) error {
	d.regular = true
	d.id, d.idOK = identityOf(f, fi)
	var prev *fileDestState
	if d.state != nil && d.idOK {
		var err error
		if prev, err = d.loadState(ctx); err != nil {
			return err
		}
	}
	d.sameAsBefore = prev != nil && prev.fileIdentity == d.id
	if prev != nil && prev.Stopped {
		d.lastEnd = prev.StoppedAt
	}
	size := fi.Size()
	keep, endsWithNewline := size, true
	if size > 0 {
		r, err := d.openToRead(fi)
		if err == nil {
			defer r.Close()
		}
		if err != nil {
			// Without reading, nothing is cut and no newline is added: the
			// file is appended to as it is.
			d.log.Warn("file destination: cannot read the file to check how it ends; appending to it as it is",
				zap.String("path", d.path), zap.Error(err))
		} else {
			if prev != nil && prev.fileIdentity == d.id && !prev.Stopped && prev.OwnedFrom <= size {
				// The last run died: the bytes after the last newline it
				// wrote are a partial line of records that were never
				// acknowledged, so they come again.
				if keep, err = lineEnd(r, prev.OwnedFrom, size); err != nil {
					return err
				}
				if keep < size && !startsAsOurLine(r, keep, size) {
					// Someone else appended after this destination's last
					// line: their bytes stay.
					d.log.Warn("file destination: the partial last line was not written by this destination; it is kept",
						zap.String("path", d.path), zap.Int64("offset", keep), zap.Int64("bytes", size-keep))
					keep = size
				}
				if keep < size {
					if err := d.cut(f, keep, size); err != nil {
						return err
					}
				}
			}
			if keep > 0 {
				var last [1]byte
				if _, err := r.ReadAt(last[:], keep-1); err != nil {
					return fmt.Errorf("reading its last byte: %w", err)
				}
				endsWithNewline = last[0] == '\n'
			}
		}
	}
	d.from, d.size = keep, keep
	if d.state != nil && d.idOK {
		if err := d.saveState(ctx, false); err != nil {
			return err
		}
	}
	if !endsWithNewline {
		// Not this destination's bytes (or ones it may not cut): keep them
		// and start the records on a line of their own.
		d.log.Warn("file destination: the file does not end with a newline and its last line was not written by this destination; "+
			"it is kept as it is and the records are appended after a newline",
			zap.String("path", d.path), zap.Int64("size", keep))
		n, err := f.Write([]byte{'\n'})
		d.size += int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

// errReplaced says that the file at the path is not the one the
// destination writes.
var errReplaced = errors.New("the file was replaced while it was being opened")

// openToRead opens the destination's path for reading back what it
// wrote, and checks that it is the file it writes (fi): someone who may
// write the directory could have put another file, a link or a named pipe
// there since. It neither follows a symbolic link (unless follow-symlinks
// is set) nor waits on a named pipe.
func (d *fileDestination) openToRead(fi os.FileInfo) (*os.File, error) {
	flags := os.O_RDONLY | openNonBlock
	if !d.followSymlinks {
		flags |= openNoFollow
	}
	r, err := os.OpenFile(d.path, flags, 0)
	if err != nil {
		if !d.followSymlinks && isSymlinkRefusal(err) {
			return nil, errReplaced
		}
		return nil, err
	}
	if rfi, err := r.Stat(); err != nil || !os.SameFile(fi, rfi) {
		_ = r.Close()
		return nil, errReplaced
	}
	return r, nil
}

// lineEnd returns the offset just after the last newline in r's bytes
// [from, size), or from when there is none.
func lineEnd(r io.ReaderAt, from, size int64) (int64, error) {
	buf := make([]byte, min(64<<10, size-from))
	for off := size; off > from; {
		n := min(int64(len(buf)), off-from)
		off -= n
		if _, err := r.ReadAt(buf[:n], off); err != nil {
			return 0, fmt.Errorf("reading its end: %w", err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return off + int64(i) + 1, nil
		}
	}
	return from, nil
}

// LastPosition implements PositionReporter: the position of the record on
// the file's last line, read back after Open repaired a torn one. Only a
// regular file can be read back. A last line this destination did not
// write (foreign content appended after its records) reports nil: the
// engine then writes the records of its last intents again rather than
// risk losing one.
func (d *fileDestination) LastPosition(context.Context) (record.Position, bool, error) {
	head, ok, err := d.lastLine()
	if head == nil || err != nil {
		return nil, ok, err
	}
	return positionOfLine(head), true, nil
}

// Offset implements HoldingReporter: the file's size, where the next line
// begins. Only a regular file whose identity the connector state keeps can
// be read back at the next open and known to be the same file.
func (d *fileDestination) Offset() (int64, bool) {
	if d.f == nil || !d.regular || d.state == nil || !d.idOK {
		return 0, false
	}
	return d.size, true
}

// HeldSince implements HoldingReporter: it reads the lines from offset to
// the end the run opened at (a torn last line already cut off) and visits
// those this destination wrote. Lines that are not its own (foreign
// content) are passed over. A file other than the one the last run wrote
// (replaced, rotated) holds nothing of it: ok is false, unless the last run
// ended cleanly exactly at offset - it wrote nothing after it, so there is
// nothing to tell.
func (d *fileDestination) HeldSince(_ context.Context, offset int64, visit func(pos record.Position, source string) error) (bool, error) {
	if _, ok := d.Offset(); !ok {
		return false, nil
	}
	if !d.sameAsBefore {
		return d.lastEnd != nil && *d.lastEnd == offset, nil
	}
	if offset >= d.size {
		// Cut shorter by someone since (the bytes are gone) or nothing
		// written after offset.
		return true, nil
	}
	fi, err := d.f.Stat()
	if err != nil {
		return false, fmt.Errorf("file destination %s: read back what it wrote: %w", d.path, err)
	}
	r, err := d.openToRead(fi)
	if errors.Is(err, errReplaced) {
		// What is at the path is not what it writes.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file destination %s: read back what it wrote: %w", d.path, err)
	}
	defer r.Close()
	if err := eachLineHead(io.NewSectionReader(r, offset, d.size-offset), func(head []byte) error {
		if pos := positionOfLine(head); pos != nil {
			return visit(pos, sourceOfLine(head))
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("file destination %s: read back what it wrote: %w", d.path, err)
	}
	return true, nil
}

// eachLineHead calls fn with the first maxPositionLine bytes of every
// newline-terminated line of r; a last line without its newline is not
// one.
func eachLineHead(r io.Reader, fn func(head []byte) error) error {
	br := bufio.NewReaderSize(r, 256<<10)
	head := make([]byte, 0, 4096)
	for {
		head = head[:0]
		for {
			chunk, err := br.ReadSlice('\n')
			if room := maxPositionLine - len(head); room > 0 {
				head = append(head, chunk[:min(room, len(chunk))]...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			break
		}
		if err := fn(head); err != nil {
			return err
		}
	}
}

// SyncsWrites implements SyncReporter: the lines are on the disk when
// Write returns only with the sync setting.
func (d *fileDestination) SyncsWrites() bool { return d.sync }

// LastSource implements SourceReporter: the conduit.source.connector.id
// of the record on the file's last line, "" when that line says none (or
// is not this destination's).
func (d *fileDestination) LastSource(context.Context) (string, error) {
	head, _, err := d.lastLine()
	if head == nil || err != nil || positionOfLine(head) == nil {
		return "", err
	}
	return sourceOfLine(head), nil
}

// lastLine returns the beginning of the file's last complete line (up to
// maxPositionLine bytes); nil when there is none, and ok false when the
// file cannot be read back (not a regular file).
func (d *fileDestination) lastLine() (head []byte, ok bool, err error) {
	if d.f == nil || !d.regular {
		return nil, false, nil
	}
	end := d.size
	if end == 0 {
		return nil, true, nil
	}
	fi, err := d.f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("file destination %s: read back its last line: %w", d.path, err)
	}
	r, err := d.openToRead(fi)
	if errors.Is(err, errReplaced) {
		// What is at the path is not what it writes: it cannot tell.
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("file destination %s: read back its last line: %w", d.path, err)
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], end-1); err != nil {
		return nil, false, fmt.Errorf("file destination %s: read back its last line: %w", d.path, err)
	}
	if last[0] != '\n' {
		return nil, true, nil
	}
	// The search for the line's start is bounded, so that opening a huge
	// file of foreign bytes without newlines does not read all of it. A
	// last line longer than that names no position: its records are
	// written again rather than risk a wrong one.
	from := max(0, end-1-d.maxLastLine)
	start, err := lineEnd(r, from, end-1)
	if err != nil {
		return nil, false, fmt.Errorf("file destination %s: read back its last line: %w", d.path, err)
	}
	if start == from && from > 0 {
		return nil, true, nil
	}
	head = make([]byte, min(end-1-start, maxPositionLine))
	if _, err := r.ReadAt(head, start); err != nil {
		return nil, false, fmt.Errorf("file destination %s: read back its last line: %w", d.path, err)
	}
	return head, true, nil
}

// sourceOfLine returns the conduit.source.connector.id in the metadata of
// a line this destination wrote (record.AppendJSON writes the metadata
// right after the position and the operation), "" when there is none or
// the line is cut before its metadata ends.
func sourceOfLine(line []byte) string {
	i := bytes.Index(line, []byte(`,"metadata":`))
	if i < 0 {
		return ""
	}
	var md map[string]string
	if err := json.NewDecoder(bytes.NewReader(line[i+len(`,"metadata":`):])).Decode(&md); err != nil {
		return ""
	}
	return md[record.MetadataSourceConnectorID]
}

// maxLastLine bounds how far back LastPosition looks for the start of the
// last line: beyond the largest message a connector may send.
const maxLastLine = 64 << 20

// maxPositionLine bounds what LastPosition reads of the last line: the
// position comes first, and a position longer than this is not one a
// source writes.
const maxPositionLine = 64 << 10

// positionOfLine returns the position a line this destination wrote begins
// with, or nil for a line it did not write.
func positionOfLine(line []byte) record.Position {
	rest, ok := bytes.CutPrefix(line, []byte(lineStart+`"`))
	if !ok {
		return nil
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return nil
	}
	pos, err := base64.StdEncoding.AppendDecode(nil, rest[:i])
	if err != nil {
		return nil
	}
	return record.Position(pos)
}

// lineStart is how every line this destination writes begins
// (record.AppendJSON).
const lineStart = `{"position":`

// startsAsOurLine reports whether the bytes [from, size) begin as a line
// this destination writes would: a crash cuts a line short, it does not
// change how it starts.
func startsAsOurLine(r io.ReaderAt, from, size int64) bool {
	buf := make([]byte, min(int64(len(lineStart)), size-from))
	if _, err := r.ReadAt(buf, from); err != nil {
		return false
	}
	return strings.HasPrefix(lineStart, string(buf))
}

// cut removes the partial line [keep, size) that this destination wrote.
func (d *fileDestination) cut(f *os.File, keep, size int64) error {
	d.log.Warn("file destination: cutting off a partial last line that this destination left when its process died while writing; its records are written again",
		zap.String("path", d.path), zap.Int64("offset", keep), zap.Int64("bytes", size-keep))
	if err := f.Truncate(keep); err != nil {
		return err
	}
	return f.Sync()
}

func (d *fileDestination) loadState(ctx context.Context) (*fileDestState, error) {
	data, err := d.state.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading what earlier runs wrote to it: %w", err)
	}
	if data == nil {
		return nil, nil
	}
	var st fileDestState
	if err := json.Unmarshal(data, &st); err != nil || st.Version != fileDestStateVersion {
		// Then nothing is known to be this destination's, which only means
		// nothing is cut.
		d.log.Warn("file destination: ignoring an unreadable record of what earlier runs wrote",
			zap.String("path", d.path), zap.ByteString("state", data), zap.Error(err))
		return nil, nil
	}
	return &st, nil
}

func (d *fileDestination) saveState(ctx context.Context, stopped bool) error {
	st := fileDestState{Version: fileDestStateVersion, fileIdentity: d.id, OwnedFrom: d.from, Stopped: stopped}
	if stopped {
		end := d.size
		st.StoppedAt = &end
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = d.state.Save(ctx, data)
	}
	if err != nil {
		return fmt.Errorf("recording where this run writes: %w", err)
	}
	return nil
}

// Write appends one OpenCDC JSON line per record with a single write call
// (and an fsync when the sync setting is on), made only if the write guard
// in ctx still allows it. A record that cannot be encoded stops the batch:
// the records before it are written.
func (d *fileDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if d.f == nil {
		return 0, fmt.Errorf("file destination %s: write called before a successful open", d.path)
	}
	if d.broken != nil {
		return 0, d.broken
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
		// After the encoding, which takes time: see pkg/writeguard.
		if err := writeguard.Check(ctx); err != nil {
			return 0, fmt.Errorf("file destination %s: %w", d.path, err)
		}
		n, err := d.f.Write(buf)
		d.size += int64(n)
		if err != nil {
			// Lines that made it completely are written; report those.
			done := 0
			for done < len(ends) && ends[done] <= n {
				done++
			}
			whole := 0
			if done > 0 {
				whole = ends[done-1]
			}
			if n > whole {
				d.dropPartialLine(int64(n - whole))
			}
			return done, fmt.Errorf("file destination %s: %w", d.path, err)
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

// dropPartialLine removes the last partial bytes of a failed write (a full
// disk can stop a write in the middle of a line), so that the next write
// does not glue its first record to them. When that is not possible, the
// destination refuses further writes; the next open repairs the file.
func (d *fileDestination) dropPartialLine(partial int64) {
	err := errors.New("not a regular file")
	if d.regular {
		var fi os.FileInfo
		if fi, err = d.f.Stat(); err == nil && fi.Size() != d.size {
			err = fmt.Errorf("the file is %d bytes, not the %d this destination wrote: someone else writes to it too", fi.Size(), d.size)
		}
		if err == nil {
			if err = d.f.Truncate(d.size - partial); err == nil {
				d.size -= partial
				return
			}
		}
	}
	d.broken = fmt.Errorf("file destination %s: a failed write left %d bytes of a partial line at its end that could not be removed (%v); "+
		"it refuses to write after them until the pipeline restarts", d.path, partial, err)
}

// Teardown syncs and closes the file, and records that the run ended
// cleanly. Nothing is buffered between Write calls; the sync makes a
// graceful stop durable even without the sync setting, at the cost of one
// fsync per run.
func (d *fileDestination) Teardown(ctx context.Context) error {
	if d.f == nil {
		return nil
	}
	f := d.f
	d.f = nil
	var syncErr error
	if d.regular {
		// Only regular files: syncing /dev/stdout or a pipe fails with EINVAL.
		syncErr = f.Sync()
	}
	closeErr := f.Close()
	if d.state != nil && d.idOK && syncErr == nil && closeErr == nil && d.broken == nil {
		// Not recording it only means the next open looks for a partial
		// line after this run's offset, where there is none.
		if err := d.saveState(ctx, true); err != nil {
			d.log.Warn("file destination: could not record a clean stop", zap.String("path", d.path), zap.Error(err))
		}
	}
	if closeErr != nil {
		return fmt.Errorf("file destination: %w", closeErr)
	}
	if syncErr != nil {
		return fmt.Errorf("file destination: sync %s: %w", d.path, syncErr)
	}
	return nil
}
