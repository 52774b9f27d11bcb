package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/pgtest"
	"github.com/conduitry/conduit/pkg/store"
)

// openCluster opens a fresh database with conduit's schema: the store's
// and the cluster's.
func openCluster(t *testing.T) *pgxpool.Pool {
	t.Helper()
	s, err := store.OpenPostgres(context.Background(), pgtest.Database(t), zap.NewNop(), store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := Migrate(context.Background(), s.Pool()); err != nil {
		t.Fatal(err)
	}
	return s.Pool()
}

func TestMembership(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", time.Second, "1 pipelines, 0f", []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	// Another process with the same id - here, on this machine, the
	// parent of the test, which runs - is refused.
	second := New(pool, "a", time.Second)
	second.pid = os.Getppid()
	if err := second.Join(ctx, "", nil); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("a second live instance with the same id: %v", err)
	}
	if err := second.Check(ctx); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("Check of a second live instance with the same id: %v", err)
	}
	b, err := Join(ctx, pool, "b", time.Second, "", nil)
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
	b2, err := Join(ctx, pool, "b", time.Second, "", nil)
	if err != nil {
		t.Fatalf("taking over a dead instance's id: %v", err)
	}
	// The process that went quiet wakes up: it learns that its id is
	// another's now, and the new one is not disturbed.
	if err := b.Heartbeat(ctx, "", nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("heartbeat of the presumed dead instance: %v", err)
	}
	if err := b2.Heartbeat(ctx, "3 pipelines, 0a", []string{"a", "b", "c"}); err != nil {
		t.Fatalf("heartbeat of the instance that took the id: %v", err)
	}
	// Each live instance's view is what its last heartbeat said, and its
	// pipelines those of the last heartbeat that changed the view.
	if l, err := a.LiveFor(ctx); err != nil || fmt.Sprint(l.IDs) != "[a b]" || l.Views["b"] != "3 pipelines, 0a" || l.Views["a"] != "1 pipelines, 0f" {
		t.Fatalf("live instances %+v %v", l, err)
	}
	if err := b2.Heartbeat(ctx, "3 pipelines, 0a", []string{"ignored"}); err != nil {
		t.Fatal(err)
	}
	known, err := a.Known(ctx, []string{"a", "b", "nobody"})
	if err != nil || fmt.Sprint(known) != "map[a:{1 pipelines, 0f [orders]} b:{3 pipelines, 0a [a b c]}]" {
		t.Fatalf("Known = %v, %v", known, err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx, "", nil); err == nil {
		t.Fatal("an instance that left heartbeats")
	}
}

// A process restarted at once on the same machine takes its id back from
// its dead predecessor, whose heartbeat is still fresh; a live-looking
// instance with the id on another machine, or whose process runs, is
// refused.
func TestMembershipAfterARestartInPlace(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := New(pool, "x", time.Minute)
	dead.pid = gone.Process.Pid
	if err := dead.Join(ctx, "", nil); err != nil {
		t.Fatal(err)
	}
	elsewhere := New(pool, "x", time.Minute)
	elsewhere.host = "another-machine"
	if err := elsewhere.Join(ctx, "", nil); !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("the same id from another machine while the first heartbeats: %v", err)
	}
	restarted := New(pool, "x", time.Minute)
	if err := restarted.Join(ctx, "", nil); err != nil {
		t.Fatalf("a process restarted in place: %v", err)
	}
	if err := dead.Heartbeat(ctx, "", nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("the predecessor's heartbeat after the restart: %v", err)
	}
}

// An instance that was presumed dead (paused past its TTL) and whose id
// another process took over leaves nothing when it exits: the leases
// under its id are the new process's.
func TestLeaveOfAPresumedDeadInstanceKeepsItsSuccessorsLeases(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	paused, err := Join(ctx, pool, "a", time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE conduit_instances SET heartbeat_at = now() - interval '2 seconds'`); err != nil {
		t.Fatal(err)
	}
	successor, err := Join(ctx, pool, "a", time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	l, ok, err := successor.Acquire(ctx, "orders")
	if err != nil || !ok {
		t.Fatalf("the successor acquires: %v %v", ok, err)
	}
	if err := paused.Heartbeat(ctx, "", nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("the paused instance's heartbeat: %v", err)
	}
	if err := paused.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if lost, err := successor.Renew(ctx, []Lease{l}); err != nil || len(lost) != 0 {
		t.Fatalf("the successor's lease after the paused instance left: lost %v %v", lost, err)
	}
	if err := successor.Heartbeat(ctx, "", nil); err != nil {
		t.Fatalf("the successor's heartbeat after the paused instance left: %v", err)
	}
}

// The same id with this process's pid on this machine is a restart in
// place (a container's first process) when that instance's heartbeat
// stopped, and another container when it goes on: its heartbeat tells.
func TestMembershipTellsARestartInPlaceFromAnotherContainer(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	const ttl = time.Second
	gone, err := Join(ctx, pool, "restarted", ttl, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(ctx, pool, "restarted", ttl, "", nil); err != nil {
		t.Fatalf("the same id and pid after the heartbeat stopped: %v", err)
	}
	if err := gone.Heartbeat(ctx, "", nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("the predecessor's heartbeat: %v", err)
	}

	running, err := Join(ctx, pool, "twin", ttl, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = running.Heartbeat(ctx, "", nil)
			}
		}
	}()
	_, err = Join(ctx, pool, "twin", ttl, "", nil)
	close(stop)
	<-beating
	if !errors.Is(err, ErrDuplicateInstance) || !strings.Contains(err.Error(), "another container") {
		t.Fatalf("the same id and pid while its heartbeat goes on: %v, want ErrDuplicateInstance", err)
	}
	if err := running.Heartbeat(ctx, "", nil); err != nil {
		t.Fatalf("the running instance after the twin was refused: %v", err)
	}
}

// Instances with different lease TTLs are refused: they would take each
// other for dead, or wait for each other's leases longer than they think.
func TestMembershipRefusesAnotherLeaseTTL(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	if _, err := Join(ctx, pool, "a", 5*time.Second, "", nil); err != nil {
		t.Fatal(err)
	}
	other := New(pool, "b", time.Hour)
	for name, err := range map[string]error{"Check": other.Check(ctx), "Join": other.Join(ctx, "", nil)} {
		if !errors.Is(err, ErrTTLMismatch) || !strings.Contains(err.Error(), "this one has 1h0m0s, but a has 5s") {
			t.Fatalf("%s with another lease TTL: %v", name, err)
		}
	}
	if _, err := Join(ctx, pool, "b", 5*time.Second, "", nil); err != nil {
		t.Fatalf("the same TTL: %v", err)
	}
}

func TestLeasesAndFencing(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", 500*time.Millisecond, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Join(ctx, pool, "b", 500*time.Millisecond, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	la, ok, err := a.Acquire(ctx, "orders")
	if err != nil || !ok || la.Token < 1 {
		t.Fatalf("a acquires: %+v %v %v", la, ok, err)
	}
	if _, ok, _ := b.Acquire(ctx, "orders"); ok {
		t.Fatal("b took a lease a holds")
	}
	// Taken up again by its holder (a new process with its id), the lease
	// gets a new token: the earlier one's late writes are refused.
	again, ok, _ := a.Acquire(ctx, "orders")
	if !ok || again.Token <= la.Token || again.Previous != "a" {
		t.Fatalf("a acquiring its own lease again: %+v", again)
	}
	la = again
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
	if !current(la.Token) || current(la.Token-1) {
		t.Fatal("a's token is not current, or its earlier one still is")
	}
	// a is paused past its lease: its token stays current until another
	// instance takes the lease over; b does, with a new token, and a's
	// writes with the old one are refused; a learns it lost the lease.
	if _, err := pool.Exec(ctx, `UPDATE conduit_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if !current(la.Token) {
		t.Fatal("an expired lease nobody took over is not current")
	}
	lb, ok, err := b.Acquire(ctx, "orders")
	if err != nil || !ok || lb.Token <= la.Token || lb.Previous != "a" {
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
	la2, ok, _ := a.Acquire(ctx, "orders")
	if !ok || la2.Token <= lb.Token {
		t.Fatalf("a after b released: %+v %v", la2, ok)
	}
	// The pipeline is deleted and created again under the same id: its
	// new lease's token is none an earlier lease of it had, so that a
	// paused holder of one cannot write into the new pipeline.
	if err := a.Drop(ctx, la2); err != nil {
		t.Fatal(err)
	}
	if renewed, ok, _ := b.Acquire(ctx, "orders"); !ok || renewed.Token <= la2.Token || renewed.Previous != "" {
		t.Fatalf("the lease of a pipeline created again: %+v %v, want a token above %d", renewed, ok, la2.Token)
	}
}

func TestAssignIsFairForAnyCount(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5, 7} {
		live := make([]string, k)
		for i := range live {
			live[i] = fmt.Sprintf("host-%d", i)
		}
		for _, n := range []int{0, 1, 2, 3, 5, 9, 10, 100, 1000, 3001} {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("p%d", i)
			}
			got := Assign(ids, live)
			if len(got) != n {
				t.Fatalf("%d over %d: %d assigned", n, k, len(got))
			}
			load := map[string]int{}
			for _, inst := range got {
				if !slices.Contains(live, inst) {
					t.Fatalf("assigned to %q, not live", inst)
				}
				load[inst]++
			}
			lo, hi := n, 0
			for _, inst := range live {
				lo, hi = min(lo, load[inst]), max(hi, load[inst])
			}
			if hi-lo > 1 {
				t.Errorf("%d pipelines over %d instances: loads %v", n, k, load)
			}
		}
	}
	if got := Assign([]string{"x"}, nil); len(got) != 0 {
		t.Errorf("assigned without instances: %v", got)
	}
}

func TestAssignIsTheSameOnEveryInstance(t *testing.T) {
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("orders-%d", i)
	}
	live := []string{"c", "a", "b", "d"}
	want := Assign(ids, live)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		if got := Assign(ids, live); !maps.Equal(got, want) {
			t.Fatal("another order of the same pipelines and instances gives another assignment")
		}
	}
}

// An instance leaving moves its pipelines and few others; one joining
// takes about its share.
func TestAssignMovesLittle(t *testing.T) {
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprintf("p-%d", i)
	}
	three := Assign(ids, []string{"a", "b", "c"})
	two := Assign(ids, []string{"a", "b"})
	movedOthers, onC := 0, 0
	for _, id := range ids {
		if three[id] == "c" {
			onC++
			continue
		}
		if two[id] != three[id] {
			movedOthers++
		}
	}
	t.Logf("c leaves: its %d move, and %d of the others", onC, movedOthers)
	if movedOthers > len(ids)/20 {
		t.Errorf("c leaving moved %d pipelines of a and b, want at most 5%%", movedOthers)
	}
	// c comes back: about its share moves to it, little else.
	again := Assign(ids, []string{"a", "b", "c"})
	moved := 0
	for _, id := range ids {
		if again[id] != two[id] {
			moved++
		}
	}
	t.Logf("c joins: %d move", moved)
	if moved > len(ids)/3+len(ids)/20 {
		t.Errorf("c joining moved %d pipelines, want about a third of %d", moved, len(ids))
	}
}

// A command reaches the instance it is sent to, which answers it; a
// refusal comes back as one; answered commands are gone, and old
// withdrawn ones are pruned.
func TestCommands(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", time.Minute, "", nil)
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
	if _, ok, err := a.Acquire(ctx, "orders"); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
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
	if err := Send(short, pool, "a", "orders", ActionStart); !errors.Is(err, ErrNotAnswered) {
		t.Fatalf("a command nobody answers: %v", err)
	}
	// The instance's lease expires before it answers (it is paused, or
	// dead): the command is withdrawn, for the next instance.
	if _, err := pool.Exec(ctx, `UPDATE conduit_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if err := Send(ctx, pool, "a", "orders", ActionStop); !errors.Is(err, ErrOwnerChanged) {
		t.Fatalf("a command to an instance whose lease expired: %v", err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM conduit_commands`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("commands left: %d %v, want the two withdrawn ones", left, err)
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

// Instances that know different pipelines: each pipeline goes to an
// instance that knows it, evenly among those, and to none when no live
// instance knows it; every instance computes the same.
func TestAssignKnownGivesPipelinesOnlyToInstancesThatKnowThem(t *testing.T) {
	ids := make([]string, 90)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
	}
	knownBy := map[string]func(string) bool{
		"a":     func(string) bool { return true },
		"b":     func(string) bool { return true },
		"c":     func(id string) bool { return id != "p7" },
		"empty": func(string) bool { return false },
	}
	knows := func(instance, id string) bool { return id != "orphan" && knownBy[instance](id) }
	live := []string{"a", "b", "c", "empty"}
	got := AssignKnown(append(slices.Clone(ids), "orphan"), live, knows)
	if _, ok := got["orphan"]; ok || len(got) != len(ids) {
		t.Fatalf("%d assigned (orphan: %q), want the %d known ones", len(got), got["orphan"], len(ids))
	}
	load := map[string]int{}
	for id, inst := range got {
		if !knows(inst, id) {
			t.Fatalf("%s given to %s, which does not know it", id, inst)
		}
		load[inst]++
	}
	if load["empty"] != 0 || load["a"] != 30 || load["b"] != 30 || load["c"] != 30 {
		t.Fatalf("loads %v, want 30 each on a, b and c", load)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3 {
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		shuffled := slices.Clone(ids)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if again := AssignKnown(append(shuffled, "orphan"), live, knows); !maps.Equal(again, got) {
			t.Fatal("another order of the same input gives another assignment")
		}
	}
	// Everybody knowing everything is Assign.
	if !maps.Equal(AssignKnown(ids, live, func(string, string) bool { return true }), Assign(ids, live)) {
		t.Fatal("AssignKnown with complete knowledge differs from Assign")
	}
}

// A killed process that its parent has not reaped yet (a zombie) does not
// run.
func TestProcessRunsIsFalseForAZombie(t *testing.T) {
	if !processRuns(os.Getpid()) {
		t.Fatal("this process does not run")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped until Wait: a zombie once the kill landed.
	clocktest.Eventually(t, func() bool { return !processRuns(cmd.Process.Pid) },
		func() string { return "a killed, unreaped process still runs" })
	_ = cmd.Wait()
	if processRuns(cmd.Process.Pid) {
		t.Fatal("a reaped process runs")
	}
}

// A heartbeat that read the instance's view before a Publish of a newer
// one does not pair its older view with the newer pipelines.
func TestHeartbeatKeepsAPublishedViewWithItsPipelines(t *testing.T) {
	ctx := context.Background()
	pool := openCluster(t)
	a, err := Join(ctx, pool, "a", time.Minute, "v1", []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, "v2", []string{"x", "y"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx, "v1", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	known, err := a.Known(ctx, []string{"a"})
	if err != nil || known["a"].View != "v2" || fmt.Sprint(known["a"].IDs) != "[x y]" {
		t.Fatalf("after a late heartbeat: %+v %v, want v2 with [x y]", known["a"], err)
	}
}
