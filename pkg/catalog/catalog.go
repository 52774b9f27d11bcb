// Package catalog keeps what users create through the API rather than in
// files: pipelines applied with ApplyPipelines (with the file they came
// in, kept once per content) and managed recovery rules. It owns their
// keys and persisted formats, and reads them back; pkg/supervision turns
// the pipelines into desired ones and pkg/managedrules the rules into
// effective ones, and each writes them through the store's one writer,
// together with what else a change writes.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

// The formats of the records the catalog persists: pipelines created
// through the API (store.PrefixAPIPipeline) and managed recovery rules
// (store.PrefixManagedRule). testdata/*.golden.json pins each.
//
// WARNING: these are part of the on-disk format. A change that an older
// record no longer decodes as needs a new version and a reader of the old
// one.
const (
	// pipelineVersion is the version of Pipeline. Records written before
	// it carried a version have none, and read as version 1.
	pipelineVersion = 1
	// ruleVersion is the version of Rule; a record without one
	// reads as version 1.
	ruleVersion = 1
)

// Pipeline is a pipeline created through the API as the store keeps
// it. The file it was applied with is kept beside it, once for all its
// pipelines (PrefixAPIPipelineFile + its hash), and parsed again at every
// start, so that the pipeline is read exactly as a file under
// pipelines.path is, and errors name the lines the user wrote.
type Pipeline struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Name is the file's name on the client, for messages.
	Name      string    `json:"name"`
	FileHash  string    `json:"fileHash"`
	AppliedAt time.Time `json:"appliedAt"`
}

// Rule is a managed recovery rule as the store keeps it: its YAML as
// written, read again at every start with the parser of rules files.
type Rule struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	YAML    string `json:"yaml"`
	// File and Line say where it was loaded from (the client's file).
	File     string    `json:"file"`
	Line     int       `json:"line"`
	LoadedAt time.Time `json:"loadedAt"`
}

// EncodePipeline is sp as the store keeps it, in the current version.
func EncodePipeline(sp Pipeline) ([]byte, error) {
	sp.Version = pipelineVersion
	return json.Marshal(sp)
}

// DecodePipeline reads a stored pipeline of this version or an older one.
func DecodePipeline(data []byte) (Pipeline, error) {
	return decode(data, func(p *Pipeline) *int { return &p.Version }, pipelineVersion)
}

// EncodeRule is sr as the store keeps it, in the current version.
func EncodeRule(sr Rule) ([]byte, error) {
	sr.Version = ruleVersion
	return json.Marshal(sr)
}

// DecodeRule reads a stored rule of this version or an older one.
func DecodeRule(data []byte) (Rule, error) {
	return decode(data, func(r *Rule) *int { return &r.Version }, ruleVersion)
}

// decode reads a record of version current or older; version is its
// version field.
func decode[T any](data []byte, version func(*T) *int, current int) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return *new(T), err
	}
	if err := checkVersion(version(&v), current); err != nil {
		return *new(T), err
	}
	return v, nil
}

// checkVersion takes a record without a version (written before
// records carried one) as version 1, and refuses one newer than current:
// a newer conduit wrote it, in a format this one cannot know.
func checkVersion(version *int, current int) error {
	if *version == 0 {
		*version = 1
	}
	if *version > current {
		return fmt.Errorf("format version %d, this conduit reads %d", *version, current)
	}
	return nil
}

// PipelineKey is the key of the pipeline id created through the API.
func PipelineKey(id string) []byte { return []byte(store.PrefixAPIPipeline + store.KeyPart(id)) }

// FileKey is the key of an applied file, by its FileHash.
func FileKey(hash string) []byte { return []byte(store.PrefixAPIPipelineFile + hash) }

// FileHash is the hash an applied file is kept under: one copy per
// content, whatever the number of pipelines it holds.
func FileHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// RuleKey is the key of the managed rule name.
func RuleKey(name string) []byte { return []byte(store.PrefixManagedRule + store.KeyPart(name)) }

// LoadPipelines reads the pipelines created through the API and the files
// they came from, by FileHash (nil for a file that is missing). A record
// that does not decode - damaged, or written by a newer conduit - is
// returned by its id with the name "(unreadable)" and no file, so that the
// pipeline is listed as invalid rather than silently gone.
func LoadPipelines(ctx context.Context, db store.Store) ([]Pipeline, map[string][]byte, error) {
	var out []Pipeline
	err := db.Scan(ctx, []byte(store.PrefixAPIPipeline), func(key, value []byte) error {
		sp, err := DecodePipeline(value)
		if err != nil {
			sp = Pipeline{ID: string(key[len(store.PrefixAPIPipeline):]), Name: "(unreadable)"}
		}
		out = append(out, sp)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the pipelines created through the API: %w", err)
	}
	files := map[string][]byte{}
	for _, sp := range out {
		if _, ok := files[sp.FileHash]; ok || sp.FileHash == "" {
			continue
		}
		data, err := db.Get(ctx, FileKey(sp.FileHash))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, nil, fmt.Errorf("reading the file pipeline %s was applied with: %w", sp.ID, err)
		}
		files[sp.FileHash] = data
	}
	return out, files, nil
}

// ScanRules calls fn with every stored managed rule, in key order; err is
// set, and r empty, for a record that does not decode (key names it).
func ScanRules(ctx context.Context, db store.Store, fn func(key []byte, r Rule, err error)) error {
	err := db.Scan(ctx, []byte(store.PrefixManagedRule), func(key, value []byte) error {
		r, err := DecodeRule(value)
		fn(key, r, err)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the managed recovery rules: %w", err)
	}
	return nil
}
