package assembly

import (
	"context"
	"errors"

	"github.com/conduitry/conduit/pkg/store"
)

// connectorState is a connector's durable memory (connector.State), one key
// of the store per pipeline and connector. Saves go through the store's
// one writer (store.Batcher); they are rare (the file
// destination saves at open and at a clean stop).
type connectorState struct {
	db  store.Store
	w   *store.Batcher
	key []byte
}

func newConnectorState(db store.Store, w *store.Batcher, pipelineID, connectorID string) connectorState {
	return connectorState{db: db, w: w, key: connectorStateKey(pipelineID, connectorID)}
}

// connectorStateKey is store.PrefixConnectorState + "<pipeline>/<connector>".
func connectorStateKey(pipelineID, connectorID string) []byte {
	return []byte(store.PrefixConnectorState + store.KeyPart(pipelineID) + "/" + store.KeyPart(connectorID))
}

// Load returns the saved value, or nil when there is none.
func (s connectorState) Load(ctx context.Context) ([]byte, error) {
	v, err := s.db.Get(ctx, s.key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// Save stores value durably.
func (s connectorState) Save(ctx context.Context, value []byte) error {
	return s.w.Apply(ctx, store.Op{Key: s.key, Value: value})
}
