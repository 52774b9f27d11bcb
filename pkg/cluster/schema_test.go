package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/pgtest"
	"github.com/conduitry/conduit/pkg/store"
)

// The cluster's tables as pkg/store's migrations 2 to 6 made them, before
// the cluster kept its own version: a database at store schema version 3
// (before the views and the token sequence), and one at version 6.
const (
	tablesOfStoreVersion3 = `CREATE TABLE conduit_instances (id text PRIMARY KEY, heartbeat_at timestamptz NOT NULL, started_at timestamptz NOT NULL);
	CREATE TABLE conduit_leases (pipeline_id text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL);
	CREATE TABLE conduit_commands (id bigserial PRIMARY KEY, pipeline_id text NOT NULL, instance text NOT NULL, action text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), done_at timestamptz, error text);
	CREATE INDEX conduit_commands_pending ON conduit_commands (instance) WHERE done_at IS NULL`
	tablesOfStoreVersion6 = tablesOfStoreVersion3 + `;
	ALTER TABLE conduit_instances ADD COLUMN view text NOT NULL DEFAULT '';
	ALTER TABLE conduit_instances ADD COLUMN pipelines text[];
	ALTER TABLE conduit_instances ADD COLUMN lease_ttl interval;
	ALTER TABLE conduit_instances ADD COLUMN host text;
	ALTER TABLE conduit_instances ADD COLUMN pid integer;
	CREATE SEQUENCE conduit_lease_tokens`
)

// A database whose cluster tables pkg/store made is taken up as it is:
// the rows stay, missing columns are added, and lease tokens go on from
// the highest one given - never back, even where the lease that had it
// was dropped since. Migrating again changes nothing; a newer version is
// refused.
func TestMigrate(t *testing.T) {
	for _, tc := range []struct {
		name, tables string
		// tokensGiven is how far the token sequence went (0: none).
		tokensGiven int64
		nextToken   int64
	}{
		{name: "store version 3", tables: tablesOfStoreVersion3, nextToken: 42},
		{name: "store version 6", tables: tablesOfStoreVersion6, tokensGiven: 50, nextToken: 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := store.OpenPostgres(ctx, pgtest.Database(t), zap.NewNop(), store.PostgresOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			pool := s.Pool()
			setup := []string{tc.tables,
				`INSERT INTO conduit_leases (pipeline_id, owner, token, expires_at) VALUES ('p', 'old', 41, now())`,
				`INSERT INTO conduit_instances (id, heartbeat_at, started_at) VALUES ('old', now(), now())`}
			if tc.tokensGiven > 0 {
				setup = append(setup, `SELECT setval('conduit_lease_tokens', 50)`)
			}
			for _, q := range setup {
				if _, err := pool.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := Migrate(ctx, pool); err != nil {
					t.Fatal(err)
				}
			}
			var version int
			if err := pool.QueryRow(ctx, `SELECT version FROM conduit_cluster_schema`).Scan(&version); err != nil || version != schemaVersion {
				t.Fatalf("cluster schema version %d %v, want %d", version, err, schemaVersion)
			}
			var view string
			var pipelines []string
			if err := pool.QueryRow(ctx, `SELECT view, pipelines FROM conduit_instances WHERE id = 'old'`).Scan(&view, &pipelines); err != nil || view != "" || pipelines != nil {
				t.Fatalf("the instance row after the migration: %q %v %v", view, pipelines, err)
			}
			var owner string
			if err := pool.QueryRow(ctx, `SELECT owner FROM conduit_leases WHERE pipeline_id = 'p'`).Scan(&owner); err != nil || owner != "old" {
				t.Fatalf("the lease after the migration: %q %v", owner, err)
			}
			var next int64
			if err := pool.QueryRow(ctx, `SELECT nextval('conduit_lease_tokens')`).Scan(&next); err != nil || next != tc.nextToken {
				t.Fatalf("the next lease token after the migration: %d %v, want %d", next, err, tc.nextToken)
			}
			if _, err := pool.Exec(ctx, `UPDATE conduit_cluster_schema SET version = 99`); err != nil {
				t.Fatal(err)
			}
			if err := Migrate(ctx, pool); !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("tables of a newer conduit: %v", err)
			}
		})
	}
}

// What fails in PostgreSQL leaves the package as its own error, with the
// driver's text: no driver error type reaches the caller.
func TestErrorsAreThePackages(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	m := New(pool, "a", 0)
	if _, err := pool.Exec(ctx, `DROP TABLE conduit_commands`); err != nil {
		t.Fatal(err)
	}
	err := m.PruneCommands(ctx)
	var pe *postgresError
	var driver *pgconn.PgError
	if !errors.As(err, &pe) || errors.As(err, &driver) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("a statement PostgreSQL refused: %v (%T)", err, err)
	}
	pool.Close()
	err = m.PruneCommands(ctx)
	if !errors.As(err, &pe) {
		t.Fatalf("a closed pool: %v (%T)", err, err)
	}
}
