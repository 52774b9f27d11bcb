package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// machineDatabase creates a database on the machine's PostgreSQL (or
// CONDUIT_TEST_POSTGRES_URL's) for t, dropped when t ends.
func machineDatabase(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("CONDUIT_TEST_POSTGRES_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("this test needs PostgreSQL at %s (.ci/run starts the machine's): %v", admin, err)
	}
	defer conn.Close(context.Background())
	name := fmt.Sprintf("conduit_e2e_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// A standalone conduit on PostgreSQL works as one on Badger: a SIGKILL and
// a restart continue the sequence, and a second process is refused.
func TestConduitOnPostgresResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dbURL := machineDatabase(t)
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 2000))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: "+dbURL+"\n")
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 500)
	second := w.start("run")
	if code := second.wait(t); code == 0 || !strings.Contains(second.stderr.String(), "in use by another conduit process") {
		t.Fatalf("a second process on the same database: exit %d\n%s", code, second.stderr.String())
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	n := len(ids(t, out))
	p = w.start("run")
	waitForRecords(t, p, out, n+500)
	if !strings.Contains(p.stderr.String(), "had not stopped cleanly") {
		t.Errorf("the restart does not say the last process crashed:\n%s", p.stderr.String())
	}
	stopProcess(t, p)
	// Positions are saved after the destination acknowledged: nothing is
	// skipped; what was in flight when the process died may come again.
	checkSequence(t, ids(t, out), 16*1024)
}
