package connector

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/pgtest"
	"github.com/conduitry/conduit/pkg/record"
)

func readAcked(t *testing.T, src Source, n int) []record.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []record.Record
	batch := make([]record.Record, 16)
	for len(out) < n {
		k, err := src.Read(ctx, batch)
		if err != nil {
			t.Fatalf("read after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, batch[:k]...)
		ps := make([]record.Position, k)
		for i := range k {
			ps[i] = batch[i].Position
		}
		if err := src.Ack(ctx, ps); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	return out
}

func TestPostgresSourceSnapshotThenCDC(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	pg.Exec(`CREATE TABLE users (id bigint PRIMARY KEY, name text, born timestamptz)`,
		`INSERT INTO users SELECT i, 'user'||i, '2020-01-01' FROM generate_series(1, 5) i`)
	reg := NewRegistry(Builtin()...)
	src, err := reg.NewSource("builtin:postgres", Config{PipelineID: "p", ConnectorID: "pg", State: &memState{},
		Settings: map[string]string{"url": pg.URL("postgres"), "tables": "users"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := src.Teardown(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	snap := readAcked(t, src, 5)
	for _, r := range snap {
		if r.Operation != record.OperationSnapshot {
			t.Errorf("snapshot record operation = %v", r.Operation)
		}
	}
	if got := string(snap[0].Payload.After.Bytes()); got == "" {
		t.Errorf("payload of a snapshot record has no JSON form: %#v", snap[0].Payload.After)
	}
	t.Logf("first: key %s payload %s meta %v", snap[0].Key.Bytes(), snap[0].Payload.After.Bytes(), snap[0].Metadata)
	pg.Exec(`INSERT INTO users VALUES (6, 'six', now())`, `UPDATE users SET name = 'uno' WHERE id = 1`, `DELETE FROM users WHERE id = 2`)
	cdc := readAcked(t, src, 3)
	want := []record.Operation{record.OperationCreate, record.OperationUpdate, record.OperationDelete}
	for i, r := range cdc {
		if r.Operation != want[i] {
			t.Errorf("cdc record %d: operation %v, want %v", i, r.Operation, want[i])
		}
	}
	var payload map[string]any
	if err := json.Unmarshal(cdc[1].Payload.After.Bytes(), &payload); err != nil || payload["name"] != "uno" {
		t.Errorf("update payload = %s (%v), want name uno", cdc[1].Payload.After.Bytes(), err)
	}
}
