// Package service runs the long-lived parts of a process as one tree with
// one shutdown order, in the style of suture: services are launched in the
// order they were added, each on a goroutine of its own (one that needs
// another one running waits for it itself), and stop in the reverse
// order, each once every service added after it has returned, so a part
// never outlives what it serves
// (the API outlives the pipelines it shows, the pipelines' leases outlive
// the pipelines). The tree stops when its context ends, when a service
// returns an error, or when anything calls Fail; the first of these is
// the tree's cause. Services are not restarted: a pipeline's supervisor
// already is that, and a failed process part is a reason to stop.
package service

import (
	"context"
	"fmt"
	"sync"
)

// Service is one part of the process. Serve runs until ctx ends and then
// returns; an error it returns before that stops the tree.
type Service interface {
	Serve(ctx context.Context) error
}

// Func makes a function a Service.
type Func func(ctx context.Context) error

// Serve calls f.
func (f Func) Serve(ctx context.Context) error { return f(ctx) }

// Tree is the process's services. The zero value is not usable; call New.
type Tree struct {
	mu       sync.Mutex
	nodes    []node
	cause    error
	failed   chan struct{} // closed by the first Fail
	stopping context.Context
	stop     context.CancelFunc
	onStop   func(cause error)
}

type node struct {
	name string
	svc  Service
}

// New returns an empty tree. onStop, if set, is told when the tree begins
// to stop, with the cause (nil: the context given to Run ended).
func New(onStop func(cause error)) *Tree {
	t := &Tree{failed: make(chan struct{}), onStop: onStop}
	t.stopping, t.stop = context.WithCancel(context.Background())
	return t
}

// Add appends a service; it starts after those added before it and stops
// before them. Adding after Run started has no effect on that run.
func (t *Tree) Add(name string, s Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodes = append(t.nodes, node{name: name, svc: s})
}

// Fail stops the tree with cause err, unless it has a cause already. It may
// be called before Run (the run then stops as soon as it started) and
// from any goroutine; it does not wait.
func (t *Tree) Fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cause == nil && err != nil {
		t.cause = err
		close(t.failed)
	}
}

// Stopping is done once the tree began to stop: a service that should
// take on no new work from then on (a new pipeline, a lease) watches it.
func (t *Tree) Stopping() context.Context { return t.stopping }

// Run starts every service, waits until the tree is to stop, stops them
// in reverse order and returns the cause: nil when ctx ended, else the
// error of Fail or of the first service that failed (named). Each service
// gets a context of its own, not ctx: it ends at that service's turn to
// stop.
func (t *Tree) Run(ctx context.Context) error {
	t.mu.Lock()
	nodes := append([]node(nil), t.nodes...)
	t.mu.Unlock()
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	started := make([]running, len(nodes))
	for i, n := range nodes {
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		started[i] = running{cancel: cancel, done: done}
		go func() {
			defer close(done)
			if err := n.svc.Serve(sctx); err != nil && sctx.Err() == nil {
				t.Fail(fmt.Errorf("%s: %w", n.name, err))
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-t.failed:
	}
	t.mu.Lock()
	cause := t.cause
	t.mu.Unlock()
	t.stop()
	if t.onStop != nil {
		t.onStop(cause)
	}
	for i := len(started) - 1; i >= 0; i-- {
		started[i].cancel()
		<-started[i].done
	}
	return cause
}
