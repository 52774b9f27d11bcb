// Package dedup is the acked-position dedup store (DESIGN.md section 6): it
// closes the window between a destination accepting records and the source
// learning that they were accepted.
//
// Without it, a crash (or a failed run) in that window makes the source
// deliver those records again after the restart, and the destination writes
// them twice. With it:
//
//  1. After a destination wrote a batch, the positions it wrote are made
//     durable here (one entry per batch, never one per record) before the
//     source is acknowledged, and before the destination writes its next
//     batch: at any moment at most one batch is written and not yet
//     remembered, so a crash duplicates at most that batch.
//  2. A destination that can say which record it holds last
//     (connector.PositionReporter) records an intent instead, before it
//     writes the batch, while the batch before is being written, so no sync
//     sits between two writes. At the next open its last position tells how
//     far the intents were written: the positions up to it are kept as
//     written, the rest are dropped (they will be written again). A crash
//     then duplicates nothing.
//  3. A destination that can read back what it wrote
//     (connector.HoldingReporter, the file destination) needs neither: a
//     mark, one per destination, says where in its output the records
//     begin that the saved source positions may not cover. The engine
//     moves it forward with every position save, in the same commit. At
//     the next open the destination reads back what it holds from the
//     mark on; those positions become a written entry, and the mark moves
//     to where the destination writes next, in one commit. Nothing is
//     committed on the records' path, a crash duplicates nothing, and what
//     is read back is never more than the records that were in flight.
//  4. When the source acknowledgement completed, the batch's entry is
//     deleted in the same commit that persists the new source position
//     (pkg/pipeline hands the keys to the position save).
//  5. When a run starts, each destination loads what earlier runs left:
//     a re-delivered record whose position is there is acknowledged
//     without being written again (Skip), and counted.
//  6. Entries carry an expiry (dedup.ttl), so an entry nobody consumes (a
//     destination that was renamed, a source that never re-delivers) does
//     not live for ever.
//
// Positions are only unique within a source: in a pipeline of several
// sources, each entry names the source of its positions (one batch is one
// source's), a position is skipped only for the records of its source, and
// a destination that reports what it holds also says which source its last
// record came from (Holdings.LastSource). A pipeline of one source files
// its entries under no source ("").
//
// The store's size follows the records in flight, not the records ever
// written.
package dedup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// DefaultTTL is how long an entry lives when nobody consumes it.
const DefaultTTL = 24 * time.Hour

// entryVersion is the version of the persisted entry. WARNING: pinned by
// testdata/entry.v4.golden and testdata/entry.v3.golden; a change needs a
// new version and a reader for the old ones. Version 1
// (testdata/entry.golden) had no kind byte: every entry was written.
// Version 2 (testdata/entry.v2.golden) had no runs. Version 3 has no
// source: an entry of no source ("", a pipeline of one source) is still
// written as version 3, byte for byte as before sources were named.
//
//	entry = version:byte(4) kind:byte expiresAt:int64 (Unix ns, big endian)
//	        uvarint(len) source uvarint(n) item*
//	      | version:byte(3) kind:byte expiresAt:int64 uvarint(n) item*
//	item  = uvarint(shared<<1) uvarint(len) suffix   one position
//	      | uvarint(count<<1 | 1)                    a run
//
// A position stores how many leading bytes it shares with the one before
// and the rest (front coding): a batch's positions are usually close
// (offsets, sequence numbers, LSNs). A run stands for count positions that
// each are the decimal successor of the one before ("41", "42", "43"...),
// as sequence numbers written in decimal are: such a batch of 1,024
// records is one position and one run, about 15 bytes instead of about
// 4 KiB. Every batch's entry is written and synced before the batch is
// written or acknowledged, so its size is what the dedup store costs the
// records' path: the bytes the store copies, checksums and syncs per
// commit, and how often its memory table fills and is flushed.
//
// Version 2 is version 3 without runs: each item a position, its first
// varint the shared length itself.
const entryVersion = 4

// entryVersionNoSource is the version of entries of no source.
const entryVersionNoSource = 3

// entryKind says what an entry's positions are.
type entryKind byte

const (
	// kindWritten: the destination wrote these records.
	kindWritten entryKind = 0
	// kindIntent: the destination was about to write these records, in
	// this order; how far it got is what it reports at its next open.
	kindIntent entryKind = 1
	// kindMark: a point in the output of a destination that reads back
	// what it wrote (see markVersion).
	kindMark entryKind = 2
)

// markVersion is the version of a destination's mark. WARNING: pinned by
// testdata/mark.v5.golden; a change needs a new version and a reader for
// the old one.
//
//	mark = version:byte(5) kind:byte(2) uvarint(offset)
//
// A mark has no expiry: it is rewritten with every position save, and a
// pipeline idle for longer than any TTL still needs it the moment a
// record is written and the process dies before its position is saved.
// It is deleted with the pipeline's entries (Forget) or when its
// destination is gone (DropMarks).
const markVersion = 5

// markKey is where a destination's mark is kept: run and sequence 0,
// which no entry has (runs start from the clock).
func markKey(prefix []byte) []byte {
	return append(bytes.Clone(prefix), make([]byte, 16)...)
}

func encodeMark(offset int64) []byte {
	return binary.AppendUvarint([]byte{markVersion, byte(kindMark)}, uint64(offset))
}

// decodeMark returns the offset of a mark; ok is false for anything that
// is not one.
func decodeMark(b []byte) (offset int64, ok bool) {
	if len(b) < 3 || b[0] != markVersion || b[1] != byte(kindMark) {
		return 0, false
	}
	v, n := binary.Uvarint(b[2:])
	if n <= 0 || 2+n != len(b) || v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// Options configure a Store.
type Options struct {
	// TTL is how long an unconsumed entry lives (default DefaultTTL).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *zap.Logger
}

// Store keeps the entries. It is safe for concurrent use; each destination
// of each run uses its own Destination.
type Store struct {
	db     store.Store
	writer *store.Batcher
	ttl    time.Duration
	now    func() time.Time
	log    *zap.Logger
	runs   atomic.Uint64
	// index knows which destinations have entries once Sweep built it.
	index *keyIndex
}

// writableStore is the optional ability of a store to say that its writes
// are refused now (the disk is full), before anything is tried.
type writableStore interface{ Writable() error }

// Writable returns the error an entry written now would get, or nil when
// the store cannot tell in advance.
func (s *Store) Writable() error {
	if w, ok := s.db.(writableStore); ok {
		return w.Writable()
	}
	return nil
}

// New returns a store on db, writing through w.
func New(db store.Store, w *store.Batcher, opts Options) *Store {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Store{db: db, writer: w, ttl: opts.TTL, now: opts.Now, log: opts.Logger, index: newKeyIndex()}
	// Run ids only need to differ between runs of this process and from
	// earlier processes' (whose entries may still be there): start from
	// the clock.
	s.runs.Store(uint64(opts.Now().UnixNano()))
	return s
}

func destinationPrefix(pipelineID, destinationID string) []byte {
	return []byte(store.PrefixDedup + store.KeyPart(pipelineID) + "/" + store.KeyPart(destinationID) + "/")
}

func pipelinePrefix(pipelineID string) []byte {
	return []byte(store.PrefixDedup + store.KeyPart(pipelineID) + "/")
}

// Destination is one destination's dedup view for one run. Its methods are
// called from that destination's stage only (one goroutine).
type Destination struct {
	store  *Store
	prefix []byte
	run    uint64
	seq    uint64

	// pending maps positions that earlier runs wrote to the entry holding
	// them; remaining counts, per entry, the positions not yet skipped.
	pending   map[sourcePosition]string
	remaining map[string]int
	hits      int64
	// unverified: the destination could not read back what its last run
	// wrote (Unverified).
	unverified bool
	// durability is what the entries must survive: what the
	// destination's writes survive (Holdings.Unsynced).
	durability store.Durability
	// scratch is where entries are encoded before they are copied to
	// their exact size.
	scratch []byte

	// markKey is where the mark of a destination that reads back what it
	// wrote is kept; nil for other destinations.
	markKey []byte
}

// Holdings is what a destination that reports what it holds
// (connector.PositionReporter) said when it opened.
type Holdings struct {
	// Reports is true for such a destination.
	Reports bool
	// Last is the position of the last record it holds; nil when it holds
	// none.
	Last record.Position
	// LastSource is the source of that record, "" when the pipeline has
	// one source or the destination cannot tell. When it cannot, intents
	// of named sources count as not written: their records may be written
	// again, none is lost.
	LastSource string
	// Since, when set, reads back what the destination holds from an
	// offset on (connector.HoldingReporter): visit gets each record's
	// source ("" in a pipeline of one source) and position; records of
	// other pipelines are not visited. ok is false when it cannot tell.
	// Offset is where it writes next: where Open moves its mark.
	Since  func(offset int64, visit func(source string, pos record.Position)) (ok bool, err error)
	Offset int64
	// Unsynced says that the destination does not sync its writes: its
	// entries are then written without a sync too (store.Unsynced). They
	// survive a crash of the process as its records do, which is what a
	// restart after a SIGKILL needs; after a power loss, which may take
	// records the destination wrote as well, records in flight may be
	// written again.
	Unsynced bool
}

// sourcePosition is a position of a source.
type sourcePosition struct{ source, position string }

// Open loads what earlier runs left for a destination: entries that expired
// or cannot be read are deleted (with a log line naming the key) instead of
// being used. Intents of earlier runs are resolved against held, in one
// atomic write before Open returns, so that a later crash never resolves
// an old intent against a newer last position: positions up to held.Last,
// in the order they were intended, become written, the others are dropped.
// A destination that does not report (any more) keeps no intent position:
// it may write them twice, never lose them. Of a destination that reads
// back what it wrote (held.Since), the records it holds from its mark on
// become written entries (one per source) and its mark moves to where it
// writes next (held.Offset), in the same commit, before it writes
// anything.
func (s *Store) Open(ctx context.Context, pipelineID, destinationID string, held Holdings) (*Destination, error) {
	d := &Destination{
		store:     s,
		prefix:    destinationPrefix(pipelineID, destinationID),
		run:       s.runs.Add(1),
		pending:   map[sourcePosition]string{},
		remaining: map[string]int{},
	}
	if held.Unsynced {
		d.durability = store.Unsynced
	}
	if held.Since != nil {
		d.markKey = markKey(d.prefix)
	}
	if s.index.none(d.prefix) {
		// Nothing to load, resolve or delete; a destination that reads
		// back what it wrote gets its first mark.
		if held.Since != nil {
			if err := s.writer.Apply(ctx, d.Mark(held.Offset)); err != nil {
				return nil, fmt.Errorf("mark where %s/%s writes: %w", pipelineID, destinationID, err)
			}
		}
		return d, nil
	}
	now := s.now()
	var stale [][]byte
	var entries []loadedEntry
	mark, marked := int64(0), false
	err := s.db.Scan(ctx, d.prefix, func(key, value []byte) error {
		if offset, ok := decodeMark(value); ok {
			mark, marked = offset, true
			return nil
		}
		expires, kind, source, positions, err := decodeEntry(value)
		switch {
		case err != nil:
			s.log.Warn("dedup entry cannot be read; deleting it", zap.ByteString("key", key), zap.Error(err))
			stale = append(stale, bytes.Clone(key))
		case !now.Before(expires):
			s.log.Info("dedup entry expired without being used; deleting it", zap.ByteString("key", key),
				zap.Time("expired_at", expires), zap.Int("positions", len(positions)))
			stale = append(stale, bytes.Clone(key))
		default:
			entries = append(entries, loadedEntry{key: bytes.Clone(key), kind: kind, source: source, expires: expires, positions: positions})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load dedup entries of %s/%s: %w", pipelineID, destinationID, err)
	}
	ops := resolveIntents(entries, held)
	for _, k := range stale {
		ops = append(ops, store.Op{Key: k, Delete: true})
	}
	for _, e := range entries {
		if d.hold(e) == 0 && e.kind == kindWritten && len(e.positions) > 0 {
			ops = append(ops, store.Op{Key: e.key, Delete: true})
		}
	}
	if held.Since != nil {
		moved := !marked || mark != held.Offset
		if marked {
			entries, err := d.readBack(held, mark, now.Add(s.ttl))
			if err != nil {
				return nil, fmt.Errorf("read back what %s/%s holds: %w", pipelineID, destinationID, err)
			}
			for _, e := range entries {
				// An entry whose positions are all held already would
				// never be consumed: it is not written.
				if d.hold(e) > 0 {
					ops = append(ops, store.Op{Key: e.key, Value: encodeEntry(e.expires, kindWritten, e.source, e.positions)})
				}
			}
		}
		if moved {
			// A mark at the end already (a run that drained, or one
			// whose last batch was saved) needs no write.
			ops = append(ops, d.Mark(held.Offset))
		}
	}
	if len(ops) > 0 {
		// One commit: the intents resolved, what is of no use any more
		// deleted and the mark of a destination that had none, or nothing.
		if err := s.writer.Apply(ctx, ops...); err != nil {
			return nil, fmt.Errorf("resolve the dedup entries of %s/%s: %w", pipelineID, destinationID, err)
		}
	}
	if n := d.Pending(); n > 0 {
		s.log.Info("records an earlier run wrote but never saw acknowledged will be skipped if the source delivers them again",
			zap.String("pipeline_id", pipelineID), zap.String("destination", destinationID), zap.Int("positions", n))
	}
	return d, nil
}

// hold makes e's positions that no entry holds yet skippable, and returns
// how many it took.
func (d *Destination) hold(e loadedEntry) int {
	k := string(e.key)
	for _, p := range e.positions {
		sp := sourcePosition{e.source, string(p)}
		if _, dup := d.pending[sp]; !dup {
			d.pending[sp] = k
			d.remaining[k]++
		}
	}
	return d.remaining[k]
}

// readBack turns what the destination holds from mark on into written
// entries, one per source in the order the sources first appear, expiring
// at expires.
func (d *Destination) readBack(held Holdings, mark int64, expires time.Time) ([]loadedEntry, error) {
	var entries []loadedEntry
	bySource := map[string]int{}
	ok, err := held.Since(mark, func(source string, pos record.Position) {
		i, seen := bySource[source]
		if !seen {
			d.seq++
			i = len(entries)
			bySource[source] = i
			entries = append(entries, loadedEntry{key: d.entryKey(), kind: kindWritten, source: source, expires: expires})
		}
		entries[i].positions = append(entries[i].positions, bytes.Clone(pos))
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		d.unverified = true
		return nil, nil
	}
	return entries, nil
}

// Unverified reports whether the destination, which reads back what it
// wrote, could not say what it holds of the last run when this one opened
// (its output was replaced or cut): records the last run wrote without
// seeing them acknowledged may be written again. The engine reports it
// (an audit event); the dedup store has nothing else to go on.
func (d *Destination) Unverified() bool { return d.unverified }

// Mark returns the write that moves the destination's mark to offset (see
// markVersion); the engine commits it with a position save. Unlike the
// other methods it may be called from any goroutine.
func (d *Destination) Mark(offset int64) store.Op {
	return store.Op{Key: d.markKey, Value: encodeMark(offset)}
}

// DropMarks deletes the marks of destinations a pipeline no longer has:
// nothing will move them, and they never expire.
func (s *Store) DropMarks(ctx context.Context, pipelineID string, destinationIDs ...string) error {
	ops := make([]store.Op, len(destinationIDs))
	for i, id := range destinationIDs {
		ops[i] = store.Op{Key: markKey(destinationPrefix(pipelineID, id)), Delete: true}
	}
	return s.writer.Apply(ctx, ops...)
}

// loadedEntry is an entry as Open found it.
type loadedEntry struct {
	key       []byte
	kind      entryKind
	source    string
	expires   time.Time
	positions []record.Position
}

// resolveIntents turns intents into written entries holding the positions
// up to the destination's last one, in key order (which is the order they
// were written in, whatever their source) and position order, and returns
// the writes that persist that; entries are changed in place. Where
// held.Last is in no intent of held.LastSource, the destination wrote none
// of them (or does not report): they hold nothing. An intent of a named
// source is never matched without that source: the last record may be
// another source's of the same position, maybe of an entry deleted long
// ago, and taking the match would lose the records up to it.
func resolveIntents(entries []loadedEntry, held Holdings) []store.Op {
	lastEntry, lastPos := -1, -1
	if held.Reports && held.Last != nil {
		for i, e := range entries {
			if e.kind != kindIntent || e.source != held.LastSource {
				continue
			}
			for j, p := range e.positions {
				if bytes.Equal(p, held.Last) {
					lastEntry, lastPos = i, j
				}
			}
		}
	}
	var ops []store.Op
	for i := range entries {
		e := &entries[i]
		if e.kind != kindIntent {
			continue
		}
		switch {
		case i < lastEntry:
		case i == lastEntry:
			e.positions = e.positions[:lastPos+1]
		default:
			e.positions = nil
		}
		e.kind = kindWritten
		if len(e.positions) == 0 {
			ops = append(ops, store.Op{Key: e.key, Delete: true})
			continue
		}
		ops = append(ops, store.Op{Key: e.key, Value: encodeEntry(e.expires, kindWritten, e.source, e.positions)})
	}
	return ops
}

// Pending is how many positions of earlier runs may still be skipped; the
// engine only looks positions up while it is not zero.
func (d *Destination) Pending() int { return len(d.pending) }

// Hits is how many records were skipped in this run.
func (d *Destination) Hits() int64 { return d.hits }

// Skip reports whether an earlier run already wrote the record at pos, and
// forgets it (each position is skipped once). When that was the last
// position of an entry, done is the entry's key: the caller deletes it with
// the source position that acknowledges this record.
func (d *Destination) Skip(source string, pos record.Position) (skip bool, done []byte) {
	sp := sourcePosition{source, string(pos)}
	k, ok := d.pending[sp]
	if !ok {
		return false, nil
	}
	delete(d.pending, sp)
	d.hits++
	d.remaining[k]--
	if d.remaining[k] == 0 {
		delete(d.remaining, k)
		return true, []byte(k)
	}
	return true, nil
}

// Remember queues a durable entry for positions, the records this
// destination just wrote, and returns its key and a wait that returns once
// it is durable. The source must not be acknowledged, nor the next batch
// written, before wait returned nil.
func (d *Destination) Remember(ctx context.Context, source string, positions []record.Position) (key []byte, wait func() error, err error) {
	return d.submit(ctx, kindWritten, source, positions)
}

// Intend queues a durable intent for positions, the records this
// destination is about to write, in the order it writes them; the batch
// must not be written before wait returned nil. Only for a destination
// that reports what it holds when it opens: its report decides at the next
// Open how many of them were written.
func (d *Destination) Intend(ctx context.Context, source string, positions []record.Position) (key []byte, wait func() error, err error) {
	return d.submit(ctx, kindIntent, source, positions)
}

func (d *Destination) submit(ctx context.Context, kind entryKind, source string, positions []record.Position) (key []byte, wait func() error, err error) {
	d.seq++
	key = d.entryKey()
	d.scratch = appendEntry(d.scratch[:0], d.store.now().Add(d.store.ttl), kind, source, positions)
	value := bytes.Clone(d.scratch)
	// The destination waits for it before it goes on: it must not queue
	// behind the pipelines' bookkeeping.
	pending, err := d.store.writer.Submit(store.WriteOptions{Priority: store.Urgent, Durability: d.durability}, store.Op{Key: key, Value: value})
	if err != nil {
		return nil, nil, fmt.Errorf("record written positions: %w", err)
	}
	return key, func() error { return pending.Wait(context.WithoutCancel(ctx)) }, nil
}

// entryKey is the key of this run's entry number d.seq.
func (d *Destination) entryKey() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(bytes.Clone(d.prefix), d.run), d.seq)
}

// Writable returns the error Remember would get now, or nil. A destination
// asks before writing a batch: a batch written and then not remembered is
// written twice after the restart.
func (d *Destination) Writable() error { return d.store.Writable() }

// deleteOps turns entry keys into delete operations (Forget and Sweep;
// the engine deletes entries with the position save that frees them).
func deleteOps(keys [][]byte) []store.Op {
	ops := make([]store.Op, len(keys))
	for i, k := range keys {
		ops[i] = store.Op{Key: k, Delete: true}
	}
	return ops
}

// Forget deletes every entry of a pipeline. The runtime calls it when dedup
// is off for a run: its source acknowledgements are not tied to entries, so
// old entries could later skip records they no longer describe.
func (s *Store) Forget(ctx context.Context, pipelineID string) (int, error) {
	var keys [][]byte
	err := s.db.Scan(ctx, pipelinePrefix(pipelineID), func(key, _ []byte) error {
		keys = append(keys, bytes.Clone(key))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return s.deleteAll(ctx, keys)
}

// Sweep deletes expired entries of every pipeline; the runtime calls it at
// startup, so that entries of pipelines or destinations that no longer
// exist do not outlive their TTL. A process that owns its store alone
// calls it before any run opens: it also builds the index of the entries
// that lets Open skip destinations that have none (see keyIndex). The
// index follows the store's writer from then on, so nothing else may
// write entries but through it.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	watching := s.writer.Watch(s.index)
	now := s.now()
	var expired, kept [][]byte
	err := s.db.Scan(ctx, []byte(store.PrefixDedup), func(key, value []byte) error {
		if _, ok := decodeMark(value); ok {
			if watching {
				kept = append(kept, bytes.Clone(key))
			}
			return nil
		}
		expires, _, _, _, err := decodeEntry(value)
		if err != nil || !now.Before(expires) {
			expired = append(expired, bytes.Clone(key))
		} else if watching {
			kept = append(kept, bytes.Clone(key))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n, err := s.deleteAll(ctx, expired)
	if err == nil && watching {
		s.index.build(kept)
	}
	return n, err
}

// deleteAll deletes keys in chunks that stay within a transaction's size
// and returns how many it deleted.
func (s *Store) deleteAll(ctx context.Context, keys [][]byte) (int, error) {
	for start := 0; start < len(keys); start += 1000 {
		if err := s.writer.Apply(ctx, deleteOps(keys[start:min(start+1000, len(keys))])...); err != nil {
			return start, err
		}
	}
	return len(keys), nil
}

func encodeEntry(expires time.Time, kind entryKind, source string, positions []record.Position) []byte {
	return appendEntry(nil, expires, kind, source, positions)
}

// appendEntry appends the entry to b. A destination encodes into a buffer
// of its own and stores a copy of the exact size: an entry of sequence
// numbers is a few bytes, of other positions a few per position.
func appendEntry(b []byte, expires time.Time, kind entryKind, source string, positions []record.Position) []byte {
	version := byte(entryVersion)
	if source == "" {
		version = entryVersionNoSource
	}
	b = append(b, version, byte(kind))
	b = binary.BigEndian.AppendUint64(b, uint64(expires.UnixNano()))
	if source != "" {
		b = binary.AppendUvarint(b, uint64(len(source)))
		b = append(b, source...)
	}
	b = binary.AppendUvarint(b, uint64(len(positions)))
	var prev record.Position
	var prevValue uint64
	prevDecimal := false
	run := 0
	for i, p := range positions {
		value, decimal := decimalValue(p)
		if i > 0 && decimal && prevDecimal && value == prevValue+1 {
			run++
			prev, prevValue = p, value
			continue
		}
		if run > 0 {
			b = binary.AppendUvarint(b, uint64(run)<<1|1)
			run = 0
		}
		shared := 0
		for shared < len(p) && shared < len(prev) && p[shared] == prev[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared)<<1)
		b = binary.AppendUvarint(b, uint64(len(p)-shared))
		b = append(b, p[shared:]...)
		prev, prevValue, prevDecimal = p, value, decimal
	}
	if run > 0 {
		b = binary.AppendUvarint(b, uint64(run)<<1|1)
	}
	return b
}

// maxRunDigits bounds the decimal positions a run may hold: their value
// fits a uint64, so the successor is a plain addition.
const maxRunDigits = 19

// decimalValue is the value of p when p is a decimal number without
// leading zeros of at most maxRunDigits digits.
func decimalValue(p record.Position) (uint64, bool) {
	if len(p) == 0 || len(p) > maxRunDigits || (p[0] == '0' && len(p) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

var errBadEntry = errors.New("malformed dedup entry")

// decodeEntry reads versions 1 (every entry written), 2, 3 and 4 (with
// a source).
func decodeEntry(b []byte) (time.Time, entryKind, string, []record.Position, error) {
	kind := kindWritten
	runs, sourced := false, false
	switch {
	case len(b) >= 9 && b[0] == 1:
		b = b[1:]
	case len(b) >= 10 && (b[0] == 2 || b[0] == entryVersionNoSource || b[0] == entryVersion) && (b[1] == byte(kindWritten) || b[1] == byte(kindIntent)):
		runs = b[0] >= entryVersionNoSource
		sourced = b[0] == entryVersion
		kind = entryKind(b[1])
		b = b[2:]
	default:
		return time.Time{}, 0, "", nil, errBadEntry
	}
	expires := time.Unix(0, int64(binary.BigEndian.Uint64(b[:8])))
	b = b[8:]
	source := ""
	if sourced {
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) {
			return time.Time{}, 0, "", nil, errBadEntry
		}
		source = string(b[k : k+int(l)])
		b = b[k+int(l):]
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return time.Time{}, 0, "", nil, errBadEntry
	}
	b = b[k:]
	// A run holds many positions in one byte: the count is checked against
	// what the runs may hold, not against the entry's length.
	if !runs && n > uint64(len(b)) || n > maxEntryPositions {
		return time.Time{}, 0, "", nil, errBadEntry
	}
	positions := make([]record.Position, 0, min(n, uint64(len(b))+1))
	var prev record.Position
	for uint64(len(positions)) < n {
		tag, k := binary.Uvarint(b)
		if k <= 0 {
			return time.Time{}, 0, "", nil, errBadEntry
		}
		b = b[k:]
		if runs && tag&1 == 1 {
			count := tag >> 1
			v, ok := decimalValue(prev)
			if count == 0 || !ok || count > n-uint64(len(positions)) || v+count < v {
				return time.Time{}, 0, "", nil, errBadEntry
			}
			for range count {
				v++
				p := record.Position(strconv.AppendUint(nil, v, 10))
				if len(p) > maxRunDigits {
					return time.Time{}, 0, "", nil, errBadEntry
				}
				positions = append(positions, p)
				prev = p
			}
			continue
		}
		shared := tag
		if runs {
			shared = tag >> 1
		}
		if shared > uint64(len(prev)) {
			return time.Time{}, 0, "", nil, errBadEntry
		}
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return time.Time{}, 0, "", nil, errBadEntry
		}
		p := make(record.Position, 0, int(shared)+int(l))
		p = append(append(p, prev[:shared]...), b[k:k+int(l)]...)
		positions = append(positions, p)
		prev = p
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return time.Time{}, 0, "", nil, errBadEntry
	}
	return expires, kind, source, positions, nil
}

// maxEntryPositions bounds the positions one entry may hold when it is
// read: an entry is one batch (or a few), and a damaged count must not
// make Open allocate without end.
const maxEntryPositions = 1 << 24

// Destinations returns the destinations of a pipeline that have entries,
// so that the runtime can say which of them no longer exist.
func (s *Store) Destinations(ctx context.Context, pipelineID string) ([]string, error) {
	prefix := pipelinePrefix(pipelineID)
	seen := map[string]bool{}
	var out []string
	err := s.db.Scan(ctx, prefix, func(key, _ []byte) error {
		rest := key[len(prefix):]
		i := bytes.IndexByte(rest, '/')
		if i < 0 {
			return nil
		}
		if id, ok := store.ParseKeyPart(string(rest[:i])); ok && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
		return nil
	})
	return out, err
}
