// Package ownership is the seam between the runtime and the way it runs:
// alone (Solo, here) or as an instance of a cluster (pkg/cluster/instance,
// opened by instance.Open). It says which pipelines this process runs, what it puts on
// their writes and what a plan's changes mean for it; the runtime calls it
// the same way in both modes and asks nothing else about the mode.
//
// A process alone owns every pipeline it knows, fences nothing and may
// always write. An instance of a cluster runs the pipelines whose lease it
// holds, fences every write of a pipeline with that lease's token and stops
// writing to destinations once the lease may have expired.
package ownership

import (
	"context"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// Ownership decides which pipelines this process runs.
type Ownership interface {
	// KnownPipelines are the valid desired pipelines this process knows,
	// in the order of the files: what the reconciler compares the desired
	// pipelines with.
	KnownPipelines() []reconciler.Running
	// Guards are what ownership puts on the writes of the store, the
	// audit log and the engines.
	Guards() Guards
	// Plan is told of a plan before the runtime applies it, and says what
	// each of its changes means here.
	Plan(ctx context.Context, plan reconciler.Plan) Planned
	// Alone reports whether this process is the only one on its store: it
	// then marks its runs (so that the next start tells a crash), sweeps
	// expired dedup entries, and forgets the pipelines deleted from its
	// files while it was down. Instances of a cluster leave those to the
	// pipelines' states, their runs and the live instances.
	Alone() bool
	// AfterShutdown says what becomes of a pipeline when this process
	// shuts down, for its stopped event ("" when it waits for the next
	// start of this process).
	AfterShutdown() string
	// Join makes this process take part once its pipelines are loaded;
	// Run keeps its ownership current until ctx is done, taking up and
	// handing over pipelines only until balance is done (the shutdown
	// began). ready is called once this process took up its pipelines;
	// fatal when it must stop (another process took its place). Leave
	// gives everything up after the last write of the pipelines' states.
	Join(ctx context.Context) error
	Run(ctx, balance context.Context, ready func(), fatal func(error))
	Leave()
	// Changed tells the other processes on the store that what was
	// changed here (pipelines through the API, managed rules) changed.
	Changed(ctx context.Context, what Change)
	// EventsOfOthers reads the events other processes wrote of the given
	// pipelines and of every pipeline they run, and returns all those ids,
	// sorted (the dry run of rules replays every pipeline's faults).
	EventsOfOthers(ctx context.Context, ids []string) ([]string, error)
	// API is how the API sees the pipelines and their events: those this
	// process runs (local), and those others run.
	API(local api.Pipelines, events *auditlog.Log) (api.Pipelines, api.Events)
}

// Guards are the hooks ownership puts on the writes; a nil field guards
// nothing.
type Guards struct {
	// FenceOf fences each write of a pipeline's keys
	// (store.BatcherOptions.FenceOf).
	FenceOf func(key []byte) *store.Fence
	// Owns reports whether the audit log may trim a pipeline's events
	// (auditlog.Options.Owns).
	Owns func(pipelineID string) bool
	// MayWrite is the engine's write guard of a pipeline
	// (pipeline.Config.WriteGuard): nil while it may write.
	MayWrite func(pipelineID string) error
}

// Planned is what one plan means for ownership.
type Planned interface {
	// AppliesHere reports whether the runtime applies the change itself;
	// the others are ownership's: a pipeline handed over to the instances
	// that still know it, one the instance it belongs to creates or
	// updates.
	AppliesHere(c reconciler.Change) bool
	// Deleted is told of a pipeline the runtime deleted; ranHere says
	// whether it ran here.
	Deleted(ctx context.Context, id string, ranHere bool, actor auditlog.Actor)
	// Applied is told once every change was applied.
	Applied(ctx context.Context)
}

// Change is what changed through this process's API that the other
// processes on the store must read again.
type Change int

const (
	// PipelinesChanged: pipelines were created, changed or deleted
	// through the API.
	PipelinesChanged Change = iota + 1
	// RulesChanged: managed recovery rules were changed.
	RulesChanged
)

// Solo is the ownership of a process that runs alone: it runs every
// pipeline it knows, which Known lists.
type Solo struct {
	Known func() []reconciler.Running
}

var _ Ownership = Solo{}

func (s Solo) KnownPipelines() []reconciler.Running { return s.Known() }

func (Solo) Guards() Guards { return Guards{} }

func (Solo) Plan(context.Context, reconciler.Plan) Planned { return soloPlan{} }

func (Solo) Alone() bool { return true }

func (Solo) AfterShutdown() string { return "" }

func (Solo) Join(context.Context) error { return nil }

func (Solo) Run(_, _ context.Context, ready func(), _ func(error)) { ready() }

func (Solo) Leave() {}

func (Solo) Changed(context.Context, Change) {}

func (Solo) EventsOfOthers(_ context.Context, ids []string) ([]string, error) { return ids, nil }

func (Solo) API(local api.Pipelines, events *auditlog.Log) (api.Pipelines, api.Events) {
	return local, events
}

// soloPlan: a process alone applies every change itself.
type soloPlan struct{}

func (soloPlan) AppliesHere(reconciler.Change) bool                    { return true }
func (soloPlan) Deleted(context.Context, string, bool, auditlog.Actor) {}
func (soloPlan) Applied(context.Context)                               {}
