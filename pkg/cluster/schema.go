package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The cluster's tables are this package's: conduit_instances (who is
// alive and what it knows), conduit_leases (who runs each pipeline, with
// the fencing token pkg/store checks every fenced write against) and
// conduit_commands (starts and stops asked through another instance's
// API), with conduit_cluster_schema holding their version. pkg/store
// keeps its own tables and version (conduit_schema).
//
// Databases migrated before the cluster kept its own version have these
// tables already, made by pkg/store's migrations 2 to 6 (store schema
// version 6): every migration here is written to find what it makes
// already there, and leaves it as it is, so that such a database starts
// at version 0 here and keeps its rows.

// schemaVersion is the version this build writes; schemaMigrations[i]
// takes the cluster's tables from version i to i+1.
const schemaVersion = 5

var schemaMigrations = []string{
	// Who is alive, and which instance runs each pipeline, with the
	// lease's fencing token.
	`CREATE TABLE IF NOT EXISTS conduit_instances (
		id text PRIMARY KEY,
		heartbeat_at timestamptz NOT NULL,
		started_at timestamptz NOT NULL
	);
	CREATE TABLE IF NOT EXISTS conduit_leases (
		pipeline_id text PRIMARY KEY,
		owner text NOT NULL,
		token bigint NOT NULL,
		expires_at timestamptz NOT NULL
	)`,
	// Start and stop asked of an instance through any instance's API
	// (Send).
	`CREATE TABLE IF NOT EXISTS conduit_commands (
		id bigserial PRIMARY KEY,
		pipeline_id text NOT NULL,
		instance text NOT NULL,
		action text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(),
		done_at timestamptz,
		error text
	);
	CREATE INDEX IF NOT EXISTS conduit_commands_pending ON conduit_commands (instance) WHERE done_at IS NULL`,
	// What each instance knows of the pipelines (Heartbeat), so that the
	// instances can tell when they disagree.
	`ALTER TABLE conduit_instances ADD COLUMN IF NOT EXISTS view text NOT NULL DEFAULT ''`,
	// The pipelines each instance knows, so that none is given a pipeline
	// it does not know; each instance's lease TTL, so that instances
	// with different ones are refused; its host and process, so that a
	// process restarted at once on the same machine can take its id back
	// from its dead predecessor. (Additive: older instances work on.)
	`ALTER TABLE conduit_instances ADD COLUMN IF NOT EXISTS pipelines text[];
	ALTER TABLE conduit_instances ADD COLUMN IF NOT EXISTS lease_ttl interval;
	ALTER TABLE conduit_instances ADD COLUMN IF NOT EXISTS host text;
	ALTER TABLE conduit_instances ADD COLUMN IF NOT EXISTS pid integer`,
	// Lease tokens from one sequence, so that a pipeline deleted and
	// created again never gets a token a paused holder of its first lease
	// still writes with. The sequence only ever moves forward: one that is
	// there already (and may have given tokens of leases since dropped)
	// keeps its next value unless a lease holds a higher token.
	`CREATE SEQUENCE IF NOT EXISTS conduit_lease_tokens;
	SELECT setval('conduit_lease_tokens',
		greatest(s.last_value + CASE WHEN s.is_called THEN 1 ELSE 0 END, coalesce((SELECT max(token) FROM conduit_leases), 0) + 1),
		false)
	FROM conduit_lease_tokens AS s`,
}

// schemaLock is the advisory lock that serializes the migrations of the
// cluster's tables across processes (pkg/store's are 0x636f6e6401-02).
const schemaLock = 0x636f6e6403

// ErrSchemaTooNew refuses a database whose cluster tables a newer
// conduit migrated past what this one knows.
var ErrSchemaTooNew = errors.New("the cluster's tables are of a newer conduit: run a newer conduit")

// Migrate creates the cluster's tables or brings them to this build's
// version, in one transaction, serialized across processes. It does
// nothing to tables of this version, so every instance runs it when it
// opens its membership (Check, Join).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return dbErr(ctx, err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS conduit_cluster_schema (version int NOT NULL)`); err != nil {
			return dbErr(ctx, err)
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM conduit_cluster_schema`).Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO conduit_cluster_schema (version) VALUES (0)`); err != nil {
				return dbErr(ctx, err)
			}
		case err != nil:
			return dbErr(ctx, err)
		}
		if version > schemaVersion {
			return fmt.Errorf("%w (version %d; this conduit's is %d)", ErrSchemaTooNew, version, schemaVersion)
		}
		for v := version; v < schemaVersion; v++ {
			if _, err := tx.Exec(ctx, schemaMigrations[v]); err != nil {
				return fmt.Errorf("to version %d: %w", v+1, dbErr(ctx, err))
			}
		}
		if version < schemaVersion {
			if _, err := tx.Exec(ctx, `UPDATE conduit_cluster_schema SET version = $1`, schemaVersion); err != nil {
				return dbErr(ctx, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrating the cluster's tables: %w", dbErr(ctx, err))
	}
	return nil
}
