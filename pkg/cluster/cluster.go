// Package cluster lets several conduit processes share one PostgreSQL
// database (DESIGN 12): each instance heartbeats in conduit_instances, and
// each pipeline is run by the instance that holds its lease in
// conduit_leases. A lease carries a fencing token that grows every time
// the lease changes hands, so that a write made with a stale token (a
// process that was paused past its lease and woke up) can be refused.
// Times are the database's, so that the instances' clocks do not matter.
//
// The package owns these tables and their migrations (schema.go, run by
// Check and Join), and keeps the driver's errors to itself (errors.go):
// what leaves it is one of its own errors, the context's, ErrUnavailable
// or PostgreSQL's refusal as text. It holds the mechanics; which pipelines
// an instance runs, and what it does when a lease moves, is decided by the
// instance of the cluster (pkg/cluster/instance), the runtime's ownership
// in a cluster.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrDuplicateInstance refuses an instance whose id a live instance has.
var ErrDuplicateInstance = errors.New("another live conduit instance has this id")

// ErrLeaseLost is returned for an operation on a lease another instance
// holds now, or that expired.
var ErrLeaseLost = errors.New("the lease is lost")

// ErrNotRegistered is returned by Heartbeat once another process joined
// with this instance's id (this one was presumed dead).
var ErrNotRegistered = errors.New("another process joined the cluster with this instance's id")

// ErrTTLMismatch refuses an instance whose lease TTL differs from the
// live instances': they would take each other for dead, or wait for each
// other's leases far longer than they expect.
var ErrTTLMismatch = errors.New("every instance of a cluster must have the same cluster.lease-ttl")

// Membership is one instance's part in the cluster.
type Membership struct {
	pool *pgxpool.Pool
	id   string
	ttl  time.Duration
	// host and pid say which process on which machine has the id, so that
	// a process restarted at once on the same machine can tell that the
	// live-looking instance with its id is its own dead predecessor.
	host string
	pid  int
	// joined is the start time the database recorded at Join: it tells
	// this process from a later one with the same id.
	joined time.Time
	// sentView is the view the last heartbeat wrote with its pipelines:
	// they are written again only when the view changes.
	sentView string
}

// New is an instance's membership before it joins: it holds nothing and
// is not seen by the others.
func New(pool *pgxpool.Pool, id string, ttl time.Duration) *Membership {
	host, _ := os.Hostname()
	return &Membership{pool: pool, id: id, ttl: ttl, host: host, pid: os.Getpid()}
}

// Join registers the instance id, knowing the given pipelines (view is a
// digest of them, as for Heartbeat); see Membership.Join.
func Join(ctx context.Context, pool *pgxpool.Pool, id string, ttl time.Duration, view string, pipelines []string) (*Membership, error) {
	m := New(pool, id, ttl)
	if err := m.Join(ctx, view, pipelines); err != nil {
		return nil, err
	}
	return m, nil
}

// Check refuses what Join would refuse, before anything is loaded: the
// id of a live instance (ErrDuplicateInstance), and a lease TTL other
// than the live instances' (ErrTTLMismatch).
func (m *Membership) Check(ctx context.Context) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	if err := Migrate(ctx, m.pool); err != nil {
		return err
	}
	return m.settle(ctx, func(settled bool) error { return m.check(ctx, m.pool, settled) })
}

// settle runs check, and once more after waiting for it when it cannot
// tell yet whether the instance with this id is this one's predecessor
// (errMaybeAlive).
func (m *Membership) settle(ctx context.Context, check func(settled bool) error) error {
	err := check(false)
	var maybe errMaybeAlive
	if !errors.As(err, &maybe) {
		return err
	}
	t := time.NewTimer(maybe.wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return check(true)
}

// errMaybeAlive is check's answer for a live-looking instance with this
// id, on this machine, with this process's pid, that heartbeat a moment
// ago: this process restarted in place (a container's first process has
// the same pid each time), or another container with the same host name
// runs with the same id. Its heartbeat tells, after wait.
type errMaybeAlive struct{ wait time.Duration }

func (e errMaybeAlive) Error() string {
	return fmt.Sprintf("an instance with this id and process id heartbeat a moment ago; waiting %s to tell whether it still runs", e.wait)
}

// heartbeatQuiet is how long an instance that runs goes without a
// heartbeat at most, but for an outage: it heartbeats every fifth of the
// TTL (pkg/conduit).
func (m *Membership) heartbeatQuiet() time.Duration { return 2 * m.ttl / 5 }

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (m *Membership) check(ctx context.Context, q querier, settled bool) error {
	if m.id == "" {
		return errEmptyID
	}
	// Live by their own TTL, which older instances did not record.
	rows, err := q.Query(ctx, `SELECT id, coalesce(lease_ttl, $1::interval), coalesce(host, ''), coalesce(pid, 0), now() - heartbeat_at FROM conduit_instances
		WHERE heartbeat_at >= now() - coalesce(lease_ttl, $1::interval) ORDER BY id`, m.ttl)
	if err != nil {
		return err
	}
	type instance struct {
		id   string
		ttl  time.Duration
		host string
		pid  int
		age  time.Duration
	}
	var live []instance
	for rows.Next() {
		var i instance
		if err := rows.Scan(&i.id, &i.ttl, &i.host, &i.pid, &i.age); err != nil {
			rows.Close()
			return err
		}
		live = append(live, i)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var differ []string
	for _, i := range live {
		switch {
		case i.id == m.id && m.predecessor(i.host, i.pid) && i.pid == m.pid && i.age < m.heartbeatQuiet():
			// This pid is this process's: its heartbeat tells whether
			// another process with it runs elsewhere (another container).
			if !settled {
				return errMaybeAlive{wait: m.heartbeatQuiet() - i.age}
			}
			return fmt.Errorf("%w: %q (process %d on %s, another container?) heartbeat %s ago", ErrDuplicateInstance, m.id, i.pid, i.host, i.age.Round(time.Millisecond))
		case i.id == m.id && !m.predecessor(i.host, i.pid):
			return fmt.Errorf("%w: %q (process %d on %s) heartbeat less than %s ago", ErrDuplicateInstance, m.id, i.pid, cmp.Or(i.host, "a host it did not name"), i.ttl)
		case i.id != m.id && i.ttl != m.ttl:
			differ = append(differ, fmt.Sprintf("%s has %s", i.id, i.ttl))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("%w: this one has %s, but %s", ErrTTLMismatch, m.ttl, strings.Join(differ, ", "))
	}
	return nil
}

// predecessor reports whether the live-looking instance with this id,
// process pid on host, is an earlier process of this one that is gone: on
// this machine, and its process no longer runs (or has this process's
// pid, which a container restarted in place gets again).
func (m *Membership) predecessor(host string, pid int) bool {
	if host == "" || host != m.host || pid <= 0 {
		return false
	}
	return pid == m.pid || !processRuns(pid)
}

// joinLock serializes joins (an advisory lock key that is conduit's, as
// pkg/store's are), so that two instances started at once with different
// TTLs or the same id cannot both pass the check.
const joinLock = 0x636f6e6403

// Join registers the instance, knowing the given pipelines. An id that a
// live instance (one that heartbeat within its TTL) has is refused with
// ErrDuplicateInstance, unless that instance is a gone process of this
// machine; a lease TTL that differs from the live instances' is refused
// with ErrTTLMismatch. A dead instance's row is taken over. The others
// start handing over its share at once: an instance joins once it is
// ready to run pipelines.
func (m *Membership) Join(ctx context.Context, view string, pipelines []string) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	id, pool, ttl := m.id, m.pool, m.ttl
	if id == "" {
		return errEmptyID
	}
	if err := Migrate(ctx, pool); err != nil {
		return err
	}
	if pipelines == nil {
		pipelines = []string{}
	}
	var joined time.Time
	err = m.settle(ctx, func(settled bool) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(joinLock)); err != nil {
				return err
			}
			if err := m.check(ctx, tx, settled); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `INSERT INTO conduit_instances (id, heartbeat_at, started_at, view, pipelines, lease_ttl, host, pid)
			VALUES ($1, now(), clock_timestamp(), $3, $4, $2, $5, $6)
			ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), started_at = clock_timestamp(),
				view = $3, pipelines = $4, lease_ttl = $2, host = $5, pid = $6
			RETURNING started_at`, id, ttl, view, pipelines, m.host, m.pid).Scan(&joined)
		})
	})
	if errors.Is(err, ErrDuplicateInstance) || errors.Is(err, ErrTTLMismatch) {
		return err
	}
	if err != nil {
		return wrapf(ctx, err, "joining the cluster as %q", id)
	}
	m.joined, m.sentView = joined, view
	// Instances that are gone for a day are forgotten (an id with the
	// process id in it is never seen again); a new one is announced, so
	// that the others hand over its share at once.
	if _, err := pool.Exec(ctx, `DELETE FROM conduit_instances WHERE heartbeat_at < now() - interval '1 day'`); err != nil {
		return wrapf(ctx, err, "joining the cluster as %q", id)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, LeasesChannel, id); err != nil {
		return wrapf(ctx, err, "joining the cluster as %q", id)
	}
	return nil
}

// Joined reports whether Join succeeded.
func (m *Membership) Joined() bool { return !m.joined.IsZero() }

// Heartbeat says the instance is alive, and what it knows of the
// pipelines: view is any text that is the same on instances that know the
// same pipelines (LiveFor shows it to the others), pipelines their ids,
// written only when the view changed since the last heartbeat (Known
// reads them). It fails when another instance took the id over (this one
// was presumed dead).
func (m *Membership) Heartbeat(ctx context.Context, view string, pipelines []string) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	var ids []string // nil: the pipelines written before stand
	if view != m.sentView {
		ids = pipelines
		if ids == nil {
			ids = []string{}
		}
	}
	// The view is written with its pipelines only: a Publish made since
	// this heartbeat read its view wrote a newer pair, which must stay
	// a pair.
	tag, err := m.pool.Exec(ctx, `UPDATE conduit_instances SET heartbeat_at = now(),
			view = CASE WHEN $4::text[] IS NULL THEN view ELSE $3 END, pipelines = coalesce($4, pipelines)
		WHERE id = $1 AND started_at = $2`, m.id, m.joined, view, ids)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w (%q)", ErrNotRegistered, m.id)
	}
	m.sentView = view
	return nil
}

// Publish says what the instance knows of the pipelines now, ahead of its
// next heartbeat (view and pipelines as for Heartbeat): an instance that
// is about to delete a pipeline its files no longer have tells the others
// first, so that of two instances that drop it at once, the later one
// sees that the first does not know it any more.
func (m *Membership) Publish(ctx context.Context, view string, pipelines []string) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	if pipelines == nil {
		pipelines = []string{}
	}
	_, err = m.pool.Exec(ctx, `UPDATE conduit_instances SET view = $3, pipelines = $4 WHERE id = $1 AND started_at = $2`,
		m.id, m.joined, view, pipelines)
	return err
}

// KnownElsewhere returns the other live instances that know the pipeline
// (an instance that never said which pipelines it knows, an older
// conduit, is taken to know it), sorted.
func (m *Membership) KnownElsewhere(ctx context.Context, pipelineID string) (_ []string, err error) {
	defer func() { err = dbErr(ctx, err) }()
	rows, err := m.pool.Query(ctx, `SELECT id FROM conduit_instances
		WHERE id <> $1 AND heartbeat_at >= now() - coalesce(lease_ttl, $2::interval) AND (pipelines IS NULL OR $3 = ANY(pipelines))
		ORDER BY id`, m.id, m.ttl, pipelineID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Known returns, for each of the given instances, the view and the ids
// of the pipelines its last heartbeat that changed its view wrote; an
// instance that never wrote them (an older conduit) is left out.
func (m *Membership) Known(ctx context.Context, instances []string) (_ map[string]KnownPipelines, err error) {
	defer func() { err = dbErr(ctx, err) }()
	rows, err := m.pool.Query(ctx, `SELECT id, view, pipelines FROM conduit_instances WHERE id = ANY($1) AND pipelines IS NOT NULL`, instances)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]KnownPipelines{}
	for rows.Next() {
		var id string
		var k KnownPipelines
		if err := rows.Scan(&id, &k.View, &k.IDs); err != nil {
			return nil, err
		}
		out[id] = k
	}
	return out, rows.Err()
}

// KnownPipelines are the pipelines an instance knows, with its view of
// them.
type KnownPipelines struct {
	View string
	IDs  []string
}

// Leave removes the instance and gives up its leases at once, so that the
// others take its pipelines without waiting for the leases to expire.
// An instance that another process with its id took over (it was
// presumed dead) leaves nothing: the leases under its id are that
// process's now.
func (m *Membership) Leave(ctx context.Context) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE conduit_leases SET expires_at = now() WHERE owner = $1
			AND EXISTS (SELECT 1 FROM conduit_instances WHERE id = $1 AND started_at = $2)`, m.id, m.joined); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM conduit_instances WHERE id = $1 AND started_at = $2`, m.id, m.joined); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, LeasesChannel, m.id)
		return err
	})
}

// Live returns the ids of the instances that heartbeat within the TTL,
// sorted.
func (m *Membership) Live(ctx context.Context) ([]string, error) {
	l, err := m.LiveFor(ctx)
	return l.IDs, err
}

// LiveInstances are the instances that heartbeat within the TTL.
type LiveInstances struct {
	// IDs, sorted.
	IDs []string
	// Views are what each one said of the pipelines in its last
	// heartbeat; empty for one that has not said yet.
	Views map[string]string
	// Soonest is the shortest time one of the others stays live without
	// another heartbeat: when the live instances may change next.
	Soonest time.Duration
}

// LiveFor returns the live instances with their views.
func (m *Membership) LiveFor(ctx context.Context) (_ LiveInstances, err error) {
	defer func() { err = dbErr(ctx, err) }()
	rows, err := m.pool.Query(ctx, `SELECT id, view, heartbeat_at + coalesce(lease_ttl, $1::interval) - now() FROM conduit_instances
		WHERE heartbeat_at >= now() - coalesce(lease_ttl, $1::interval) ORDER BY id`, m.ttl)
	if err != nil {
		return LiveInstances{}, err
	}
	defer rows.Close()
	l := LiveInstances{Views: map[string]string{}, Soonest: m.ttl}
	for rows.Next() {
		var id, view string
		var left time.Duration
		if err := rows.Scan(&id, &view, &left); err != nil {
			return LiveInstances{}, err
		}
		l.IDs = append(l.IDs, id)
		l.Views[id] = view
		if id != m.id {
			l.Soonest = min(l.Soonest, left)
		}
	}
	return l, rows.Err()
}

// Lease is a pipeline's lease as this instance holds it.
type Lease struct {
	PipelineID string
	// Token is new each time the lease changes hands (one sequence for
	// every lease, so never the token of an earlier lease of a pipeline
	// of the same id): a write is valid only with the token of the lease
	// that is current.
	Token   int64
	Expires time.Time
	// Previous is the instance that held the lease before Acquire took
	// it (this one's id when it held it already), "" for a new lease.
	Previous string
}

// Acquire takes the pipeline's lease when it is free, expired or this
// instance id's already, always with a new token: a process that takes a
// lease up starts its pipeline anew, and whatever an earlier holder - an
// earlier process with this id too - still writes under the old token is
// refused. ok is false when another instance holds it.
//
// A commit of the pipeline's state under the current token holds the
// lease row FOR KEY SHARE (pkg/store): the row is locked FOR UPDATE
// first, which waits for such a commit, so that a takeover never
// overtakes it. (A renewal, which changes no key, does not wait for
// commits.)
func (m *Membership) Acquire(ctx context.Context, pipelineID string) (l Lease, ok bool, err error) {
	defer func() { err = dbErr(ctx, err) }()
	err = pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT owner FROM conduit_leases WHERE pipeline_id = $1 FOR UPDATE`, pipelineID).Scan(&l.Previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO conduit_leases (pipeline_id, owner, token, expires_at)
			VALUES ($1, $2, nextval('conduit_lease_tokens'), now() + $3::interval)
		ON CONFLICT (pipeline_id) DO UPDATE SET
			-- Above the lease's own token as well: an instance of an
			-- older conduit, during a rolling upgrade, adds one to it.
			token = greatest(EXCLUDED.token, conduit_leases.token + 1),
			owner = $2, expires_at = now() + $3::interval
		WHERE conduit_leases.owner = $2 OR conduit_leases.expires_at < now()
		RETURNING token, expires_at`, pipelineID, m.id, m.ttl).Scan(&l.Token, &l.Expires)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, err
	}
	l.PipelineID = pipelineID
	return l, true, nil
}

// Renew extends the leases this instance still holds with their tokens
// and returns the ones it lost (taken over after they expired).
func (m *Membership) Renew(ctx context.Context, leases []Lease) (lost []string, err error) {
	defer func() { err = dbErr(ctx, err) }()
	if len(leases) == 0 {
		return nil, nil
	}
	ids := make([]string, len(leases))
	tokens := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.PipelineID, l.Token
	}
	rows, err := m.pool.Query(ctx, `UPDATE conduit_leases AS l SET expires_at = now() + $2::interval
		FROM unnest($3::text[], $4::bigint[]) AS mine(pipeline_id, token)
		WHERE l.pipeline_id = mine.pipeline_id AND l.token = mine.token AND l.owner = $1 AND l.expires_at >= now()
		RETURNING l.pipeline_id`, m.id, m.ttl, ids, tokens)
	if err != nil {
		return nil, err
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.Contains(kept, id) {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// Release gives a lease up at once (a graceful hand-over) and tells the
// other instances, so that the one it belongs to takes it without waiting
// for its next round.
func (m *Membership) Release(ctx context.Context, l Lease) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE conduit_leases SET expires_at = now() WHERE pipeline_id = $1 AND owner = $2 AND token = $3`,
			l.PipelineID, m.id, l.Token); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, LeasesChannel, m.id)
		return err
	})
}

// Drop deletes the lease of a pipeline that was deleted, if this instance
// still holds it with l's token.
func (m *Membership) Drop(ctx context.Context, l Lease) (err error) {
	defer func() { err = dbErr(ctx, err) }()
	_, err = m.pool.Exec(ctx, `DELETE FROM conduit_leases WHERE pipeline_id = $1 AND owner = $2 AND token = $3`,
		l.PipelineID, m.id, l.Token)
	return err
}

// ID is the instance's id.
func (m *Membership) ID() string { return m.id }

// TTL is the lease TTL.
func (m *Membership) TTL() time.Duration { return m.ttl }

// Holder is who holds a pipeline's lease, as the database says now.
type Holder struct {
	Instance string
	// Live: the lease has not expired.
	Live bool
	// ExpiresIn is how long the lease lasts unless it is renewed
	// (negative once it expired), by the database's clock.
	ExpiresIn time.Duration
}

// Holders returns the holder of every lease, by pipeline id.
func (m *Membership) Holders(ctx context.Context) (_ map[string]Holder, err error) {
	defer func() { err = dbErr(ctx, err) }()
	rows, err := m.pool.Query(ctx, `SELECT pipeline_id, owner, expires_at >= now(), expires_at - now() FROM conduit_leases`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Holder{}
	for rows.Next() {
		var id string
		var h Holder
		if err := rows.Scan(&id, &h.Instance, &h.Live, &h.ExpiresIn); err != nil {
			return nil, err
		}
		out[id] = h
	}
	return out, rows.Err()
}

// Current reports whether token is the current token of the pipeline's
// lease: the check a write of the pipeline's state makes inside its
// transaction (pkg/store). A lease that expired but that nobody took over
// yet is still current: a takeover gives it a new token, and waits for
// the commits that hold its row.
func Current(ctx context.Context, tx pgx.Tx, pipelineID string, token int64) (_ bool, err error) {
	defer func() { err = dbErr(ctx, err) }()
	var ok bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conduit_leases WHERE pipeline_id = $1 AND token = $2)`,
		pipelineID, token).Scan(&ok)
	return ok, err
}

// Assign gives each pipeline the instance that should run it: rendezvous
// hashing with bounded loads. Pipelines are placed one by one, in an order
// fixed by their ids' hashes, each on the first instance of its
// rendezvous ranking that has room: floor(pipelines/instances), and one
// more for as many instances as the division leaves over. Every instance computes the same assignment from the same
// pipelines and live instances, whatever their order; the loads differ
// by at most one, however few the pipelines (plain rendezvous hashing
// gives 9 pipelines over 3 instances as 6, 3 and 0 as often as not); and
// an instance joining or leaving moves about its share and little more.
func Assign(pipelineIDs, live []string) map[string]string {
	return AssignKnown(pipelineIDs, live, nil)
}

// AssignKnown is Assign where not every instance knows every pipeline
// (their pipeline files differ): a pipeline goes only to an instance
// knows says knows it - the first of its ranking that knows it and has
// room, or, when those that know it are full, the least loaded of them -
// and to none when no live instance knows it. knows nil: every instance
// knows every pipeline. Instances that compute it from the same
// pipelines, live instances and knowledge agree.
func AssignKnown(pipelineIDs, live []string, knows func(instance, pipelineID string) bool) map[string]string {
	out := make(map[string]string, len(pipelineIDs))
	if len(live) == 0 {
		return out
	}
	instances := slices.Clone(live)
	slices.Sort(instances)
	instances = slices.Compact(instances)
	ids := slices.Clone(pipelineIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	order := make([]uint64, len(ids))
	for i, id := range ids {
		order[i] = hashOf(id)
	}
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(order[a], order[b]); c != 0 {
			return c
		}
		return cmp.Compare(ids[a], ids[b])
	})
	// Every instance gets floor(n/k) pipelines, and the first n mod k
	// to reach that get one more.
	base, extra := len(ids)/len(instances), len(ids)%len(instances)
	load := make([]int, len(instances))
	scores := make([]uint64, len(instances))
	ranked := make([]int, len(instances))
	for _, i := range idx {
		id := ids[i]
		for j, inst := range instances {
			scores[j] = score(inst, id)
			ranked[j] = j
		}
		slices.SortFunc(ranked, func(a, b int) int {
			if c := cmp.Compare(scores[b], scores[a]); c != 0 {
				return c
			}
			return cmp.Compare(instances[a], instances[b])
		})
		placed, fallback := false, -1
		for _, j := range ranked {
			if knows != nil && !knows(instances[j], id) {
				continue
			}
			if fallback < 0 || load[j] < load[fallback] {
				fallback = j
			}
			if load[j] < base || (load[j] == base && extra > 0) {
				if load[j] == base {
					extra--
				}
				load[j]++
				out[id] = instances[j]
				placed = true
				break
			}
		}
		if !placed && fallback >= 0 {
			load[fallback]++
			out[id] = instances[fallback]
		}
	}
	return out
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix(h.Sum64())
}

// score is an instance's rendezvous score for a pipeline; higher wins.
func score(instance, pipelineID string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(instance))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(pipelineID))
	return mix(h.Sum64())
}

// mix spreads a hash's bits (splitmix64's finalizer): FNV alone orders
// ids that differ in a digit too alike for a fair spread.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// OpenPool opens connections of an instance's part in the cluster, apart
// from those of its pipelines' state: a heartbeat or a renewal must never
// wait behind the pipelines' writes, or a busy instance would lose its
// leases. An instance opens two: one of size 1 that only renews, and one
// for everything else (listening, taking leases up, listings, commands),
// whose statements may wait for a lease row another instance locked.
//
// A session left inside a transaction longer than idleInTx (a process
// paused mid-release) is ended by PostgreSQL, so that the lease rows it
// locked do not wait for it to wake up.
func OpenPool(ctx context.Context, url string, size int32, idleInTx time.Duration) (_ *pgxpool.Pool, err error) {
	defer func() { err = dbErr(ctx, err) }()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = size
	cfg.MinConns = 1
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(idleInTx.Milliseconds(), 10)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Using is the membership of the same instance on another pool: the
// renewals of an instance go through a pool of their own.
func (m *Membership) Using(pool *pgxpool.Pool) *Membership {
	c := *m
	c.pool = pool
	return &c
}
