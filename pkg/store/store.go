// Package store is the small key-value interface the runtime keeps its state
// in, with two implementations: Badger (the embedded default, durable) and an
// in-memory map (tests, `db.type: inmemory`).
//
// The runtime writes only through Batcher, the one durable write path:
// rounds of writes committed with Store.Commit, one transaction each. The
// few writes that must read before they write (the schema registry's
// counters) call Commit themselves, with ops that Expect what they read.
//
// Badger's types and errors never leave this package.
package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned by Get for a key that is not there.
var ErrNotFound = errors.New("key not found")

// ErrInUse is returned by Open when another process holds the database.
var ErrInUse = errors.New("database is in use by another conduit process")

// ErrClosed is returned by every operation on a store after Close, so that a
// late caller during shutdown gets an answer instead of touching freed files.
var ErrClosed = errors.New("store is closed")

// ErrTxnTooBig is returned by Commit when its ops are more than the store
// can commit atomically in one transaction. The in-memory store has no such
// limit.
var ErrTxnTooBig = errors.New("transaction too large for one atomic write; split it into several commits")

// ErrConflict is returned by a Commit that wrote nothing because a key did
// not hold what its op's Expect said: another writer changed it since the
// caller read it. The caller reads again and retries.
var ErrConflict = errors.New("a key changed since it was read")

// conflictError is ErrConflict for key.
func conflictError(key []byte) error {
	return fmt.Errorf("%w: %q", ErrConflict, key)
}

// ErrNoSpace is returned by Open, and by every write, when the filesystem
// holding the database has less free space than the store keeps in reserve.
// The store refuses writes before Badger could write into a page of a
// memory-mapped file the disk cannot back, which would kill the process.
// Writes succeed again by themselves once space is freed. The error carries
// code 507 (insufficient storage, transient) for the supervisor.
var ErrNoSpace = errors.New("no space left for the database")

// ErrUnavailable is returned when the database server cannot be reached
// (PostgreSQL restarting, down, or cut off by the network). Commits keep
// trying for a while before they return it (PostgresOptions.RetryFor);
// reads return it at once. The error carries code 503 (transient).
var ErrUnavailable = errors.New("the database cannot be reached")

// ErrDisowned is returned by every commit of a store whose database
// another conduit process opened since (PostgreSQL: the session that held
// this process's lock on the database ended - the server restarted - and
// another process took the database before this one could take its lock
// back). Nothing this process still writes lands; it must stop. The error
// carries code 409 (fatal).
var ErrDisowned = errors.New("another conduit process opened this database since; this one's writes are refused")

// ErrCorrupt is returned by Open for a database whose files are damaged or
// inconsistent (a missing MANIFEST beside data files, a table whose footer
// or checksums do not match). The store never deletes or repairs anything
// itself: the operator restores a backup or moves the directory away.
var ErrCorrupt = errors.New("database is corrupted")

// MaxValueBytes is the longest value a write may carry, in every
// implementation; a longer one is refused with ErrValueTooLarge and
// nothing of its commit is written.
//
// It keeps every value out of Badger's value log. Badger writes values
// from its value threshold up into the value log through a memory mapping
// of a file it extends sparsely, and creates the next file of that log
// itself in the middle of a write: when another process fills the disk at
// that moment, the copy into the mapping is SIGBUS and the process dies.
// The write-ahead log, which takes every shorter value, is allocated ahead
// (see walAllocator); the value log cannot be, as its files are created
// with O_EXCL when Badger needs them. Values under the limit therefore
// stay in the write-ahead log and the tables, with Badger's threshold at
// its maximum (1 MiB). Splitting longer values into pieces would not
// allow much more: one transaction holds at most 15% of a memtable (about
// 1.2 MiB), so a value could never be much longer than 1 MiB anyway. The
// runtime's values are far shorter; the longest are the pipeline files
// and pipelines applied through the API, whose requests are bounded at
// 1 MiB.
const MaxValueBytes = 1<<20 - 1

// ErrValueTooLarge is wrapped by the error of a commit with a value longer
// than MaxValueBytes.
var ErrValueTooLarge = errors.New("value too large for the database")

// errEmptyKey is returned for an empty key. Badger rejects empty keys, and
// the in-memory store does the same so tests catch it before production does.
var errEmptyKey = errors.New("key must not be empty")

// Store is a durable, ordered key-value store. Every write that returns nil is
// durable (synced) for the Badger implementation.
type Store interface {
	// Get returns a copy of the value of key, or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Commit applies ops in one atomic, durable transaction, in order (of
	// two ops on one key the later wins). It is what Batcher commits a
	// round with, and the one write a backend must make fast: one sync (or
	// one database transaction) per call, whatever the number of ops. The
	// store may keep the slices until Commit returns, no longer.
	//
	// Ops with an Expect make it a compare-and-set: unless every such key
	// holds what its Expect says when the transaction runs, Commit writes
	// nothing and returns ErrConflict. This is how a read-modify-write
	// stays atomic, also between processes sharing a database.
	//
	// A value longer than MaxValueBytes fails the commit with
	// ErrValueTooLarge, and nothing is written.
	Commit(ctx context.Context, ops []Op) error
	// Scan calls fn for every key with the prefix, in key order. The slices
	// are only valid during the call. Returning an error from fn stops the
	// scan and Scan returns it.
	Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	// ScanFrom is Scan starting at start: it calls fn for every key with the
	// prefix that is >= start, in key order. A start below the prefix scans
	// the whole prefix; one above every key with the prefix visits nothing.
	// It lets a reader resume a range (after a sequence number, say)
	// without walking the keys before it.
	ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error
	// ScanReverse calls fn for every key with the prefix that is <= start,
	// in reverse key order; an empty start begins at the prefix's last key.
	// Stopping and the validity of the slices are as for Scan. It finds the
	// newest entries of an ordered range with one seek.
	ScanReverse(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error
	// Close releases the store. It is safe to call more than once and from
	// several goroutines; every call returns the result of the first. Later
	// operations return ErrClosed.
	Close() error
}

// checkKey rejects keys that no implementation can store.
func checkKey(key []byte) error {
	if len(key) == 0 {
		return errEmptyKey
	}
	return nil
}

// checkWrite rejects an op no implementation stores: an empty key, or a
// value longer than MaxValueBytes.
func checkWrite(op Op) error {
	if err := checkKey(op.Key); err != nil {
		return err
	}
	if len(op.Value) > MaxValueBytes {
		return fmt.Errorf("the value of %q is %s (%d bytes): %w, which keeps values to at most %d bytes (1 MiB)",
			op.Key, formatBytes(uint64(len(op.Value))), len(op.Value), ErrValueTooLarge, MaxValueBytes)
	}
	return nil
}

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil when there is none (an empty prefix, or one of only 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := bytes.Clone(prefix[:i+1])
			end[i]++
			return end
		}
	}
	return nil
}

// Key prefixes of everything the runtime persists.
//
// WARNING: these are part of the on-disk format. Changing one orphans the
// data written under the old prefix; a change needs a migration.
const (
	// PrefixPosition + "<pipeline id>/<source connector id>" holds the
	// position the source resumes from (see pkg/pipeline position.go).
	PrefixPosition = "conduit/position/"
	// PrefixPipelineState + "<pipeline id>" holds the supervisor's persisted
	// state of a pipeline (lifecycle/).
	PrefixPipelineState = "conduit/pipeline-state/"
	// PrefixAuditLog + "<pipeline id>/<sequence>" holds audit events (auditlog/).
	PrefixAuditLog = "conduit/auditlog/"
	// PrefixDedup + "<pipeline id>/<destination id>/<run><sequence>" (two
	// big-endian uint64) holds a destination's entry for one batch: the
	// positions it wrote, or intends to write, awaiting the source ack
	// (dedup/).
	PrefixDedup = "conduit/dedup/"
	// PrefixAPIPipeline + "<pipeline id>" holds a pipeline created through
	// the API, and PrefixAPIPipelineFile + "<sha256>" the text of a file
	// pipelines were applied with, kept while one of them needs it
	// (pkg/supervision).
	PrefixAPIPipeline     = "conduit/api-pipeline/"
	PrefixAPIPipelineFile = "conduit/api-pipeline-file/"
	// PrefixManagedRule + "<rule name>" holds a recovery rule managed
	// through the API: its YAML and where it was loaded from
	// (pkg/managedrules).
	PrefixManagedRule = "conduit/managed-rule/"
	// KeyProcess is present while a conduit process runs on the store and
	// removed by its clean shutdown: found at startup, it says the last
	// process crashed (pkg/conduit).
	KeyProcess = "conduit/process"
	// PrefixConnectorState + "<pipeline id>/<connector id>" holds a
	// connector's own durable memory (connector.State; pkg/assembly hands it
	// to connectors, the file destination keeps what it wrote there).
	PrefixConnectorState = "conduit/connector-state/"
	// PrefixSchema holds the built-in schema registry's schemas (see
	// pkg/schemaregistry for the keys under it): the Avro schemas Conduit's
	// avro processors register and look up by id.
	PrefixSchema = "conduit/schema/"
	// PrefixNotifyOutbox + "<target>/<time>/<subject>/<n>" holds a
	// notification not yet delivered to its target (pkg/notify).
	PrefixNotifyOutbox = "conduit/notify-outbox/"
)

// KeyPart escapes an id (a pipeline's, a connector's) for use as one
// segment of a key: '%' and '/' become %25 and %2F, so that the '/' that
// ends the segment is the only one in it, and one id's key range can never
// reach into another's. Ids without those characters are unchanged.
func KeyPart(id string) string {
	if !strings.ContainsAny(id, "%/") {
		return id
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(id)
}

// ParseKeyPart reverses KeyPart; ok is false for text KeyPart cannot have
// written.
func ParseKeyPart(esc string) (id string, ok bool) {
	if !strings.Contains(esc, "%") {
		return esc, true
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		if esc[i] != '%' {
			b.WriteByte(esc[i])
			continue
		}
		switch esc[i:min(i+3, len(esc))] {
		case "%25":
			b.WriteByte('%')
		case "%2F":
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// PipelineOfKey returns the pipeline a key of the runtime's state belongs
// to - its persisted state, a position, a dedup entry, an audit event or a
// connector's state - and false for keys that belong to no pipeline (the
// process marker, managed rules, applied pipeline files). It is how writes
// are fenced by their pipeline's lease when several processes share a
// database.
func PipelineOfKey(key []byte) (string, bool) {
	k := string(key)
	if rest, ok := strings.CutPrefix(k, PrefixPipelineState); ok {
		return rest, rest != ""
	}
	for _, prefix := range []string{PrefixPosition, PrefixDedup, PrefixAuditLog, PrefixConnectorState} {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		esc, _, found := strings.Cut(rest, "/")
		if !found || esc == "" {
			return "", false
		}
		return ParseKeyPart(esc)
	}
	return "", false
}
