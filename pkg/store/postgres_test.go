package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/pgtest"
)

func openTestPostgres(t testing.TB, dbURL string, opts PostgresOptions) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), dbURL, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), opts)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPostgresAcceptance(t *testing.T) {
	t.Parallel()
	runStoreAcceptance(t, func(t *testing.T) Store {
		return openTestPostgres(t, pgtest.Database(t), PostgresOptions{})
	})
}

func TestPostgresSchemaAndExclusiveLock(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	a := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	if err := put(ctx, a, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A second standalone process is refused, naming the database.
	_, err := OpenPostgres(ctx, dbURL, zap.NewNop(), PostgresOptions{Exclusive: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "conduit_test_") {
		t.Fatalf("second exclusive open: %v, want ErrInUse naming the database", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: the schema is there already and the data kept.
	b := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	if v, err := b.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after reopening: %q %v", v, err)
	}
	// A schema newer than this build is refused.
	if _, err := b.pool.Exec(ctx, `UPDATE conduit_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(ctx, dbURL, zap.NewNop(), PostgresOptions{}); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("a newer schema: %v", err)
	}
	if _, err := OpenPostgres(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", zap.NewNop(), PostgresOptions{}); err == nil ||
		!strings.Contains(err.Error(), "db.postgres.url") {
		t.Fatalf("an unreachable server: %v", err)
	}
}

// A database of an earlier schema is migrated in place: its rows stay.
// (The cluster's tables, which migrations 2 to 6 made before, are
// pkg/cluster's: see its TestMigrate.)
func TestPostgresMigratesTheSchemaBefore(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	a := openTestPostgres(t, dbURL, PostgresOptions{})
	for _, q := range []string{
		`DROP FUNCTION conduit_owner_check(bigint); DROP TABLE conduit_owner; DROP SEQUENCE conduit_owner_tokens`,
		`UPDATE conduit_schema SET version = 3`,
	} {
		if _, err := a.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(ctx, a, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	var version int
	if err := b.pool.QueryRow(ctx, `SELECT version FROM conduit_schema`).Scan(&version); err != nil || version != postgresSchema {
		t.Fatalf("schema version %d %v, want %d", version, err, postgresSchema)
	}
	if v, err := b.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after the migration: %q %v", v, err)
	}
	// The owner's table came back with the migration: the exclusive open
	// claimed it.
	var mode string
	if err := b.pool.QueryRow(ctx, `SELECT mode FROM conduit_owner`).Scan(&mode); err != nil {
		t.Fatalf("the owner after the migration: %q %v", mode, err)
	}
}

// openFencedPostgres is openTestPostgres with the cluster's tables, whose
// lease rows fenced writes are checked against.
func openFencedPostgres(t *testing.T, opts PostgresOptions) *Postgres {
	t.Helper()
	s := openTestPostgres(t, pgtest.Database(t), opts)
	if err := cluster.Migrate(context.Background(), s.Pool()); err != nil {
		t.Fatal(err)
	}
	return s
}

// A write made under a stale lease is left out and fails its writer;
// the writes of the same commit under current leases, or none, land.
func TestPostgresFencedCommit(t *testing.T) {
	ctx := context.Background()
	s := openFencedPostgres(t, PostgresOptions{})
	if _, err := s.pool.Exec(ctx, `INSERT INTO conduit_leases (pipeline_id, owner, token, expires_at) VALUES
		('orders', 'b', 2, now() + interval '1 minute'), ('old', 'a', 1, now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, []Op{
		{Key: []byte("stale"), Value: []byte("a"), Fence: &Fence{Pipeline: "orders", Token: 1}},
		{Key: []byte("current"), Value: []byte("b"), Fence: &Fence{Pipeline: "orders", Token: 2}},
		{Key: []byte("expired"), Value: []byte("c"), Fence: &Fence{Pipeline: "old", Token: 1}},
		{Key: []byte("unknown"), Value: []byte("d"), Fence: &Fence{Pipeline: "nobody", Token: 1}},
		{Key: []byte("plain"), Value: []byte("e")},
	})
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || strings.Join(fe.Pipelines, ",") != "nobody,orders" {
		t.Fatalf("Commit: %v", err)
	}
	// An expired lease that nobody took over keeps its token current.
	for key, want := range map[string]bool{"stale": false, "current": true, "expired": true, "unknown": false, "plain": true} {
		_, err := s.Get(ctx, []byte(key))
		if got := err == nil; got != want {
			t.Errorf("%s written %v, want %v (%v)", key, got, want, err)
		}
	}
}

// A commit in progress locks only the rows of its current leases: a
// process paused in the middle of a late commit (with a stale token, or
// token 0 for a pipeline it does not hold) does not hold up the renewal
// of the lease's new holder, while a takeover waits for a commit with
// the current token.
func TestPostgresLateCommitDoesNotHoldUpTheNewHolder(t *testing.T) {
	ctx := context.Background()
	s := openFencedPostgres(t, PostgresOptions{NotifyEvents: true})
	if _, err := s.Pool().Exec(ctx, `INSERT INTO conduit_leases (pipeline_id, owner, token, expires_at) VALUES
		('mine', 'a', 3, now() + interval '1 minute'),
		('moved', 'b', 5, now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	op := func(pipeline string, token int64) Op {
		return Op{Key: []byte(PrefixPipelineState + pipeline), Value: []byte("x"), Fence: &Fence{Pipeline: pipeline, Token: token}}
	}
	// A late commit with the stale token, stopped in the middle: the new
	// holder renews without waiting; the current holder's own commit does
	// lock its row.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if stale, err := staleFences(ctx, tx, []Op{op("moved", 4), op("mine", 3), op("moved", 0)}); err != nil || len(stale) != 2 {
		t.Fatalf("fences in the open transaction: %v %v", stale, err)
	}
	// What pkg/cluster does: a renewal updates the row, a takeover locks
	// it FOR UPDATE first.
	statement := func(sql, pipeline string) error {
		conn, err := s.Pool().Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql, pipeline)
			return err
		})
	}
	const (
		renewal  = `UPDATE conduit_leases SET expires_at = now() + interval '1 minute' WHERE pipeline_id = $1`
		takeover = `SELECT 1 FROM conduit_leases WHERE pipeline_id = $1 FOR UPDATE`
	)
	if err := statement(takeover, "moved"); err != nil {
		t.Fatalf("taking over a lease another process's open commit has a stale token of: %v", err)
	}
	if err := statement(renewal, "mine"); err != nil {
		t.Fatalf("renewing a lease while a commit under it is in progress: %v", err)
	}
	if err := statement(takeover, "mine"); err == nil {
		t.Fatal("a takeover overtook a commit in progress with the current token")
	}
}

// The instances of a cluster share a database; a conduit alone is refused
// while they run on it, and they while it does.
func TestPostgresClusterAndStandaloneExcludeEachOther(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	a := openTestPostgres(t, dbURL, PostgresOptions{Shared: true})
	b := openTestPostgres(t, dbURL, PostgresOptions{Shared: true})
	if _, err := OpenPostgres(ctx, dbURL, zap.NewNop(), PostgresOptions{Exclusive: true}); !errors.Is(err, ErrInUse) ||
		!strings.Contains(err.Error(), "instances of a cluster") {
		t.Fatalf("a conduit alone beside a cluster: %v", err)
	}
	_ = a.Close()
	_ = b.Close()
	alone := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	if _, err := OpenPostgres(ctx, dbURL, zap.NewNop(), PostgresOptions{Shared: true}); !errors.Is(err, ErrInUse) ||
		!strings.Contains(err.Error(), "cluster.enabled off") {
		t.Fatalf("an instance of a cluster beside a conduit alone: %v", err)
	}
	_ = alone.Close()
	openTestPostgres(t, dbURL, PostgresOptions{Shared: true})
}
