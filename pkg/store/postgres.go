package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/pgfault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Postgres is a Store in a PostgreSQL database (db.type postgres): one
// table of keys and values, created and migrated by conduit, with the
// schema's version in a table of its own. Keys are bytea, which
// PostgreSQL orders byte by byte, as the Store contract needs. Commit is
// one transaction; one with an Expect is serializable, run again when
// PostgreSQL finds it conflicted with another.
type Postgres struct {
	pool *pgxpool.Pool
	log  *zap.Logger
	// lock holds the session advisory lock of an exclusive or shared
	// store (sharedLock), behind lockMu: watchLock takes it again on a
	// new session when the server ended the one that held it.
	lockMu     sync.Mutex
	lock       *pgxpool.Conn
	sharedLock bool
	// owner is the token this process holds in conduit_owner (0: none,
	// the store takes no lock): every commit checks it, so that when
	// another process opened the database while this one's lock was lost,
	// this one's writes are refused (ErrDisowned) instead of mixing with
	// the other's.
	owner int64
	// commitTimeout bounds one attempt of a commit.
	commitTimeout time.Duration
	// stopWatch ends watchLock, and a probe it has under way;
	// watchDone is closed when it returned.
	stopWatch context.CancelFunc
	watchDone chan struct{}
	// notifyEvents: commits notify EventsChannel of the pipelines whose
	// audit events they write.
	notifyEvents bool
	// retryFor is PostgresOptions.RetryFor.
	retryFor time.Duration
	// unreachableSince is when commits began to find the server
	// unreachable (UnixNano; 0 while it answers): an outage is logged
	// once, and its end too. Commits share the outage's RetryFor, so
	// that the writes that come one after another in an outage (a
	// shutdown's last ones) do not wait RetryFor each.
	unreachableSince atomic.Int64
	// outlasted is set once a commit gave up on the outage (it lasted
	// RetryFor), until a commit lands.
	outlasted atomic.Bool
	// lastUnreachable is the last failed attempt of a commit that found
	// the server unreachable. Once the outage has outlasted RetryFor, a
	// commit within probeEvery of it fails with its error without trying:
	// on a network that drops packets every attempt waits out
	// CommitTimeout, and a shutdown's last writes would wait it each.
	lastUnreachable atomic.Pointer[failedAttempt]
	// probeEvery is outageProbeEvery.
	probeEvery time.Duration

	// inflight counts the operations under way; Close waits for them, so
	// that none fails on a pool closed under it.
	mu       sync.RWMutex
	closed   atomic.Bool
	inflight sync.WaitGroup
	once     sync.Once
	closeErr error
}

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	// Exclusive makes the store refuse a second process (ErrInUse), as a
	// Badger directory does: a standalone conduit owns its database.
	Exclusive bool
	// Shared is the lock of an instance of a cluster: any number of them
	// share the database, and a conduit that runs alone (Exclusive) is
	// refused while they do, and they while it does.
	Shared bool
	// NotifyEvents makes every commit that writes audit events send a
	// notification on EventsChannel with each such pipeline's id, so
	// that the other processes on the database show those events to their
	// watchers (pkg/cluster listens).
	NotifyEvents bool
	// IdleInTransactionTimeout, when set, makes PostgreSQL end a session
	// of this store that stays inside a transaction, waiting for the
	// client, longer than this: a process paused mid-commit (SIGSTOP, a
	// VM freeze) must not hold the rows it locked - the leases another
	// instance needs to take its pipelines over - until it wakes up.
	IdleInTransactionTimeout time.Duration
	// RetryFor is how long commits keep trying while PostgreSQL cannot
	// be reached (a restart or failover of the server, a network blip),
	// so that such a blip costs the pipelines a pause rather than a
	// failure; 0 is defaultRetryFor. It counts from the outage's first
	// failed commit: a commit made later in the same outage tries for
	// what is left of it, and once it is spent, commits try the server
	// once a second and fail at once in between. Commits are retried
	// whole: their writes are puts and deletes of keys, which land the
	// same however often they are applied, and the Batcher sends one
	// commit at a time.
	RetryFor time.Duration
	// CommitTimeout bounds one attempt of a commit, so that a connection
	// the network silently dropped (no reset, no answer) fails the
	// attempt - which is then tried again on a new connection, within
	// RetryFor - instead of holding the one writer for as long as the
	// kernel takes to give the socket up; 0 is defaultCommitTimeout.
	CommitTimeout time.Duration
	// LockCheckEvery is how often an exclusive or shared store checks
	// that the session holding its lock on the database is still there,
	// and takes the lock again on a new session when it is not (the
	// server restarted); 0 is defaultLockCheckEvery.
	LockCheckEvery time.Duration
}

// defaultCommitTimeout is PostgresOptions.CommitTimeout's default: far
// longer than a healthy commit takes, short beside RetryFor.
const defaultCommitTimeout = 5 * time.Second

// defaultLockCheckEvery is PostgresOptions.LockCheckEvery's default.
const defaultLockCheckEvery = 2 * time.Second

// ownerLostCode is the SQLSTATE conduit_owner_check raises when the token
// it is given is no longer the database's owner.
const ownerLostCode = "CD001"

// defaultRetryFor is PostgresOptions.RetryFor's default: longer than a
// restart of the server takes.
const defaultRetryFor = 10 * time.Second

// EventsChannel is the PostgreSQL notification channel of
// PostgresOptions.NotifyEvents. PostgreSQL delivers a notification when
// its transaction commits, and one per distinct payload of a
// transaction.
const EventsChannel = "conduit_events"

// postgresSchema is the version this build writes; migrations[i] takes a
// database from version i to i+1. An empty migration is one that made the
// tables of several processes on one database (versions 2 to 5, and the
// lease token sequence of 6): those are pkg/cluster's now, which creates
// and migrates them with a version of their own (cluster.Migrate), so
// that they exist only where a cluster runs. Databases migrated before
// have them already; nothing is dropped.
const postgresSchema = 6

var postgresMigrations = []string{
	`CREATE TABLE conduit_kv (key bytea PRIMARY KEY, value bytea NOT NULL)`,
	"", "", "", "",
	// The database's owner: which conduit process (a standalone one) or
	// which cluster holds it, with a token every commit checks, so that a
	// process that lost its lock (the server restarted) and was overtaken
	// by another cannot write on.
	`CREATE SEQUENCE conduit_owner_tokens;
	CREATE TABLE conduit_owner (
		id int PRIMARY KEY CHECK (id = 1),
		mode text NOT NULL,
		token bigint NOT NULL
	);
	CREATE FUNCTION conduit_owner_check(t bigint) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		-- FOR SHARE: a process that takes the database over (an UPDATE of
		-- the row) waits for the commits under way.
		PERFORM 1 FROM conduit_owner WHERE id = 1 AND token = t FOR SHARE;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'another conduit process opened this database' USING ERRCODE = 'CD001';
		END IF;
	END $$`,
}

// Advisory lock keys (any constants that are conduit's): one serializes
// migrations, one marks the database of a standalone conduit.
const (
	pgMigrationLock = 0x636f6e6401
	pgProcessLock   = 0x636f6e6402
)

// defaultPostgresConns is the most connections a store opens unless
// db.postgres.url sets pool_max_conns.
const defaultPostgresConns = 10

// scanPage is how many keys a scan reads per query after the first,
// which reads firstScanPage: many scans stop at their first key (the last
// event of a pipeline, the next pipeline's first), and a query's rows all
// cross the wire whether the caller reads them or not.
const (
	firstScanPage = 16
	scanPage      = 1000
)

// OpenPostgres connects to the database at url (a libpq URL or DSN) and
// creates or migrates conduit's schema.
func OpenPostgres(ctx context.Context, url string, log *zap.Logger, opts PostgresOptions) (_ *Postgres, err error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db.postgres.url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (4, or one per CPU) makes pipelines queue for a
		// connection while a commit is under way; a URL that says how
		// many it may use is followed.
		cfg.MaxConns = max(cfg.MaxConns, defaultPostgresConns)
	}
	if opts.IdleInTransactionTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(opts.IdleInTransactionTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db.postgres.url: %w", err)
	}
	s := &Postgres{pool: pool, log: log, notifyEvents: opts.NotifyEvents, retryFor: cmp.Or(opts.RetryFor, defaultRetryFor),
		commitTimeout: cmp.Or(opts.CommitTimeout, defaultCommitTimeout), probeEvery: outageProbeEvery}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL (db.postgres.url, %s): %w", describeTarget(cfg), err)
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if opts.Exclusive || opts.Shared {
		s.sharedLock = opts.Shared
		got, err := s.takeLock(ctx)
		if err != nil {
			return nil, err
		}
		if !got {
			holder := "a conduit alone or the instances of a cluster"
			if opts.Shared {
				holder = "a conduit alone, with cluster.enabled off"
			}
			return nil, fmt.Errorf("%w: PostgreSQL database %s (%s run on it)", ErrInUse, describeTarget(cfg), holder)
		}
		if err := s.claim(ctx); err != nil {
			return nil, err
		}
		watchCtx, stop := context.WithCancel(context.Background())
		s.stopWatch, s.watchDone = stop, make(chan struct{})
		go s.watchLock(watchCtx, cmp.Or(opts.LockCheckEvery, defaultLockCheckEvery), describeTarget(cfg))
	}
	return s, nil
}

// takeLock takes the process lock on a session of its own, kept in s.lock.
func (s *Postgres) takeLock(ctx context.Context) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	lock := `SELECT pg_try_advisory_lock($1)`
	if s.sharedLock {
		lock = `SELECT pg_try_advisory_lock_shared($1)`
	}
	var got bool
	if err := conn.QueryRow(ctx, lock, int64(pgProcessLock)).Scan(&got); err != nil || !got {
		conn.Release()
		return false, err
	}
	s.lockMu.Lock()
	s.lock = conn
	s.lockMu.Unlock()
	return true, nil
}

// claim makes this process the database's owner: a standalone one with a
// token of its own, which ends whatever another process held; an
// instance of a cluster with the cluster's token, new only when the
// database was not a cluster's.
func (s *Postgres) claim(ctx context.Context) error {
	if !s.sharedLock {
		err := s.pool.QueryRow(ctx, `INSERT INTO conduit_owner (id, mode, token) VALUES (1, 'alone', nextval('conduit_owner_tokens'))
			ON CONFLICT (id) DO UPDATE SET mode = 'alone', token = EXCLUDED.token
			RETURNING token`).Scan(&s.owner)
		if err != nil {
			return fmt.Errorf("taking the database (conduit_owner): %w", s.pgErr(ctx, err))
		}
		return nil
	}
	// An instance of a cluster changes the row only when the database
	// was not a cluster's: an update would wait for every instance's
	// commits under way (they hold the row FOR SHARE), and hold up the
	// next ones.
	if _, err := s.pool.Exec(ctx, `INSERT INTO conduit_owner (id, mode, token) VALUES (1, 'cluster', nextval('conduit_owner_tokens'))
		ON CONFLICT (id) DO UPDATE SET mode = 'cluster', token = EXCLUDED.token WHERE conduit_owner.mode <> 'cluster'`); err != nil {
		return fmt.Errorf("taking the database (conduit_owner): %w", s.pgErr(ctx, err))
	}
	if err := s.pool.QueryRow(ctx, `SELECT token FROM conduit_owner WHERE id = 1`).Scan(&s.owner); err != nil {
		return fmt.Errorf("taking the database (conduit_owner): %w", s.pgErr(ctx, err))
	}
	return nil
}

// watchLock checks every so often that the session holding the process
// lock is still there. When the server ended it (a restart), the lock is
// taken again on a new session, so that another conduit started meanwhile
// is refused as before. If another one took the lock first, it also
// took the database over (claim), and this process's commits fail with
// ErrDisowned; that is logged here as it happens.
func (s *Postgres) watchLock(watchCtx context.Context, every time.Duration, target string) {
	defer close(s.watchDone)
	t := time.NewTicker(every)
	defer t.Stop()
	lost := false
	for {
		select {
		case <-watchCtx.Done():
			return
		case <-t.C:
		}
		// A probe cut off by its deadline ends the session, and the lock
		// with it: it gets far longer than a healthy server takes. A server
		// that went away answers at once (reset, refused).
		ctx, cancel := context.WithTimeout(watchCtx, max(30*time.Second, every))
		s.lockMu.Lock()
		conn := s.lock
		s.lockMu.Unlock()
		if conn != nil && !conn.Conn().IsClosed() {
			_, err := conn.Exec(ctx, `SELECT 1`)
			if err == nil || watchCtx.Err() != nil {
				// Fine, or closing: Close releases the lock.
				cancel()
				continue
			}
		}
		if conn != nil {
			s.lockMu.Lock()
			s.lock = nil
			s.lockMu.Unlock()
			conn.Release()
			if !lost {
				s.log.Warn("the session holding this process's lock on the database ended (PostgreSQL restarted?); taking the lock again",
					zap.String("database", target))
			}
			lost = true
		}
		got, err := s.takeLock(ctx)
		cancel()
		switch {
		case err != nil:
			// The server is not back yet: next time.
		case got:
			s.log.Info("this process holds its lock on the database again", zap.String("database", target))
			lost = false
		default:
			s.log.Error("another conduit process holds the database now; this one's writes are refused",
				zap.String("database", target))
			return
		}
	}
}

func describeTarget(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// migrate brings the schema to postgresSchema, one migration per
// transaction, serialized across processes by an advisory lock.
func (s *Postgres) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS conduit_schema (version int NOT NULL)`); err != nil {
			return fmt.Errorf("creating conduit's schema table: %w", err)
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM conduit_schema`).Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO conduit_schema (version) VALUES (0)`); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if version > postgresSchema {
			return fmt.Errorf("%w: the database's schema is version %d, newer than this conduit's (%d): run a newer conduit",
				ErrCorrupt, version, postgresSchema)
		}
		for v := version; v < postgresSchema; v++ {
			if postgresMigrations[v] == "" {
				continue
			}
			if _, err := tx.Exec(ctx, postgresMigrations[v]); err != nil {
				return fmt.Errorf("migrating conduit's schema to version %d: %w", v+1, err)
			}
		}
		if version < postgresSchema {
			if _, err := tx.Exec(ctx, `UPDATE conduit_schema SET version = $1`, postgresSchema); err != nil {
				return err
			}
			s.log.Info("PostgreSQL schema migrated", zap.Int("from", version), zap.Int("to", postgresSchema))
		}
		return nil
	})
}

// enter registers an operation; false once the store is closed.
func (s *Postgres) enter() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return false
	}
	s.inflight.Add(1)
	return true
}

// pgErr maps a driver error: a closed store, a cancelled context.
func (s *Postgres) pgErr(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case s.closed.Load():
		return ErrClosed
	case ownerLost(err):
		return cerrors.WithCode(ErrDisowned, cerrors.CodeConflict)
	case errors.Is(err, ErrConflict):
		return err
	case unavailable(err):
		return cerrors.WithCode(fmt.Errorf("%w: %v", ErrUnavailable, err), cerrors.CodeUnavailable)
	}
	// The driver's error types stay in this package; their text says
	// what PostgreSQL refused.
	return fmt.Errorf("PostgreSQL: %v", err)
}

// ownerLost reports whether err is conduit_owner_check's refusal.
func ownerLost(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == ownerLostCode
}

// TxnLimits implements TxnLimiter: a PostgreSQL transaction holds any
// round of the Batcher, which is then always one transaction.
func (s *Postgres) TxnLimits() (ops, bytes int) { return 0, 0 }

// Pool returns the connection pool, for what shares the database beside
// the key-value table (pkg/cluster).
func (s *Postgres) Pool() *pgxpool.Pool { return s.pool }

// Get implements Store.
func (s *Postgres) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.inflight.Done()
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM conduit_kv WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, s.pgErr(ctx, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

const (
	pgUpsert = `INSERT INTO conduit_kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`
	pgDelete = `DELETE FROM conduit_kv WHERE key = $1`
)

// Commit implements Store: one transaction, the ops sent in one batch. A
// commit with an Expect runs serializable, so that a concurrent commit
// that changes a key it checked (in this process or another) fails one of
// the two; the failed one runs again and then finds the change.
func (s *Postgres) Commit(ctx context.Context, ops []Op) error {
	for _, op := range ops {
		if err := checkWrite(op); err != nil {
			return err
		}
	}
	if len(ops) == 0 {
		return ctx.Err()
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.inflight.Done()
	var stale map[Fence]bool
	// A large round (a storm of thousands of pipelines' states) is one
	// transaction too: it gets more time, a second per MiB it carries and
	// per 10,000 writes.
	size := 0
	for _, op := range ops {
		size += len(op.Key) + len(op.Value)
	}
	timeout := s.commitTimeout + time.Duration(size>>20)*time.Second + time.Duration(len(ops)/10000)*time.Second
	err := s.retryUnavailable(ctx, func() error {
		attempt, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		err := s.commit(attempt, ops, &stale)
		if err != nil && attempt.Err() != nil && ctx.Err() == nil {
			// No answer in time: the connection may be gone without a
			// word (a network cut); the next attempt takes another one.
			return fmt.Errorf("%w (no answer within %s): %v", errNoAnswer, timeout, err)
		}
		return err
	})
	if err == nil && len(stale) > 0 {
		fe := &FencedError{}
		for f := range stale {
			if !slices.Contains(fe.Pipelines, f.Pipeline) {
				fe.Pipelines = append(fe.Pipelines, f.Pipeline)
			}
		}
		slices.Sort(fe.Pipelines)
		return fe
	}
	return s.pgErr(ctx, err)
}

// commit makes one attempt at Commit; stale receives the fences it found
// stale.
func (s *Postgres) commit(ctx context.Context, ops []Op, staleOut *map[Fence]bool) error {
	var stale map[Fence]bool
	var txOpts pgx.TxOptions
	if slices.ContainsFunc(ops, func(op Op) bool { return op.Expect != nil }) {
		txOpts.IsoLevel = pgx.Serializable
	}
	err := s.retryConflicts(ctx, func() error {
		return pgx.BeginTxFunc(ctx, s.pool, txOpts, func(tx pgx.Tx) error {
			var err error
			if stale, err = staleFences(ctx, tx, ops); err != nil {
				return err
			}
			if err := checkExpects(ctx, tx, ops); err != nil {
				return err
			}
			b := &pgx.Batch{}
			if s.owner != 0 {
				b.Queue(`SELECT conduit_owner_check($1)`, s.owner)
			}
			for _, op := range ops {
				if op.Fence != nil && stale[*op.Fence] {
					continue
				}
				if op.Delete {
					b.Queue(pgDelete, op.Key)
					continue
				}
				v := op.Value
				if v == nil {
					v = []byte{}
				}
				b.Queue(pgUpsert, op.Key, v)
			}
			if s.notifyEvents {
				queueEventNotifications(b, ops, stale)
			}
			return tx.SendBatch(ctx, b).Close()
		})
	})
	*staleOut = stale
	return err
}

// checkExpects returns ErrConflict unless every op with an Expect finds
// its key holding what it expects.
func checkExpects(ctx context.Context, tx pgx.Tx, ops []Op) error {
	for _, op := range ops {
		if op.Expect == nil {
			continue
		}
		var v []byte
		err := tx.QueryRow(ctx, `SELECT value FROM conduit_kv WHERE key = $1`, op.Key).Scan(&v)
		present := true
		if errors.Is(err, pgx.ErrNoRows) {
			present = false
		} else if err != nil {
			return err
		}
		if !op.Expect.holds(v, present) {
			return conflictError(op.Key)
		}
	}
	return nil
}

// retryUnavailable runs fn again, with a growing pause, while it fails
// because the server cannot be reached, until the server has been
// unreachable for s.retryFor: the first commit of an outage waits for up
// to that long, a commit after it tries once.
func (s *Postgres) retryUnavailable(ctx context.Context, fn func() error) error {
	if s.outlasted.Load() {
		if last := s.lastUnreachable.Load(); last != nil && time.Since(last.at) < s.probeEvery {
			return last.err
		}
	}
	pause := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			s.outlasted.Store(false)
			if since := s.unreachableSince.Swap(0); since != 0 {
				s.log.Info("PostgreSQL can be reached again; the commits that waited for it are written",
					zap.Duration("unreachable_for", time.Since(time.Unix(0, since)).Round(time.Millisecond)))
			}
			return nil
		}
		if !unavailable(err) || ctx.Err() != nil || s.closed.Load() {
			return err
		}
		now := time.Now()
		s.lastUnreachable.Store(&failedAttempt{at: now, err: err})
		if s.unreachableSince.CompareAndSwap(0, now.UnixNano()) {
			s.log.Warn("PostgreSQL cannot be reached; commits wait and try again",
				zap.Duration("for_at_most", s.retryFor), zap.Error(err))
		}
		since := s.unreachableSince.Load()
		if since == 0 { // reachable again meanwhile, for another commit
			since = now.UnixNano()
		}
		if now.Sub(time.Unix(0, since))+pause > s.retryFor {
			s.outlasted.Store(true)
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, time.Second)
	}
}

// outageProbeEvery is how often commits try the server once an outage
// has outlasted PostgresOptions.RetryFor; the commits between two tries
// fail at once.
const outageProbeEvery = time.Second

// failedAttempt is an attempt of a commit that failed, and when.
type failedAttempt struct {
	at  time.Time
	err error
}

// unavailable reports whether err says the server could not be reached or
// went away (see pgfault), or a commit got no answer in time, rather than
// refusing what was asked.
func unavailable(err error) bool {
	return errors.Is(err, errNoAnswer) || pgfault.Unavailable(err)
}

// errNoAnswer is a commit attempt that got no answer within
// PostgresOptions.CommitTimeout.
var errNoAnswer = errors.New("PostgreSQL did not answer the commit")

// queueEventNotifications notifies EventsChannel once per pipeline whose
// audit events ops write (and were not fenced off).
func queueEventNotifications(b *pgx.Batch, ops []Op, stale map[Fence]bool) {
	notified := map[string]bool{}
	for _, op := range ops {
		if op.Delete || !bytes.HasPrefix(op.Key, []byte(PrefixAuditLog)) || (op.Fence != nil && stale[*op.Fence]) {
			continue
		}
		id, ok := PipelineOfKey(op.Key)
		if !ok || notified[id] {
			continue
		}
		notified[id] = true
		b.Queue(`SELECT pg_notify($1, $2)`, EventsChannel, id)
	}
}

// staleFences returns the fences among ops whose token is not their
// lease's current one. (A lease that expired but was not taken over is
// still current: a takeover locks the row, waiting for this commit, and
// only then gives the lease a new token.) The lease rows of the
// current fences are locked FOR KEY SHARE until the transaction ends, so
// that a takeover (pkg/cluster Acquire locks the row FOR UPDATE) waits
// for this commit instead of overtaking it, while a renewal, which
// changes no key, does not wait at all: an instance whose thousand
// pipelines commit all the time still renews at once. One statement
// locks them all in pipeline order, so that commits of several instances
// and takeovers never wait for each other in a circle. Rows whose token
// moved on are not locked: a process paused in the middle of a late
// commit must not hold up the instance that runs those pipelines now.
// conduit_leases is pkg/cluster's table (cluster.Migrate makes it when an
// instance opens its membership, before its first fenced write).
func staleFences(ctx context.Context, tx pgx.Tx, ops []Op) (map[Fence]bool, error) {
	// A round commits the writes of many pipelines, several ops each:
	// a set, not a scan of the fences seen so far.
	var fences []Fence
	seen := map[Fence]bool{}
	for _, op := range ops {
		if op.Fence != nil && !seen[*op.Fence] {
			seen[*op.Fence] = true
			fences = append(fences, *op.Fence)
		}
	}
	if len(fences) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(fences))
	tokens := make([]int64, 0, len(fences))
	for _, f := range fences {
		if f.Token > 0 { // 0 is never a lease's token
			ids, tokens = append(ids, f.Pipeline), append(tokens, f.Token)
		}
	}
	current := map[Fence]bool{}
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, `SELECT l.pipeline_id, l.token FROM conduit_leases AS l
			JOIN unnest($1::text[], $2::bigint[]) AS f(pipeline_id, token) ON l.pipeline_id = f.pipeline_id AND l.token = f.token
			ORDER BY l.pipeline_id FOR KEY SHARE OF l`, ids, tokens)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var f Fence
			if err := rows.Scan(&f.Pipeline, &f.Token); err != nil {
				rows.Close()
				return nil, err
			}
			current[f] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var stale map[Fence]bool
	for _, f := range fences {
		if !current[f] {
			if stale == nil {
				stale = map[Fence]bool{}
			}
			stale[f] = true
		}
	}
	return stale, nil
}

// retryConflicts runs fn, a whole transaction, again when PostgreSQL
// aborted it for a deadlock or a serialization failure: the ops of a
// commit are upserts and deletes, which may be applied again.
func (s *Postgres) retryConflicts(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		var pe *pgconn.PgError
		if attempt < maxConflictRetries && errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// maxConflictRetries bounds how often a commit is tried when PostgreSQL
// keeps aborting it for conflicts.
const maxConflictRetries = 5

// Scan implements Store.
func (s *Postgres) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return s.scan(ctx, prefix, prefix, nil, false, fn)
}

// ScanFrom implements Store.
func (s *Postgres) ScanFrom(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	lo := prefix
	if bytes.Compare(start, prefix) > 0 {
		lo = start
	}
	return s.scan(ctx, prefix, lo, nil, false, fn)
}

// ScanReverse implements Store.
func (s *Postgres) ScanReverse(ctx context.Context, prefix, start []byte, fn func(key, value []byte) error) error {
	var hi []byte
	if len(start) > 0 {
		hi = start
	}
	return s.scan(ctx, prefix, prefix, hi, true, fn)
}

// scan visits the keys with prefix from lo (and up to hi inclusive when
// given), in key order or reversed, a page at a time, all in one
// repeatable-read transaction: the callback sees the keys present when
// the scan began, and may write to the store meanwhile.
func (s *Postgres) scan(ctx context.Context, prefix, lo, hi []byte, reverse bool, fn func(key, value []byte) error) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.inflight.Done()
	end := prefixEnd(prefix)
	var fnErr error
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var after []byte // the last key visited
		for limit := firstScanPage; ; limit = scanPage {
			// Both bounds are index conditions only when written as plain
			// comparisons: a bound behind "$2 IS NULL OR" is a filter, and
			// the index scan then runs past the prefix through the rest of
			// the table.
			var (
				rows pgx.Rows
				err  error
			)
			switch {
			case !reverse:
				from, op := lo, ">="
				if after != nil {
					from, op = after, ">"
				}
				if end == nil {
					rows, err = tx.Query(ctx, `SELECT key, value FROM conduit_kv WHERE key `+op+` $1 ORDER BY key LIMIT $2`, from, limit)
				} else {
					rows, err = tx.Query(ctx, `SELECT key, value FROM conduit_kv WHERE key `+op+` $1 AND key < $2 ORDER BY key LIMIT $3`, from, end, limit)
				}
			default:
				top, op := hi, "<="
				if after != nil {
					top, op = after, "<"
				}
				if top == nil {
					top, op = end, "<"
				}
				if top == nil {
					rows, err = tx.Query(ctx, `SELECT key, value FROM conduit_kv WHERE key >= $1 ORDER BY key DESC LIMIT $2`, prefix, limit)
				} else {
					rows, err = tx.Query(ctx, `SELECT key, value FROM conduit_kv WHERE key >= $1 AND key `+op+` $2 ORDER BY key DESC LIMIT $3`, prefix, top, limit)
				}
			}
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					rows.Close()
					return err
				}
				n++
				after = k
				if !bytes.HasPrefix(k, prefix) {
					continue
				}
				if err := ctx.Err(); err != nil {
					rows.Close()
					return err
				}
				if v == nil {
					v = []byte{}
				}
				if err := fn(k, v); err != nil {
					rows.Close()
					fnErr = err
					return err
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if n < limit {
				return nil
			}
		}
	})
	if fnErr != nil {
		return fnErr
	}
	return s.pgErr(ctx, err)
}

// Close implements Store: it waits for the operations under way, releases
// the process lock and closes the connections.
func (s *Postgres) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		s.inflight.Wait()
		s.release()
	})
	return s.closeErr
}

func (s *Postgres) release() {
	if s.stopWatch != nil {
		s.stopWatch()
		<-s.watchDone
		s.stopWatch = nil
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.lock != nil {
		unlock := `SELECT pg_advisory_unlock($1)`
		if s.sharedLock {
			unlock = `SELECT pg_advisory_unlock_shared($1)`
		}
		// Bounded: on a network that drops packets it would wait for the
		// kernel to give the socket up; the session's end frees the lock
		// all the same.
		ctx, cancel := context.WithTimeout(context.Background(), s.commitTimeout)
		_, _ = s.lock.Exec(ctx, unlock, int64(pgProcessLock))
		cancel()
		s.lock.Release()
		s.lock = nil
	}
	// pgx closes a connection whose query it gave up on by sending the
	// server a cancel request over a new connection, and the pool's
	// Close waits for that for up to 15 s: on a network that drops
	// packets, a shutdown would hang that long for nothing. The close is
	// waited for as long as a commit attempt may take; past that it ends
	// on its own, within pgx's bound.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.pool.Close()
	}()
	t := time.NewTimer(s.commitTimeout)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		s.log.Warn("PostgreSQL does not answer while the store closes; its connections are left to time out",
			zap.Duration("waited", s.commitTimeout))
	}
}
