package connector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

const (
	// filePollInterval is how often a source at the end of its file looks
	// for appended data.
	filePollInterval = 100 * time.Millisecond
	// fileReadBuffer is the initial read buffer; it grows for long lines.
	fileReadBuffer = 1 << 20
	// fileMaxLine is the longest line the file source accepts (without its
	// newline), so that a file without newlines cannot exhaust memory.
	fileMaxLine = 16 << 20
)

// fileSource is the source side of builtin:file. See the package
// documentation for its settings.
type fileSource struct {
	path   string
	nodeID string // Conduit's name of this source, for conduit.source.connector.id
	log    *zap.Logger

	// Injected for tests.
	pollInterval time.Duration
	after        func(time.Duration) <-chan time.Time
	now          func() time.Time
	maxLine      int

	f *os.File
	// buf[start:end] holds bytes read from the file but not yet emitted;
	// offset is the file offset of buf[start], readOffset that of buf[end].
	buf        []byte
	start, end int
	offset     int64
	readOffset int64
	lineEnds   []int // scratch: ends of the lines found in buf, reused
}

// NewFileSource builds the source side of builtin:file. It only parses the
// settings; the file is opened by Open.
func NewFileSource(cfg Config) (Source, error) {
	s := plugin.NewSettings(cfg.Settings)
	path := s.Required("path", "the file to read")
	sdkSettings(s, roleSource)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return &fileSource{
		log:          loggerOf(cfg),
		path:         path,
		nodeID:       cfg.NodeID(),
		pollInterval: filePollInterval,
		after:        time.After,
		now:          time.Now,
		maxLine:      fileMaxLine,
	}, nil
}

// Open opens the file and seeks to pos, the byte offset just after the last
// line the pipeline processed (nil: the start of the file).
func (s *fileSource) Open(_ context.Context, pos record.Position) error {
	var offset int64
	if len(pos) > 0 {
		n, err := strconv.ParseInt(string(pos), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("file source %s: position %q is not a byte offset (want decimal digits)", s.path, pos)
		}
		offset = n
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("file source: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("file source %s: not a regular file", s.path)
	}
	if fi.Size() < offset {
		f.Close()
		return fmt.Errorf("file source %s: position %d is beyond the end of the file (%d bytes): was it truncated or replaced?",
			s.path, offset, fi.Size())
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("file source: %w", err)
	}
	s.f = f
	s.offset, s.readOffset = offset, offset
	s.buf = make([]byte, min(fileReadBuffer, s.maxLine+1))
	s.start, s.end = 0, 0
	abs, _ := filepath.Abs(s.path)
	s.log.Info("file source reading lines", zap.String("path", abs), zap.Int64("offset", offset))
	return nil
}

// Read returns the complete lines that are buffered or can be read now
// (at least one). At the end of the file it polls for appended data until
// ctx is done. A last line without its newline is held back until the
// newline arrives.
func (s *fileSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if s.f == nil {
		return 0, fmt.Errorf("file source %s: %w", s.path, errReadBeforeOpen)
	}
	if len(batch) == 0 {
		return 0, fmt.Errorf("file source %s: read called with an empty batch", s.path)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if n := s.emit(batch); n > 0 {
			return n, nil
		}
		got, err := s.fill()
		if err != nil {
			return 0, err
		}
		if got {
			continue
		}
		if err := s.checkFile(); err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.after(s.pollInterval):
		}
	}
}

// emit turns the complete lines in buf into records, as many as fit in batch.
func (s *fileSource) emit(batch []record.Record) int {
	s.lineEnds = s.lineEnds[:0]
	lineBytes := 0
	for p := s.start; len(s.lineEnds) < len(batch); {
		i := bytes.IndexByte(s.buf[p:s.end], '\n')
		if i < 0 {
			break
		}
		p += i + 1
		s.lineEnds = append(s.lineEnds, p)
		lineBytes += i
	}
	n := len(s.lineEnds)
	if n == 0 {
		return 0
	}

	readAt := strconv.FormatInt(s.now().UnixNano(), 10)
	digits := len(strconv.AppendInt(make([]byte, 0, 24), s.offset+int64(s.lineEnds[n-1]-s.start), 10))
	slab := make([]byte, 0, lineBytes+2*digits*n)
	for i, end := range s.lineEnds {
		r := &batch[i]
		line := s.buf[s.start : end-1]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		lineStart := s.offset
		s.offset += int64(end - s.start)
		s.start = end

		mark := len(slab)
		slab = append(slab, line...)
		payload := slab[mark:len(slab):len(slab)]
		mark = len(slab)
		slab = strconv.AppendInt(slab, s.offset, 10)
		pos := slab[mark:len(slab):len(slab)]
		mark = len(slab)
		slab = strconv.AppendInt(slab, lineStart, 10)
		key := slab[mark:len(slab):len(slab)]

		md := r.Metadata
		if md == nil {
			md = make(record.Metadata, 4)
		}
		s.setMetadata(md, readAt)
		if len(md) != 3 {
			// Keys left over from a processor; see generatorSource.fill.
			clear(md)
			s.setMetadata(md, readAt)
		}

		*r = record.Record{
			Position:  pos,
			Operation: record.OperationCreate,
			Metadata:  md,
			Key:       record.RawData(key),
			Payload:   record.Change{After: record.RawData(payload)},
		}
	}
	return n
}

// StampsSourceMetadata tells the engine that every record read carries
// opencdc.readAt and conduit.source.connector.id already.
func (s *fileSource) StampsSourceMetadata() {}

func (s *fileSource) setMetadata(md record.Metadata, readAt string) {
	md[record.MetadataFilePath] = s.path
	md[record.MetadataReadAt] = readAt
	md[record.MetadataSourceConnectorID] = s.nodeID
}

// fill reads more of the file into buf. It reports whether it got any bytes;
// false means the end of the file for now.
func (s *fileSource) fill() (bool, error) {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		// The buffer holds one incomplete line.
		if len(s.buf) > s.maxLine {
			// Reading it again cannot make it shorter: a human must act.
			return false, cerrors.WithCode(fmt.Errorf("file source %s: the line at offset %d is longer than %d bytes",
				s.path, s.offset, s.maxLine), cerrors.CodePayloadTooLarge)
		}
		grown := make([]byte, min(2*len(s.buf), s.maxLine+1))
		copy(grown, s.buf[:s.end])
		s.buf = grown
	}
	n, err := s.f.Read(s.buf[s.end:])
	s.end += n
	s.readOffset += int64(n)
	switch {
	case n > 0:
		return true, nil
	case err == nil || errors.Is(err, io.EOF):
		return false, nil
	default:
		return false, fmt.Errorf("file source: %w", err)
	}
}

// checkFile runs at the end of the file: it catches the file being truncated
// below what was read, or replaced by another file, instead of waiting
// forever for data that will never come.
func (s *fileSource) checkFile() error {
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	if fi.Size() < s.readOffset {
		return fmt.Errorf("file source %s: the file was truncated: it has %d bytes, but %d were read already",
			s.path, fi.Size(), s.readOffset)
	}
	if pi, err := os.Stat(s.path); err == nil && !os.SameFile(fi, pi) {
		return fmt.Errorf("file source %s: the file was replaced by another file (rotated?) after offset %d was read",
			s.path, s.readOffset)
	}
	return nil
}

// Ack does nothing: positions are byte offsets and the file is not changed.
func (s *fileSource) Ack(context.Context, []record.Position) error { return nil }

// Teardown closes the file.
func (s *fileSource) Teardown(context.Context) error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	return nil
}
