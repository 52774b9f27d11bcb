package instance

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// fleet is the runtime's part in a cluster (cluster.enabled, DESIGN 12),
// its ownership there (pkg/ownership), opened by Open:
// every instance knows every pipeline (the same pipeline files, and those
// created through the API, from the database) and runs those whose lease
// it holds. A renewal loop heartbeats and renews the leases on a
// connection of its own; a balance loop takes up the pipelines Assign
// gives this instance and hands over the others; a listener hears
// the other instances (instances joining and leaving, leases released,
// commands for this instance, pipelines and rules changed through the
// API, audit events); a command loop carries out the starts and stops
// other instances' APIs send here.
//
// Safety rests on two things: every write of a pipeline's state,
// positions, dedup entries and events carries its lease's fencing token
// (store.BatcherOptions.FenceOf; a write for a pipeline this instance does
// not hold carries token 0, which is never current), and no record is
// written to a destination once the lease could have expired by this
// instance's clock (mayWrite), so that a process that was paused and
// continues writes nothing its successor also writes.
type fleet struct {
	host   Host
	opts   Options
	member *cluster.Membership
	pool   *pgxpool.Pool
	// renewer is member on a pool of its own (renewPool), so that a
	// renewal never waits for a connection behind take-ups that wait for
	// a paused instance's locks.
	renewer   *cluster.Membership
	renewPool *pgxpool.Pool
	ttl       time.Duration
	log       *zap.Logger
	// kick asks the lease loop for a round now; commands asks the
	// command loop to look for commands.
	kick, commands chan struct{}
	// epoch is the base of the state's renewal time: leaseClock readings
	// as durations.
	epoch time.Duration
	// keeper owns what this instance knows (fleetState): the leases it
	// holds, the pipelines it knows, the last round's view of the
	// database, the pending deletions, the watchers of events, the
	// figures.
	keeper *keeper
}

// Shares of the lease TTL: leases are renewed every fifth of it, and a
// failed renewal is tried again every renewRetry; after half of it
// without a renewal the instance stops its pipelines; from three quarters
// of it, counted from the last renewal that was sent, no record is
// written any more. The lease lasts the whole TTL from the database's
// reception of that renewal, which is later. So the database may be away
// for three tenths of the TTL at least (a restart of the server, a
// network blip) before the pipelines stop. The instances balance every
// third of it.
const (
	renewShare     = 5
	balanceShare   = 3
	abandonPercent = 50
	writePercent   = 75
	renewRetry     = 250 * time.Millisecond
)

func newFleet(host Host, opts Options, member *cluster.Membership, pool *pgxpool.Pool) *fleet {
	return &fleet{
		host: host, opts: opts, member: member, pool: pool, ttl: member.TTL(), log: opts.Log.With(zap.String("instance_id", member.ID())),
		kick: make(chan struct{}, 1), commands: make(chan struct{}, 1),
		epoch:  leaseClock(),
		keeper: newKeeper(initialState()),
	}
}

// state is what this instance knows, as its keeper published it last.
func (f *fleet) state() *fleetState { return f.keeper.state() }

// update has the keeper apply a change and returns once it is published.
func (f *fleet) update(apply func(*draft)) { f.keeper.update(apply) }

// controlConnections is the size of an instance's pool for everything of
// the cluster but renewals: the listener, the take-ups running at once,
// listings and commands.
const controlConnections = takeUpParallelism + 2

// IdleInTransactionTimeout is how long PostgreSQL lets a session of a
// cluster instance wait inside a transaction: well within the time after
// which the instance's leases may be taken over, so that a paused process
// does not keep the lease rows its commit locked.
func IdleInTransactionTimeout(ttl time.Duration) time.Duration {
	return max(ttl/4, time.Second)
}

// Host is the runtime an instance of a cluster runs its pipelines in.
type Host interface {
	// Supervised is the pipeline this process supervises with the id, nil
	// when there is none; retiring when its supervisor is ending (handed
	// over, about to be removed).
	Supervised(id string) (p api.Supervised, retiring bool)
	// TakeUp starts a pipeline whose lease this instance acquired, from
	// the state its last instance saved (position, dedup entries, status,
	// next attempt time), as run by instance.
	TakeUp(ctx context.Context, k reconciler.Running, takeover lifecycle.Takeover, instance string) error
	// Retire stops a pipeline this process runs, within timeout (0: at
	// once), and forgets it; nothing when it runs none with the id.
	Retire(ctx context.Context, id string, how lifecycle.Retirement, timeout time.Duration)
	// Forget deletes a pipeline that runs nowhere: its connectors are told,
	// its state forgotten (its position kept), durably.
	Forget(ctx context.Context, p config.Pipeline, actor lifecycle.Actor) error
	// SavedState is the state a pipeline's instance saved last.
	SavedState(ctx context.Context, id string) (lifecycle.State, bool, error)
	// Reload reads the pipelines again (another instance changed those
	// created through the API); ReloadRules the managed rules.
	Reload()
	ReloadRules(ctx context.Context) error
	// BetweenPlans runs fn while no plan is applied.
	BetweenPlans(fn func())
	// Audit is the audit log, once it is open (before Join).
	Audit() *auditlog.Log
}

// Options configure this process's instance of a cluster.
type Options struct {
	// URL is the PostgreSQL database the instances share (db.postgres.url).
	URL string
	// ID is this instance's id (cluster.instance-id), TTL the leases'
	// (cluster.lease-ttl).
	ID  string
	TTL time.Duration
	// Recovery is the global error recovery policy, to describe the
	// pipelines other instances run.
	Recovery config.ErrorRecovery
	// GracefulStopTimeout bounds a hand-over's drain
	// (pipelines.graceful-stop-timeout).
	GracefulStopTimeout time.Duration
	Log                 *zap.Logger
	Metrics             *metrics.Metrics
}

// Open prepares this process's part in the cluster; Join makes
// it a member once its pipelines are loaded. An id a live instance has
// is refused at once, before anything is loaded.
func Open(ctx context.Context, host Host, opts Options) (ownership.Ownership, error) {
	id := opts.ID
	idle := IdleInTransactionTimeout(opts.TTL)
	pool, err := cluster.OpenPool(ctx, opts.URL, controlConnections, idle)
	if err != nil {
		return nil, fmt.Errorf("db.postgres.url: %w", err)
	}
	renewPool, err := cluster.OpenPool(ctx, opts.URL, 1, idle)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("db.postgres.url: %w", err)
	}
	member := cluster.New(pool, id, opts.TTL)
	if err := member.Check(ctx); err != nil {
		pool.Close()
		renewPool.Close()
		switch {
		case errors.Is(err, cluster.ErrTTLMismatch):
			return nil, fmt.Errorf("cluster.lease-ttl: %w", err)
		case errors.Is(err, cluster.ErrDuplicateInstance):
			return nil, fmt.Errorf("cluster.instance-id %s: %w", id, err)
		}
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f := newFleet(host, opts, member, pool)
	f.renewPool = renewPool
	return f, nil
}

// Join makes this instance a member: the others hand it its share of the
// pipelines from now on.
func (f *fleet) Join(ctx context.Context) error {
	known := f.state().known
	if err := f.member.Join(ctx, known.view, known.ids); err != nil {
		if errors.Is(err, cluster.ErrTTLMismatch) {
			return fmt.Errorf("cluster.lease-ttl: %w", err)
		}
		return fmt.Errorf("cluster.instance-id %s: %w", f.member.ID(), err)
	}
	f.renewer = f.member.Using(f.renewPool)
	f.log.Info("joined the cluster", zap.Duration("cluster.lease-ttl", f.ttl), zap.Int("pipelines", len(f.KnownPipelines())))
	f.opts.Metrics.WatchCluster(f.member.ID(), f.clusterFigures)
	return nil
}

var _ ownership.Ownership = (*fleet)(nil)

// Guards fence every write of a pipeline with its lease's token, trim
// the events only of the pipelines held here, and stop destination
// writes once a lease may have expired.
func (f *fleet) Guards() ownership.Guards {
	return ownership.Guards{FenceOf: f.fenceOf, Owns: f.holds, MayWrite: f.mayWrite}
}

// Alone: the instances share the store.
func (f *fleet) Alone() bool { return false }

func (f *fleet) AfterShutdown() string {
	return "an instance of the cluster takes it up: another live one at once, or the first to start"
}

// Plan tells the other instances at once what this one will know after
// plan (when it deletes pipelines of this instance's files), and hands
// over those of them that other live instances still know (dropping).
func (f *fleet) Plan(ctx context.Context, plan reconciler.Plan) ownership.Planned {
	p := fleetPlan{f: f, plan: plan, handedOff: f.dropping(ctx, plan)}
	for _, c := range plan.Changes {
		if ctx.Err() != nil {
			break
		}
		if others, ok := p.handedOff[c.ID]; ok && c.Action == reconciler.Delete {
			f.handOff(ctx, c.ID, others)
		}
	}
	return p
}

// fleetPlan is what a plan means for an instance of a cluster.
type fleetPlan struct {
	f         *fleet
	plan      reconciler.Plan
	handedOff map[string][]string
}

// AppliesHere: a pipeline handed over is not deleted; a created one is
// taken up by the instance it belongs to (balance); an updated one is
// updated by the instance that runs it.
func (p fleetPlan) AppliesHere(c reconciler.Change) bool {
	switch c.Action {
	case reconciler.Delete:
		_, handedOff := p.handedOff[c.ID]
		return !handedOff
	case reconciler.Create:
		return false
	case reconciler.Update:
		p, _ := p.f.host.Supervised(c.ID)
		return p != nil
	}
	return true
}

// Deleted drops the lease of a pipeline deleted here, and deletes one
// that no instance runs (deletedElsewhere).
func (p fleetPlan) Deleted(ctx context.Context, id string, ranHere bool, actor lifecycle.Actor) {
	if ranHere {
		p.f.dropLease(ctx, id)
		return
	}
	p.f.deletedElsewhere(ctx, id, actor)
}

// Applied makes what this instance knows what the plan left, and asks
// for a round so that new pipelines are taken up.
func (p fleetPlan) Applied(ctx context.Context) {
	p.f.knowAfter(ctx, p.plan)
}

// API shows every pipeline of the cluster, each with its instance, and
// their events, those written by other instances included.
func (f *fleet) API(local api.Pipelines, events *auditlog.Log) (api.Pipelines, api.Events) {
	return clusterPipelines{Pipelines: local, f: f}, clusterEvents{log: events, f: f}
}

func (f *fleet) clusterFigures() metrics.ClusterFigures {
	s := f.state()
	return metrics.ClusterFigures{Leases: s.leases.len(), Live: len(s.round.live),
		RenewalFailures: s.counts.renewalFailures, RenewalAge: f.sinceEpoch() - s.renewed, TTL: f.ttl,
		TakenOver: s.counts.takenOver, HandedOver: s.counts.handedOver, Lost: s.counts.lost, ViewsDiffer: s.viewsDiffer}
}

// fenceOf fences a write of a pipeline's keys with the token of the lease
// this instance holds for it, or with 0 (never current) when it holds
// none. Keys of no pipeline are not fenced.
func (f *fleet) fenceOf(key []byte) *store.Fence {
	id, ok := store.PipelineOfKey(key)
	if !ok {
		return nil
	}
	l, _ := f.state().lease(id)
	return &store.Fence{Pipeline: id, Token: l.Token}
}

// errLeaseExpired refuses a destination write once the lease may have
// expired.
var errLeaseExpired = errors.New("this instance's lease of the pipeline may have expired (it could not renew it in time): another instance may run the pipeline now, so nothing more is written here")

// mayWrite is the engine's write guard: nil while this instance holds the
// pipeline's lease and renewed it recently enough.
func (f *fleet) mayWrite(pipelineID string) error {
	s := f.state()
	if !s.writable(pipelineID) || s.renewed == 0 || f.sinceEpoch() > f.deadline(s, writePercent) {
		return errLeaseExpired
	}
	return nil
}

// sinceEpoch is the leaseClock time since epoch.
func (f *fleet) sinceEpoch() time.Duration { return leaseClock() - f.epoch }

// deadline is the time (since epoch) at which percent of the TTL has
// passed since the last renewal of s was sent.
func (f *fleet) deadline(s *fleetState, percent int) time.Duration {
	return s.renewed + f.ttl*time.Duration(percent)/100
}

// holds reports whether this instance holds the pipeline's lease: the
// audit log trims only those pipelines' events.
func (f *fleet) holds(pipelineID string) bool {
	_, ok := f.state().lease(pipelineID)
	return ok
}

// knowAfter makes the pipelines this instance knows those plan left,
// and asks for a round so that new ones are taken up.
func (f *fleet) knowAfter(ctx context.Context, plan reconciler.Plan) {
	var before, after *knownPipelines
	f.update(func(d *draft) {
		known := knownAfter(d.known.pipelines, plan)
		view, ids := viewOf(known)
		before, after = d.known, &knownPipelines{pipelines: known, view: view, ids: ids}
		d.known = after
	})
	if after == nil {
		return // left the cluster
	}
	view, ids := after.view, after.ids
	if view != before.view && f.member.Joined() {
		// Told at once, not with the next heartbeat: until the others know
		// that this instance knows a new pipeline, they give it only to
		// the instances that do, and move it again once they learn.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.ttl/renewShare)
		if err := f.member.Publish(pctx, view, ids); err != nil {
			f.log.Warn("could not tell the other instances which pipelines this one knows; the next heartbeat does", zap.Error(err))
		}
		cancel()
	}
	f.kickRound()
}

// dropping is called before a plan that deletes pipelines is applied: it
// tells the other instances at once what this one will know after it,
// and returns the pipelines of this instance's files that the plan
// deletes but that other live instances still know, with those
// instances. Such a pipeline was removed from this instance's files only:
// it is handed over, not deleted (its state, dedup entries and
// connectors' resources are the cluster's). A pipeline created through
// the API is deleted for all; so is one no other instance knows.
func (f *fleet) dropping(ctx context.Context, plan reconciler.Plan) map[string][]string {
	known := f.KnownPipelines()
	fromFiles := map[string]bool{}
	for _, k := range known {
		if !k.Origin.API() {
			fromFiles[k.Pipeline.ID] = true
		}
	}
	var candidates []string
	for _, c := range plan.Changes {
		if c.Action == reconciler.Delete && fromFiles[c.ID] {
			candidates = append(candidates, c.ID)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	after := knownAfter(known, plan)
	view, ids := viewOf(after)
	ctx, cancel := context.WithTimeout(ctx, f.ttl)
	defer cancel()
	if err := f.member.Publish(ctx, view, ids); err != nil {
		f.log.Warn("could not tell the other instances which pipelines this one knows", zap.Error(err))
	}
	kept := map[string][]string{}
	for _, id := range candidates {
		others, err := f.member.KnownElsewhere(ctx, id)
		if err != nil {
			// Not knowing, the state is kept: a deletion cannot be undone.
			f.log.Warn("could not read which instances know a pipeline removed from this instance's files: handing it over rather than deleting it",
				zap.String("pipeline_id", id), zap.Error(err))
			others = []string{"?"}
		}
		if len(others) > 0 {
			kept[id] = others
		}
	}
	return kept
}

// handOff stops running a pipeline this instance's files no longer have
// but other instances' still do, leaving its state to them.
func (f *fleet) handOff(ctx context.Context, id string, others []string) {
	f.log.Warn("a pipeline was removed from this instance's pipeline files, but other instances still have it: handing it over, not deleting it (remove it from every instance's files to delete it)",
		zap.String("pipeline_id", id), zap.Strings("known_by", others))
	if f.holds(id) {
		f.release(ctx, id, "its file was removed from this instance (instances "+strings.Join(others, ", ")+" still have it)", true)
	}
}

// foreignPipelines are the pipelines only other live instances know, as
// this one shows them: their id, and whose files define them; and those
// no live instance knows any more (the only instance whose files had
// them is gone), which run nowhere until such an instance comes back.
func (f *fleet) foreignPipelines() []reconciler.Running {
	s := f.state()
	round, known := s.round, s.known
	out := make([]reconciler.Running, 0, len(round.foreign))
	for id, instances := range round.foreign {
		out = append(out, reconciler.Running{Pipeline: config.Pipeline{ID: id},
			Origin: reconciler.Origin{File: "pipeline files of instance " + strings.Join(instances, ", ")}})
	}
	for id, h := range round.holders {
		if round.orphaned(known, id) {
			out = append(out, reconciler.Running{Pipeline: config.Pipeline{ID: id},
				Origin: reconciler.Origin{File: "no live instance has its pipeline file (instance " + h.Instance + " ran it last)"}})
		}
	}
	slices.SortFunc(out, func(a, b reconciler.Running) int { return strings.Compare(a.Pipeline.ID, b.Pipeline.ID) })
	return out
}

// KnownPipelines are the valid desired pipelines this instance knows.
func (f *fleet) KnownPipelines() []reconciler.Running {
	return slices.Clone(f.state().known.pipelines)
}

func (f *fleet) kickRound() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Run is the renewal loop, the balance loop and the command loop, with
// the listener, until ctx is done; pipelines are taken up and handed over
// only until balance is done (the process shuts down). The renewals have
// a loop of their own: taking up a thousand pipelines must not delay
// them. The pipelines it started are the runtime's supervisors'. ready is
// called after the first balance round; fatal when another process took
// this instance's id.
func (f *fleet) Run(ctx, balance context.Context, ready func(), fatal func(error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		cluster.Listen(ctx, f.pool, []string{cluster.LeasesChannel, cluster.CommandsChannel, cluster.PipelinesChannel,
			cluster.RulesChannel, store.EventsChannel},
			f.log, f.notified)
	})
	wg.Go(func() { f.answerLoop(balance) })
	// The first renewal before the first balance: taking pipelines up
	// waits for one.
	r := &renewals{fatal: fatal}
	renewed := f.renewRound(ctx, r)
	wg.Go(func() { f.balanceLoop(balance, ready) })
	every := f.ttl / renewShare
	for {
		next := every
		if !renewed {
			next = min(every, renewRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		renewed = f.renewRound(ctx, r)
	}
}

// renewals is the renewal loop's own: whether renewals fail (it says so
// once per outage), and whom to tell that this instance must stop.
type renewals struct {
	failing bool
	fatal   func(error)
}

// balanceLoop takes up and hands over pipelines every third of the TTL,
// and at once when kicked (an instance joined or left, a lease was
// released, the pipelines changed); ready is called after the first
// round.
func (f *fleet) balanceLoop(ctx context.Context, ready func()) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-f.kick:
		}
		next := f.balanceRound(ctx)
		if ready != nil {
			ready()
			ready = nil
		}
		timer.Reset(next)
	}
}

// notified handles a notification of another instance (or of this one).
func (f *fleet) notified(n cluster.Notification) {
	switch n.Channel {
	case cluster.LeasesChannel:
		if n.Payload != f.member.ID() {
			f.kickRound()
		}
	case cluster.CommandsChannel:
		if n.Payload == f.member.ID() {
			select {
			case f.commands <- struct{}{}:
			default:
			}
		}
	case cluster.PipelinesChannel:
		f.host.Reload()
	case cluster.RulesChannel:
		f.reloadRules()
	case store.EventsChannel:
		f.syncEvents(n.Payload)
	case "":
		// The listener reconnected: what was sent meanwhile is lost.
		f.kickRound()
		f.host.Reload()
		f.reloadRules()
		select {
		case f.commands <- struct{}{}:
		default:
		}
		s := f.state()
		ids, every := s.followed()
		if every {
			ids = s.known.ids
		}
		for _, id := range ids {
			f.syncEvents(id)
		}
	}
}

// syncEvents reads the events another instance wrote of a pipeline that
// somebody watches here.
func (f *fleet) syncEvents(pipelineID string) {
	s := f.state()
	if _, held := s.lease(pipelineID); held || !s.watchedHere(pipelineID) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.ttl)
	defer cancel()
	if _, err := f.host.Audit().Sync(ctx, pipelineID); err != nil {
		f.log.Warn("could not read the events another instance wrote", zap.String("pipeline_id", pipelineID), zap.Error(err))
	}
}

// watchEvery counts a watcher of every pipeline's events until ctx is
// done: while there is one, the events of all pipelines run elsewhere are
// read as they are notified. The first one catches up with every such
// pipeline first: the events written elsewhere while nobody here followed
// them are history, and must not reach the new watcher as news when the
// next event of their pipeline is notified. Those that come while it
// catches up wait for it.
func (f *fleet) watchEvery(ctx context.Context) {
	var first bool
	var caughtUp chan struct{}
	f.update(func(d *draft) { first, caughtUp = d.watchEvery() })
	context.AfterFunc(ctx, func() { f.update(func(d *draft) { d.every-- }) })
	if first {
		f.catchUp(ctx)
		f.update(func(d *draft) { d.caughtUpWith(caughtUp) })
		return
	}
	select {
	case <-caughtUp:
	case <-ctx.Done():
	}
}

// catchUp takes up, as history, the events other instances wrote of the
// pipelines this one does not run.
func (f *fleet) catchUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, f.ttl)
	defer cancel()
	for _, k := range f.KnownPipelines() {
		id := k.Pipeline.ID
		if f.holds(id) {
			continue
		}
		if err := f.host.Audit().CatchUp(ctx, id); err != nil {
			f.log.Warn("could not read the events another instance wrote", zap.String("pipeline_id", id), zap.Error(err))
			return
		}
	}
}

// watch counts a watcher of a pipeline's events until ctx is done.
func (f *fleet) watch(ctx context.Context, pipelineID string) {
	f.update(func(d *draft) { d.watch(pipelineID, 1) })
	context.AfterFunc(ctx, func() { f.update(func(d *draft) { d.watch(pipelineID, -1) }) })
}

// renewRound heartbeats and renews the leases, and reports whether it
// could; when that fails for longer than half a TTL, it stops every
// pipeline of this instance.
func (f *fleet) renewRound(ctx context.Context, r *renewals) bool {
	sent := f.sinceEpoch()
	lost, err := f.renew(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		f.update(func(d *draft) { d.counts.renewalFailures++ })
		if errors.Is(err, cluster.ErrNotRegistered) {
			f.log.Error("another process took over this instance's id: stopping", zap.Error(err))
			f.abandon(ctx, "another process took over this instance's id")
			r.fatal(fmt.Errorf("cluster: %w", err))
			return false
		}
		s := f.state()
		since := f.sinceEpoch() - s.renewed
		if !r.failing {
			// Once per outage: it is tried again four times a second.
			f.log.Warn("could not renew the leases; trying again", zap.Error(err), zap.Duration("since_last_renewal", since))
			r.failing = true
		}
		if f.sinceEpoch() > f.deadline(s, abandonPercent) && s.leases.len() > 0 {
			f.abandon(ctx, fmt.Sprintf("this instance's leases could not be renewed for %s (cluster.lease-ttl %s)", since.Round(time.Millisecond), f.ttl))
		}
		return false
	}
	var previous time.Duration
	// The leases found taken over are revoked in the same state as the
	// renewal that lets the others be written: a process that was paused
	// must not write a record of a pipeline another instance runs now in
	// the moment between this renewal and the stop of the pipeline.
	f.update(func(d *draft) {
		previous = d.renewed
		d.renewedAt(sent, lost)
	})
	if r.failing {
		f.log.Info("leases renewed again", zap.Duration("since_last_renewal", (sent-previous).Round(time.Millisecond)))
		r.failing = false
	}
	if len(lost) > 0 {
		f.kickRound()
	}
	return true
}

// balanceRound stops the pipelines whose lease was lost, reads who is
// live and who holds what, and balances. It returns when the next round
// is due: a third of the TTL from now, or sooner when an instance may
// die or a lease this instance waits for may expire before then - so
// that a dead instance's pipelines move as soon as they may.
func (f *fleet) balanceRound(ctx context.Context) time.Duration {
	every := f.ttl / balanceShare
	var lost []cluster.Lease
	f.update(func(d *draft) { lost = d.takeLost() })
	for _, l := range lost {
		if !f.state().still(l) {
			continue // given up meanwhile
		}
		f.update(func(d *draft) { d.counts.lost++ })
		f.log.Warn("another instance took over the lease of a pipeline this instance ran (it was paused or cut off): stopping it here",
			zap.String("pipeline_id", l.PipelineID))
		f.release(ctx, l.PipelineID, "its lease was taken over by another instance", false)
	}
	if !f.renewedRecently() {
		return every // the renewal loop decides what happens to the pipelines
	}
	qctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	instances, err := f.member.LiveFor(qctx)
	if err != nil {
		f.log.Warn("could not read the live instances", zap.Error(err))
		return every
	}
	read := roundRead{instances: instances}
	if read.holders, err = f.member.Holders(qctx); err != nil {
		f.log.Warn("could not read the leases", zap.Error(err))
		return every
	}
	// The pipelines of a view are read from the database once, when an
	// instance first heartbeats it.
	if missing := f.state().missingViews(instances); len(missing) > 0 {
		if read.views, err = f.member.Known(qctx, missing); err != nil {
			f.log.Warn("could not read the pipelines the other instances know", zap.Error(err))
			return every
		}
	}
	var round roundOutcome
	now := time.Now()
	f.update(func(d *draft) { round = d.newRound(read, now, viewGrace*f.ttl) })
	f.reportViews(round.views, instances.Views)
	next := instances.Soonest
	if waiting := f.balance(ctx, instances.IDs, read.holders, round.all, round.knows); waiting > 0 {
		next = min(next, waiting)
	}
	// A moment after the expiry, so that the database sees it too.
	return min(max(next+expiryMargin, expiryMargin), every)
}

// viewGrace is how long, in lease TTLs, the live instances' views of the
// pipelines may differ before it is reported: a change of the pipeline
// files reaches the instances a moment apart.
const viewGrace = 2

// reportViews tells the operator when the live instances' views have
// differed for viewGrace (their pipeline files differ; the metric says
// so too), and when they agree again. Pipelines are still spread over the
// instances that know them (knowledge); the warning is for the operator.
func (f *fleet) reportViews(news viewsNews, views map[string]string) {
	switch news {
	case viewsAgreeAgain:
		f.log.Info("the live instances know the same pipelines again")
	case viewsNowDiffer:
		described := make([]string, 0, len(views))
		for id, v := range views {
			described = append(described, id+": "+v)
		}
		slices.Sort(described)
		f.log.Warn("the live instances do not know the same pipelines (their pipeline files differ): each pipeline runs on one of the instances that know it, and the shares may be uneven; give every instance the same pipeline files",
			zap.String("this_view", f.state().known.view), zap.Strings("views", described))
	}
}

// viewOf says which pipelines an instance knows: their count and a digest
// of their ids; and the ids, sorted.
func viewOf(known []reconciler.Running) (string, []string) {
	ids := make([]string, len(known))
	for i, k := range known {
		ids[i] = k.Pipeline.ID
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%d pipelines, %x", len(ids), h.Sum(nil)[:6]), ids
}

// expiryMargin is how long after a lease's or a heartbeat's expiry the
// balance loop looks again.
const expiryMargin = 50 * time.Millisecond

// renewedRecently: the last renewal is less than a third of the TTL old,
// so that a pipeline taken up now has time to start before this instance
// might have to give everything up.
func (f *fleet) renewedRecently() bool {
	renewed := f.state().renewed
	return f.sinceEpoch()-renewed < f.ttl/2 && renewed > 0
}

// renew heartbeats and renews the held leases; lost are those another
// instance took over.
func (f *fleet) renew(ctx context.Context) (lost []cluster.Lease, err error) {
	rctx, cancel := context.WithTimeout(ctx, f.ttl/renewShare)
	defer cancel()
	s := f.state()
	if err := f.renewer.Heartbeat(rctx, s.known.view, s.known.ids); err != nil {
		return nil, err
	}
	leases := s.heldLeases()
	ids, err := f.renewer.Renew(rctx, leases)
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		if slices.Contains(ids, l.PipelineID) {
			lost = append(lost, l)
		}
	}
	return lost, nil
}

// handoverParallelism bounds the pipelines drained at once when handing
// over: each drains for up to pipelines.graceful-stop-timeout.
// takeUpParallelism bounds the pipelines started at once: each reads its
// state and opens its connectors.
const (
	handoverParallelism = 512
	takeUpParallelism   = 4
)

// balance takes up the pipelines AssignKnown gives this instance
// and whose lease is free, and hands over those it gives to another. It
// returns how long until the first lease it waits for expires (0: none).
// No plan is applied while pipelines change hands: a pipeline is not
// updated or deleted meanwhile.
func (f *fleet) balance(ctx context.Context, live []string, holders map[string]cluster.Holder, all []string, knows func(instance, pipelineID string) bool) (waiting time.Duration) {
	self := f.member.ID()
	var give []string
	var take []reconciler.Running
	known := f.KnownPipelines()
	owners := cluster.AssignKnown(all, live, knows)
	for _, k := range known {
		id := k.Pipeline.ID
		want := owners[id] == self
		have := f.holds(id)
		switch {
		case want && !have:
			if h, ok := holders[id]; ok && h.Live && h.Instance != self {
				// Its holder hands it over, or dies and its lease expires.
				if waiting == 0 || h.ExpiresIn < waiting {
					waiting = max(h.ExpiresIn, time.Millisecond)
				}
				continue
			}
			take = append(take, k)
		case !want && have:
			give = append(give, id)
		}
	}
	s := f.state()
	deletions := len(s.undeleted) > 0 || len(s.abandoned(self)) > 0
	if len(take) == 0 && len(give) == 0 && !deletions {
		return waiting
	}
	f.host.BetweenPlans(func() { f.changeHands(ctx, take, give, owners, live, deletions) })
	return waiting
}

// changeHands carries out a balance round's deletions, take-ups and
// hand-overs; no plan is applied meanwhile (Runtime.betweenPlans).
func (f *fleet) changeHands(ctx context.Context, take []reconciler.Running, give []string, owners map[string]string, live []string, deletions bool) {
	if deletions {
		f.retryDeletions(ctx)
	}
	if len(take) > 0 && !f.writesSettled(ctx) {
		take = nil // the next round
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, takeUpParallelism)
	for _, k := range take {
		if ctx.Err() != nil || !f.renewedRecently() {
			break
		}
		// Read before the lock: a pipeline deleted or changed since is
		// not taken up as it was (the next round sees it as it is).
		if !f.stillKnown(k) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f.takeUp(ctx, k)
		})
	}
	wg.Wait()
	if len(give) == 0 {
		return
	}
	f.log.Info("handing pipelines over to the instances they belong to now", zap.Int("pipelines", len(give)), zap.Strings("live", live))
	sem = make(chan struct{}, handoverParallelism)
	for _, id := range give {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f.release(ctx, id, "handed over to instance "+owners[id], true)
		})
	}
	wg.Wait()
}

// writesSettled reports whether what this process wrote before it last
// stopped its pipelines for want of a renewal (abandon) is durable,
// waiting a moment for it: the events and states of those pipelines wait
// in memory while the database is away, under their leases' tokens, and
// taking a lease again gives it a new token, which would fence them out.
// Once they are, it answers at once until the next abandon.
func (f *fleet) writesSettled(ctx context.Context) bool {
	s := f.state()
	abandons := s.abandons
	if s.settled == abandons {
		return true
	}
	audit := f.host.Audit()
	ctx, cancel := context.WithTimeout(ctx, f.ttl/renewShare)
	defer cancel()
	// A write that failed was held or logged: only the wait counts (Flush
	// reports the last failure until something is written after it).
	if err := audit.Flush(ctx); err != nil && ctx.Err() != nil {
		return false
	}
	if held, _ := audit.WriteFigures(); held > 0 {
		f.log.Info("taking up pipelines once the events and states written while the database was away are stored", zap.Int("held", held))
		return false
	}
	f.update(func(d *draft) { d.settled = max(d.settled, abandons) })
	return true
}

// stillKnown reports whether this instance knows k as it is: the same
// pipeline, with the same configuration.
func (f *fleet) stillKnown(k reconciler.Running) bool {
	return slices.ContainsFunc(f.state().known.pipelines, func(c reconciler.Running) bool {
		return c.Pipeline.ID == k.Pipeline.ID && c.Fingerprint == k.Fingerprint
	})
}

// takeUp acquires a pipeline's lease and starts it here from the state
// its last instance saved: position, dedup entries, status and next
// attempt time.
func (f *fleet) takeUp(ctx context.Context, k reconciler.Running) {
	id := k.Pipeline.ID
	lease, ok := f.acquire(ctx, id)
	if !ok {
		return
	}
	// The resumed event says how the pipeline left its last instance.
	takeover := lifecycle.Takeover{From: lease.Previous, Self: lease.Previous == f.member.ID()}
	if err := f.host.TakeUp(ctx, k, takeover, f.member.ID()); err != nil {
		if ctx.Err() != nil {
			f.log.Info("shutting down: giving back the lease of a pipeline this instance was taking up", zap.String("pipeline_id", id))
		} else {
			f.log.Error("could not start a pipeline this instance acquired; giving its lease back", zap.String("pipeline_id", id), zap.Error(err))
		}
		f.giveBack(ctx, id)
		return
	}
	f.update(func(d *draft) { d.counts.takenOver++ })
	f.log.Info("pipeline taken up", zap.String("pipeline_id", id), zap.Int64("fencing_token", lease.Token))
}

// acquire takes a pipeline's lease when it is free or expired, holds it,
// and reads the events its last instance wrote, so that this instance's
// continue their sequence.
func (f *fleet) acquire(ctx context.Context, id string) (cluster.Lease, bool) {
	actx, cancel := context.WithTimeout(ctx, f.ttl/renewShare)
	lease, ok, err := f.member.Acquire(actx, id)
	cancel()
	if err != nil {
		f.log.Warn("could not acquire a pipeline's lease", zap.String("pipeline_id", id), zap.Error(err))
		return cluster.Lease{}, false
	}
	if !ok {
		return cluster.Lease{}, false
	}
	f.update(func(d *draft) { d.hold(lease) })
	// Without the events the last instance wrote, this one's would take
	// their sequence numbers and overwrite them: the lease is given back,
	// to be taken up again in a later round.
	sctx, cancel := context.WithTimeout(ctx, f.ttl)
	_, err = f.host.Audit().Sync(sctx, id)
	cancel()
	if err != nil {
		f.log.Warn("could not read the pipeline's events; giving its lease back to take it up later", zap.String("pipeline_id", id), zap.Error(err))
		f.giveBack(ctx, id)
		return cluster.Lease{}, false
	}
	return lease, true
}

// release stops a pipeline this instance runs and gives its lease up:
// gracefully (drain, then the state is written, then the lease released)
// when it still holds it, at once when the lease is lost.
func (f *fleet) release(ctx context.Context, id, why string, graceful bool) {
	timeout := f.opts.GracefulStopTimeout
	if !graceful {
		timeout = 0
	}
	f.host.Retire(ctx, id, lifecycle.Retirement{Reason: lifecycle.StopReasonHandover, Actor: lifecycle.ActorSystem,
		Stopping: "pipeline stopping: " + why + "; source stops reading, in-flight records drain",
		Stopped:  "pipeline stopped: " + why}, timeout)
	f.update(func(d *draft) { d.counts.handedOver++ })
	if graceful {
		f.giveBack(ctx, id)
		return
	}
	f.update(func(d *draft) { d.unhold(id) })
}

// unhold forgets the lease held for a pipeline and returns it.
func (f *fleet) unhold(id string) (l cluster.Lease, ok bool) {
	f.update(func(d *draft) { l, ok = d.unhold(id) })
	return l, ok
}

// giveBack releases a held lease.
func (f *fleet) giveBack(ctx context.Context, id string) {
	l, ok := f.unhold(id)
	if !ok {
		return
	}
	if err := f.member.Release(context.WithoutCancel(ctx), l); err != nil {
		f.log.Warn("could not release a lease; it expires by itself", zap.String("pipeline_id", id), zap.Error(err))
	}
}

// abandon stops every pipeline this instance runs when it cannot renew
// their leases: they are stopped before another instance may take them
// over, forced if they do not drain before the leases may expire.
func (f *fleet) abandon(ctx context.Context, why string) {
	var leases []cluster.Lease
	f.update(func(d *draft) {
		d.abandons++
		leases = d.heldLeases()
	})
	f.log.Error("stopping every pipeline of this instance: "+why, zap.Int("pipelines", len(leases)))
	left := max(f.deadline(f.state(), writePercent)-f.sinceEpoch(), 0)
	var wg sync.WaitGroup
	for _, l := range leases {
		id := l.PipelineID
		wg.Go(func() {
			f.host.Retire(ctx, id, lifecycle.Retirement{Reason: lifecycle.StopReasonHandover, Actor: lifecycle.ActorSystem,
				Stopping: "pipeline stopping: " + why,
				Stopped:  "pipeline stopped: " + why}, left)
			f.update(func(d *draft) {
				d.counts.handedOver++
				d.unhold(id)
			})
		})
	}
	wg.Wait()
}

// Leave gives every lease up once the pipelines stopped (a graceful
// shutdown): the others take them at once.
func (f *fleet) Leave() {
	defer f.keeper.close()
	ctx, cancel := context.WithTimeout(context.Background(), f.ttl)
	defer cancel()
	defer f.pool.Close()
	defer f.renewPool.Close()
	if !f.member.Joined() {
		return
	}
	if err := f.member.Leave(ctx); err != nil {
		f.log.Warn("could not leave the cluster; this instance's pipelines move once their leases expire", zap.Error(err))
		return
	}
	f.log.Info("left the cluster; the other instances take over its pipelines")
}

// answerLoop carries out the commands other instances' APIs send here,
// each on a goroutine of its own that reports back when it is done; the
// loop alone knows which are being carried out, so that a command read
// again meanwhile is not carried out twice.
func (f *fleet) answerLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(f.ttl)
	defer tick.Stop()
	answering := map[int64]bool{}
	answered := make(chan int64)
	for {
		cmds, err := f.member.Pending(ctx)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("could not read the commands for this instance", zap.Error(err))
		}
		for _, c := range cmds {
			if answering[c.ID] {
				continue
			}
			answering[c.ID] = true
			wg.Go(func() {
				f.answer(ctx, c)
				select {
				case answered <- c.ID:
				case <-ctx.Done():
				}
			})
		}
		if !f.awaitCommands(ctx, tick, answered, answering) {
			return
		}
	}
}

// awaitCommands waits until there may be new commands (notified, or the
// tick), forgetting the commands carried out meanwhile; false once ctx is
// done.
func (f *fleet) awaitCommands(ctx context.Context, tick *time.Ticker, answered <-chan int64, answering map[int64]bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case id := <-answered:
			delete(answering, id)
		case <-f.commands:
			return true
		case <-tick.C:
			if err := f.member.PruneCommands(ctx); err != nil && ctx.Err() == nil {
				f.log.Debug("could not delete old commands", zap.Error(err))
			}
			return true
		}
	}
}

// answer carries out one command and records the result.
func (f *fleet) answer(ctx context.Context, c cluster.Command) {
	m, _ := f.host.Supervised(c.PipelineID)
	var err error
	switch {
	case m == nil:
		err = &cluster.RefusedError{Instance: f.member.ID(), Message: fmt.Sprintf("pipeline %s is not run by instance %s any more; try again", c.PipelineID, f.member.ID())}
	case c.Action == cluster.ActionStart:
		err = m.Start(ctx)
	case c.Action == cluster.ActionStop, c.Action == cluster.ActionForceStop:
		err = m.Stop(ctx, c.Action == cluster.ActionForceStop)
	default:
		err = fmt.Errorf("unknown command %q", c.Action)
	}
	if errors.Is(err, lifecycle.ErrInvalidTransition) || errors.Is(err, lifecycle.ErrStillStopping) {
		err = &cluster.RefusedError{Instance: f.member.ID(), Message: err.Error()}
	}
	f.log.Info("command of another instance's API carried out", zap.String("pipeline_id", c.PipelineID),
		zap.String("action", c.Action), zap.Error(err))
	if aerr := f.member.Answer(context.WithoutCancel(ctx), c.ID, err); aerr != nil {
		f.log.Warn("could not answer a command", zap.Int64("command", c.ID), zap.Error(aerr))
	}
}

// holder is who runs a pipeline as the last round saw it.
func (f *fleet) holder(id string) cluster.Holder {
	s := f.state()
	if _, held := s.lease(id); held {
		return cluster.Holder{Instance: f.member.ID(), Live: true}
	}
	return s.round.holders[id]
}

// nextHolder waits until an instance holds the pipeline's lease again -
// another one, this one, or the same one having renewed or taken it back
// - and returns it.
func (f *fleet) nextHolder(ctx context.Context, pipelineID string) (string, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// This instance, once it runs the pipeline (it holds the lease a
		// moment before); another, once its lease is live.
		if f.holds(pipelineID) {
			if p, _ := f.host.Supervised(pipelineID); p != nil {
				return f.member.ID(), nil
			}
		} else {
			f.refreshHolders(ctx)
			if h := f.holder(pipelineID); h.Live && h.Instance != f.member.ID() {
				return h.Instance, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no instance took it over in time: %w", cluster.ErrNotAnswered)
		case <-tick.C:
		}
	}
}

// refreshHolders reads the leases now, for a listing that must not be a
// round old (a failover just happened).
func (f *fleet) refreshHolders(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	holders, err := f.member.Holders(ctx)
	if err != nil {
		return
	}
	// The rest of the round stays as it is.
	f.update(func(d *draft) { d.round = &roundView{live: d.round.live, holders: holders, foreign: d.round.foreign} })
}

// knownAfter is the pipelines an instance knows once plan is applied to
// known: in the same order, updated ones in place, deleted ones gone,
// created ones at the end.
func knownAfter(known []reconciler.Running, plan reconciler.Plan) []reconciler.Running {
	changes := make(map[string]reconciler.Change, len(plan.Changes))
	for _, c := range plan.Changes {
		changes[c.ID] = c
	}
	running := func(c reconciler.Change) reconciler.Running {
		return reconciler.Running{Pipeline: c.Desired.Pipeline, Origin: c.Desired.Origin, Fingerprint: c.Fingerprint}
	}
	out := make([]reconciler.Running, 0, len(known)+len(plan.Changes))
	seen := map[string]bool{}
	for _, k := range known {
		id := k.Pipeline.ID
		seen[id] = true
		c, ok := changes[id]
		switch {
		case !ok || c.Action == reconciler.Delete:
			// Not desired any more (a reconciliation plans every id).
		case c.Action == reconciler.Invalid:
			if c.Kept {
				out = append(out, k)
			}
		case c.Desired != nil:
			out = append(out, running(c))
		default:
			out = append(out, k)
		}
	}
	for _, c := range plan.Changes {
		if c.Action == reconciler.Create && !seen[c.ID] {
			out = append(out, running(c))
		}
	}
	return out
}

// deletedElsewhere deletes a pipeline that no instance deletes itself:
// one this instance does not run whose lease expired with its instance.
// The instance that holds a live lease deletes its pipeline itself; one
// that never ran has nothing to delete.
func (f *fleet) deletedElsewhere(ctx context.Context, id string, actor lifecycle.Actor) {
	known := f.state().known.pipelines
	i := slices.IndexFunc(known, func(k reconciler.Running) bool { return k.Pipeline.ID == id })
	if i < 0 {
		return
	}
	cfg := known[i]
	f.forgetUnheld(ctx, pendingDeletion{cfg: cfg.Pipeline, actor: actor})
}

// forgetUnheld deletes a pipeline this instance does not run, once no
// instance holds its lease. One that another instance holds is deleted
// later (retryDeletions): when it is deleted from every instance's files
// at once, the one that runs it hands it over (the others still knew it
// when it looked), and none would delete it.
func (f *fleet) forgetUnheld(ctx context.Context, d pendingDeletion) {
	id := d.cfg.ID
	f.refreshHolders(ctx)
	h, leased := f.state().round.holders[id]
	if leased && h.Live && h.Instance != f.member.ID() {
		f.update(func(s *draft) { s.addDeletion(d) })
		f.log.Info("pipeline deleted while instance "+h.Instance+" runs it: deleting it once that instance has let it go", zap.String("pipeline_id", id))
		return
	}
	f.update(func(s *draft) { s.removeDeletion(id) })
	if !leased {
		return // never ran: nothing to forget
	}
	if _, ok := f.acquire(ctx, id); !ok {
		f.update(func(s *draft) { s.addDeletion(d) }) // taken meanwhile: next round
		return
	}
	f.log.Info("pipeline deleted while no instance ran it: forgetting it", zap.String("pipeline_id", id))
	if err := f.host.Forget(ctx, d.cfg, d.actor); err != nil {
		f.log.Warn("could not write the deletion", zap.String("pipeline_id", id), zap.Error(err))
	}
	f.dropLease(ctx, id)
}

// retryDeletions deletes the pipelines deleted while another instance
// held them, once it let them go; one that is known again (its file came
// back) is not deleted. No plan is applied meanwhile (changeHands).
func (f *fleet) retryDeletions(ctx context.Context) {
	s := f.state()
	var pending []pendingDeletion
	for _, d := range s.undeleted {
		if !s.round.knownSomewhere(s.known, d.cfg.ID) {
			pending = append(pending, d)
		}
	}
	// Also those another instance meant to delete but could not carry out
	// (it stopped before the holder let go), left by a live instance that
	// does not know them any more; the first live instance does it.
	for _, id := range s.abandoned(f.member.ID()) {
		if _, ok := s.undeleted[id]; !ok {
			pending = append(pending, pendingDeletion{cfg: config.Pipeline{ID: id}, actor: lifecycle.ActorConfig})
		}
	}
	for _, d := range pending {
		if ctx.Err() != nil {
			return
		}
		f.forgetUnheld(ctx, d)
	}
	f.update(func(d *draft) { d.dropKnownDeletions() })
}

// dropLease deletes the lease of a pipeline this instance deleted.
func (f *fleet) dropLease(ctx context.Context, id string) {
	l, ok := f.unhold(id)
	if !ok {
		return
	}
	if err := f.member.Drop(context.WithoutCancel(ctx), l); err != nil {
		f.log.Warn("could not delete the lease of a deleted pipeline", zap.String("pipeline_id", id), zap.Error(err))
	}
}

// reloadRules reads the managed recovery rules again, after an instance
// changed them.
func (f *fleet) reloadRules() {
	ctx, cancel := context.WithTimeout(context.Background(), f.ttl)
	defer cancel()
	if err := f.host.ReloadRules(ctx); err != nil {
		f.log.Warn("could not read the managed recovery rules another instance changed", zap.Error(err))
	}
}

// changed tells every instance that what changed here (pipelines
// through the API, managed rules) changed.
func (f *fleet) Changed(ctx context.Context, what ownership.Change) {
	channel := cluster.PipelinesChannel
	if what == ownership.RulesChanged {
		channel = cluster.RulesChannel
	}
	if err := cluster.Notify(context.WithoutCancel(ctx), f.pool, channel); err != nil {
		f.log.Warn("could not tell the other instances of a change; they see it at their next reload", zap.String("channel", channel), zap.Error(err))
	}
}
