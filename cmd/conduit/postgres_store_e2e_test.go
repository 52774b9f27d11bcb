package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conduitry/conduit/pkg/pgtest"
)

// runOnPostgres starts a standalone conduit with its state in a database
// of its own, a generator -> file pipeline, and waits for 500 records in
// out.
func runOnPostgres(t *testing.T) (w *workspace, p *process, dbURL, out string) {
	t.Helper()
	dbURL = pgtest.Database(t)
	w = newWorkspace(t, fmt.Sprintf(generatorToFile, 2000))
	w.write("conduit.yml", "log:\n  format: json\n  level: info\ndb:\n  type: postgres\n  postgres:\n    url: "+dbURL+"\n")
	out = filepath.Join(w.dir, "out.jsonl")
	p = w.start("run")
	waitForRecords(t, p, out, 500)
	return w, p, dbURL, out
}

// A standalone conduit on PostgreSQL works as one on Badger: a SIGKILL and
// a restart continue the sequence, and a second process is refused.
func TestConduitOnPostgresResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	w, p, _, out := runOnPostgres(t)
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

// A standalone conduit whose database another process took over (after
// its lock's session ended, as in a restart of the server) stops at its
// next commit, saying why, and writes nothing more.
func TestConduitOnPostgresStopsWhenAnotherProcessTookTheDatabase(t *testing.T) {
	t.Parallel()
	_, p, dbURL, out := runOnPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	// What a second conduit's start does once it has the lock.
	if _, err := conn.Exec(ctx, `UPDATE conduit_owner SET token = nextval('conduit_owner_tokens'), mode = 'alone'`); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code == 0 || !strings.Contains(p.stderr.String(), "another conduit process opened this database") {
		t.Fatalf("the overtaken conduit: exit %d\n%s", code, p.stderr.String())
	}
	checkSequence(t, ids(t, out), 16*1024)
}
