package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/conduitry/conduit/pkg/cluster"
)

// The cluster benchmark runs three real conduit processes on one
// PostgreSQL database, as a user does: n generator -> file pipelines are
// spread over them, one instance at a time is SIGKILLed and started
// again. It measures, from the database's leases (what every instance's
// `conduit pipelines list` shows):
//
//   - spread: from the start of two instances beside one that runs every
//     pipeline until each pipeline is held by the instance it belongs to;
//   - failover: from the SIGKILL until every pipeline of the killed
//     instance is held by a live one (the design's bound: two lease TTLs);
//   - rejoin: from the restart of the killed instance until its share is
//     back.

// clusterPoll is how often the benchmark reads the leases.
const clusterPoll = 50 * time.Millisecond

type clusterBench struct {
	dir, bin, dbURL string
	n               int
	ttl             time.Duration
	procs           map[string]*exec.Cmd
	conn            *pgx.Conn
}

func clusterParent(n int, ttl time.Duration, kills int, postgresURL string) error {
	fmt.Printf("\ncluster: %d generator -> file pipelines (1 record/s each) on three conduit processes sharing one PostgreSQL database, cluster.lease-ttl %s\n", n, ttl)
	ctx := context.Background()
	dbURL, drop, err := createBenchDatabase(ctx, postgresURL)
	if err != nil {
		return err
	}
	defer drop()
	dir, err := os.MkdirTemp("", "conduit-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &clusterBench{dir: dir, dbURL: dbURL, n: n, ttl: ttl, procs: map[string]*exec.Cmd{}}
	defer b.stopAll()
	if err := b.setup(ctx); err != nil {
		return err
	}
	defer b.conn.Close(ctx)

	start := time.Now()
	if err := b.start("i1"); err != nil {
		return err
	}
	if err := b.waitPlaced(ctx, []string{"i1"}, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("one instance takes up all %d:              %s\n", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	for _, id := range []string{"i2", "i3"} {
		if err := b.start(id); err != nil {
			return err
		}
	}
	all := []string{"i1", "i2", "i3"}
	if err := b.waitPlaced(ctx, all, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("spread over three (two join one):          %s\n", time.Since(start).Round(time.Millisecond))
	var failovers, rejoins []float64
	for k := range kills {
		victim := all[k%len(all)]
		rest := make([]string, 0, 2)
		for _, id := range all {
			if id != victim {
				rest = append(rest, id)
			}
		}
		killed := time.Now()
		if err := b.procs[victim].Process.Kill(); err != nil {
			return err
		}
		_ = b.procs[victim].Wait()
		if err := b.waitPlaced(ctx, rest, 4*ttl+time.Minute); err != nil {
			return fmt.Errorf("failover after killing %s: %w", victim, err)
		}
		failovers = append(failovers, time.Since(killed).Seconds())
		started := time.Now()
		if err := b.start(victim); err != nil {
			return err
		}
		if err := b.waitPlaced(ctx, all, 5*time.Minute); err != nil {
			return fmt.Errorf("rejoin of %s: %w", victim, err)
		}
		rejoins = append(rejoins, time.Since(started).Seconds())
		fmt.Printf("kill %d (%s): failover %.2fs (%.2f TTL), rejoin %.2fs\n", k+1, victim,
			failovers[k], failovers[k]/ttl.Seconds(), rejoins[k])
	}
	if kills > 0 {
		fmt.Printf("failover median %.2fs = %.2f x cluster.lease-ttl (bound: 2), max %.2fs; rejoin median %.2fs\n",
			median(failovers), median(failovers)/ttl.Seconds(), slicesMax(failovers), median(rejoins))
	}
	return nil
}

func slicesMax(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

// setup builds the conduit binary and writes the pipelines and the
// configuration.
func (b *clusterBench) setup(ctx context.Context) error {
	b.bin = filepath.Join(b.dir, "conduit")
	if out, err := exec.Command("go", "build", "-o", b.bin, "./cmd/conduit").CombinedOutput(); err != nil {
		return fmt.Errorf("building conduit (run the bench from the repository root): %v\n%s", err, out)
	}
	var p strings.Builder
	p.WriteString("version: \"2.2\"\npipelines:\n")
	for i := range b.n {
		fmt.Fprintf(&p, `  - id: p%04d
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          rate: 1
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: %s
`, i, filepath.Join(b.dir, "out", fmt.Sprintf("p%04d.jsonl", i)))
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "pipelines"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "pipelines", "p.yml"), []byte(p.String()), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf("log:\n  level: warn\ndb:\n  type: postgres\n  postgres:\n    url: %s\ncluster:\n  enabled: true\n  lease-ttl: %s\napi:\n  enabled: false\npipelines:\n  path: %s\n",
		b.dbURL, b.ttl, filepath.Join(b.dir, "pipelines"))
	if err := os.WriteFile(filepath.Join(b.dir, "conduit.yml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	b.conn = conn
	return nil
}

func (b *clusterBench) start(id string) error {
	cmd := exec.Command(b.bin, "run", "--config.path", filepath.Join(b.dir, "conduit.yml"), "--cluster.instance-id", id)
	cmd.Dir = b.dir
	cmd.SysProcAttr = childAttributes()
	log, err := os.Create(filepath.Join(b.dir, id+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	b.procs[id] = cmd
	return nil
}

func (b *clusterBench) stopAll() {
	for _, cmd := range b.procs {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		}
	}
}

// waitPlaced waits until every pipeline's lease is live and held by the
// instance cluster.Assign gives it among live.
func (b *clusterBench) waitPlaced(ctx context.Context, live []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	ids := make([]string, b.n)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%04d", i)
	}
	want := cluster.Assign(ids, live)
	for {
		rows, err := b.conn.Query(ctx, `SELECT pipeline_id, owner FROM conduit_leases WHERE expires_at >= now()`)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" {
			// The first instance has not created the tables yet.
			time.Sleep(clusterPoll)
			continue
		}
		if err != nil {
			return err
		}
		placed := 0
		for rows.Next() {
			var id, owner string
			if err := rows.Scan(&id, &owner); err != nil {
				rows.Close()
				return err
			}
			if want[id] == owner {
				placed++
			}
		}
		rows.Close()
		if placed == b.n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pipelines placed on %v after %s (logs in %s)", placed, b.n, live, limit, b.dir)
		}
		time.Sleep(clusterPoll)
	}
}
