package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/pgtest"
	"github.com/conduitry/conduit/pkg/store"
)

const (
	userSchema  = `{"type":"record","name":"user","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"}]}`
	userSchema2 = `{"type":"record","name":"user","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"},{"name":"email","type":["null","string"],"default":null}]}`
)

func avroSchema(text string) sr.Schema { return sr.Schema{Type: sr.TypeAvro, Schema: text} }

// stores are the backends the registry is kept in: the same tests run on
// each.
func stores(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"inmemory": func(*testing.T) store.Store { return store.NewInMemory() },
		"badger": func(t *testing.T) store.Store {
			db, err := store.OpenBadger(context.Background(), filepath.Join(t.TempDir(), "db"), zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		},
		"postgres": func(t *testing.T) store.Store { return openPostgres(t, pgtest.Database(t)) },
	}
}

func openPostgres(t *testing.T, url string) store.Store {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, zap.NewNop(), store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestBuiltinRegistersAndLooksUp(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t)
			reg := NewBuiltin(db)

			first, err := reg.CreateSchema(ctx, "orders-value", avroSchema(userSchema))
			if err != nil {
				t.Fatal(err)
			}
			if first.ID != 1 || first.Version != 1 || first.Subject != "orders-value" {
				t.Fatalf("first schema: %+v, want id 1 version 1", first)
			}
			again, err := reg.CreateSchema(ctx, "orders-value", avroSchema(userSchema))
			if err != nil || again.ID != 1 || again.Version != 1 {
				t.Fatalf("the same schema again: %+v %v, want id 1 version 1", again, err)
			}
			second, err := reg.CreateSchema(ctx, "orders-value", avroSchema(userSchema2))
			if err != nil || second.ID != 2 || second.Version != 2 {
				t.Fatalf("a changed schema: %+v %v, want id 2 version 2", second, err)
			}
			other, err := reg.CreateSchema(ctx, "users-value", avroSchema(userSchema))
			if err != nil || other.ID != 1 || other.Version != 1 {
				t.Fatalf("the first schema under another subject: %+v %v, want its id 1 and version 1", other, err)
			}

			// A second registry on the same store (the next process, or
			// another instance of a cluster) sees everything.
			next := NewBuiltin(db)
			s, err := next.SchemaByID(ctx, 2)
			if err != nil || s.Schema != userSchema2 || s.Type != sr.TypeAvro {
				t.Fatalf("schema 2: %+v %v", s, err)
			}
			latest, err := next.SchemaBySubjectVersion(ctx, "orders-value", LatestVersion)
			if err != nil || latest.Version != 2 || latest.ID != 2 || latest.Schema.Schema != userSchema2 {
				t.Fatalf("latest of orders-value: %+v %v", latest, err)
			}
			v1, err := next.SchemaBySubjectVersion(ctx, "orders-value", 1)
			if err != nil || v1.ID != 1 || v1.Schema.Schema != userSchema {
				t.Fatalf("orders-value version 1: %+v %v", v1, err)
			}
			third, err := next.CreateSchema(ctx, "users-value", avroSchema(userSchema2))
			if err != nil || third.ID != 2 || third.Version != 2 {
				t.Fatalf("schema 2 under users-value: %+v %v, want id 2 version 2", third, err)
			}
		})
	}
}

func TestBuiltinRefuses(t *testing.T) {
	ctx := context.Background()
	reg := NewBuiltin(store.NewInMemory())
	cases := []struct {
		name    string
		do      func() error
		code    int
		want    string
		missing bool
	}{
		{name: "unknown id", do: func() error { _, err := reg.SchemaByID(ctx, 7); return err }, code: 404, want: "schema id 7", missing: true},
		{name: "unknown subject", do: func() error {
			_, err := reg.SchemaBySubjectVersion(ctx, "nope", LatestVersion)
			return err
		}, code: 404, want: `subject "nope"`, missing: true},
		{name: "version 0", do: func() error { _, err := reg.SchemaBySubjectVersion(ctx, "s", 0); return err }, code: 400, want: "versions count from 1"},
		{name: "not Avro", do: func() error {
			_, err := reg.CreateSchema(ctx, "s", sr.Schema{Type: sr.TypeJSON, Schema: `{}`})
			return err
		}, code: 400, want: "Avro schemas only"},
		{name: "invalid Avro", do: func() error { _, err := reg.CreateSchema(ctx, "s", avroSchema(`{"type":"record"}`)); return err }, code: 400, want: "invalid Avro schema"},
		{name: "empty subject", do: func() error { _, err := reg.CreateSchema(ctx, "", avroSchema(userSchema)); return err }, code: 400, want: "non-empty name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if got := cerrors.Classify(err); got.Code != c.code {
				t.Fatalf("code %d, want %d (%v)", got.Code, c.code, err)
			}
			if errors.Is(err, ErrNotFound) != c.missing {
				t.Fatalf("errors.Is(ErrNotFound) = %v, want %v", !c.missing, c.missing)
			}
		})
	}
}

// Processes sharing one PostgreSQL database register at the same time: no
// id or version is given twice.
func TestBuiltinConcurrentRegistrationsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	regs := []*Builtin{NewBuiltin(openPostgres(t, url)), NewBuiltin(openPostgres(t, url))}
	const schemas = 8
	var wg sync.WaitGroup
	results := make([][]sr.SubjectSchema, len(regs))
	errs := make([]error, len(regs))
	for i, reg := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range schemas {
				// Both register the same schemas, in opposite orders.
				if i == 1 {
					n = schemas - 1 - n
				}
				text := fmt.Sprintf(`{"type":"record","name":"r%d","fields":[{"name":"f","type":"int"}]}`, n)
				ss, err := reg.CreateSchema(ctx, "shared", avroSchema(text))
				if err != nil {
					errs[i] = err
					return
				}
				results[i] = append(results[i], ss)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ids, versions := map[string]int{}, map[string]int{}
	for _, rs := range results {
		for _, ss := range rs {
			if id, ok := ids[ss.Schema.Schema]; ok && id != ss.ID {
				t.Fatalf("schema %s got ids %d and %d", ss.Schema.Schema, id, ss.ID)
			}
			if v, ok := versions[ss.Schema.Schema]; ok && v != ss.Version {
				t.Fatalf("schema %s got versions %d and %d", ss.Schema.Schema, v, ss.Version)
			}
			ids[ss.Schema.Schema], versions[ss.Schema.Schema] = ss.ID, ss.Version
		}
	}
	seenID, seenVersion := map[int]bool{}, map[int]bool{}
	for text := range ids {
		if seenID[ids[text]] || seenVersion[versions[text]] {
			t.Fatalf("id %d or version %d given twice: %v %v", ids[text], versions[text], ids, versions)
		}
		seenID[ids[text]], seenVersion[versions[text]] = true, true
	}
	if len(ids) != schemas {
		t.Fatalf("%d schemas registered, want %d", len(ids), schemas)
	}
}

// The registry's keys and values are part of the on-disk format.
func TestBuiltinPersistedFormat(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	reg := NewBuiltin(db)
	for _, c := range []struct{ subject, schema string }{
		{"orders-value", userSchema}, {"orders-value", userSchema2}, {"users-value", userSchema},
	} {
		if _, err := reg.CreateSchema(ctx, c.subject, avroSchema(c.schema)); err != nil {
			t.Fatal(err)
		}
	}
	kept := map[string]string{}
	if err := db.Scan(ctx, []byte(store.PrefixSchema), func(k, v []byte) error {
		kept[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	encoded, err := json.MarshalIndent(kept, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := golden.File(t, "builtin.golden.json", append(encoded, '\n'))

	// And a registry reads what the golden file holds.
	var stored map[string]string
	if err := json.Unmarshal(want, &stored); err != nil {
		t.Fatal(err)
	}
	fresh := store.NewInMemory()
	var ops []store.Op
	for k, v := range stored {
		ops = append(ops, store.Op{Key: []byte(k), Value: []byte(v)})
	}
	if err := fresh.Commit(ctx, ops); err != nil {
		t.Fatal(err)
	}
	ss, err := NewBuiltin(fresh).SchemaBySubjectVersion(ctx, "orders-value", 2)
	if err != nil || ss.ID != 2 || ss.Schema.Schema != userSchema2 {
		t.Fatalf("from the golden file: %+v %v", ss, err)
	}
}
