package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/pgtest"
)

// A commit made while the server restarts waits for it and lands; one
// that outlasts RetryFor, and a read while the server is away, fail with
// ErrUnavailable, code 503.
func TestPostgresCommitRidesOutAServerRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	pg.Exec("CREATE DATABASE conduit")
	core, logs := observer.New(zapcore.InfoLevel)
	ctx := context.Background()
	s, err := OpenPostgres(ctx, pg.URL("conduit"), zap.New(core), PostgresOptions{RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Commit(ctx, []Op{{Key: []byte("before"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}

	pg.Stop()
	if _, err := s.Get(ctx, []byte("before")); !errors.Is(err, ErrUnavailable) || cerrors.Classify(err).Code != cerrors.CodeUnavailable {
		t.Fatalf("a read while the server is away: %v, want ErrUnavailable with code 503", err)
	}
	committed := make(chan error, 1)
	go func() {
		committed <- s.Commit(ctx, []Op{{Key: []byte("during"), Value: []byte("2")}, {Key: []byte("before"), Delete: true}})
	}()
	waitForLog(t, logs, "PostgreSQL cannot be reached; commits wait and try again")
	pg.Start()
	if err := <-committed; err != nil {
		t.Fatalf("the commit made while the server restarted: %v", err)
	}
	waitForLog(t, logs, "PostgreSQL can be reached again")
	if v, err := s.Get(ctx, []byte("during")); err != nil || string(v) != "2" {
		t.Fatalf("Get(during) = %q, %v, want 2", v, err)
	}
	if _, err := s.Get(ctx, []byte("before")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(before) = %v, want ErrNotFound: the commit's delete is lost", err)
	}

	short, err := OpenPostgres(ctx, pg.URL("conduit"), zap.NewNop(), PostgresOptions{RetryFor: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Close() })
	pg.Stop()
	err = short.Commit(ctx, []Op{{Key: []byte("lost"), Value: []byte("3")}})
	if !errors.Is(err, ErrUnavailable) || cerrors.Classify(err).Code != cerrors.CodeUnavailable {
		t.Fatalf("a commit through an outage longer than RetryFor: %v, want ErrUnavailable with code 503", err)
	}
	pg.Start()
}

// waitForLog waits until a message containing msg was logged.
func waitForLog(t *testing.T, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	clocktest.Eventually(t, func() bool { return logs.FilterMessageSnippet(msg).Len() > 0 },
		func() string { return fmt.Sprintf("nothing logged %q; logged: %v", msg, logs.All()) })
}
