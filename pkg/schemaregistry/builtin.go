package schemaregistry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/store"
)

// Keys under store.PrefixSchema.
//
// WARNING: these are part of the on-disk format (testdata/builtin.golden.json
// pins them); a change needs a migration.
const (
	// keyLastID holds the last id given to a schema, in decimal.
	keyLastID = store.PrefixSchema + "last-id"
	// prefixID + "<id, 10 decimal digits>" holds a schema (storedSchema).
	prefixID = store.PrefixSchema + "id/"
	// prefixFingerprint + "<sha-256 of type and text, hex>" holds the id of
	// that schema: the same schema gets one id in every subject, as in
	// Confluent's registry.
	prefixFingerprint = store.PrefixSchema + "fingerprint/"
	// prefixSubject + "<subject>\x00<version, 10 decimal digits>" holds the
	// id of that version of the subject.
	prefixSubject = store.PrefixSchema + "subject/"
	// prefixSubjectLast + "<subject>" holds the subject's last version.
	prefixSubjectLast = store.PrefixSchema + "subject-last/"
	// prefixSubjectSchema + "<subject>\x00<fingerprint>" holds the version
	// a schema already has in a subject: registering it again answers
	// that version instead of adding one.
	prefixSubjectSchema = store.PrefixSchema + "subject-schema/"
)

// LatestVersion asks SchemaBySubjectVersion for a subject's newest version,
// as -1 does in Confluent's API.
const LatestVersion = -1

// storedSchema is a schema as the store keeps it.
type storedSchema struct {
	Type   string `json:"type"`
	Schema string `json:"schema"`
}

// ErrNotFound is wrapped by lookups of an id, subject or version the
// registry does not have. It carries code 404: a record naming a schema
// that is not there will not decode on a retry either.
var ErrNotFound = errors.New("schema not found")

// Builtin is the schema registry conduit keeps in its own store - Badger
// by default, PostgreSQL in cluster mode - so that what an avro.encode
// wrote in one run decodes in the next, and in another process sharing the
// store. Schemas are immutable once registered, so lookups are answered
// from memory after the first.
//
// A registration reads the last id and the subject's last version and
// writes the next ones. That read-modify-write is one Commit of the store
// whose ops Expect what was read (serializable in PostgreSQL), not a write
// through the batcher: two processes registering at once must not hand out
// one id twice. The one whose keys changed meanwhile reads again and
// retries. Registrations happen once per new schema, so they are rare.
type Builtin struct {
	db store.Store
	// registerMu makes the registrations of this process take turns, so
	// that they do not fail each other's commits; other processes'
	// registrations are caught by the commit's expects.
	registerMu sync.Mutex

	mu        sync.RWMutex
	byID      map[int]sr.Schema
	byVersion map[subjectVersion]sr.SubjectSchema
	// bySchema maps subject and fingerprint to what registering that
	// schema under that subject answered.
	bySchema map[subjectVersion]sr.SubjectSchema
}

type subjectVersion struct {
	subject string
	version string // a version number, or a fingerprint in bySchema
}

// NewBuiltin returns the registry kept in db.
func NewBuiltin(db store.Store) *Builtin {
	return &Builtin{db: db, byID: map[int]sr.Schema{}, byVersion: map[subjectVersion]sr.SubjectSchema{},
		bySchema: map[subjectVersion]sr.SubjectSchema{}}
}

// CreateSchema registers schema under subject and returns its id and
// version. Registering a schema the subject already has returns the
// version it has; a new one becomes the subject's next version, with the
// id the same schema has under another subject, or a new one. Only Avro
// schemas are accepted, and only ones that parse.
func (b *Builtin) CreateSchema(ctx context.Context, subject string, schema sr.Schema) (sr.SubjectSchema, error) {
	if err := checkSubject(subject); err != nil {
		return sr.SubjectSchema{}, err
	}
	if schema.Type != sr.TypeAvro {
		return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q: schema type %s: the built-in schema registry keeps Avro schemas only", subject, schema.Type), cerrors.CodeBadRequest)
	}
	if len(schema.References) > 0 {
		return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q: the built-in schema registry does not resolve schema references", subject), cerrors.CodeBadRequest)
	}
	if _, err := avro.ParseWithCache(schema.Schema, "", &avro.SchemaCache{}); err != nil {
		return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q: invalid Avro schema: %w", subject, err), cerrors.CodeBadRequest)
	}
	fp := fingerprint(schema)
	b.mu.RLock()
	ss, ok := b.bySchema[subjectVersion{subject, fp}]
	b.mu.RUnlock()
	if ok {
		return ss, nil
	}

	var id, version int
	b.registerMu.Lock()
	err := b.register(ctx, func(tx *registration) error {
		id, version = 0, 0
		if v, err := tx.get([]byte(prefixSubjectSchema + subject + "\x00" + fp)); err == nil {
			version, err = strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("version of subject %q: %w", subject, err)
			}
			idBytes, err := tx.get(subjectKey(subject, version))
			if err != nil {
				return fmt.Errorf("subject %q version %d: %w", subject, version, err)
			}
			id, err = strconv.Atoi(string(idBytes))
			return err
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var err error
		if id, err = b.idOf(tx, schema, fp); err != nil {
			return err
		}
		last, err := getInt(tx, prefixSubjectLast+subject)
		if err != nil {
			return err
		}
		version = last + 1
		tx.set(subjectKey(subject, version), []byte(strconv.Itoa(id)))
		tx.set([]byte(prefixSubjectLast+subject), []byte(strconv.Itoa(version)))
		tx.set([]byte(prefixSubjectSchema+subject+"\x00"+fp), []byte(strconv.Itoa(version)))
		return nil
	})
	b.registerMu.Unlock()
	if err != nil {
		return sr.SubjectSchema{}, fmt.Errorf("register a schema under subject %q: %w", subject, err)
	}
	ss = sr.SubjectSchema{Subject: subject, Version: version, ID: id, Schema: schema}
	b.mu.Lock()
	b.byID[id] = schema
	b.byVersion[subjectVersion{subject, strconv.Itoa(version)}] = ss
	b.bySchema[subjectVersion{subject, fp}] = ss
	b.mu.Unlock()
	return ss, nil
}

// idOf returns the id schema has, giving it the next one if it has none.
func (b *Builtin) idOf(tx *registration, schema sr.Schema, fp string) (int, error) {
	if v, err := tx.get([]byte(prefixFingerprint + fp)); err == nil {
		return strconv.Atoi(string(v))
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	last, err := getInt(tx, keyLastID)
	if err != nil {
		return 0, err
	}
	id := last + 1
	encoded, err := json.Marshal(storedSchema{Type: schema.Type.String(), Schema: schema.Schema})
	if err != nil {
		return 0, err
	}
	tx.set(idKey(id), encoded)
	tx.set([]byte(prefixFingerprint+fp), []byte(strconv.Itoa(id)))
	tx.set([]byte(keyLastID), []byte(strconv.Itoa(id)))
	return id, nil
}

// SchemaByID returns the schema with id.
func (b *Builtin) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	b.mu.RLock()
	s, ok := b.byID[id]
	b.mu.RUnlock()
	if ok {
		return s, nil
	}
	v, err := b.db.Get(ctx, idKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return sr.Schema{}, cerrors.WithCode(fmt.Errorf("schema id %d: %w", id, ErrNotFound), cerrors.CodeNotFound)
	}
	if err != nil {
		return sr.Schema{}, fmt.Errorf("schema id %d: %w", id, err)
	}
	var stored storedSchema
	if err := json.Unmarshal(v, &stored); err != nil {
		return sr.Schema{}, fmt.Errorf("schema id %d: stored schema unreadable: %w", id, err)
	}
	var typ sr.SchemaType
	if err := typ.UnmarshalText([]byte(stored.Type)); err != nil {
		return sr.Schema{}, fmt.Errorf("schema id %d: stored schema type %q: %w", id, stored.Type, err)
	}
	s = sr.Schema{Type: typ, Schema: stored.Schema}
	b.mu.Lock()
	b.byID[id] = s
	b.mu.Unlock()
	return s, nil
}

// SchemaBySubjectVersion returns version of subject, or its newest with
// LatestVersion.
func (b *Builtin) SchemaBySubjectVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error) {
	if err := checkSubject(subject); err != nil {
		return sr.SubjectSchema{}, err
	}
	if version == LatestVersion {
		// The newest version changes; it is not cached.
		v, err := b.db.Get(ctx, []byte(prefixSubjectLast+subject))
		if errors.Is(err, store.ErrNotFound) {
			return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q: %w", subject, ErrNotFound), cerrors.CodeNotFound)
		}
		if err != nil {
			return sr.SubjectSchema{}, fmt.Errorf("subject %q: %w", subject, err)
		}
		if version, err = strconv.Atoi(string(v)); err != nil {
			return sr.SubjectSchema{}, fmt.Errorf("subject %q: last version %q: %w", subject, v, err)
		}
	}
	if version <= 0 {
		return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q: version %d: versions count from 1 (or -1 for the latest)", subject, version), cerrors.CodeBadRequest)
	}
	key := subjectVersion{subject, strconv.Itoa(version)}
	b.mu.RLock()
	ss, ok := b.byVersion[key]
	b.mu.RUnlock()
	if ok {
		return ss, nil
	}
	v, err := b.db.Get(ctx, subjectKey(subject, version))
	if errors.Is(err, store.ErrNotFound) {
		return sr.SubjectSchema{}, cerrors.WithCode(fmt.Errorf("subject %q version %d: %w", subject, version, ErrNotFound), cerrors.CodeNotFound)
	}
	if err != nil {
		return sr.SubjectSchema{}, fmt.Errorf("subject %q version %d: %w", subject, version, err)
	}
	id, err := strconv.Atoi(string(v))
	if err != nil {
		return sr.SubjectSchema{}, fmt.Errorf("subject %q version %d: stored id %q: %w", subject, version, v, err)
	}
	s, err := b.SchemaByID(ctx, id)
	if err != nil {
		return sr.SubjectSchema{}, fmt.Errorf("subject %q version %d: %w", subject, version, err)
	}
	ss = sr.SubjectSchema{Subject: subject, Version: version, ID: id, Schema: s}
	b.mu.Lock()
	b.byVersion[key] = ss
	b.mu.Unlock()
	return ss, nil
}

func checkSubject(subject string) error {
	if subject == "" || strings.ContainsRune(subject, 0) {
		return cerrors.WithCode(fmt.Errorf("subject %q: a subject is a non-empty name without NUL bytes", subject), cerrors.CodeBadRequest)
	}
	return nil
}

// fingerprint identifies a schema by its type and text.
func fingerprint(s sr.Schema) string {
	h := sha256.New()
	h.Write([]byte(s.Type.String()))
	h.Write([]byte{0})
	h.Write([]byte(s.Schema))
	return hex.EncodeToString(h.Sum(nil))
}

func idKey(id int) []byte { return fmt.Appendf(nil, "%s%010d", prefixID, id) }

func subjectKey(subject string, version int) []byte {
	return fmt.Appendf(nil, "%s%s\x00%010d", prefixSubject, subject, version)
}

// getInt reads a decimal counter, 0 when it is not there yet.
func getInt(tx *registration, key string) (int, error) {
	v, err := tx.get([]byte(key))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, fmt.Errorf("%s holds %q, not a number: %w", key, v, err)
	}
	return n, nil
}

// maxRegisterAttempts bounds how often a registration reads again after
// other processes' registrations changed what it read.
const maxRegisterAttempts = 50

// registration is one attempt at a registration: it reads the store and
// gathers writes, each of which expects its key to hold what the attempt
// read (or to be absent when it was), so that the commit lands only if no
// other writer came between.
//
// Keys read and not written (a schema's id, a subject's version of it)
// need no expect: once written they never change.
type registration struct {
	ctx  context.Context
	db   store.Store
	read map[string]store.Expect
	ops  []store.Op
}

// register runs fn on fresh reads and commits what it set, again while
// the commit conflicts with another process's writes. If fn returns an
// error, nothing is written and register returns it.
func (b *Builtin) register(ctx context.Context, fn func(tx *registration) error) error {
	for attempt := 1; ; attempt++ {
		tx := &registration{ctx: ctx, db: b.db, read: map[string]store.Expect{}}
		if err := fn(tx); err != nil {
			return err
		}
		if len(tx.ops) == 0 {
			return nil
		}
		err := b.db.Commit(ctx, tx.ops)
		if !errors.Is(err, store.ErrConflict) || attempt == maxRegisterAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// get reads key from the store and remembers what it held.
func (tx *registration) get(key []byte) ([]byte, error) {
	v, err := tx.db.Get(tx.ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		tx.read[string(key)] = store.Expect{Absent: true}
	case err == nil:
		tx.read[string(key)] = store.Expect{Value: v}
	}
	return v, err
}

// set writes value under key at the commit, if key still holds what get
// read.
func (tx *registration) set(key, value []byte) {
	op := store.Op{Key: key, Value: value}
	if e, ok := tx.read[string(key)]; ok {
		op.Expect = &e
	}
	tx.ops = append(tx.ops, op)
}
