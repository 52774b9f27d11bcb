package instance

import (
	"sync"

	"github.com/conduitry/conduit/pkg/cluster"
)

// leaseTable is what this instance holds: the leases it acquired, those a
// renewal found taken over (revoked: nothing more is written under them)
// and not yet stopped (lost, for the balance loop). The balance loop's
// take-ups and hand-overs and the renewal loop change it; every write of
// the store and every destination write reads it (fenceOf, mayWrite), so
// it has a lock of its own, held only for a map operation.
type leaseTable struct {
	mu      sync.RWMutex
	held    map[string]cluster.Lease
	revoked map[string]bool
	lost    []cluster.Lease
}

func newLeaseTable() *leaseTable {
	return &leaseTable{held: map[string]cluster.Lease{}, revoked: map[string]bool{}}
}

// hold records a lease acquired.
func (t *leaseTable) hold(l cluster.Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held[l.PipelineID] = l
	delete(t.revoked, l.PipelineID)
}

// unhold forgets a lease this instance held and returns it.
func (t *leaseTable) unhold(id string) (cluster.Lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.held[id]
	delete(t.held, id)
	delete(t.revoked, id)
	return l, ok
}

// get is the lease held for a pipeline.
func (t *leaseTable) get(id string) (cluster.Lease, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l, ok := t.held[id]
	return l, ok
}

// writable reports whether the pipeline's lease is held and was not found
// taken over.
func (t *leaseTable) writable(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, held := t.held[id]
	return held && !t.revoked[id]
}

// still reports whether l is still the lease held for its pipeline (not
// given up or acquired again since).
func (t *leaseTable) still(l cluster.Lease) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.held[l.PipelineID] == l
}

func (t *leaseTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.held)
}

// all are the leases held, in no order.
func (t *leaseTable) all() []cluster.Lease {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]cluster.Lease, 0, len(t.held))
	for _, l := range t.held {
		out = append(out, l)
	}
	return out
}

// ids are the pipelines whose lease is held, in no order.
func (t *leaseTable) ids() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.held))
	for id := range t.held {
		out = append(out, id)
	}
	return out
}

// revoke marks leases another instance took over, those still held as
// they were, and queues them for the balance loop to stop their
// pipelines.
func (t *leaseTable) revoke(lost []cluster.Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range lost {
		if t.held[l.PipelineID] == l {
			t.revoked[l.PipelineID] = true
		}
	}
	t.lost = append(t.lost, lost...)
}

// takeLost returns the leases revoke queued since the last call.
func (t *leaseTable) takeLost() []cluster.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	lost := t.lost
	t.lost = nil
	return lost
}
