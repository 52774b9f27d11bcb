package instance

import (
	"sync"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
)

// pendingDeletion is a pipeline deleted while another instance held it.
type pendingDeletion struct {
	cfg   config.Pipeline
	actor lifecycle.Actor
}

// deletions are the pipelines deleted while another instance held them,
// deleted once their lease is free. A plan (Deleted) and the balance loop
// (retryDeletions) change them, one at a time (a plan is not applied
// while pipelines change hands); the balance loop also asks whether there
// are any before its round.
type deletions struct {
	mu      sync.Mutex
	pending map[string]pendingDeletion
}

func newDeletions() *deletions { return &deletions{pending: map[string]pendingDeletion{}} }

func (d *deletions) add(p pendingDeletion) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending[p.cfg.ID] = p
}

func (d *deletions) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, id)
}

func (d *deletions) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.pending[id]
	return ok
}

func (d *deletions) any() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending) > 0
}

// list returns the pending deletions, in no order.
func (d *deletions) list() []pendingDeletion {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]pendingDeletion, 0, len(d.pending))
	for _, p := range d.pending {
		out = append(out, p)
	}
	return out
}

// removeIf forgets the pending deletions of the pipelines drop says.
func (d *deletions) removeIf(drop func(id string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.pending {
		if drop(id) {
			delete(d.pending, id)
		}
	}
}
