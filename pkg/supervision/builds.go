package supervision

import (
	"sync"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// A pipeline's configuration is validated by building it (pkg/assembly:
// constructors check their settings, and that is the only check there
// is), and the build is what its first run runs. It is built once per
// start: planning a change builds every desired pipeline and keeps each
// build here, under the pipeline's id and fingerprint; provisioning takes
// it out and hands it to the pipeline's first run (managedPipeline.first);
// later runs build afresh, since connectors are used by one run only.
// What planning built for pipelines the plan leaves as they are, or that
// turn out not to be provisioned, is dropped when the plan is applied:
// unopened connectors and processors hold nothing the garbage collector
// cannot take.
type keptBuilds struct {
	mu   sync.Mutex
	byID map[string]keptBuild
}

type keptBuild struct {
	fingerprint string
	cfg         pipeline.Config
}

// keep holds cfg, the build of p, for p's first run.
func (k *keptBuilds) keep(p config.Pipeline, cfg pipeline.Config) {
	hash, err := reconciler.Fingerprint(p)
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = map[string]keptBuild{}
	}
	k.byID[p.ID] = keptBuild{fingerprint: hash, cfg: cfg}
}

// take returns and forgets the build kept for the pipeline id with
// fingerprint hash; ok is false when there is none for that configuration.
func (k *keptBuilds) take(id, hash string) (pipeline.Config, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.byID[id]
	if !ok {
		return pipeline.Config{}, false
	}
	delete(k.byID, id)
	return b.cfg, b.fingerprint == hash
}

// drop forgets every kept build.
func (k *keptBuilds) drop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.byID)
}

// build is the run of p provisioning hands to the pipeline's first run:
// the one planning kept when it is for this configuration, else a new one.
func (ps *Pipelines) build(p config.Pipeline, hash string) (pipeline.Config, error) {
	if cfg, ok := ps.kept.take(p.ID, hash); ok {
		return cfg, nil
	}
	return ps.assembler.Build(p)
}

// check is every reason p cannot run, nil when it can, and then p's
// build. The first problem found stops the build; each connector, each
// processor, the dead-letter queue and the recovery policy are then
// checked on their own, so that one problem does not hide the next and a
// file is fixed in one pass.
func (ps *Pipelines) check(p config.Pipeline) (pipeline.Config, []error) {
	_, _, policyErr := ps.policyOf(p)
	cfg, err := ps.assembler.Build(p)
	if policyErr == nil && err == nil {
		return cfg, nil
	}
	var errs []error
	if policyErr != nil {
		errs = append(errs, policyErr)
	}
	if err != nil {
		parts := ps.assembler.Problems(p)
		if len(parts) == 0 {
			// Not found part by part (what the parts add up to).
			parts = []error{err}
		}
		errs = append(errs, parts...)
	}
	return pipeline.Config{}, errs
}
