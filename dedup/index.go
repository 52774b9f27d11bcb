package dedup

import (
	"bytes"
	"sync"

	"github.com/conduitry/conduit/pkg/store"
)

// keyIndex knows, in a process that owns its store alone, which
// destinations have entries, so that a run's Open does not scan the store
// for a destination that has none - in a fault storm every restarted
// destination's scan found nothing, and the scans were a tenth of the
// storm's CPU. It follows every write of the Batcher (store.WriteWatcher)
// and holds a superset of the entries in the store: a key counts from when
// its write is submitted, and stops counting once its delete committed. A
// commit of entries that failed leaves the store unknown, and Open scans
// from then on. It is known once Sweep built it from a scan of every
// entry; until then Open scans too.
type keyIndex struct {
	mu     sync.Mutex
	known  bool
	broken bool
	keys   map[string]struct{}
	// perDestination counts the keys under each destination's prefix.
	perDestination map[string]int
}

// dedupPrefix is store.PrefixDedup as bytes, for the checks of every op
// the writer commits.
var dedupPrefix = []byte(store.PrefixDedup)

func newKeyIndex() *keyIndex {
	return &keyIndex{keys: map[string]struct{}{}, perDestination: map[string]int{}}
}

// destinationOf returns the destination prefix of an entry's key
// (PrefixDedup, the pipeline, the destination, each followed by "/"; the
// ids are escaped, so the first two slashes after PrefixDedup end them).
func destinationOf(key []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(key, dedupPrefix)
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	j := bytes.IndexByte(rest[i+1:], '/')
	if j < 0 {
		return "", false
	}
	return string(key[:len(store.PrefixDedup)+i+1+j+1]), true
}

// add counts key; mu is held.
func (x *keyIndex) add(key []byte) {
	prefix, ok := destinationOf(key)
	if !ok {
		return
	}
	if _, ok := x.keys[string(key)]; ok {
		return
	}
	x.keys[string(key)] = struct{}{}
	x.perDestination[prefix]++
}

// Submitted counts the entries a write sets.
func (x *keyIndex) Submitted(ops []store.Op) {
	for i := range ops {
		if ops[i].Delete || !bytes.HasPrefix(ops[i].Key, dedupPrefix) {
			continue
		}
		x.mu.Lock()
		x.add(ops[i].Key)
		x.mu.Unlock()
	}
}

// Committed stops counting the entries a commit deleted; a failed commit
// of entries makes the index unknown.
func (x *keyIndex) Committed(ops []store.Op, err error) {
	for i := range ops {
		if !bytes.HasPrefix(ops[i].Key, dedupPrefix) {
			continue
		}
		x.mu.Lock()
		switch {
		case err != nil:
			x.broken = true
		case ops[i].Delete:
			if _, ok := x.keys[string(ops[i].Key)]; ok {
				delete(x.keys, string(ops[i].Key))
				prefix, _ := destinationOf(ops[i].Key)
				if x.perDestination[prefix]--; x.perDestination[prefix] <= 0 {
					delete(x.perDestination, prefix)
				}
			}
		}
		x.mu.Unlock()
	}
}

// build counts keys, the entries a scan of the store found, and makes the
// index known.
func (x *keyIndex) build(keys [][]byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		x.add(k)
	}
	x.known = true
}

// none reports whether the destination of prefix surely has no entry.
func (x *keyIndex) none(prefix []byte) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.known && !x.broken && x.perDestination[string(prefix)] == 0
}
