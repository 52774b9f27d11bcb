package instance

import (
	"maps"
	"slices"
	"time"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// fleetState is what an instance knows, as its keeper published it: never
// changed once published (a draft copies what a change changes), so it is
// read without a lock.
type fleetState struct {
	// known is what this instance knows of the pipelines; each plan
	// replaces it.
	known *knownPipelines
	// round is the database's view as of the last round; each round
	// replaces it, and a listing its holders.
	round *roundView
	// leases are the leases this instance holds, by pipeline; lost are
	// those a renewal found taken over, waiting for the balance loop to
	// stop their pipelines.
	leases leaseTable
	lost   []cluster.Lease
	// renewed is when (leaseClock since the fleet's epoch) the last
	// successful renewal was sent, 0 before the first: the leases last
	// at least a TTL from then.
	renewed time.Duration
	// abandons counts the times this instance stopped its pipelines for
	// want of a renewal; settled is the count when what they wrote was
	// last found durable (writesSettled).
	abandons, settled uint64
	// undeleted are the pipelines deleted from every instance's files (or
	// through the API) while another instance still held them, handing
	// them over: deleted once their lease is free (retryDeletions).
	undeleted map[string]pendingDeletion
	// watched counts who follows, through this instance's API, the
	// events of each pipeline other instances run; every those who
	// follow every pipeline's. caughtUp is closed once the first of
	// those read what other instances wrote before (watchEvery).
	watched  map[string]int
	every    int
	caughtUp chan struct{}
	// viewSets are the pipelines of the views other live instances
	// heartbeat (cluster Known), by view. differSince is when the live
	// instances' views were first seen to differ, zero while they agree;
	// viewsDiffer is set once they have differed for viewGrace.
	viewSets    map[string]map[string]bool
	differSince time.Time
	viewsDiffer bool
	// counts are the figures of the metrics.
	counts fleetCounts
}

// heldLease is a lease this instance holds; revoked once a renewal found
// another instance took it over: nothing more is written under it.
type heldLease struct {
	cluster.Lease
	revoked bool
}

// fleetCounts are the counters of an instance's metrics.
type fleetCounts struct {
	renewalFailures, takenOver, handedOver, lost uint64
}

// knownPipelines are the valid desired pipelines an instance knows, in the
// order of the files: what it runs when it holds their lease; view is
// what it tells the others in its heartbeat (viewOf), ids their ids,
// sorted. Never changed once published.
type knownPipelines struct {
	pipelines []reconciler.Running
	view      string
	ids       []string
}

// has reports whether the pipeline is known.
func (k *knownPipelines) has(id string) bool {
	return slices.ContainsFunc(k.pipelines, func(r reconciler.Running) bool { return r.Pipeline.ID == id })
}

// roundView is the database's view as of the last round: the live
// instances and who holds which lease; and foreign, the pipelines only
// other live instances know (their pipeline files differ), with those
// instances, sorted: this one lists them, and sends them start and stop.
// Never changed once published.
type roundView struct {
	live    []string
	holders map[string]cluster.Holder
	foreign map[string][]string
}

// knownSomewhere reports whether this instance (known) or another live
// one knows the pipeline.
func (v *roundView) knownSomewhere(known *knownPipelines, id string) bool {
	return v.foreign[id] != nil || known.has(id)
}

// orphaned reports whether the pipeline has a lease that no live holder
// has, and no live instance knows it: its instance died, and no other
// instance's files define it.
func (v *roundView) orphaned(known *knownPipelines, id string) bool {
	h, leased := v.holders[id]
	return leased && !h.Live && !v.knownSomewhere(known, id)
}

// pendingDeletion is a pipeline deleted while another instance held it.
type pendingDeletion struct {
	cfg   config.Pipeline
	actor lifecycle.Actor
}

func initialState() *fleetState {
	return &fleetState{known: &knownPipelines{}, round: &roundView{},
		undeleted: map[string]pendingDeletion{}, watched: map[string]int{}, viewSets: map[string]map[string]bool{}}
}

// lease is the lease held for a pipeline.
func (s *fleetState) lease(id string) (cluster.Lease, bool) {
	l, ok := s.leases.get(id)
	return l.Lease, ok
}

// writable reports whether the pipeline's lease is held and was not found
// taken over.
func (s *fleetState) writable(id string) bool {
	l, ok := s.leases.get(id)
	return ok && !l.revoked
}

// still reports whether l is still the lease held for its pipeline (not
// given up or acquired again since).
func (s *fleetState) still(l cluster.Lease) bool {
	h, ok := s.leases.get(l.PipelineID)
	return ok && h.Lease == l
}

// heldLeases are the leases held, in no order.
func (s *fleetState) heldLeases() []cluster.Lease {
	out := make([]cluster.Lease, 0, s.leases.len())
	for l := range s.leases.all() {
		out = append(out, l.Lease)
	}
	return out
}

// watchedHere reports whether somebody here follows the pipeline's events.
func (s *fleetState) watchedHere(id string) bool { return s.watched[id] > 0 || s.every > 0 }

// followed are the pipelines whose watchers follow them one by one, and
// whether somebody follows every pipeline.
func (s *fleetState) followed() (ids []string, every bool) {
	return slices.Collect(maps.Keys(s.watched)), s.every > 0
}

// orphaned reports whether the pipeline runs nowhere as of the last round
// (roundView.orphaned).
func (s *fleetState) orphaned(id string) bool { return s.round.orphaned(s.known, id) }

// abandoned returns the pipelines whose lease a live instance let go and
// that no live instance knows: removed from every instance's files. Only
// the first live instance (self) returns them. (A pipeline whose last
// instance died is not one: that instance may come back with it.)
func (s *fleetState) abandoned(self string) []string {
	round := s.round
	if len(round.live) == 0 || round.live[0] != self {
		return nil
	}
	var out []string
	for id, h := range round.holders {
		if !h.Live && slices.Contains(round.live, h.Instance) && round.orphaned(s.known, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// draft is the keeper's working copy of the state while it applies a
// batch of changes: it shares the maps of the state it was made from
// until a change changes them, and copies each once.
type draft struct {
	fleetState
	copied struct {
		leases                       leaseCopies
		undeleted, watched, viewSets bool
	}
}

func newDraft(s *fleetState) *draft { return &draft{fleetState: *s} }

// publish is the state the draft holds now, to be published.
func (d *draft) publish() *fleetState {
	s := d.fleetState
	return &s
}

// hold records a lease acquired.
func (d *draft) hold(l cluster.Lease) { d.setLease(l.PipelineID, heldLease{Lease: l}) }

// unhold forgets a lease this instance held and returns it.
func (d *draft) unhold(id string) (cluster.Lease, bool) {
	l, ok := d.leases.get(id)
	if !ok {
		return cluster.Lease{}, false
	}
	d.deleteLease(id)
	return l.Lease, true
}

// renewedAt records a renewal sent at sent that found the leases lost
// taken over: those still held as they were are revoked, in the same
// state as the renewal that lets the others be written, and queued for
// the balance loop to stop their pipelines.
func (d *draft) renewedAt(sent time.Duration, lost []cluster.Lease) {
	d.renewed = sent
	if len(lost) == 0 {
		return
	}
	for _, l := range lost {
		if h, ok := d.leases.get(l.PipelineID); ok && h.Lease == l {
			h.revoked = true
			d.setLease(l.PipelineID, h)
		}
	}
	d.lost = slices.Concat(d.lost, lost)
}

// takeLost returns the leases renewals found lost since the last call.
func (d *draft) takeLost() []cluster.Lease {
	lost := d.lost
	d.lost = nil
	return lost
}

func (d *draft) ownUndeleted() {
	if !d.copied.undeleted {
		d.undeleted, d.copied.undeleted = maps.Clone(d.undeleted), true
	}
}

func (d *draft) addDeletion(p pendingDeletion) {
	d.ownUndeleted()
	d.undeleted[p.cfg.ID] = p
}

func (d *draft) removeDeletion(id string) {
	if _, ok := d.undeleted[id]; ok {
		d.ownUndeleted()
		delete(d.undeleted, id)
	}
}

// dropKnownDeletions forgets the pending deletions of the pipelines an
// instance knows again (their file came back).
func (d *draft) dropKnownDeletions() {
	for id := range d.undeleted {
		if d.round.knownSomewhere(d.known, id) {
			d.removeDeletion(id)
		}
	}
}

// watch counts a watcher of a pipeline's events in (delta 1) or out (-1).
func (d *draft) watch(id string, delta int) {
	if !d.copied.watched {
		d.watched, d.copied.watched = maps.Clone(d.watched), true
	}
	if d.watched[id] += delta; d.watched[id] <= 0 {
		delete(d.watched, id)
	}
}

// watchEvery counts a watcher of every pipeline's events in. The first
// catches up with what other instances wrote before, and closes caughtUp
// (caughtUpWith) when it did; those after it wait for caughtUp.
func (d *draft) watchEvery() (first bool, caughtUp chan struct{}) {
	d.every++
	if d.every == 1 {
		d.caughtUp = make(chan struct{})
	}
	return d.every == 1, d.caughtUp
}

// caughtUpWith lets the watchers of every pipeline that wait for c start.
func (d *draft) caughtUpWith(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// roundRead is what a balance round read from the database: the live
// instances, who holds which lease, and the pipelines of the views not
// read before, by instance.
type roundRead struct {
	instances cluster.LiveInstances
	holders   map[string]cluster.Holder
	views     map[string]cluster.KnownPipelines
}

// missingViews are the live instances whose view differs from this
// instance's and whose pipelines were not read yet.
func (s *fleetState) missingViews(instances cluster.LiveInstances) []string {
	var missing []string
	for _, id := range instances.IDs {
		if v := instances.Views[id]; v != "" && v != s.known.view && s.viewSets[v] == nil {
			missing = append(missing, id)
		}
	}
	return missing
}

// roundOutcome is what the balance loop balances after a round: every
// pipeline some live instance knows and which instance knows which
// (knowledge), and what to tell the operator of the instances' views.
type roundOutcome struct {
	all   []string
	knows func(instance, pipelineID string) bool
	views viewsNews
}

// viewsNews is what a round has to tell of the live instances' views.
type viewsNews int

const (
	viewsNothingNew viewsNews = iota
	// viewsNowDiffer: they have differed for the grace, from this round on.
	viewsNowDiffer
	// viewsAgreeAgain: they agree again after they were said to differ.
	viewsAgreeAgain
)

// newRound takes up what a balance round read at now: the round's view
// (published for the API and the next rounds), the views of the other
// instances, and whether they have differed for long.
func (d *draft) newRound(read roundRead, now time.Time, grace time.Duration) roundOutcome {
	all, knows, foreign := d.knowledge(read)
	d.round = &roundView{live: read.instances.IDs, holders: read.holders, foreign: foreign}
	out := roundOutcome{all: all, knows: knows}
	agree := true
	for _, v := range read.instances.Views {
		// An instance that has not said its view (an older conduit) is not
		// counted.
		if v != "" && v != d.known.view {
			agree = false
		}
	}
	switch {
	case agree:
		if d.viewsDiffer {
			out.views = viewsAgreeAgain
		}
		d.viewsDiffer, d.differSince = false, time.Time{}
	case d.differSince.IsZero():
		d.differSince = now
	case !d.viewsDiffer && now.Sub(d.differSince) >= grace:
		d.viewsDiffer, out.views = true, viewsNowDiffer
	}
	return out
}

// knowledge returns every pipeline some live instance knows, which
// instance knows which, and the pipelines only other instances know
// (roundView.foreign): nil when they all know what this one knows (or
// have not said, being older conduits), the common case. It remembers the
// pipelines of the views read, and forgets those of views no live
// instance has any more.
func (d *draft) knowledge(read roundRead) (all []string, knows func(instance, pipelineID string) bool, foreign map[string][]string) {
	instances, mine, own := read.instances, d.known.view, d.known.ids
	differ := false
	for _, v := range instances.Views {
		differ = differ || (v != "" && v != mine)
	}
	if !differ {
		return own, nil, nil
	}
	if !d.copied.viewSets {
		d.viewSets, d.copied.viewSets = maps.Clone(d.viewSets), true
	}
	for _, k := range read.views {
		set := make(map[string]bool, len(k.IDs))
		for _, id := range k.IDs {
			set[id] = true
		}
		d.viewSets[k.View] = set
	}
	mineSet := make(map[string]bool, len(own))
	for _, id := range own {
		mineSet[id] = true
	}
	// Each live instance's pipelines: its view's, or, for a view whose
	// pipelines were not read (it changed meanwhile), those read under
	// its id.
	sets := make(map[string]map[string]bool, len(instances.IDs))
	inUse := map[string]bool{}
	for _, id := range instances.IDs {
		v := instances.Views[id]
		switch {
		case v == "":
			sets[id] = nil // an older conduit: taken to know every pipeline
		case v == mine:
			sets[id] = mineSet
		case d.viewSets[v] != nil:
			sets[id], inUse[v] = d.viewSets[v], true
		case read.views[id].IDs != nil:
			sets[id], inUse[read.views[id].View] = d.viewSets[read.views[id].View], true
		default:
			sets[id] = nil // said no pipelines (an older conduit): as above
		}
	}
	maps.DeleteFunc(d.viewSets, func(v string, _ map[string]bool) bool { return !inUse[v] })
	union := slices.Clone(own)
	foreign = map[string][]string{}
	for _, instance := range instances.IDs {
		for id := range sets[instance] {
			if !mineSet[id] {
				union = append(union, id)
				foreign[id] = append(foreign[id], instance)
			}
		}
	}
	slices.Sort(union)
	union = slices.Compact(union)
	return union, func(instance, pipelineID string) bool {
		set, ok := sets[instance]
		return !ok || set == nil || set[pipelineID]
	}, foreign
}
