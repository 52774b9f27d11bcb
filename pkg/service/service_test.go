package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// journal records the order services start and stop in.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// waiting is a service that records its start, waits for its context and
// records its stop; started is closed once it runs.
func waiting(j *journal, name string, started chan<- struct{}) Service {
	return Func(func(ctx context.Context) error {
		j.add("start " + name)
		if started != nil {
			close(started)
		}
		<-ctx.Done()
		j.add("stop " + name)
		return nil
	})
}

func TestTreeStopsInReverseOrderWhenItsContextEnds(t *testing.T) {
	j := &journal{}
	var causes []error
	tree := New(func(cause error) { causes = append(causes, cause) })
	started := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	for i, name := range []string{"api", "leases", "pipelines"} {
		tree.Add(name, waiting(j, name, started[i]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tree.Run(ctx) }()
	for _, s := range started {
		<-s
	}
	if tree.Stopping().Err() != nil {
		t.Fatal("Stopping is done before the tree began to stop")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v, want nil for an ended context", err)
	}
	got := j.all()
	if want := []string{"stop pipelines", "stop leases", "stop api"}; !slices.Equal(got[3:], want) {
		t.Fatalf("stops %q, want %q (each after those added later returned)", got[3:], want)
	}
	if tree.Stopping().Err() == nil {
		t.Fatal("Stopping is not done after the tree stopped")
	}
	if len(causes) != 1 || causes[0] != nil {
		t.Fatalf("onStop told %v, want once with nil", causes)
	}
}

func TestTreeStopsWhenAServiceFails(t *testing.T) {
	j := &journal{}
	tree := New(nil)
	apiStarted := make(chan struct{})
	tree.Add("api", waiting(j, "api", apiStarted))
	broken := errors.New("address in use")
	tree.Add("server", Func(func(ctx context.Context) error {
		<-apiStarted
		return broken
	}))
	tree.Add("pipelines", waiting(j, "pipelines", nil))
	err := tree.Run(context.Background())
	if !errors.Is(err, broken) || err.Error() != "server: address in use" {
		t.Fatalf("Run: %v, want the failed service's error, named", err)
	}
	if got := j.all(); !slices.Contains(got, "stop pipelines") || got[len(got)-1] != "stop api" {
		t.Fatalf("%q: every other service stopped, the first added last", got)
	}
}

func TestTreeFailedBeforeRunStopsAtOnceWithTheFirstCause(t *testing.T) {
	j := &journal{}
	tree := New(nil)
	tree.Add("pipelines", waiting(j, "pipelines", nil))
	first := errors.New("another process took the database")
	tree.Fail(first)
	tree.Fail(errors.New("a pipeline is degraded"))
	if err := tree.Run(context.Background()); !errors.Is(err, first) {
		t.Fatalf("Run: %v, want the first cause", err)
	}
	if got := j.all(); !slices.Equal(got, []string{"start pipelines", "stop pipelines"}) {
		t.Fatalf("%q: the service started and stopped", got)
	}
}

func TestTreeIgnoresAnErrorReturnedWhileStopping(t *testing.T) {
	tree := New(nil)
	tree.Add("pipelines", Func(func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("force-stopped")
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tree.Run(ctx); err != nil {
		t.Fatalf("Run: %v, want nil: the error came from being stopped", err)
	}
}
