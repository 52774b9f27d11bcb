package instance

import (
	"context"
	"sync"
)

// watchers count who follows the events of pipelines other instances run
// through this instance's API: those of one pipeline, and those of every
// pipeline. The events of a pipeline run elsewhere are read from the
// database only while somebody here follows them.
type watchers struct {
	mu    sync.Mutex
	of    map[string]int
	every int
	// everyGate serializes the starts of watchers of every pipeline's
	// events, so that none starts before the first has caught up.
	everyGate sync.Mutex
}

func newWatchers() *watchers { return &watchers{of: map[string]int{}} }

// watch counts a watcher of a pipeline's events until ctx is done.
func (w *watchers) watch(ctx context.Context, pipelineID string) {
	w.mu.Lock()
	w.of[pipelineID]++
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.of[pipelineID]--; w.of[pipelineID] <= 0 {
			delete(w.of, pipelineID)
		}
	})
}

// watchEvery counts a watcher of every pipeline's events until ctx is
// done; the first one runs catchUp before it is counted as started, and
// later ones wait for it.
func (w *watchers) watchEvery(ctx context.Context, catchUp func(context.Context)) {
	w.everyGate.Lock()
	defer w.everyGate.Unlock()
	w.mu.Lock()
	first := w.every == 0
	w.every++
	w.mu.Unlock()
	if first {
		catchUp(ctx)
	}
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.every--
	})
}

// watched reports whether somebody follows the pipeline's events.
func (w *watchers) watched(pipelineID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.of[pipelineID] > 0 || w.every > 0
}

// followed are the pipelines whose watchers follow them one by one, and
// whether somebody follows every pipeline.
func (w *watchers) followed() (ids []string, every bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids = make([]string, 0, len(w.of))
	for id := range w.of {
		ids = append(ids, id)
	}
	return ids, w.every > 0
}
