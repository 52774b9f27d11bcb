package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// MachineURL is the machine's PostgreSQL server (127.0.0.1:5432, trust
// authentication), or CONDUIT_TEST_POSTGRES_URL when set.
func MachineURL() string {
	if u := os.Getenv("CONDUIT_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

var databases atomic.Int64

// Database creates an empty database on the machine's server for tb and
// returns its URL; the database is dropped when tb ends. Tests never use a
// database they did not create.
func Database(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, MachineURL())
	if err != nil {
		tb.Fatalf("this test needs PostgreSQL at %s (set CONDUIT_TEST_POSTGRES_URL; make test starts the machine's): %v", MachineURL(), err)
	}
	defer admin.Close(context.Background())
	name := fmt.Sprintf("conduit_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000, databases.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, MachineURL())
		if err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(MachineURL())
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
