package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/pgtest"
	"github.com/conduitry/conduit/pkg/store"
)

// openCluster opens a fresh database with conduit's schema.
func openCluster(t *testing.T) *pgxpool.Pool {
	t.Helper()
	s, err := store.OpenPostgres(context.Background(), pgtest.Database(t), zap.NewNop(), store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.Pool()
}

func TestMembership(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(ctx, pool, "a", time.Second); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("a second live instance with the same id: %v", err)
	}
	b, err := Join(ctx, pool, "b", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if live, err := a.Live(ctx); err != nil || fmt.Sprint(live) != "[a b]" {
		t.Fatalf("live %v %v", live, err)
	}
	// b stops heartbeating: after the TTL it is no longer live, and its id
	// can be taken over.
	if _, err := pool.Exec(ctx, `UPDATE conduit_instances SET heartbeat_at = now() - interval '2 seconds' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	if live, _ := a.Live(ctx); fmt.Sprint(live) != "[a]" {
		t.Fatalf("live after b went quiet: %v", live)
	}
	b2, err := Join(ctx, pool, "b", time.Second)
	if err != nil {
		t.Fatalf("taking over a dead instance's id: %v", err)
	}
	// The process that went quiet wakes up: it learns that its id is
	// another's now, and the new one is not disturbed.
	if err := b.Heartbeat(ctx); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("heartbeat of the presumed dead instance: %v", err)
	}
	if err := b2.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat of the instance that took the id: %v", err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx); err == nil {
		t.Fatal("an instance that left heartbeats")
	}
}

func TestLeasesAndFencing(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Join(ctx, pool, "b", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	la, ok, err := a.Acquire(ctx, "orders")
	if err != nil || !ok || la.Token != 1 {
		t.Fatalf("a acquires: %+v %v %v", la, ok, err)
	}
	if _, ok, _ := b.Acquire(ctx, "orders"); ok {
		t.Fatal("b took a lease a holds")
	}
	if again, ok, _ := a.Acquire(ctx, "orders"); !ok || again.Token != la.Token {
		t.Fatalf("a renewing by acquiring: %+v", again)
	}
	if lost, err := a.Renew(ctx, []Lease{la}); err != nil || len(lost) != 0 {
		t.Fatalf("renew: %v %v", lost, err)
	}
	current := func(token int64) bool {
		t.Helper()
		var ok bool
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			ok, err = Current(ctx, tx, "orders", token)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !current(la.Token) {
		t.Fatal("a's token is not current")
	}
	// a is paused past its lease: b takes over with a new token, and a's
	// writes with the old one are refused; a learns it lost the lease.
	if _, err := pool.Exec(ctx, `UPDATE conduit_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	lb, ok, err := b.Acquire(ctx, "orders")
	if err != nil || !ok || lb.Token != la.Token+1 {
		t.Fatalf("b takes the expired lease: %+v %v %v", lb, ok, err)
	}
	if current(la.Token) || !current(lb.Token) {
		t.Fatal("the stale token is still current")
	}
	if lost, err := a.Renew(ctx, []Lease{la}); err != nil || fmt.Sprint(lost) != "[orders]" {
		t.Fatalf("a renewing a lost lease: %v %v", lost, err)
	}
	// A graceful hand-over frees the lease at once.
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if la2, ok, _ := a.Acquire(ctx, "orders"); !ok || la2.Token != lb.Token+1 {
		t.Fatalf("a after b released: %+v %v", la2, ok)
	}
}

func TestOwnerSpreadsAndMovesLittle(t *testing.T) {
	three := []string{"a", "b", "c"}
	counts := map[string]int{}
	owners := map[string]string{}
	for i := range 3000 {
		id := fmt.Sprintf("p-%d", i)
		o := Owner(id, three)
		counts[o]++
		owners[id] = o
	}
	for _, id := range three {
		if counts[id] < 900 || counts[id] > 1100 {
			t.Errorf("instance %s runs %d of 3000", id, counts[id])
		}
	}
	// c leaves: only c's pipelines move.
	moved := 0
	for id, o := range owners {
		if now := Owner(id, []string{"a", "b"}); now != o {
			moved++
			if o != "c" {
				t.Fatalf("%s moved from %s, which is still there", id, o)
			}
		}
	}
	if moved != counts["c"] {
		t.Errorf("%d moved, want c's %d", moved, counts["c"])
	}
	if Owner("x", nil) != "" {
		t.Error("an owner without instances")
	}
}

// A command reaches the instance it is sent to, which answers it; a
// refusal comes back as one; answered commands are gone, and old
// withdrawn ones are pruned.
func TestCommands(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(result error) {
		for {
			cmds, err := a.Pending(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if len(cmds) > 0 {
				if cmds[0].PipelineID != "orders" || cmds[0].Action != ActionStop {
					t.Errorf("command %+v", cmds[0])
				}
				if err := a.Answer(ctx, cmds[0].ID, result); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	go answer(nil)
	if err := Send(ctx, pool, "a", "orders", ActionStop); err != nil {
		t.Fatalf("an answered command: %v", err)
	}
	go answer(&RefusedError{Instance: "a", Message: "cannot stop a stopped pipeline"})
	var refused *RefusedError
	if err := Send(ctx, pool, "a", "orders", ActionStop); !errors.As(err, &refused) || refused.Message != "cannot stop a stopped pipeline" {
		t.Fatalf("a refused command: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := Send(short, pool, "a", "orders", ActionStart); err == nil {
		t.Fatal("a command nobody answers succeeded")
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM conduit_commands`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("commands left: %d %v, want the withdrawn one", left, err)
	}
	if pending, _ := a.Pending(ctx); len(pending) != 0 {
		t.Fatalf("a withdrawn command is still pending: %+v", pending)
	}
	if _, err := pool.Exec(ctx, `UPDATE conduit_commands SET done_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if err := a.PruneCommands(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM conduit_commands`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("commands left after pruning: %d %v", left, err)
	}
}
