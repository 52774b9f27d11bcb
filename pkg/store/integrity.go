package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// Badger's on-disk layout, as far as the checks below read it (Badger v4,
// table/table.go, memtable.go, value.go, structs.go).
const (
	manifestFile = badger.ManifestFilename
	// logHeaderSize opens every write-ahead log and value log file: a key
	// id and an IV.
	logHeaderSize = 20
	// maxKeyLen is the longest key Badger replays; a longer one ends replay.
	maxKeyLen = 1 << 16
	// bitTxn marks an entry of a transaction, bitFinTxn the entry that
	// commits it.
	bitTxn    = 1 << 6
	bitFinTxn = 1 << 7
)

// checkFiles looks at the database in dir before Badger opens it, because
// Badger silently loses data or panics on the problems below, some of them
// in its own goroutines where no recover reaches:
//
//   - tables (.sst) or value log data but no readable MANIFEST: Badger would
//     start a new MANIFEST and delete every table it does not list, so
//     every pipeline would start from the beginning;
//   - a table whose footer, index or block checksums do not match: Badger
//     panics with an index out of range while opening it;
//   - a write-ahead log whose tail does not replay: Badger drops it without
//     a word, so it is logged here.
//
// It never changes a file. A fresh or empty directory passes.
func checkFiles(dir string, opt badger.Options, logger *zap.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("open badger database at %s: %w", dir, err)
	}
	tables := map[uint64]string{}
	var vlogData, wals []string
	for _, e := range entries {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".sst":
			if id, ok := table.ParseFileID(name); ok {
				tables[id] = name
			}
		case ".vlog":
			if info, err := e.Info(); err == nil && info.Size() > logHeaderSize {
				vlogData = append(vlogData, name)
			}
		case ".mem":
			wals = append(wals, name)
		}
	}

	manifest, err := readManifest(dir, opt, logger)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && len(tables) == 0 && len(vlogData) == 0 {
			return nil // a new database, or one that never flushed a table
		}
		return newCorruptError(dir, fmt.Sprintf("%v, beside %s", err, describeData(tables, vlogData)))
	}

	ids := make([]uint64, 0, len(manifest.Tables))
	for id := range manifest.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var buf []byte
	for _, id := range ids {
		name, ok := tables[id]
		if !ok {
			return newCorruptError(dir, fmt.Sprintf("table %s listed in %s is missing", filepath.Base(table.NewFilename(id, dir)), manifestFile))
		}
		tm := manifest.Tables[id]
		if buf, err = checkTable(filepath.Join(dir, name), tm, buf); err != nil {
			return newCorruptError(dir, err.Error())
		}
	}
	for id, name := range tables {
		if _, ok := manifest.Tables[id]; !ok {
			logger.Warn("table file not listed in the MANIFEST: Badger deletes it on open; it is a leftover of an interrupted compaction, unless the MANIFEST lost entries",
				zap.String("path", filepath.Join(dir, name)))
		}
	}

	slices.Sort(wals)
	for _, name := range wals {
		path := filepath.Join(dir, name)
		end, tail, err := logTail(path)
		if err != nil {
			return fmt.Errorf("open badger database at %s: read write-ahead log: %w", dir, err)
		}
		if tail > end {
			logger.Warn("write-ahead log replay stops before its end: the bytes after it are not complete, intact transactions and are dropped (a write a crash cut short, never acknowledged, or corruption)",
				zap.String("path", path), zap.Int64("replayed_bytes", end), zap.Int64("dropped_up_to", tail))
		}
	}
	return nil
}

// readManifest replays dir's MANIFEST read-only. A missing file is an error
// wrapping os.ErrNotExist.
func readManifest(dir string, opt badger.Options, logger *zap.Logger) (badger.Manifest, error) {
	path := filepath.Join(dir, manifestFile)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return badger.Manifest{}, fmt.Errorf("%s is missing: %w", manifestFile, err)
		}
		return badger.Manifest{}, fmt.Errorf("%s: %w", manifestFile, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return badger.Manifest{}, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if info.Size() == 0 {
		return badger.Manifest{}, fmt.Errorf("%s is empty", manifestFile)
	}
	m, end, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	if err != nil {
		return badger.Manifest{}, fmt.Errorf("%s is unreadable: %v", manifestFile, err)
	}
	if end < info.Size() {
		logger.Warn("MANIFEST ends in a torn entry, which Badger drops (a crash while it was written)",
			zap.String("path", path), zap.Int64("dropped_bytes", info.Size()-end))
	}
	return m, nil
}

func describeData(tables map[uint64]string, vlogs []string) string {
	var parts []string
	if n := len(tables); n > 0 {
		parts = append(parts, fmt.Sprintf("%d table file(s)", n))
	}
	if n := len(vlogs); n > 0 {
		parts = append(parts, fmt.Sprintf("%d value log file(s) with data", n))
	}
	if len(parts) == 0 {
		return "no data files"
	}
	return strings.Join(parts, " and ")
}

// corruptError says what is wrong and what the operator can do.
type corruptError struct {
	path   string
	detail string
}

func newCorruptError(path, detail string) error {
	return &corruptError{path: path, detail: detail}
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("database %s is corrupted: %s. Conduit does not open it, so that nothing in it is lost or overwritten: "+
		"restore the directory from a backup, or move it away to start with an empty database (every pipeline then starts from the beginning)",
		e.path, e.detail)
}

func (e *corruptError) Unwrap() error { return ErrCorrupt }

// checkTable validates the table file at path the way Badger reads it on
// open: the footer (index, index length, checksum, checksum length, from
// the end), the index checksum, every block's bounds and, for uncompressed
// tables, every block's checksum. buf is reused between calls.
func checkTable(path string, tm badger.TableManifest, buf []byte) (_ []byte, err error) {
	defer func() {
		// The index is only parsed after its checksum matched, so this is a
		// last resort, not a path we expect.
		if r := recover(); r != nil {
			err = fmt.Errorf("table %s: unreadable: %v", path, r)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return buf, err
	}
	size := int(info.Size())
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	data := buf[:size]
	if _, err := io.ReadFull(f, data); err != nil {
		return buf, fmt.Errorf("table %s: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("table %s (%d bytes): %s", path, size, fmt.Sprintf(format, args...))
	}

	pos := size - 4
	if pos < 4 {
		return buf, bad("too short for a footer")
	}
	chkLen := int(binary.BigEndian.Uint32(data[pos:]))
	if chkLen > pos-4 {
		return buf, bad("footer: checksum length %d is beyond the file", chkLen)
	}
	pos -= chkLen
	var chk pb.Checksum
	if err := proto.Unmarshal(data[pos:pos+chkLen], &chk); err != nil {
		return buf, bad("footer: index checksum unreadable: %v", err)
	}
	pos -= 4
	indexLen := int(binary.BigEndian.Uint32(data[pos:]))
	if indexLen > pos {
		return buf, bad("footer: index length %d is beyond the file", indexLen)
	}
	pos -= indexLen
	index := data[pos : pos+indexLen]
	if err := y.VerifyChecksum(index, &chk); err != nil {
		return buf, bad("index checksum mismatch")
	}
	if tm.KeyID != 0 {
		return buf, nil // encrypted: the index and blocks cannot be read here
	}
	ti := fb.GetRootAsTableIndex(index, 0)
	n := ti.OffsetsLength()
	if n == 0 {
		return buf, bad("index lists no blocks")
	}
	var bo fb.BlockOffset
	for i := 0; i < n; i++ {
		if !ti.Offsets(&bo, i) {
			return buf, bad("index entry of block %d unreadable", i)
		}
		off, l := int(bo.Offset()), int(bo.Len())
		if off+l > pos {
			return buf, bad("block %d (offset %d, %d bytes) is beyond the data", i, off, l)
		}
		if tm.Compression != options.None {
			continue // block checksums are of the uncompressed bytes
		}
		if err := checkBlock(data[off : off+l]); err != nil {
			return buf, bad("block %d at offset %d: %v", i, off, err)
		}
	}
	return buf, nil
}

// checkBlock validates one uncompressed block: entries, entry offsets,
// entry count, checksum, checksum length.
func checkBlock(b []byte) error {
	pos := len(b) - 4
	if pos < 4 {
		return errors.New("too short")
	}
	chkLen := int(binary.BigEndian.Uint32(b[pos:]))
	if chkLen > pos-4 {
		return fmt.Errorf("checksum length %d is beyond the block", chkLen)
	}
	pos -= chkLen
	var chk pb.Checksum
	if err := proto.Unmarshal(b[pos:pos+chkLen], &chk); err != nil {
		return fmt.Errorf("checksum unreadable: %v", err)
	}
	pos -= 4
	if n := int(binary.BigEndian.Uint32(b[pos:])); n > pos/4 {
		return fmt.Errorf("entry count %d does not fit", n)
	}
	if err := y.VerifyChecksum(b[:pos+4], &chk); err != nil {
		return errors.New("checksum mismatch")
	}
	return nil
}

// logTail replays the write-ahead log at path as Badger does (entries with
// a CRC; a transaction counts once its commit entry is read) without
// changing it. end is where replay stops, tail is just past the last
// non-zero byte: data after end that Badger would drop when tail > end.
func logTail(path string) (end, tail int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	if _, err := r.Discard(logHeaderSize); err != nil {
		return 0, 0, nil // shorter than its header: nothing to replay
	}
	off := int64(logHeaderSize)
	end = off
	var txn uint64 // version of the open transaction, 0 outside one
	var entry []byte
replay:
	for {
		var meta byte
		var key, value []byte
		var n int
		meta, key, value, n, entry = readLogEntry(r, info.Size()-off, entry)
		if n == 0 || len(key) == 0 {
			break
		}
		off += int64(n)
		switch {
		case meta&bitTxn != 0:
			ts := y.ParseTs(key)
			if txn == 0 {
				txn = ts
			}
			if txn != ts {
				break replay
			}
		case meta&bitFinTxn != 0:
			ts, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil || ts != txn {
				break replay
			}
			txn = 0
			end = off
		default:
			if txn != 0 {
				break replay
			}
			end = off
		}
	}

	// Find the last non-zero byte after end.
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		return 0, 0, err
	}
	tail = end
	chunk := make([]byte, 64<<10)
	for pos := end; ; {
		n, err := f.Read(chunk)
		if i := lastNonZero(chunk[:n]); i >= 0 {
			tail = pos + int64(i) + 1
		}
		pos += int64(n)
		if err == io.EOF {
			return end, tail, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
}

// readLogEntry reads one entry (header, key, value, CRC) of at most limit
// bytes into buf; n is 0 when there is none that is whole and intact.
func readLogEntry(r *bufio.Reader, limit int64, buf []byte) (meta byte, key, value []byte, n int, _ []byte) {
	// The header: meta, user meta, then key length, value length and
	// expiry as uvarints.
	hdr, _ := r.Peek(2 + 3*binary.MaxVarintLen64)
	if len(hdr) < 2 {
		return 0, nil, nil, 0, buf
	}
	p := 2
	var lens [3]uint64
	for i := range lens {
		v, k := binary.Uvarint(hdr[p:])
		if k <= 0 {
			return 0, nil, nil, 0, buf
		}
		lens[i] = v
		p += k
	}
	klen, vlen := lens[0], lens[1]
	if klen > maxKeyLen || vlen > uint64(limit) {
		return 0, nil, nil, 0, buf
	}
	total := p + int(klen) + int(vlen) + crc32.Size
	if int64(total) > limit {
		return 0, nil, nil, 0, buf
	}
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, nil, 0, buf
	}
	body := buf[:total-crc32.Size]
	if crc32.Checksum(body, y.CastagnoliCrcTable) != binary.BigEndian.Uint32(buf[total-crc32.Size:]) {
		return 0, nil, nil, 0, buf
	}
	key = body[p : p+int(klen)]
	value = body[p+int(klen):]
	return body[0], key, value, total, buf
}

// lastNonZero is the index of the last non-zero byte of b, or -1.
func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
