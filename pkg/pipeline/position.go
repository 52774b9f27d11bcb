package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/conduitry/conduit/pkg/jsonenc"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// positionFormatVersion is the version of the persisted position record.
// WARNING: the format is pinned by testdata/position.golden.json; a change
// needs a new version and a reader for the old one.
const positionFormatVersion = 1

// persistedPosition is the value stored under store.PrefixPosition.
type persistedPosition struct {
	Version int `json:"version"`
	// Position is the source's opaque position, base64 in JSON.
	Position []byte    `json:"position"`
	SavedAt  time.Time `json:"savedAt"`
}

// PositionStore keeps, per pipeline and source connector, the position the
// source resumes from.
type PositionStore struct {
	db     store.Store
	writer *store.Batcher
	now    func() time.Time
}

// NewPositionStore returns a PositionStore reading db and writing through
// w (the Batcher of db), so that many pipelines saving at once share disk
// syncs; now may be nil (time.Now).
func NewPositionStore(db store.Store, w *store.Batcher, now func() time.Time) *PositionStore {
	if now == nil {
		now = time.Now
	}
	return &PositionStore{db: db, writer: w, now: now}
}

func positionKey(pipelineID, connectorID string) []byte {
	return []byte(store.PrefixPosition + store.KeyPart(pipelineID) + "/" + store.KeyPart(connectorID))
}

// Load returns the persisted position, or nil when there is none (a first
// start reads from the beginning).
func (s *PositionStore) Load(ctx context.Context, pipelineID, connectorID string) (record.Position, error) {
	raw, err := s.db.Get(ctx, positionKey(pipelineID, connectorID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load position of %s/%s: %w", pipelineID, connectorID, err)
	}
	pos, err := decodePosition(raw)
	if err != nil {
		return nil, fmt.Errorf("load position of %s/%s: %w", pipelineID, connectorID, err)
	}
	return pos, nil
}

// SaveLater submits pos as the position to resume from, and the writes in
// with in the same commit (either all happen or none), without waiting:
// done gets the result once the write is durable (see Positions).
func (s *PositionStore) SaveLater(pipelineID, connectorID string, pos record.Position, with []store.Op, done func(error)) error {
	// Encoded by the writer at its commit: of the positions an acker offers
	// while a commit is under way, only the last is ever encoded.
	pos, savedAt := bytes.Clone(pos), s.now()
	ops := make([]store.Op, 0, 1+len(with))
	ops = append(ops, store.Op{Key: positionKey(pipelineID, connectorID),
		Encode: func(dst []byte) ([]byte, error) { return appendPosition(dst, pos, savedAt) }})
	ops = append(ops, with...)
	// Positions and the dedup entries they delete are on the records'
	// path: they go in the urgent lane, as the entries did.
	_, err := s.writer.Submit(store.WriteOptions{Priority: store.Urgent, Done: func(err error) {
		if err != nil {
			err = fmt.Errorf("save position of %s/%s: %w", pipelineID, connectorID, err)
		}
		done(err)
	}}, ops...)
	if err != nil {
		return fmt.Errorf("save position of %s/%s: %w", pipelineID, connectorID, err)
	}
	return nil
}

func encodePosition(pos record.Position, savedAt time.Time) ([]byte, error) {
	return appendPosition(nil, pos, savedAt)
}

// appendPosition appends the persisted form of pos to dst: json.Marshal's
// bytes, written without reflection - every acknowledged batch saves a
// position (TestPositionEncoderMatchesJSON).
func appendPosition(dst []byte, pos record.Position, savedAt time.Time) ([]byte, error) {
	p := persistedPosition{Version: positionFormatVersion, Position: pos, SavedAt: savedAt.UTC()}
	e := jsonenc.New(dst)
	e.Raw(`{"version":`)
	e.Int(int64(p.Version))
	e.Raw(`,"position":`)
	e.Bytes(p.Position)
	e.Raw(`,"savedAt":`)
	e.Time(p.SavedAt)
	e.Raw("}")
	if e.OK {
		return e.Buf, nil
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return dst, err
	}
	return append(dst, raw...), nil
}

func decodePosition(raw []byte) (record.Position, error) {
	var p persistedPosition
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("persisted position is corrupt: %w", err)
	}
	if p.Version != positionFormatVersion {
		return nil, fmt.Errorf("persisted position has format version %d, this build reads version %d", p.Version, positionFormatVersion)
	}
	return p.Position, nil
}
