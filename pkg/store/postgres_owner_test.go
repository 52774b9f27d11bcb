package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/pgtest"
)

// endLockSessions ends the sessions that hold conduit's process lock on
// the database, as a restart of the server does, and waits until they are
// gone: the lock is free only once the session's process has exited.
func endLockSessions(t *testing.T, s *Postgres) {
	t.Helper()
	var ended int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 30000) AS gone FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND objid = $1) terminated WHERE gone`, int64(pgProcessLock&0xffffffff)).Scan(&ended); err != nil || ended == 0 {
		t.Fatalf("ending the lock's session: %d sessions, %v", ended, err)
	}
}

// A conduit whose lock on the database was lost (the server ended its
// session) and that another conduit overtook cannot write on: its
// commits are refused with ErrDisowned, code 409, and the other's land.
func TestPostgresOvertakenProcessCannotWrite(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	first := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true, LockCheckEvery: time.Hour})
	if err := put(ctx, first, []byte("k"), []byte("first")); err != nil {
		t.Fatal(err)
	}
	endLockSessions(t, first)
	second := openTestPostgres(t, dbURL, PostgresOptions{Exclusive: true})
	err := put(ctx, first, []byte("k"), []byte("late"))
	if !errors.Is(err, ErrDisowned) || cerrors.Classify(err).Code != cerrors.CodeConflict {
		t.Fatalf("a commit of the overtaken process: %v, want ErrDisowned with code 409", err)
	}
	if err := put(ctx, second, []byte("k"), []byte("second")); err != nil {
		t.Fatal(err)
	}
	if v, err := second.Get(ctx, []byte("k")); err != nil || string(v) != "second" {
		t.Fatalf("the value: %q %v", v, err)
	}
	// A cluster started on the database the same way ends the standalone
	// one's writes too; its instances share one token.
	endLockSessions(t, second)
	a := openTestPostgres(t, dbURL, PostgresOptions{Shared: true})
	b := openTestPostgres(t, dbURL, PostgresOptions{Shared: true})
	if err := put(ctx, second, []byte("k"), []byte("late")); !errors.Is(err, ErrDisowned) {
		t.Fatalf("a commit of the standalone process a cluster overtook: %v", err)
	}
	for _, s := range []*Postgres{a, b} {
		if err := put(ctx, s, []byte("k"), []byte("cluster")); err != nil {
			t.Fatalf("a commit of a cluster's instance: %v", err)
		}
	}
}

// A process whose lock's session ended takes the lock back, so that a
// conduit started afterwards is refused as before, and writes on.
func TestPostgresTakesItsLockBack(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	core, logs := observer.New(zapcore.InfoLevel)
	s, err := OpenPostgres(ctx, dbURL, zap.New(core), PostgresOptions{Exclusive: true, LockCheckEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	endLockSessions(t, s)
	clocktest.Eventually(t, func() bool { return logs.FilterMessage("this process holds its lock on the database again").Len() > 0 },
		func() string { return fmt.Sprintf("the lock was not taken back; logs: %v", logs.All()) })
	if _, err := OpenPostgres(ctx, dbURL, zap.NewNop(), PostgresOptions{Exclusive: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second conduit after the lock was taken back: %v, want ErrInUse", err)
	}
	if err := put(ctx, s, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("a commit after the lock was taken back: %v", err)
	}
}

// freezer forwards TCP connections to target until freeze, after which
// it keeps every connection open and passes nothing on, as a network that
// drops packets without a reset does.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	// cut closes the listener and every connection: the network is back,
	// refusing.
	cut func()
}

func startFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			frozen := f.frozen
			f.mu.Unlock()
			if !frozen {
				go f.forward(c)
			}
		}
	}()
	f.cut = sync.OnceFunc(func() {
		_ = ln.Close()
		<-done
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			_ = c.Close()
		}
	})
	t.Cleanup(f.cut)
	return f
}

func (f *freezer) forward(c net.Conn) {
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, up)
	f.mu.Unlock()
	pass := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			f.mu.Lock()
			frozen := f.frozen
			f.mu.Unlock()
			if err != nil || frozen {
				// Frozen: what arrives is dropped, nothing is closed.
				if err != nil {
					return
				}
				continue
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pass(up, c)
	go pass(c, up)
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// A commit over a connection the network silently dropped gives up
// within RetryFor, with ErrUnavailable, instead of waiting for the
// kernel to give up the socket; the next commit of the outage fails at
// once; and Close does not wait for pgx's cancel of the abandoned
// connection, which the silent network holds for up to 15 s.
func TestPostgresCommitGivesUpOnASilentNetwork(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	f := startFreezer(t, u.Host)
	u.Host = f.ln.Addr().String()
	core, logs := observer.New(zapcore.WarnLevel)
	s, err := OpenPostgres(ctx, u.String(), zap.New(core), PostgresOptions{CommitTimeout: 100 * time.Millisecond, RetryFor: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, s, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	done := make(chan error, 1)
	go func() { done <- put(ctx, s, []byte("k"), []byte("w")) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a commit on a silent network: %v, want ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a commit on a silent network still waits after 30 s")
	}
	if err := put(ctx, s, []byte("k"), []byte("x")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the next commit of the outage: %v, want ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if logs.FilterMessageSnippet("its connections are left to time out").Len() != 1 {
		t.Fatalf("Close on a silent network does not say it left the connections to time out: %v", logs.All())
	}
}

// Commits made one after another in one outage share its RetryFor: the
// first tries until the outage has lasted that long; after it, a commit
// tries once, and fails without trying within probeEvery of the last
// attempt; a commit that lands ends the outage, and the next one waits
// again.
func TestPostgresCommitsShareAnOutagesRetryWindow(t *testing.T) {
	s := &Postgres{log: zap.NewNop(), retryFor: 200 * time.Millisecond, probeEvery: time.Hour}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	attempts := func(fail bool) (n int, err error) {
		err = s.retryUnavailable(context.Background(), func() error {
			n++
			if fail {
				return refused
			}
			return nil
		})
		return n, err
	}
	if n, err := attempts(true); !errors.Is(err, syscall.ECONNREFUSED) || n < 2 {
		t.Fatalf("the outage's first commit: %d attempts, %v; want several, then the error", n, err)
	}
	for i := range 3 {
		if n, err := attempts(true); !errors.Is(err, syscall.ECONNREFUSED) || n != 0 {
			t.Fatalf("commit %d right after: %d attempts, %v; want none and the last attempt's error", i+2, n, err)
		}
	}
	s.probeEvery = 0
	if n, err := attempts(true); !errors.Is(err, syscall.ECONNREFUSED) || n != 1 {
		t.Fatalf("a commit later in the outage: %d attempts, %v; want one", n, err)
	}
	if n, err := attempts(false); err != nil || n != 1 {
		t.Fatalf("a commit once the server answers: %d attempts, %v", n, err)
	}
	s.probeEvery = time.Hour
	if n, err := attempts(true); !errors.Is(err, syscall.ECONNREFUSED) || n < 2 {
		t.Fatalf("the next outage's first commit: %d attempts, %v; want several", n, err)
	}
}
