package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/clock"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// Options configure a Notifier.
type Options struct {
	// DB is read for the outbox; Writer writes it (the one write path).
	DB     store.Store
	Writer *store.Batcher
	// Targets are the resolved notifications.targets.
	Targets []config.ResolvedTarget
	// GroupWindow, MaxListed, RecoveringAfter and RetryMaxDelay are the
	// notifications.* keys; zero takes their defaults.
	GroupWindow     time.Duration
	MaxListed       int
	RecoveringAfter time.Duration
	RetryMaxDelay   time.Duration
	// Clock is the time of windows, backoffs and recovering-long; nil is
	// the wall clock.
	Clock clock.Clock
	// Client sends; nil is NewClient(DefaultTimeout).
	Client *http.Client
	// Record writes the audit event of a delivery or failed delivery
	// (kind notified or notification-failed); nil writes none.
	Record func(auditlog.Event)
	// Logger; nil discards.
	Logger *zap.Logger
}

// recentDeliveries is how many deliveries Status remembers.
const recentDeliveries = 50

// Notifier sends notifications; see the package doc. Ops and Breaker are
// called by whoever writes events, Run is its one goroutine.
type Notifier struct {
	opts    Options
	clock   clock.Clock
	log     *zap.Logger
	targets []*target
	// trackRecovering: some target wants recovering-long.
	trackRecovering bool

	seq     atomic.Uint64
	nudge   chan struct{}
	metrics metrics

	// afterDeliver, set by tests before Run, runs after each delivery pass.
	afterDeliver func()

	// pipelines are the pipelines' own narrowing (a pipeline file's
	// notifications block), by id: replaced whole under pipelinesMu, read
	// without a lock by Ops, which runs on every supervisor's goroutine.
	pipelines   atomic.Pointer[map[string]config.PipelineNotifications]
	pipelinesMu sync.Mutex

	mu sync.Mutex
	// recovering are the pipelines recovering now, by id.
	recovering map[string]*recoveringPipeline
	recent     []Delivery
}

// target is a configured target with its filters and, owned by Run, its
// state of delivery.
type target struct {
	config.ResolvedTarget
	kinds       map[Kind]bool // nil: all
	minSeverity Severity

	// Owned by Run; copied into status under Notifier.mu.
	failures int
	retryAt  time.Time
	status   TargetStatus
}

type recoveringPipeline struct {
	since    time.Time
	last     auditlog.Event
	notified bool
}

// New returns a Notifier; Run starts its delivery.
func New(opts Options) *Notifier {
	opts.GroupWindow = cmpOr(opts.GroupWindow, 10*time.Second)
	opts.RecoveringAfter = cmpOr(opts.RecoveringAfter, 15*time.Minute)
	opts.RetryMaxDelay = cmpOr(opts.RetryMaxDelay, 5*time.Minute)
	opts.MaxListed = max(opts.MaxListed, 0)
	if opts.MaxListed == 0 {
		opts.MaxListed = 20
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Client == nil {
		opts.Client = NewClient(DefaultTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	n := &Notifier{opts: opts, clock: opts.Clock, log: opts.Logger, nudge: make(chan struct{}, 1),
		recovering: map[string]*recoveringPipeline{}, metrics: newMetrics()}
	for _, rt := range opts.Targets {
		t := &target{ResolvedTarget: rt, minSeverity: parseSeverity(rt.MinSeverity)}
		if len(rt.Events) > 0 {
			t.kinds = map[Kind]bool{}
			for _, e := range rt.Events {
				t.kinds[Kind(e)] = true
			}
		}
		t.status = TargetStatus{Name: rt.Name, Kind: rt.Kind, Events: rt.Events, Pipelines: rt.Pipelines,
			MinSeverity: t.minSeverity.String()}
		if t.wantsKind(KindRecoveringLong) {
			n.trackRecovering = true
		}
		n.targets = append(n.targets, t)
	}
	if len(n.targets) > 0 {
		names := make([]string, len(n.targets))
		for i, t := range n.targets {
			names[i] = t.Name + " (" + t.Kind + ")"
		}
		n.log.Info("notifications on", zap.Strings("targets", names))
	}
	return n
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (t *target) wantsKind(k Kind) bool { return t.kinds == nil || t.kinds[k] }

// wants says whether t is sent a notification of kind and severity about
// one of pipelines.
func (t *target) wants(k Kind, s Severity, pipelines ...string) bool {
	if !t.wantsKind(k) || s < t.minSeverity {
		return false
	}
	if len(t.Pipelines) == 0 {
		return true
	}
	for _, p := range pipelines {
		for _, g := range t.Pipelines {
			if ok, _ := path.Match(g, p); ok {
				return true
			}
		}
	}
	return false
}

// wake tells Run there is something new; it never blocks.
func (n *Notifier) wake() {
	select {
	case n.nudge <- struct{}{}:
	default:
	}
}

// SetPipeline makes f the narrowing of pipeline id's notifications (a zero
// f: none); it is called when the pipeline is provisioned and when it is
// deleted. Safe on a nil Notifier (no targets: nothing to narrow).
func (n *Notifier) SetPipeline(id string, f config.PipelineNotifications) {
	if n == nil {
		return
	}
	n.pipelinesMu.Lock()
	defer n.pipelinesMu.Unlock()
	next := map[string]config.PipelineNotifications{}
	if cur := n.pipelines.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if len(f.Targets) == 0 && len(f.Events) == 0 {
		delete(next, id)
	} else {
		next[id] = f
	}
	n.pipelines.Store(&next)
}

// pipelineWants says whether pipeline id's own narrowing lets target hear
// of kind.
func (n *Notifier) pipelineWants(id, target string, kind Kind) bool {
	m := n.pipelines.Load()
	if m == nil || id == "" {
		return true
	}
	f, ok := (*m)[id]
	if !ok {
		return true
	}
	return (len(f.Targets) == 0 || slices.Contains(f.Targets, target)) &&
		(len(f.Events) == 0 || slices.Contains(f.Events, string(kind)))
}

// Ops returns the outbox entries of audit event e, to be committed with
// it (auditlog.Options.With). It is called for every event, on the
// writer's caller's goroutine: it only filters and defers the encoding to
// the writer.
func (n *Notifier) Ops(e auditlog.Event) []store.Op {
	if n.trackRecovering {
		n.track(e)
	}
	kind, sev, ok := classify(e)
	if !ok {
		return nil
	}
	var ops []store.Op
	var base *entry
	for _, t := range n.targets {
		if !t.wants(kind, sev, e.PipelineID) || !n.pipelineWants(e.PipelineID, t.Name, kind) {
			continue
		}
		if base == nil {
			base = entryOf(kind, sev, e)
		}
		en := *base
		en.Target = t.Name
		ops = append(ops, store.Op{Key: entryKey(t.Name, e.Time, e.PipelineID, e.Sequence),
			Encode: func(dst []byte) ([]byte, error) { return appendEntry(dst, en) }})
	}
	if len(ops) > 0 {
		n.wake()
	}
	return ops
}

// entryOf is the notification of an audit event.
func entryOf(kind Kind, sev Severity, e auditlog.Event) *entry {
	en := &entry{Kind: kind, Severity: sev.String(), Time: e.Time, Pipeline: e.PipelineID, Event: eventOf(e)}
	cause := e.ErrorMessage
	if cause != "" && e.Component != "" {
		cause += " (" + e.Component + ")"
	}
	switch kind {
	case KindDegraded:
		en.Summary = fmt.Sprintf("pipeline %s degraded (%s)", e.PipelineID, e.Reason)
	case KindFlapping:
		en.Summary = fmt.Sprintf("pipeline %s is flapping", e.PipelineID)
		if e.Kind == auditlog.KindDegraded {
			en.Summary = fmt.Sprintf("pipeline %s degraded: flapping", e.PipelineID)
		}
	case KindRecoveringLong:
		en.Summary = fmt.Sprintf("pipeline %s has been recovering since %s (restart %d)", e.PipelineID,
			e.Time.UTC().Format(time.RFC3339), e.Attempt)
	case KindDeadLettered:
		en.Summary = fmt.Sprintf("pipeline %s: %s", e.PipelineID, e.Message)
		cause = ""
	case KindRecovered:
		en.Summary = fmt.Sprintf("pipeline %s recovered (%s)", e.PipelineID, e.Reason)
		if e.Kind == auditlog.KindStarting {
			en.Summary = fmt.Sprintf("pipeline %s was degraded and is started again (by %s)", e.PipelineID, e.Actor)
		}
	}
	if cause != "" {
		en.Summary += ": " + cause
	}
	en.Hint = hint(kind, &e)
	return en
}

// track follows which pipelines are recovering, for recovering-long.
func (n *Notifier) track(e auditlog.Event) {
	switch e.Kind {
	case auditlog.KindRecovering, auditlog.KindRestarted, auditlog.KindFault:
		if e.Kind != auditlog.KindRecovering && e.StatusAfter != lifecycle.StatusRecovering {
			return
		}
		n.mu.Lock()
		r := n.recovering[e.PipelineID]
		if r == nil {
			r = &recoveringPipeline{since: e.Time}
			n.recovering[e.PipelineID] = r
			defer n.wake()
		}
		r.last = e
		n.mu.Unlock()
	case auditlog.KindRecovered, auditlog.KindDegraded, auditlog.KindRunning, auditlog.KindStopping,
		auditlog.KindStopped, auditlog.KindDeleted:
		n.mu.Lock()
		delete(n.recovering, e.PipelineID)
		n.mu.Unlock()
	}
}

// Breaker notifies a dependency breaker opening or closing.
func (n *Notifier) Breaker(c lifecycle.BreakerChange) {
	if n == nil {
		return
	}
	kind, sev := KindBreakerClosed, SeverityInfo
	pipelines := c.Released
	if c.Open {
		kind, sev, pipelines = KindBreakerOpened, SeverityWarning, c.Failed
	}
	now := n.clock.Now()
	en := entry{Kind: kind, Severity: sev.String(), Time: now, Dependency: c.Dependency, Canary: c.Canary,
		Pipelines: pipelines, Hint: hint(kind, nil)}
	if c.Open {
		en.Summary = fmt.Sprintf("dependency %s: breaker opened after %d pipelines failed on it; %s retries it", c.Dependency, len(c.Failed), c.Canary)
	} else {
		en.Summary = fmt.Sprintf("dependency %s: breaker closed, %s got a record through; %d pipelines restart", c.Dependency, c.Canary, len(c.Released))
	}
	seq := n.seq.Add(1)
	var ops []store.Op
	for _, t := range n.targets {
		if !t.wants(kind, sev, append([]string{c.Canary}, pipelines...)...) {
			continue
		}
		e := en
		e.Target = t.Name
		ops = append(ops, store.Op{Key: entryKey(t.Name, now, c.Dependency, seq), Encode: func(dst []byte) ([]byte, error) { return appendEntry(dst, e) }})
	}
	n.submit(ops)
}

func (n *Notifier) submit(ops []store.Op) {
	if len(ops) == 0 {
		return
	}
	if _, err := n.opts.Writer.Submit(store.WriteOptions{}, ops...); err != nil {
		n.log.Error("could not queue notifications", zap.Int("notifications", len(ops)), zap.Error(err))
		return
	}
	n.wake()
}

// Run delivers until ctx ends: first what the outbox holds from before
// (a previous process), then each window's notifications.
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	due := n.clock.Now()
	for {
		now := n.clock.Now()
		if !due.IsZero() && !now.Before(due) {
			due = n.deliver(ctx, now)
			if n.afterDeliver != nil {
				n.afterDeliver()
			}
		}
		recoveringAt := n.recoveringDue(now)
		next := due
		if !recoveringAt.IsZero() && (next.IsZero() || recoveringAt.Before(next)) {
			next = recoveringAt
		}
		var fire <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			timer = n.clock.TimerAt(next)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-n.nudge:
			// The first new entry opens the window; later ones join it.
			if at := n.clock.Now().Add(n.opts.GroupWindow); due.IsZero() || at.Before(due) {
				due = at
			}
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// recoveringDue queues the recovering-long notifications that are due
// and returns when the next one will be (zero: none).
func (n *Notifier) recoveringDue(now time.Time) time.Time {
	if !n.trackRecovering {
		return time.Time{}
	}
	var next time.Time
	var due []auditlog.Event
	var since []time.Time
	n.mu.Lock()
	for _, r := range n.recovering {
		if r.notified {
			continue
		}
		at := r.since.Add(n.opts.RecoveringAfter)
		if !now.Before(at) {
			r.notified = true
			due, since = append(due, r.last), append(since, r.since)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	n.mu.Unlock()
	var ops []store.Op
	for i, e := range due {
		e.Time = since[i]
		en := entryOf(KindRecoveringLong, SeverityWarning, e)
		en.Time = now
		for _, t := range n.targets {
			if !t.wants(KindRecoveringLong, SeverityWarning, e.PipelineID) {
				continue
			}
			te := *en
			te.Target = t.Name
			ops = append(ops, store.Op{Key: entryKey(t.Name, now, e.PipelineID, n.seq.Add(1)),
				Encode: func(dst []byte) ([]byte, error) { return appendEntry(dst, te) }})
		}
	}
	n.submit(ops)
	return next
}

// deliver sends what the outbox holds to every target whose backoff
// allows, and returns when it must run again for a target that failed
// (zero: none).
func (n *Notifier) deliver(ctx context.Context, now time.Time) time.Time {
	// Entries queued before now are in the store once this returns.
	if err := n.opts.Writer.Flush(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("notifications: could not flush the store's writes before reading the outbox", zap.Error(err))
	}
	byTarget, err := n.readOutbox(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Error("notifications: could not read the outbox; retrying", zap.Error(err))
			return now.Add(retryMinDelay)
		}
		return time.Time{}
	}
	var next time.Time
	for _, t := range n.targets {
		entries := byTarget[t.Name]
		if len(entries) > 0 && now.Before(t.retryAt) {
			n.setPending(t, len(entries))
			if next.IsZero() || t.retryAt.Before(next) {
				next = t.retryAt
			}
			continue
		}
		left := n.deliverTarget(ctx, t, entries, now)
		n.setPending(t, left)
		if left > 0 && (next.IsZero() || t.retryAt.Before(next)) {
			next = t.retryAt
		}
	}
	return next
}

// deliverTarget sends t's entries, one message per kind in the order the
// kinds first appear (PagerDuty sees a trigger before its resolve), and
// stops at the first failure. It returns how many entries are left.
func (n *Notifier) deliverTarget(ctx context.Context, t *target, entries []entry, now time.Time) int {
	left := len(entries)
	for _, g := range groupByKind(entries) {
		err := n.send(ctx, t, g, false)
		if err != nil {
			if ctx.Err() != nil {
				return left
			}
			t.failures++
			var de *deliveryError
			var asked time.Duration
			if errors.As(err, &de) {
				asked = de.retryAfter
			}
			delay := retryDelay(t.failures, n.opts.RetryMaxDelay, asked)
			t.retryAt = now.Add(delay)
			n.log.Warn("notification not delivered; retrying later", zap.String("target", t.Name), zap.String("kind", string(g.kind)),
				zap.Int("notifications", len(g.entries)), zap.Int("attempt", t.failures), zap.Duration("retry_in", delay), zap.Error(err))
			n.metrics.failures.WithLabelValues(t.Name).Inc()
			n.noteDelivery(t, g, now, err, false)
			n.auditDelivery(t, g, err, delay)
			return left
		}
		t.failures, t.retryAt = 0, time.Time{}
		deletes := make([]store.Op, len(g.entries))
		for i, e := range g.entries {
			deletes[i] = store.Op{Key: e.key, Delete: true}
		}
		if err := n.opts.Writer.Apply(ctx, deletes...); err != nil {
			// Sent again next time: at least once.
			n.log.Error("notifications delivered but not removed from the outbox; they will be sent again", zap.String("target", t.Name), zap.Error(err))
		}
		left -= len(g.entries)
		n.log.Info("notification delivered", zap.String("target", t.Name), zap.String("kind", string(g.kind)),
			zap.Int("notifications", len(g.entries)))
		n.metrics.sent.WithLabelValues(t.Name, string(g.kind)).Add(float64(len(g.entries)))
		n.noteDelivery(t, g, now, nil, false)
		n.auditDelivery(t, g, nil, 0)
	}
	return left
}

// groupByKind splits a target's entries (in time order) by kind, in the
// order each kind first appears.
func groupByKind(entries []entry) []group {
	var groups []group
	index := map[Kind]int{}
	for _, e := range entries {
		i, ok := index[e.Kind]
		if !ok {
			i = len(groups)
			index[e.Kind] = i
			groups = append(groups, group{kind: e.Kind})
		}
		groups[i].entries = append(groups[i].entries, e)
	}
	return groups
}

// send posts g's messages to t.
func (n *Notifier) send(ctx context.Context, t *target, g group, test bool) error {
	reqs, err := messages(t.ResolvedTarget, g, n.opts.MaxListed, test)
	if err != nil {
		return &deliveryError{err: fmt.Errorf("building the message: %w", err)}
	}
	for _, r := range reqs {
		if err := post(ctx, n.opts.Client, t.ResolvedTarget, r.body, n.clock.Now()); err != nil {
			return err
		}
	}
	return nil
}

// readOutbox returns every entry by target, in time order. Entries of a
// target no longer configured are deleted: nobody would send them.
func (n *Notifier) readOutbox(ctx context.Context) (map[string][]entry, error) {
	out := map[string][]entry{}
	var orphans []store.Op
	known := map[string]bool{}
	for _, t := range n.targets {
		known[store.KeyPart(t.Name)] = true
	}
	prefix := []byte(store.PrefixNotifyOutbox)
	err := n.opts.DB.Scan(ctx, prefix, func(key, value []byte) error {
		esc, _, _ := bytes.Cut(key[len(prefix):], []byte("/"))
		if !known[string(esc)] {
			orphans = append(orphans, store.Op{Key: bytes.Clone(key), Delete: true})
			return nil
		}
		e, err := decodeEntry(key, value)
		if err != nil {
			n.log.Warn("notifications: skipping an outbox entry that does not read", zap.ByteString("key", key), zap.Error(err))
			return nil
		}
		out[e.Target] = append(out[e.Target], e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(orphans) > 0 {
		n.log.Warn("notifications: dropping the undelivered notifications of targets no longer configured", zap.Int("notifications", len(orphans)))
		if err := n.opts.Writer.Apply(ctx, orphans...); err != nil {
			n.log.Error("notifications: could not drop them", zap.Error(err))
		}
	}
	return out, nil
}

// auditDelivery writes a notified or notification-failed event for each
// pipeline g is about (a breaker's: its canary).
func (n *Notifier) auditDelivery(t *target, g group, err error, delay time.Duration) {
	if n.opts.Record == nil {
		return
	}
	pipelines := map[string]bool{}
	var order []string
	for _, e := range g.entries {
		p := e.Pipeline
		if p == "" {
			p = e.Canary
		}
		if p != "" && !pipelines[p] {
			pipelines[p] = true
			order = append(order, p)
		}
	}
	what := fmt.Sprintf("notification %s to target %s (%s)", g.kind, t.Name, t.Kind)
	if len(order) > 1 {
		what += fmt.Sprintf(", one message for %d pipelines", len(order))
	}
	for _, p := range order {
		ev := auditlog.Event{PipelineID: p, Kind: auditlog.KindNotified, Actor: lifecycle.ActorSystem, Message: what + " delivered"}
		if err != nil {
			ev.Kind, ev.ErrorMessage, ev.Attempt, ev.Delay = auditlog.KindNotificationFailed, err.Error(), t.failures, delay
			ev.Message = fmt.Sprintf("%s failed (attempt %d), next attempt in %s: %v", what, t.failures, delay, err)
		}
		n.opts.Record(ev)
	}
}

// Test sends a sample notification to the target named name, now and
// outside the outbox, and returns the target's answer.
func (n *Notifier) Test(ctx context.Context, name string) error {
	i := slices.IndexFunc(n.targets, func(t *target) bool { return t.Name == name })
	if i < 0 {
		names := make([]string, len(n.targets))
		for j, t := range n.targets {
			names[j] = t.Name
		}
		return fmt.Errorf("%w: %q (configured: %s)", ErrUnknownTarget, name, strings.Join(names, ", "))
	}
	t := n.targets[i]
	now := n.clock.Now()
	e := auditlog.Event{Sequence: 1, Time: now, PipelineID: "conduit-notification-test", Kind: auditlog.KindDegraded,
		StatusBefore: "recovering", StatusAfter: "degraded", Actor: lifecycle.ActorUser, Reason: string(lifecycle.ReasonFatal),
		ErrorMessage: "this is a test notification sent by `conduit notifications test`", ErrorCode: 0}
	en := entryOf(KindDegraded, SeverityCritical, e)
	en.Target = t.Name
	g := group{kind: KindDegraded, entries: []entry{*en}}
	err := n.send(ctx, t, g, true)
	n.noteDelivery(t, g, now, err, true)
	return err
}

// ErrUnknownTarget is Test's error for a name no target has.
var ErrUnknownTarget = errors.New("no notification target")
