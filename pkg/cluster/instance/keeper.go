package instance

import (
	"context"
	"sync/atomic"
)

// keeper is the one goroutine that changes an instance's state
// (fleetState). The loops, plans and API calls send it changes - functions
// of a draft of the state - and read the state it last published, a value
// never changed once published: a write of the store reads its fence, and
// the API its listing, without waiting for anybody.
//
// A change only computes on the draft: it reads no clock (a caller that
// needs the time passes it in), does no I/O, logs nothing, calls no Host
// and never waits. So the keeper never waits on anything but its inbox,
// and anybody may send it a change whatever they hold - a plan holding the
// runtime's plan turn, a take-up holding a lease, the renewal loop in the
// middle of an outage - without a cycle of waits.
type keeper struct {
	changes   chan change
	published atomic.Pointer[fleetState]
	stop      context.CancelFunc
	done      chan struct{}
}

// change is a message to the keeper: apply changes the draft; applied is
// closed once the state it changed is published.
type change struct {
	apply   func(*draft)
	applied chan struct{}
}

// keeperBatch bounds the changes the keeper applies to one draft before
// it publishes it: changes sent at once (a hundred take-ups ending
// together) cost one copy of the state, not one each.
const keeperBatch = 64

// newKeeper starts the keeper of state; close ends it.
func newKeeper(state *fleetState) *keeper {
	ctx, stop := context.WithCancel(context.Background())
	k := &keeper{changes: make(chan change), stop: stop, done: make(chan struct{})}
	k.published.Store(state)
	go k.run(ctx)
	return k
}

func (k *keeper) run(ctx context.Context) {
	defer close(k.done)
	batch := make([]change, 0, keeperBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-k.changes:
			batch = append(batch[:0], c)
		}
	collect:
		for len(batch) < keeperBatch {
			select {
			case c := <-k.changes:
				batch = append(batch, c)
			default:
				break collect
			}
		}
		d := newDraft(k.published.Load())
		for _, c := range batch {
			c.apply(d)
		}
		k.published.Store(d.publish())
		for _, c := range batch {
			close(c.applied)
		}
		clear(batch)
	}
}

// state is the state the keeper published last.
func (k *keeper) state() *fleetState { return k.published.Load() }

// update sends the keeper a change and returns once the state it changed
// is published, so that whatever the caller does next sees it. Once the
// keeper has ended (the instance left the cluster) nothing is changed.
func (k *keeper) update(apply func(*draft)) {
	c := change{apply: apply, applied: make(chan struct{})}
	select {
	case k.changes <- c:
	case <-k.done:
		return
	}
	// Received, the change is published before the keeper looks at its
	// context again.
	<-c.applied
}

// close ends the keeper; the state it published last stays readable.
func (k *keeper) close() {
	k.stop()
	<-k.done
}
