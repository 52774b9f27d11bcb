package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
)

// InMemory is a Store in a map, for tests and `db.type: inmemory`. Nothing
// survives the process. It behaves like Badger where callers can tell:
// copies in and out, key-ordered snapshot scans, atomic updates.
type InMemory struct {
	// updateMu serializes Update calls, standing in for Badger's conflict
	// detection: a read-modify-write in fn cannot interleave with another.
	// It is separate from mu so fn may still call Get/Set/Scan on the store.
	updateMu sync.Mutex

	mu     sync.RWMutex
	data   map[string][]byte
	closed bool
}

var _ Store = (*InMemory)(nil)

// NewInMemory returns an empty in-memory store.
func NewInMemory() *InMemory {
	return &InMemory{data: make(map[string][]byte)}
}

// Get returns a copy of the value of key, or ErrNotFound.
func (m *InMemory) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := checkOp(ctx, key); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	v, ok := m.data[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

// Set stores a copy of value under key.
func (m *InMemory) Set(ctx context.Context, key, value []byte) error {
	if err := checkOp(ctx, key); err != nil {
		return err
	}
	v := cloneValue(value)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.data[string(key)] = v
	return nil
}

// Delete removes key; a missing key is not an error.
func (m *InMemory) Delete(ctx context.Context, key []byte) error {
	if err := checkOp(ctx, key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.data, string(key))
	return nil
}

// Update runs fn with its writes buffered and applies them all at once if fn
// returns nil. Updates run one at a time, so fn runs exactly once.
func (m *InMemory) Update(ctx context.Context, fn func(tx Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.updateMu.Lock()
	defer m.updateMu.Unlock()

	if m.isClosed() {
		return ErrClosed
	}
	tx := &memTxn{store: m, writes: make(map[string]memWrite)}
	err := fn(tx)
	tx.done = true
	if err != nil {
		return err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for k, w := range tx.writes {
		if w.deleted {
			delete(m.data, k)
		} else {
			m.data[k] = w.value
		}
	}
	return nil
}

// Commit applies ops at once, in order; values are copied.
func (m *InMemory) Commit(ctx context.Context, ops []Op) error {
	return m.Update(ctx, func(tx Txn) error {
		for _, op := range ops {
			var err error
			if op.Delete {
				err = tx.Delete(op.Key)
			} else {
				err = tx.Set(op.Key, op.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Scan calls fn for every key with prefix in key order, on a snapshot taken
// when Scan starts, so fn may write to the store without deadlocking.
//
// The key and value slices passed to fn are reused between calls, as Badger's
// are: a caller that keeps them past the call sees them change here in tests
// instead of in production.
func (m *InMemory) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return m.scan(ctx, prefix, nil, false, fn)
}

// ScanFrom is Scan from the first key >= start; see Store.ScanFrom.
func (m *InMemory) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	return m.scan(ctx, prefix, start, false, fn)
}

// ScanReverse is Scan backwards from the last key <= start; see
// Store.ScanReverse.
func (m *InMemory) ScanReverse(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	return m.scan(ctx, prefix, start, true, fn)
}

// scan snapshots the keys with prefix on the right side of start (none:
// no bound) and calls fn for them in order.
func (m *InMemory) scan(ctx context.Context, prefix, start []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	type kv struct {
		key   string
		value []byte
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	p, bound := string(prefix), string(start)
	var snap []kv
	for k, v := range m.data {
		if !strings.HasPrefix(k, p) {
			continue
		}
		if bound != "" && (!reverse && k < bound || reverse && k > bound) {
			continue
		}
		// Stored values are never mutated in place (Set replaces them),
		// so the snapshot can share them.
		snap = append(snap, kv{key: k, value: v})
	}
	m.mu.RUnlock()

	slices.SortFunc(snap, func(a, b kv) int { return strings.Compare(a.key, b.key) })
	if reverse {
		slices.Reverse(snap)
	}

	done := ctx.Done()
	var keyBuf, valBuf []byte
	for _, e := range snap {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		keyBuf = append(keyBuf[:0], e.key...)
		valBuf = append(valBuf[:0], e.value...)
		if err := fn(keyBuf, valBuf); err != nil {
			return err
		}
	}
	return nil
}

// Close drops the data. It is safe to call more than once.
func (m *InMemory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.data = nil
	return nil
}

func (m *InMemory) isClosed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// errTxnDone is returned by a Txn used after its Update returned.
var errTxnDone = errors.New("transaction used after Update returned")

// memWrite is a buffered write of an in-memory transaction.
type memWrite struct {
	value   []byte
	deleted bool
}

// memTxn buffers writes until Update commits them; reads see the buffer
// first, then the store.
type memTxn struct {
	store  *InMemory
	writes map[string]memWrite
	// done makes use after Update returned fail loudly, as it does in Badger.
	done bool
}

func (t *memTxn) Get(key []byte) ([]byte, error) {
	if err := t.check(key); err != nil {
		return nil, err
	}
	if w, ok := t.writes[string(key)]; ok {
		if w.deleted {
			return nil, ErrNotFound
		}
		return bytes.Clone(w.value), nil
	}
	return t.store.Get(context.Background(), key)
}

func (t *memTxn) Set(key, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	t.writes[string(key)] = memWrite{value: cloneValue(value)}
	return nil
}

func (t *memTxn) Delete(key []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	t.writes[string(key)] = memWrite{deleted: true}
	return nil
}

func (t *memTxn) check(key []byte) error {
	if t.done {
		return errTxnDone
	}
	return checkKey(key)
}

// checkOp does the checks every single-key operation starts with.
func checkOp(ctx context.Context, key []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return checkKey(key)
}

// cloneValue copies value, turning nil into an empty value: Badger returns a
// stored nil as empty, and the two stores should not differ in that.
func cloneValue(value []byte) []byte {
	if value == nil {
		return []byte{}
	}
	return bytes.Clone(value)
}
