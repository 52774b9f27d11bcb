package instance

import (
	"iter"
	"maps"
)

// leaseShards is how many maps a leaseTable is split into.
const leaseShards = 256

// leaseTable is the leases an instance holds, by pipeline, as a published
// state has them: never changed once published. It is split into
// leaseShards maps by a hash of the pipeline id, so that a change copies
// the one map it changes and the table of maps, not every lease: a copy of
// the whole table for each of a thousand take-ups would copy half a
// million leases.
type leaseTable struct {
	shards *[leaseShards]map[string]heldLease
	n      int
}

// shardOf is the shard of a pipeline's lease (FNV-1a of its id).
func shardOf(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % leaseShards)
}

// get is the lease held for a pipeline.
func (t leaseTable) get(id string) (heldLease, bool) {
	if t.shards == nil {
		return heldLease{}, false
	}
	l, ok := t.shards[shardOf(id)][id]
	return l, ok
}

// len is how many leases are held.
func (t leaseTable) len() int { return t.n }

// all are the leases held, in no order.
func (t leaseTable) all() iter.Seq[heldLease] {
	return func(yield func(heldLease) bool) {
		if t.shards == nil {
			return
		}
		for _, shard := range t.shards {
			for _, l := range shard {
				if !yield(l) {
					return
				}
			}
		}
	}
}

// leaseCopies is what a draft copied of the lease table it was made from.
type leaseCopies struct {
	table  bool
	shards [leaseShards]bool
}

// ownShard makes the shard of id the draft's own, copying it and the
// table of shards the first time, and returns it.
func (d *draft) ownShard(id string) map[string]heldLease {
	c := &d.copied.leases
	if !c.table {
		table := new([leaseShards]map[string]heldLease)
		if d.leases.shards != nil {
			*table = *d.leases.shards
		}
		d.leases.shards, c.table = table, true
	}
	i := shardOf(id)
	if !c.shards[i] {
		shard := maps.Clone(d.leases.shards[i])
		if shard == nil {
			shard = map[string]heldLease{}
		}
		d.leases.shards[i], c.shards[i] = shard, true
	}
	return d.leases.shards[i]
}

// setLease records the lease held for a pipeline.
func (d *draft) setLease(id string, l heldLease) {
	shard := d.ownShard(id)
	if _, ok := shard[id]; !ok {
		d.leases.n++
	}
	shard[id] = l
}

// deleteLease forgets the lease held for a pipeline.
func (d *draft) deleteLease(id string) {
	if _, ok := d.leases.get(id); !ok {
		return
	}
	delete(d.ownShard(id), id)
	d.leases.n--
}
