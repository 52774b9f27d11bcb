package store

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
)

// InMemory is a Store in a map, for tests and `db.type: inmemory`. Nothing
// survives the process. It behaves like Badger where callers can tell:
// copies in and out, key-ordered snapshot scans, atomic commits.
type InMemory struct {
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

// Commit applies ops at once, in order; values are copied. It checks
// every op's Expect first, under the lock the writes take.
func (m *InMemory) Commit(ctx context.Context, ops []Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, op := range ops {
		if err := checkWrite(op); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, op := range ops {
		if op.Expect == nil {
			continue
		}
		v, ok := m.data[string(op.Key)]
		if !op.Expect.holds(v, ok) {
			return conflictError(op.Key)
		}
	}
	for _, op := range ops {
		if op.Delete {
			delete(m.data, string(op.Key))
		} else {
			m.data[string(op.Key)] = cloneValue(op.Value)
		}
	}
	return nil
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
