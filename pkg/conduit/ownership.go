package conduit

import (
	"context"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// ownership decides which pipelines this process runs. It is the one
// place where running alone (solo, below) and running as an instance of
// a cluster (fleet, fleet.go, over pkg/cluster) differ: the runtime calls
// it the same way in both, and asks nothing else about the mode.
//
// A process alone owns every pipeline it knows, fences nothing and may
// always write. An instance of a cluster runs the pipelines whose lease
// it holds, fences every write of a pipeline with that lease's token and
// stops writing to destinations once the lease may have expired.
type ownership interface {
	// knownPipelines are the valid desired pipelines this process knows,
	// in the order of the files: what the reconciler compares the desired
	// pipelines with.
	knownPipelines() []reconciler.Running
	// guards are what ownership puts on the writes of the store, the
	// audit log and the engines.
	guards() writeGuards
	// plan is told of a plan before the runtime applies it, and says what
	// each of its changes means here.
	plan(ctx context.Context, plan reconciler.Plan) plannedOwnership
	// alone reports whether this process is the only one on its store: it
	// then marks its runs (so that the next start tells a crash), sweeps
	// expired dedup entries, and forgets the pipelines deleted from its
	// files while it was down. Instances of a cluster leave those to the
	// pipelines' states, their runs and the live instances.
	alone() bool
	// join makes this process take part once its pipelines are loaded;
	// run keeps its ownership current until ctx is done, taking up and
	// handing over pipelines only until balance is done (the shutdown
	// began). ready is called once this process took up its pipelines;
	// fatal when it must stop (another process took its place). leave
	// gives everything up after the last write of the pipelines' states.
	join(ctx context.Context) error
	run(ctx, balance context.Context, ready func(), fatal func(error))
	leave()
	// changed tells the other processes on the store that what was
	// changed here (pipelines through the API, managed rules) changed.
	changed(ctx context.Context, what sharedChange)
	// eventsOfOthers reads the events other processes wrote of the given
	// pipelines and of every pipeline they run, and returns all those ids,
	// sorted (the dry run of rules replays every pipeline's faults).
	eventsOfOthers(ctx context.Context, ids []string) ([]string, error)
	// api is how the API sees the pipelines and their events: those this
	// process runs (local), and those others run.
	api(local apiPipelines, events *auditlog.Log) (api.Pipelines, api.Events)
}

// writeGuards are the hooks ownership puts on the writes; a nil field
// guards nothing.
type writeGuards struct {
	// fenceOf fences each write of a pipeline's keys
	// (store.BatcherOptions.FenceOf).
	fenceOf func(key []byte) *store.Fence
	// owns reports whether the audit log may trim a pipeline's events
	// (auditlog.Options.Owns).
	owns func(pipelineID string) bool
	// mayWrite is the engine's write guard of a pipeline
	// (pipeline.Config.WriteGuard): nil while it may write.
	mayWrite func(pipelineID string) error
}

// plannedOwnership is what one plan means for ownership.
type plannedOwnership interface {
	// appliesHere reports whether the runtime applies the change itself;
	// the others are ownership's: a pipeline handed over to the instances
	// that still know it, one the instance it belongs to creates or
	// updates.
	appliesHere(c reconciler.Change) bool
	// deleted is told of a pipeline the runtime deleted; ranHere says
	// whether it ran here.
	deleted(ctx context.Context, id string, ranHere bool, actor auditlog.Actor)
	// applied is told once every change was applied.
	applied(ctx context.Context)
}

// sharedChange is what changed through this process's API that the other
// processes on the store must read again.
type sharedChange int

const (
	changedPipelines sharedChange = iota + 1
	changedRules
)

// solo is the ownership of a process that runs alone: it runs every
// pipeline it knows.
type solo struct{ r *Runtime }

var _ ownership = solo{}

func (s solo) knownPipelines() []reconciler.Running {
	r := s.r
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]reconciler.Running, len(r.pipelines))
	for i, m := range r.pipelines {
		out[i] = reconciler.Running{Pipeline: m.cfg, Origin: *m.origin.Load(), Fingerprint: m.fingerprint}
	}
	return out
}

func (solo) guards() writeGuards { return writeGuards{} }

func (solo) plan(context.Context, reconciler.Plan) plannedOwnership { return soloPlan{} }

func (solo) alone() bool { return true }

func (solo) join(context.Context) error { return nil }

func (solo) run(_, _ context.Context, ready func(), _ func(error)) { ready() }

func (solo) leave() {}

func (solo) changed(context.Context, sharedChange) {}

func (solo) eventsOfOthers(_ context.Context, ids []string) ([]string, error) { return ids, nil }

func (solo) api(local apiPipelines, events *auditlog.Log) (api.Pipelines, api.Events) {
	return local, events
}

// soloPlan: a process alone applies every change itself.
type soloPlan struct{}

func (soloPlan) appliesHere(reconciler.Change) bool                    { return true }
func (soloPlan) deleted(context.Context, string, bool, auditlog.Actor) {}
func (soloPlan) applied(context.Context)                               {}
