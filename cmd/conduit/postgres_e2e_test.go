package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/pgtest"
)

// postgresPipeline is a pipeline file as Conduit 2.2 users write it: a
// table's snapshot and then its changes by logical replication, into a
// file.
func postgresPipeline(id, url, tables string) string {
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %[1]s
    status: running
    description: users from PostgreSQL, snapshot then logical replication
    connectors:
      - id: pg
        type: source
        plugin: builtin:postgres
        settings:
          url: %[2]s
          tables: %[3]s
          snapshotMode: initial
          cdcMode: logrepl
          logrepl.slotName: slot_%[4]s
          logrepl.publicationName: pub_%[4]s
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./%[1]s.jsonl
    error-recovery:
      min-delay: 100ms
      max-delay: 500ms
`, id, url, tables, strings.ReplaceAll(id, "-", "_"))
}

// change is one line of the destination file, as far as these tests look.
type change struct {
	Operation string        `json:"operation"`
	Key       structuredKey `json:"key"`
	Payload   struct {
		After *struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		} `json:"after"`
	} `json:"payload"`
}

// structuredKey is a record key's id when the key is structured; a raw key
// (base64 text) leaves it 0.
type structuredKey struct{ ID int }

func (k *structuredKey) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	var v struct {
		ID int `json:"id"`
	}
	err := json.Unmarshal(b, &v)
	k.ID = v.ID
	return err
}

func changes(t *testing.T, path string) []change {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []change
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c change
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %d of %s: %v: %s", len(out)+1, path, err, sc.Text())
		}
		out = append(out, c)
	}
	return out
}

func waitForChanges(t *testing.T, p *process, path string, n int) []change {
	t.Helper()
	var got []change
	eventually(t, pollInterval, func() bool { got = changes(t, path); return len(got) >= n }, func() string {
		return fmt.Sprintf("%d of %d changes in %s; conduit output:\n%s", len(got), n, path, p.stderr.String())
	})
	return got
}

// A Conduit pipeline file reading a table with snapshot and logical
// replication runs unchanged: the snapshot, then inserts, updates and
// deletes; PostgreSQL stopped under it sends the pipeline recovering, and
// once it is back every row inserted meanwhile arrives, none twice.
func TestPostgresSnapshotThenCDCSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	pg.Exec(`CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, born timestamptz)`,
		`INSERT INTO users SELECT i, 'user' || i, '2001-02-03T04:05:06Z' FROM generate_series(1, 50) i`)
	w := newWorkspace(t, postgresPipeline("users", pg.URL("postgres"), "users"))
	// The only pipeline file is removed at the end, on purpose.
	p := w.start("run", "--pipelines.allow-delete-all")
	out := filepath.Join(w.dir, "users.jsonl")

	got := waitForChanges(t, p, out, 50)
	for i, c := range got {
		if c.Operation != "snapshot" || c.Key.ID != i+1 || c.Payload.After == nil || c.Payload.After.Name != fmt.Sprintf("user%d", i+1) {
			t.Fatalf("snapshot line %d = %+v, want row %d", i+1, c, i+1)
		}
	}

	pg.Exec(`INSERT INTO users VALUES (51, 'fifty-one', now())`,
		`UPDATE users SET name = 'first' WHERE id = 1`,
		`DELETE FROM users WHERE id = 2`)
	got = waitForChanges(t, p, out, 53)
	want := []struct {
		op string
		id int
	}{{"create", 51}, {"update", 1}, {"delete", 2}}
	for i, wc := range want {
		c := got[50+i]
		if c.Operation != wc.op || c.Key.ID != wc.id {
			t.Errorf("change %d = %s of %d, want %s of %d", i+1, c.Operation, c.Key.ID, wc.op, wc.id)
		}
	}
	if c := got[51]; c.Payload.After == nil || c.Payload.After.Name != "first" {
		t.Errorf("update carries %+v, want name first", c.Payload.After)
	}

	pg.Stop()
	e := waitForEvent(t, p, "users", "recovering", 1)
	if e.Class != "transient" || !strings.Contains(e.Error, "builtin:postgres") {
		t.Errorf("recovering after the server stopped: %+v, want a transient error naming builtin:postgres", e)
	}
	pg.Start()
	pg.Exec(`INSERT INTO users SELECT i, 'late' || i, now() FROM generate_series(52, 60) i`)
	waitForEvent(t, p, "users", "recovered", 1)
	got = waitForChanges(t, p, out, 62)
	seen := map[int]int{}
	for _, c := range got[53:] {
		if c.Operation != "create" {
			t.Errorf("after the restart: %s of %d, want only creates", c.Operation, c.Key.ID)
		}
		seen[c.Key.ID]++
	}
	for id := 52; id <= 60; id++ {
		if seen[id] != 1 {
			t.Errorf("row %d arrived %d times after the server restart, want once", id, seen[id])
		}
	}

	// Deleting the pipeline drops its replication slot and publication, as
	// Conduit does: a slot nobody reads keeps PostgreSQL's write-ahead log
	// from being recycled until its disk is full.
	var slots, pubs int
	pg.Query(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'slot_users'`, &slots)
	if slots != 1 {
		t.Fatalf("%d replication slots while the pipeline runs, want 1", slots)
	}
	if err := os.Remove(filepath.Join(w.dir, "pipelines/p.yml")); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, p, `"deleted":1`)
	pg.Query(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'slot_users'`, &slots)
	pg.Query(`SELECT count(*) FROM pg_publication WHERE pubname = 'pub_users'`, &pubs)
	if slots != 0 || pubs != 0 {
		t.Errorf("after the pipeline was deleted: %d replication slots and %d publications left, want none", slots, pubs)
	}
	stopProcess(t, p)
}

// Errors that no retry fixes are transient to the connector (it gives no
// codes); the shipped rules make them fatal, named by the rule.
func TestPostgresPermanentErrorsAreFatalWithTheShippedRules(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	pg.Exec(`CREATE TABLE users (id bigint PRIMARY KEY, name text)`,
		`CREATE ROLE reader LOGIN`, `GRANT SELECT ON users TO reader`)
	port := pg.Port()
	rules, err := os.ReadFile("../../examples/rules/postgres.yml")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t, "")
	w.write("conduit.yml", string(rules)+"log:\n  format: json\n")
	pipelines := map[string]struct {
		url, tables, rule, message string
	}{
		"no-table":    {pg.URL("postgres"), "missing", "postgres-missing-table", `relation "missing" does not exist`},
		"no-role":     {fmt.Sprintf("postgres://nobody@127.0.0.1:%d/postgres?sslmode=disable", port), "users", "postgres-authentication", `role "nobody" does not exist`},
		"no-database": {pg.URL("nodb"), "users", "postgres-missing-database", `database "nodb" does not exist`},
		"no-repl":     {fmt.Sprintf("postgres://reader@127.0.0.1:%d/postgres?sslmode=disable", port), "users", "postgres-permission", "permission denied"},
	}
	for id, c := range pipelines {
		w.write("pipelines/"+id+".yml", postgresPipeline(id, c.url, c.tables))
	}
	w.write("pipelines/bad-url.yml", postgresPipeline("bad-url", "postgres://postgres@127.0.0.1:port/postgres", "users"))
	p := w.start("run")
	for id, c := range pipelines {
		e := waitForEvent(t, p, id, "degraded", 1)
		if e.Reason != "rule" || e.Rule != c.rule || e.Class != "fatal" || !strings.Contains(e.Error, c.message) {
			t.Errorf("%s: degraded %+v, want rule %s for an error saying %q", id, e, c.rule, c.message)
		}
	}
	// A URL that does not parse is refused by the connector's Configure:
	// fatal without any rule.
	if e := waitForEvent(t, p, "bad-url", "degraded", 1); e.Class != "fatal" || !strings.Contains(e.Error, "invalid url") {
		t.Errorf("bad-url: degraded %+v, want a fatal error about the url", e)
	}
	stopProcess(t, p)

	// A rule of the user's that matches first overrides the built-in one:
	// the same missing table is retried, and the error says which table.
	w2 := newWorkspace(t, postgresPipeline("no-table", pg.URL("postgres"), "missing"))
	w2.write("conduit.yml", "log:\n  format: json\npipelines:\n  error-recovery:\n    rules:\n      - name: keep-trying\n        match: {message: \"(SQLSTATE 42P01)\"}\n        action: retry\n")
	p2 := w2.start("run")
	if e := waitForEvent(t, p2, "no-table", "recovering", 1); e.Class != "transient" || e.Rule != "keep-trying" || !strings.Contains(e.Error, `relation "missing" does not exist`) {
		t.Errorf("with a user's retry rule: recovering %+v, want a transient error by rule keep-trying naming the table", e)
	}
	stopProcess(t, p2)
}

// Without a rule of the user's, the known-permanent errors of Conduit's
// PostgreSQL connector are fatal through conduit's built-in rules: a
// server with wal_level = replica (PostgreSQL's default) was retried
// forever, SQLSTATE 55000 on every open. recovery-rules list shows them as
// built in.
func TestPostgresPermanentErrorsAreFatalWithTheBuiltinRules(t *testing.T) {
	t.Parallel()
	replica := pgtest.StartWith(t, "wal_level = replica")
	replica.Exec(`CREATE TABLE users (id bigint PRIMARY KEY, name text)`)
	logical := pgtest.Start(t)
	w := newWorkspace(t, "")
	w.write("conduit.yml", "log:\n  format: json\n")
	w.write("pipelines/replica.yml", postgresPipeline("replica", replica.URL("postgres"), "users"))
	w.write("pipelines/no-table.yml", postgresPipeline("no-table", logical.URL("postgres"), "missing"))
	p := w.start("run")
	for id, c := range map[string]struct{ rule, message string }{
		"replica":  {"postgres-wal-level", "SQLSTATE 55000"},
		"no-table": {"postgres-missing-table", `relation "missing" does not exist`},
	} {
		e := waitForEvent(t, p, id, "degraded", 1)
		if e.Reason != "rule" || e.Rule != c.rule || e.Class != "fatal" || !strings.Contains(e.Error, c.message) {
			t.Errorf("%s: degraded %+v, want built-in rule %s for an error saying %q", id, e, c.rule, c.message)
		}
	}
	res := conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+apiAddress(t, p)), "recovery-rules", "list")
	rows := tableRows(res.stdout)
	for _, name := range []string{"postgres-authentication", "postgres-missing-database", "postgres-missing-table", "postgres-permission", "postgres-wal-level"} {
		if r := rows[name]; len(r) < 2 || r[1] != "built-in" {
			t.Errorf("recovery-rules list: %s is not listed as built-in:\n%s", name, res.stdout)
		}
	}
	res = conduitCLI(t, w.dir, cliEnv("CONDUIT_API_HTTP_ADDRESS="+apiAddress(t, p)), "recovery-rules", "delete", "postgres-wal-level")
	if res.code == 0 || !strings.Contains(res.stderr, "built-in rules") || !strings.Contains(res.stderr, "your rules are tried first") {
		t.Errorf("delete of a built-in rule: exit %d\n%s", res.code, res.stderr)
	}
	stopProcess(t, p)
}

// Settings are checked against the connector's own specification when
// the file is loaded.
func TestPostgresBadSettingsAreNamed(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("pipelines/typo.yml", strings.Replace(postgresPipeline("typo", "postgres://x@127.0.0.1:1/x", "users"),
		"snapshotMode: initial", "snapshotMode: sometimes", 1))
	p := w.start("run")
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "snapshotMode")
	}, func() string { return "no error naming snapshotMode:\n" + p.stderr.String() })
	out := p.stderr.String()
	for _, want := range []string{`typo.yml`, `connectors[pg].settings.snapshotMode`, `sometimes`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	stopProcess(t, p)
}

// builtin:postgres as a destination: a table copied into another by
// snapshot and logical replication, as a Conduit user replicates one.
func TestPostgresDestinationCopiesATable(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	pg.Exec(`CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL)`,
		`CREATE TABLE users_copy (id bigint PRIMARY KEY, name text NOT NULL)`,
		`INSERT INTO users SELECT i, 'user' || i FROM generate_series(1, 100) i`)
	w := newWorkspace(t, fmt.Sprintf(`version: "2.2"
pipelines:
  - id: copy
    connectors:
      - id: in
        type: source
        plugin: builtin:postgres
        settings:
          url: %[1]s
          tables: users
          logrepl.slotName: copy_slot
          logrepl.publicationName: copy_pub
      - id: out
        type: destination
        plugin: builtin:postgres
        settings:
          url: %[1]s
          table: users_copy
`, pg.URL("postgres")))
	p := w.start("run")
	var rows, sum int
	wait := func(wantRows, wantSum int) {
		t.Helper()
		eventually(t, pollInterval, func() bool {
			pg.Query(`SELECT count(*), coalesce(sum(id), 0) FROM users_copy`, &rows, &sum)
			return rows == wantRows && sum == wantSum
		}, func() string {
			return fmt.Sprintf("users_copy has %d rows (ids summing to %d), want %d (%d); conduit output:\n%s",
				rows, sum, wantRows, wantSum, p.stderr.String())
		})
	}
	wait(100, 5050)
	pg.Exec(`INSERT INTO users VALUES (101, 'new')`, `UPDATE users SET name = 'renamed' WHERE id = 7`, `DELETE FROM users WHERE id = 8`)
	wait(100, 5050+101-8)
	var name string
	pg.Query(`SELECT name FROM users_copy WHERE id = 7`, &name)
	if name != "renamed" {
		t.Errorf("row 7 in the copy is named %q, want renamed", name)
	}
	stopProcess(t, p)
}
