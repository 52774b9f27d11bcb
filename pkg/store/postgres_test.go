package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// testPostgresURL is the machine's PostgreSQL (trust auth on loopback), or
// CONDUIT_TEST_POSTGRES_URL. Tests create their own databases on it and
// drop them; they never touch another.
func testPostgresURL() string {
	if u := os.Getenv("CONDUIT_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

var testDatabases atomic.Int64

// newTestDatabase creates an empty database for t and returns its URL; it
// is dropped when t ends.
func newTestDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, testPostgresURL())
	if err != nil {
		t.Fatalf("the PostgreSQL tests need a server at %s (set CONDUIT_TEST_POSTGRES_URL; .ci/run starts the machine's): %v", testPostgresURL(), err)
	}
	defer admin.Close(context.Background())
	name := fmt.Sprintf("conduit_test_%d_%d", os.Getpid(), testDatabases.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testPostgresURL())
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(testPostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

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
	runStoreAcceptance(t, func(t *testing.T) Store {
		return openTestPostgres(t, newTestDatabase(t), PostgresOptions{})
	})
}

func TestPostgresSchemaAndExclusiveLock(t *testing.T) {
	ctx := context.Background()
	dbURL := newTestDatabase(t)
	a := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	if err := a.Set(ctx, []byte("k"), []byte("v")); err != nil {
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
