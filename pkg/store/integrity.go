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
	// keyRegistryFile holds Badger's encryption keys; without encryption
	// it is an IV and a sanity text, written when the store is created.
	keyRegistryFile = badger.KeyRegistryFileName
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
//   - tables (.sst) or value log data but no readable MANIFEST, or a
//     MANIFEST that does not list every table: Badger would start over
//     from what the MANIFEST lists and delete every other table, so
//     pipelines would start from an earlier position or the beginning;
//   - a store that differs from what conduit's inventory recorded at the
//     last clean stop (a MANIFEST cut short, a table, value log or
//     write-ahead log missing, changed or added: damage or a partial
//     restore);
//   - after a crash, a write-ahead log missing (its writes would be lost
//     without a word);
//   - a table whose footer, index or block checksums do not match: Badger
//     panics with an index out of range while opening it;
//   - a write-ahead log whose tail does not replay: Badger drops it without
//     a word, so it is logged here.
//
// After a crash a table the MANIFEST does not list can be the output of a
// flush or compaction the crash interrupted; its data is then still in a
// write-ahead log or in the tables the MANIFEST lists. Such a table is
// returned in leftovers when its versions prove it (see isLeftover), so the
// caller moves it out of Badger's way; any other unlisted table is refused.
//
// It never changes a file. A fresh or empty directory passes. inv is the
// inventory the last process wrote, nil when there is none.
func checkFiles(dir string, opt badger.Options, inv *inventory, logger *zap.Logger) (leftovers []string, _ error) {
	files, err := listStoreFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("open badger database at %s: %w", dir, err)
	}
	tables := files.tables

	if err := checkKeyRegistry(dir); err != nil {
		return nil, newCorruptError(dir, err.Error())
	}
	manifest, err := readManifest(dir, opt, logger)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && len(tables) == 0 && len(files.vlogData) == 0 {
			return nil, nil // a new database, or one that never flushed a table
		}
		return nil, newCorruptError(dir, fmt.Sprintf("%v, beside %s", err, describeData(tables, files.vlogData)))
	}

	ids := make([]uint64, 0, len(manifest.Tables))
	for id := range manifest.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var buf []byte
	var listedVersion, listedID uint64
	for _, id := range ids {
		name, ok := tables[id]
		if !ok {
			return nil, newCorruptError(dir, fmt.Sprintf("table %s listed in %s is missing", filepath.Base(table.NewFilename(id, dir)), manifestFile))
		}
		tm := manifest.Tables[id]
		var version uint64
		if buf, version, err = checkTable(filepath.Join(dir, name), tm, buf); err != nil {
			return nil, newCorruptError(dir, err.Error())
		}
		listedVersion = max(listedVersion, version)
		listedID = max(listedID, id)
	}

	var walRanges []versionRange
	for _, id := range sortedKeys(files.wals) {
		path := filepath.Join(dir, files.wals[id])
		replay, err := logTail(path)
		if err != nil {
			return nil, fmt.Errorf("open badger database at %s: read write-ahead log: %w", dir, err)
		}
		if replay.tail > replay.end {
			logger.Warn("write-ahead log replay stops before its end: the bytes after it are not complete, intact transactions and are dropped (a write a crash cut short, never acknowledged, or corruption)",
				zap.String("path", path), zap.Int64("replayed_bytes", replay.end), zap.Int64("dropped_up_to", replay.tail))
		}
		if replay.versions.max > 0 {
			walRanges = append(walRanges, replay.versions)
		}
	}

	clean := inv != nil && inv.Clean
	var unlisted []string
	for _, id := range sortedKeys(tables) {
		if _, ok := manifest.Tables[id]; ok {
			continue
		}
		name := tables[id]
		var version uint64
		buf, version, err = checkTable(filepath.Join(dir, name), badger.TableManifest{}, buf)
		switch {
		case clean:
			// Nothing ran since the clean stop: no flush or compaction
			// can have been cut short.
			unlisted = append(unlisted, name)
		case err != nil && id > listedID:
			// Cut short while it was written: the MANIFEST never got to it.
			leftovers = append(leftovers, name)
		case err == nil && isLeftover(version, listedVersion, walRanges):
			leftovers = append(leftovers, name)
		default:
			unlisted = append(unlisted, name)
		}
	}
	var problems []string
	if len(unlisted) > 0 {
		problems = append(problems, fmt.Sprintf("%s does not list table file(s) %s, which hold data found nowhere else in the store (Badger would delete them); %s was cut short or replaced by an older one",
			manifestFile, strings.Join(unlisted, ", "), manifestFile))
	}
	if clean {
		problems = append(problems, compareClean(dir, *inv, files)...)
	}
	if len(problems) > 0 {
		return nil, newDamagedError(dir, problems)
	}

	if inv != nil && !inv.Clean {
		if problems := checkWALsAfterCrash(*inv, files); len(problems) > 0 {
			return nil, newDamagedError(dir, problems)
		}
	}
	return leftovers, nil
}

// versionRange is the range of commit versions of the entries in a file.
type versionRange struct{ min, max uint64 }

// isLeftover reports whether a table the MANIFEST does not list, whose
// newest entry has version tableVersion, holds only data the store still
// has elsewhere. Badger gives every commit a higher version than the one
// before, so:
//
//   - a flush cut short before the MANIFEST listed its table leaves the
//     memtable's write-ahead log, whose versions include the table's newest;
//   - a compaction cut short leaves its input tables listed, and its output
//     is no newer than they are.
//
// A table lost from a MANIFEST cut short is newer than every listed table
// and older than the write-ahead logs (Badger deletes a log once its table
// is listed), so it fails both tests.
func isLeftover(tableVersion, listedVersion uint64, walRanges []versionRange) bool {
	if tableVersion == 0 {
		return false
	}
	for _, r := range walRanges {
		if r.min <= tableVersion && tableVersion <= r.max {
			return true
		}
	}
	return listedVersion > 0 && tableVersion <= listedVersion
}

// setAsideDir is where tables that were proven leftovers of an interrupted
// flush or compaction are moved instead of letting Badger delete them.
const setAsideDir = "set-aside"

// setAside moves the leftover tables of dir into dir/set-aside, so that
// Badger does not delete them and an operator can look at them.
func setAside(dir string, leftovers []string, logger *zap.Logger) error {
	if len(leftovers) == 0 {
		return nil
	}
	target := filepath.Join(dir, setAsideDir)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return fmt.Errorf("open badger database at %s: %w", dir, err)
	}
	for _, name := range leftovers {
		to := filepath.Join(target, name)
		for i := 1; ; i++ {
			if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
				break
			}
			to = filepath.Join(target, fmt.Sprintf("%s.%d", name, i))
		}
		if err := os.Rename(filepath.Join(dir, name), to); err != nil {
			return fmt.Errorf("open badger database at %s: set aside %s: %w", dir, name, err)
		}
		logger.Warn("table file not listed in the MANIFEST set aside: it is the output of a flush or compaction a crash interrupted, and its data is still in the store; delete it when you like",
			zap.String("path", filepath.Join(dir, name)), zap.String("moved_to", to))
	}
	if err := syncDir(target); err != nil {
		return err
	}
	return syncDir(dir)
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

// checkKeyRegistry reads dir's KEYREGISTRY as Badger's open does, which
// fails on a damaged one with its bare message ("Error while reading
// sanity text"). A missing one is no damage: Badger writes a new one, and
// without encryption it holds no key.
func checkKeyRegistry(dir string) error {
	path := filepath.Join(dir, keyRegistryFile)
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", keyRegistryFile, err)
	}
	kr, err := badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: dir, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("%s is damaged or cut short (%d bytes; Badger reads: %v)", keyRegistryFile, info.Size(), err)
	}
	return kr.Close()
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
		"restore the whole directory from a backup taken while conduit was stopped (all of its files from one copy, not some of them), "+
		"or move it away to start with an empty database (every pipeline then starts from the beginning)",
		e.path, e.detail)
}

func (e *corruptError) Unwrap() error { return ErrCorrupt }

// newDamagedError is newCorruptError for a list of problems, of which it
// names the first few.
func newDamagedError(path string, problems []string) error {
	const most = 10
	detail := strings.Join(problems[:min(len(problems), most)], "; ")
	if len(problems) > most {
		detail += fmt.Sprintf("; and %d more", len(problems)-most)
	}
	return newCorruptError(path, detail)
}

// checkTable validates the table file at path the way Badger reads it on
// open: the footer (index, index length, checksum, checksum length, from
// the end), the index checksum, every block's bounds and, for uncompressed
// tables, every block's checksum. buf is reused between calls. maxVersion
// is the version of the table's newest entry (0 for an encrypted table).
func checkTable(path string, tm badger.TableManifest, buf []byte) (_ []byte, maxVersion uint64, err error) {
	defer func() {
		// The index is only parsed after its checksum matched, so this is a
		// last resort, not a path we expect.
		if r := recover(); r != nil {
			err = fmt.Errorf("table %s: unreadable: %v", path, r)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return buf, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return buf, 0, err
	}
	size := int(info.Size())
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	data := buf[:size]
	if _, err := io.ReadFull(f, data); err != nil {
		return buf, 0, fmt.Errorf("table %s: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("table %s (%d bytes): %s", path, size, fmt.Sprintf(format, args...))
	}

	pos := size - 4
	if pos < 4 {
		return buf, 0, bad("too short for a footer")
	}
	chkLen := int(binary.BigEndian.Uint32(data[pos:]))
	if chkLen > pos-4 {
		return buf, 0, bad("footer: checksum length %d is beyond the file", chkLen)
	}
	pos -= chkLen
	var chk pb.Checksum
	if err := proto.Unmarshal(data[pos:pos+chkLen], &chk); err != nil {
		return buf, 0, bad("footer: index checksum unreadable: %v", err)
	}
	pos -= 4
	indexLen := int(binary.BigEndian.Uint32(data[pos:]))
	if indexLen > pos {
		return buf, 0, bad("footer: index length %d is beyond the file", indexLen)
	}
	pos -= indexLen
	index := data[pos : pos+indexLen]
	if err := y.VerifyChecksum(index, &chk); err != nil {
		return buf, 0, bad("index checksum mismatch")
	}
	if tm.KeyID != 0 {
		return buf, 0, nil // encrypted: the index and blocks cannot be read here
	}
	ti := fb.GetRootAsTableIndex(index, 0)
	maxVersion = ti.MaxVersion()
	n := ti.OffsetsLength()
	if n == 0 {
		return buf, 0, bad("index lists no blocks")
	}
	var bo fb.BlockOffset
	for i := 0; i < n; i++ {
		if !ti.Offsets(&bo, i) {
			return buf, 0, bad("index entry of block %d unreadable", i)
		}
		off, l := int(bo.Offset()), int(bo.Len())
		if off+l > pos {
			return buf, 0, bad("block %d (offset %d, %d bytes) is beyond the data", i, off, l)
		}
		if tm.Compression != options.None {
			continue // block checksums are of the uncompressed bytes
		}
		if err := checkBlock(data[off : off+l]); err != nil {
			return buf, 0, bad("block %d at offset %d: %v", i, off, err)
		}
	}
	return buf, maxVersion, nil
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

// logReplay is what logTail found in a write-ahead log.
type logReplay struct {
	// end is where replay stops, tail is just past the last non-zero
	// byte: data after end that Badger would drop when tail > end.
	end, tail int64
	// versions of the entries replayed; zero when there are none.
	versions versionRange
}

// logTail replays the write-ahead log at path as Badger does (entries with
// a CRC; a transaction counts once its commit entry is read) without
// changing it.
func logTail(path string) (replay logReplay, err error) {
	f, err := os.Open(path)
	if err != nil {
		return logReplay{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return logReplay{}, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	if _, err := r.Discard(logHeaderSize); err != nil {
		return logReplay{}, nil // shorter than its header: nothing to replay
	}
	off := int64(logHeaderSize)
	end := off
	var pending versionRange // versions of the open transaction
	var txn uint64           // version of the open transaction, 0 outside one
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
			pending = pending.add(ts)
		case meta&bitFinTxn != 0:
			ts, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil || ts != txn {
				break replay
			}
			txn = 0
			end = off
			replay.versions = replay.versions.merge(pending)
			pending = versionRange{}
		default:
			if txn != 0 {
				break replay
			}
			end = off
			replay.versions = replay.versions.add(y.ParseTs(key))
		}
	}

	// Find the last non-zero byte after end.
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		return logReplay{}, err
	}
	replay.end, replay.tail = end, end
	chunk := make([]byte, 64<<10)
	for pos := end; ; {
		n, err := f.Read(chunk)
		if i := lastNonZero(chunk[:n]); i >= 0 {
			replay.tail = pos + int64(i) + 1
		}
		pos += int64(n)
		if err == io.EOF {
			return replay, nil
		}
		if err != nil {
			return logReplay{}, err
		}
	}
}

func (r versionRange) add(v uint64) versionRange {
	if v == 0 {
		return r
	}
	if r.max == 0 {
		return versionRange{min: v, max: v}
	}
	return versionRange{min: min(r.min, v), max: max(r.max, v)}
}

func (r versionRange) merge(o versionRange) versionRange {
	if o.max == 0 {
		return r
	}
	return r.add(o.min).add(o.max)
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
