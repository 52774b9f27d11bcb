package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/field"

	"github.com/conduitry/conduit/pkg/record"
)

// TestOwnProcessorsMatchConduit runs this package's field.set,
// field.exclude, filter and error side by side with Conduit's own
// implementations on the same settings and records, and checks that the
// records they produce are the same, that they drop the same records, and
// that they reject the same ones (with the same message for error, whose
// message is the user's).
func TestOwnProcessorsMatchConduit(t *testing.T) {
	quietSDKLogs()
	conduits := map[string]func() sdk.Processor{
		"field.set":     func() sdk.Processor { return field.NewSetProcessor(log.Nop()) },
		"field.exclude": func() sdk.Processor { return field.NewExcludeProcessor(log.Nop()) },
		"filter":        func() sdk.Processor { return impl.NewFilterProcessor(log.Nop()) },
		"error":         func() sdk.Processor { return impl.NewErrorProcessor(log.Nop()) },
	}
	configs := []struct {
		plugin   string
		settings map[string]string
	}{
		{"field.set", map[string]string{"field": ".Payload.After.name", "value": "constant"}},
		{"field.set", map[string]string{"field": ".Payload.After.full", "value": "{{ .Payload.After.name }}-{{ .Metadata.table }}"}},
		{"field.set", map[string]string{"field": ".Payload.After.address.city", "value": "Bergen"}},
		{"field.set", map[string]string{"field": ".Payload.After.new.deep", "value": "x"}},
		{"field.set", map[string]string{"field": ".Metadata.copied", "value": "{{ .Payload.Before.name }}"}},
		{"field.set", map[string]string{"field": ".Metadata[\"a.b\"]", "value": "{{ index .Metadata \"table\" }}"}},
		{"field.set", map[string]string{"field": ".Key", "value": "k-{{ .Position }}"}},
		{"field.set", map[string]string{"field": ".Key.id", "value": "1"}},
		{"field.set", map[string]string{"field": ".Operation", "value": "delete"}},
		{"field.set", map[string]string{"field": ".Payload.After", "value": "{{ .Operation }}"}},
		{"field.set", map[string]string{"field": ".Payload.After[\"a.b\"]", "value": "{{ .Payload.After.age }}"}},
		{"field.set", map[string]string{"field": ".Metadata.x", "value": "{{ .Payload.After.nope }}{{ .Metadata.nope }}"}},
		{"field.exclude", map[string]string{"fields": ".Metadata.table"}},
		{"field.exclude", map[string]string{"fields": ".Metadata"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.address.zip,.Payload.Before.name"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After[\"a.b\"]"}},
		{"field.exclude", map[string]string{"fields": ".Payload"}},
		{"field.exclude", map[string]string{"fields": ".Key"}},
		{"field.exclude", map[string]string{"fields": ".Key.id"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.missing,.Metadata.missing"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.nothere.zip"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.nothing.zip"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.password"}},
		{"field.exclude", map[string]string{"fields": ".Payload.After.age.x"}},
		{"field.exclude", map[string]string{"fields": ".Key.a.b"}},
		{"filter", map[string]string{}},
		{"error", map[string]string{}},
		{"error", map[string]string{"message": "bad {{ .Metadata.table }} record at {{ .Position }}"}},
	}
	records := map[string]func() record.Record{
		"full": testRecord,
		"structured key": func() record.Record {
			r := testRecord()
			r.Key = record.StructuredData{"id": 1}
			return r
		},
		"no payload or metadata": func() record.Record {
			return record.Record{Position: record.Position("p"), Operation: record.OperationCreate}
		},
		"delete": func() record.Record {
			return record.Record{Position: record.Position("p"), Operation: record.OperationDelete,
				Metadata: record.Metadata{"table": "users"}, Payload: record.Change{Before: record.StructuredData{"name": "ann", "password": "x"}}}
		},
		"nil value": func() record.Record {
			r := testRecord()
			r.Payload.After.(record.StructuredData)["nothing"] = nil
			return r
		},
		"raw payload": func() record.Record {
			r := testRecord()
			r.Payload = record.Change{Before: nil, After: record.RawData("text")}
			return r
		},
	}
	ctx := context.Background()
	for _, c := range configs {
		for rname, mk := range records {
			t.Run(fmt.Sprintf("%s %v/%s", c.plugin, c.settings, rname), func(t *testing.T) {
				ours, err := NewRegistry(Builtin()...).New(c.plugin, Config{Settings: c.settings})
				if err != nil {
					t.Fatalf("ours: %v", err)
				}
				theirs := conduits[c.plugin]()
				if err := theirs.Configure(ctx, c.settings); err != nil {
					t.Fatalf("Conduit's: %v", err)
				}
				if err := theirs.Open(ctx); err != nil {
					t.Fatal(err)
				}

				rec := mk()
				oerr := ours.Process(ctx, &rec)
				in := record.ToOpenCDC(ptr(mk()))
				got := theirs.Process(ctx, []opencdc.Record{in})[0]

				switch g := got.(type) {
				case sdk.FilterRecord:
					if !errors.Is(oerr, ErrFiltered) {
						t.Errorf("Conduit's drops the record, ours: %v", oerr)
					}
				case sdk.ErrorRecord:
					switch {
					case oerr == nil && strings.Contains(g.Error.Error(), "nil pointer evaluating opencdc.Data."):
						// Known difference (docs/connectors.md): a template
						// reading a field of absent data renders "" here.
						t.Logf("known difference: Conduit's rejects the record (%v), ours renders \"\"", g.Error)
					case oerr == nil || errors.Is(oerr, ErrFiltered):
						t.Errorf("Conduit's rejects the record (%v), ours: %v", g.Error, oerr)
					case c.plugin == "error" && oerr.Error() != strings.ReplaceAll(g.Error.Error(), "<no value>", ""):
						// Known difference: a missing value renders "" here,
						// "<no value>" in Conduit.
						t.Errorf("message %q, Conduit's %q", oerr, g.Error)
					}
				case sdk.SingleRecord:
					if oerr != nil {
						t.Fatalf("ours: %v, Conduit's: %+v", oerr, g)
					}
					want := opencdc.Record(g)
					ob, err := opencdc.JSONSerializer{}.Serialize(record.ToOpenCDC(&rec))
					if err != nil {
						t.Fatal(err)
					}
					wb, err := opencdc.JSONSerializer{}.Serialize(want)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case string(ob) == string(wb):
					case string(ob) == strings.ReplaceAll(string(wb), `\u003cno value\u003e`, ""):
						// Known difference (docs/connectors.md): a missing
						// value renders "" here, "<no value>" in Conduit.
						t.Logf("known difference: Conduit's writes <no value>: %s", wb)
					default:
						t.Errorf("record differs from Conduit's\n ours: %s\nConduit: %s", ob, wb)
					}
				default:
					t.Fatalf("Conduit's returned %T", got)
				}
			})
		}
	}
}

// TestSplittersMatchConduit runs split and clone through the registry
// (the adapter, as the engine calls it) and Conduit's own processors side
// by side on the same records, and checks that they make the same records
// in the same order, drop the same ones and reject the same ones. An array
// of one element makes one record and an empty one none, as Conduit's
// engine makes of a MultiRecord of one or none.
func TestSplittersMatchConduit(t *testing.T) {
	quietSDKLogs()
	conduits := map[string]func() sdk.Processor{
		"split": func() sdk.Processor { return impl.NewSplitProcessor(log.Nop()) },
		"clone": func() sdk.Processor { return impl.NewCloneProcessor(log.Nop()) },
	}
	configs := []struct {
		plugin   string
		settings map[string]string
	}{
		{"split", map[string]string{"field": ".Payload.After.users"}},
		{"split", map[string]string{"field": ".Payload.After.tags"}},
		{"split", map[string]string{"field": ".Payload.After.one"}},
		{"split", map[string]string{"field": ".Payload.After.none"}},
		{"split", map[string]string{"field": ".Payload.After.name"}},
		{"split", map[string]string{"field": ".Payload.After.missing"}},
		{"split", map[string]string{"field": ".Key.ids"}},
		{"split", map[string]string{"field": ".Payload.Before.users"}},
		{"clone", map[string]string{"count": "1"}},
		{"clone", map[string]string{"count": "3"}},
	}
	records := map[string]func() record.Record{
		"arrays": func() record.Record {
			return record.Record{
				Position:  record.Position("p7"),
				Operation: record.OperationUpdate,
				Metadata:  record.Metadata{"table": "orders"},
				Key:       record.StructuredData{"ids": []any{1, 2}},
				Payload: record.Change{
					Before: record.StructuredData{"users": []any{"x"}},
					After: record.StructuredData{
						"name":  "bob",
						"users": []any{map[string]any{"name": "ann", "age": 30}, map[string]any{"name": "cy", "age": 4}, map[string]any{"name": "di"}},
						"tags":  []string{"a", "b"},
						"one":   []any{"only"},
						"none":  []any{},
					},
				},
			}
		},
		"no metadata, raw key": func() record.Record {
			return record.Record{Position: record.Position("p8"), Operation: record.OperationCreate, Key: record.RawData("k"),
				Payload: record.Change{After: record.StructuredData{"users": []any{1, 2, 3}, "tags": []any{}, "name": "x"}}}
		},
		"raw payload": func() record.Record {
			return record.Record{Position: record.Position("p9"), Operation: record.OperationCreate,
				Payload: record.Change{After: record.RawData(`{"users":[1,2]}`)}}
		},
	}
	ctx := context.Background()
	ser := func(r opencdc.Record) string {
		b, err := opencdc.JSONSerializer{}.Serialize(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range configs {
		for rname, mk := range records {
			t.Run(fmt.Sprintf("%s %v/%s", c.plugin, c.settings, rname), func(t *testing.T) {
				proc, err := NewRegistry(Builtin()...).New(c.plugin, Config{Settings: c.settings})
				if err != nil {
					t.Fatalf("ours: %v", err)
				}
				ours := proc.(Splitter)
				theirs := conduits[c.plugin]()
				if err := theirs.Configure(ctx, c.settings); err != nil {
					t.Fatalf("Conduit's: %v", err)
				}

				rec := mk()
				several, oerr := ours.ProcessMulti(ctx, &rec, nil)
				got := theirs.Process(ctx, []opencdc.Record{record.ToOpenCDC(ptr(mk()))})[0]

				var want []opencdc.Record
				switch g := got.(type) {
				case sdk.ErrorRecord:
					if oerr == nil || oerr.Error() != g.Error.Error() {
						t.Fatalf("Conduit's rejects the record (%v), ours: %v", g.Error, oerr)
					}
					return
				case sdk.MultiRecord:
					want = g
				default:
					t.Fatalf("Conduit's returned %T", got)
				}
				switch {
				case len(want) == 0:
					if !errors.Is(oerr, ErrFiltered) || len(several) != 0 {
						t.Fatalf("Conduit's makes no record, ours: %d records, %v", len(several), oerr)
					}
					return
				case oerr != nil:
					t.Fatalf("ours: %v, Conduit's made %d records", oerr, len(want))
				case len(want) == 1:
					if len(several) != 0 {
						t.Fatalf("Conduit's makes one record, ours %d", len(several))
					}
					several = []record.Record{rec}
				}
				if len(several) != len(want) {
					t.Fatalf("ours made %d records, Conduit's %d", len(several), len(want))
				}
				for i := range want {
					if o, w := ser(record.ToOpenCDC(&several[i])), ser(want[i]); o != w {
						t.Errorf("record %d differs from Conduit's\n ours: %s\nConduit: %s", i, o, w)
					}
				}
				// Ours shares nothing with the record it was given: the
				// engine reuses that one's maps.
				if len(several) > 1 && len(rec.Metadata) > 0 {
					rec.Metadata["changed"] = "after"
					for i := range several {
						if several[i].Metadata["changed"] != "" {
							t.Fatalf("record %d shares its metadata with the original", i)
						}
					}
				}
			})
		}
	}
}
