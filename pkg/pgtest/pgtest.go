// Package pgtest starts a private PostgreSQL cluster for tests: logical
// replication needs wal_level=logical, which a shared server may not have,
// and tests that stop and start the server must own it.
//
// The cluster lives in a new directory under the system's temporary
// directory, listens on 127.0.0.1 on a free port and on a unix socket in
// its own directory, trusts local connections, and is stopped and removed
// when the test ends. The server binaries are PostgreSQL's initdb and
// pg_ctl, found on PATH or in /usr/lib/postgresql/*/bin. Run as root, the
// server runs as the postgres user (PostgreSQL refuses to run as root).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running private PostgreSQL cluster.
type Cluster struct {
	tb      testing.TB
	bin     string // directory of initdb and pg_ctl
	dir     string // data directory
	port    int
	runAs   *user.User // nil: the current user
	logFile string
}

// Start creates and starts a cluster; it fails tb when PostgreSQL's
// server binaries are missing or the cluster does not start.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	return StartWith(tb, "")
}

// StartWith is Start with more lines for postgresql.conf, which override
// Start's own ("wal_level = replica" for a server without logical
// replication).
func StartWith(tb testing.TB, conf string) *Cluster {
	tb.Helper()
	c, remove, err := create(conf)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	c.tb = tb
	tb.Cleanup(remove)
	c.Start()
	tb.Cleanup(func() { _ = c.command("pg_ctl", "-D", c.dir, "-m", "immediate", "-w", "stop").Run() })
	return c
}

// Launch starts a cluster for a program that is not a test (a benchmark):
// conf is as for StartWith. Only URL and Port of the returned Cluster may
// be used; stop stops the server and removes its directory.
func Launch(conf string) (c *Cluster, stop func(), err error) {
	c, remove, err := create(conf)
	if err != nil {
		return nil, nil, err
	}
	if out, err := c.command("pg_ctl", "-D", c.dir, "-l", c.logFile, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(c.logFile)
		remove()
		return nil, nil, fmt.Errorf("pgtest: starting the server: %v\n%s\n%s", err, out, log)
	}
	return c, func() {
		_ = c.command("pg_ctl", "-D", c.dir, "-m", "fast", "-w", "stop").Run()
		remove()
	}, nil
}

// create makes the data directory and configuration of a cluster that is
// not started yet; remove deletes them.
func create(conf string) (c *Cluster, remove func(), err error) {
	bin, err := serverBin()
	if err != nil {
		return nil, nil, err
	}
	c = &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, nil, fmt.Errorf("running as root needs a postgres user to run the server as: %w", err)
		}
		c.runAs = u
	}
	dir, err := os.MkdirTemp("", "conduit-pg-")
	if err != nil {
		return nil, nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	fail := func(err error) (*Cluster, func(), error) {
		remove()
		return nil, nil, err
	}
	if c.runAs != nil {
		uid, _ := strconv.Atoi(c.runAs.Uid)
		gid, _ := strconv.Atoi(c.runAs.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	c.dir = filepath.Join(dir, "data")
	c.logFile = filepath.Join(dir, "server.log")
	if out, err := c.command("initdb", "-D", c.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if c.port, err = freePort(); err != nil {
		return fail(err)
	}
	settings := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
fsync = off
synchronous_commit = off
full_page_writes = off
%s
`, c.port, dir, conf)
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(settings)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(fmt.Errorf("writing postgresql.conf: %w", err))
	}
	return c, remove, nil
}

// serverBin finds the directory of initdb and pg_ctl.
func serverBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", fmt.Errorf("PostgreSQL's initdb is neither on PATH nor in /usr/lib/postgresql/*/bin (install the postgresql package)")
	}
	slices.Sort(matches)
	return filepath.Dir(matches[len(matches)-1]), nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.runAs == nil {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", c.runAs.Username, "--", path}, args...)...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port, nil
}

// Start starts the server (again) and waits until it accepts connections.
func (c *Cluster) Start() {
	c.tb.Helper()
	if out, err := c.command("pg_ctl", "-D", c.dir, "-l", c.logFile, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(c.logFile)
		c.tb.Fatalf("pgtest: starting the server: %v\n%s\n%s", err, out, log)
	}
}

// Stop stops the server, cutting every connection (fast shutdown).
func (c *Cluster) Stop() {
	c.tb.Helper()
	if out, err := c.command("pg_ctl", "-D", c.dir, "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
		c.tb.Fatalf("pgtest: stopping the server: %v\n%s", err, out)
	}
}

// Port is the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// URL is the connection URL of database db as the postgres superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Exec runs SQL statements in database postgres and fails the test when
// one fails.
func (c *Cluster) Exec(sql ...string) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		c.tb.Fatalf("pgtest: connecting: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, s := range sql {
		if _, err := conn.Exec(ctx, s); err != nil {
			c.tb.Fatalf("pgtest: %s: %v", s, err)
		}
	}
}

// Query runs a query in database postgres and scans its one row into
// dest; it fails the test when the query fails.
func (c *Cluster) Query(sql string, dest ...any) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		c.tb.Fatalf("pgtest: connecting: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		c.tb.Fatalf("pgtest: %s: %v", sql, err)
	}
}
