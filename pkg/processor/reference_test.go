package processor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

func TestParseReference(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantPart part
		wantPath []string
		wantErr  []string
	}{
		{name: "position", in: ".Position", wantPart: partPosition},
		{name: "operation", in: ".Operation", wantPart: partOperation},
		{name: "metadata", in: ".Metadata", wantPart: partMetadata},
		{name: "metadata key", in: ".Metadata.table", wantPart: partMetadata, wantPath: []string{"table"}},
		{name: "metadata quoted key", in: `.Metadata["opencdc.readAt"]`, wantPart: partMetadata, wantPath: []string{"opencdc.readAt"}},
		{name: "metadata backquoted key", in: ".Metadata[`a\"b`]", wantPart: partMetadata, wantPath: []string{`a"b`}},
		{name: "key", in: ".Key", wantPart: partKey},
		{name: "key field", in: ".Key.id", wantPart: partKey, wantPath: []string{"id"}},
		{name: "payload", in: ".Payload", wantPart: partPayload},
		{name: "before", in: ".Payload.Before", wantPart: partBefore},
		{name: "after", in: ".Payload.After", wantPart: partAfter},
		{name: "nested", in: ".Payload.After.address.city", wantPart: partAfter, wantPath: []string{"address", "city"}},
		{name: "quoted then nested", in: `.Payload.After["1.4.foo"].bar`, wantPart: partAfter, wantPath: []string{"1.4.foo", "bar"}},
		{name: "quoted with escapes", in: `.Payload.Before["a\"b\\c"]`, wantPart: partBefore, wantPath: []string{`a"b\c`}},
		{name: "quoted record part", in: `.Payload["After"].x`, wantPart: partAfter, wantPath: []string{"x"}},
		{name: "underscore and digits", in: ".Payload.After.user_2", wantPart: partAfter, wantPath: []string{"user_2"}},
		{name: "unicode letters", in: ".Payload.After.größe", wantPart: partAfter, wantPath: []string{"größe"}},
		{name: "dollar prefix", in: "$.Key.id", wantPart: partKey, wantPath: []string{"id"}},
		{name: "surrounding spaces", in: "  .Key  ", wantPart: partKey},

		{name: "empty", in: "", wantErr: []string{"empty"}},
		{name: "dot alone", in: ".", wantErr: []string{"whole record"}},
		{name: "no leading dot", in: "Payload.After", wantErr: []string{"starts with a dot"}},
		{name: "unknown part", in: ".Body", wantErr: []string{`unknown field "Body"`, ".Payload"}},
		{name: "wrong case", in: ".payload.after", wantErr: []string{`"payload"`, "did you mean .Payload?"}},
		{name: "wrong payload part", in: ".Payload.after", wantErr: []string{"did you mean .Payload.After?"}},
		{name: "unknown payload part", in: ".Payload.Middle", wantErr: []string{`unknown field "Middle" in .Payload`}},
		{name: "field of position", in: ".Position.x", wantErr: []string{".Position has no fields"}},
		{name: "field of operation", in: ".Operation.x", wantErr: []string{".Operation has no fields"}},
		{name: "nested metadata", in: ".Metadata.a.b", wantErr: []string{".Metadata values are text"}},
		{name: "double dot", in: ".Key..id", wantErr: []string{"expected a field name after the dot at offset 4"}},
		{name: "trailing dot", in: ".Key.", wantErr: []string{"expected a field name"}},
		{name: "leading digit", in: ".Payload.After.1x", wantErr: []string{`starts with a digit`, `["1x"]`}},
		{name: "dash", in: ".Payload.After.first-name", wantErr: []string{`unexpected '-' at offset 20`}},
		{name: "unquoted bracket", in: ".Payload.After[name]", wantErr: []string{"expected a quoted field name"}},
		{name: "unterminated quote", in: `.Payload.After["name]`, wantErr: []string{"unterminated"}},
		{name: "missing bracket", in: `.Payload.After["name"`, wantErr: []string{"expected a quoted field name and ]"}},
		{name: "bracket first", in: `["Key"]`, wantErr: []string{"starts with a field"}},
		{name: "template braces", in: "{{ .Key }}", wantErr: []string{"starts with a dot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := ParseReference(tt.in)
			wantErr(t, err, tt.wantErr...)
			if err != nil {
				if !strings.Contains(err.Error(), `invalid reference "`) {
					t.Errorf("error %q does not name the reference", err)
				}
				return
			}
			if ref.part != tt.wantPart || !reflect.DeepEqual(ref.path, tt.wantPath) {
				t.Errorf("ParseReference(%q) = part %v path %q, want part %v path %q",
					tt.in, ref.part, ref.path, tt.wantPart, tt.wantPath)
			}
		})
	}
}

func TestReferenceGet(t *testing.T) {
	rec := testRecord()
	rec.Payload.After.(record.StructuredData)["nested"] = record.StructuredData{"deep": map[string]any{"x": 1}}
	tests := []struct {
		name    string
		ref     string
		want    any
		wantErr []string
	}{
		{name: "position", ref: ".Position", want: record.Position("pos-1")},
		{name: "operation", ref: ".Operation", want: record.OperationUpdate},
		{name: "metadata", ref: ".Metadata", want: rec.Metadata},
		{name: "metadata key", ref: ".Metadata.table", want: "users"},
		{name: "metadata quoted key", ref: `.Metadata["opencdc.readAt"]`, want: "1700000000"},
		{name: "missing metadata key", ref: ".Metadata.nope", want: nil},
		{name: "key", ref: ".Key", want: record.RawData("42")},
		{name: "payload", ref: ".Payload", want: rec.Payload},
		{name: "before", ref: ".Payload.Before", want: rec.Payload.Before},
		{name: "before field", ref: ".Payload.Before.name", want: "ann"},
		{name: "after field", ref: ".Payload.After.age", want: 30},
		{name: "nested field", ref: ".Payload.After.address.city", want: "Oslo"},
		{name: "quoted field", ref: `.Payload.After["a.b"]`, want: "dotted"},
		{name: "through StructuredData values", ref: ".Payload.After.nested.deep.x", want: 1},
		{name: "missing field", ref: ".Payload.After.nope", want: nil},
		{name: "missing parent", ref: ".Payload.After.nope.x", want: nil},
		{name: "field of raw key", ref: ".Key.id", wantErr: []string{"cannot use .Key.id", ".Key holds raw data"}},
		{name: "field of a string", ref: ".Payload.After.name.first",
			wantErr: []string{".Payload.After.name is a string, not an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := ParseReference(tt.ref)
			wantErr(t, err)
			got, err := ref.Get(&rec)
			wantErr(t, err, tt.wantErr...)
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Get(%s) = %#v, want %#v", tt.ref, got, tt.want)
			}
		})
	}

	t.Run("absent data", func(t *testing.T) {
		empty := record.Record{}
		for _, s := range []string{".Key", ".Key.id", ".Payload.After.a.b", ".Metadata.x"} {
			ref, _ := ParseReference(s)
			got, err := ref.Get(&empty)
			if err != nil || (got != nil && !reflect.ValueOf(got).IsNil()) {
				t.Errorf("Get(%s) on an empty record = %#v, %v; want nil", s, got, err)
			}
		}
		if !reflect.DeepEqual(empty, record.Record{}) {
			t.Errorf("Get changed the record: %#v", empty)
		}
	})
}

func TestReferenceSet(t *testing.T) {
	tests := []struct {
		name    string
		ref     string
		value   any
		before  func(*record.Record) // prepares testRecord(); nil = as is
		want    func(*record.Record) // applies the expected change to testRecord()
		wantErr []string
	}{
		{name: "operation by name", ref: ".Operation", value: "delete",
			want: func(r *record.Record) { r.Operation = record.OperationDelete }},
		{name: "operation value", ref: ".Operation", value: record.OperationSnapshot,
			want: func(r *record.Record) { r.Operation = record.OperationSnapshot }},
		{name: "bad operation name", ref: ".Operation", value: "upsert",
			wantErr: []string{"cannot set .Operation", `unknown operation "upsert"`}},
		{name: "bad operation value", ref: ".Operation", value: record.Operation(9),
			wantErr: []string{"not a valid operation"}},
		{name: "operation wrong type", ref: ".Operation", value: 3,
			wantErr: []string{"cannot set .Operation to a number: want an operation name"}},
		{name: "position", ref: ".Position", value: "x", wantErr: []string{"cannot set .Position", "read-only"}},
		{name: "metadata key", ref: ".Metadata.table", value: "orders",
			want: func(r *record.Record) { r.Metadata["table"] = "orders" }},
		{name: "new quoted metadata key", ref: `.Metadata["x.y"]`, value: "1",
			want: func(r *record.Record) { r.Metadata["x.y"] = "1" }},
		{name: "metadata key on nil metadata", ref: ".Metadata.k", value: "v",
			before: func(r *record.Record) { r.Metadata = nil },
			want:   func(r *record.Record) { r.Metadata = record.Metadata{"k": "v"} }},
		{name: "metadata key nil deletes", ref: ".Metadata.table", value: nil,
			want: func(r *record.Record) { delete(r.Metadata, "table") }},
		{name: "metadata key wrong type", ref: ".Metadata.n", value: 1, wantErr: []string{"want a string"}},
		{name: "whole metadata", ref: ".Metadata", value: map[string]string{"a": "b"},
			want: func(r *record.Record) { r.Metadata = record.Metadata{"a": "b"} }},
		{name: "whole metadata from text", ref: ".Metadata", value: "x", wantErr: []string{"want a metadata map"}},
		{name: "key as text", ref: ".Key", value: "k-1",
			want: func(r *record.Record) { r.Key = record.RawData("k-1") }},
		{name: "key as structured", ref: ".Key", value: map[string]any{"id": 1},
			want: func(r *record.Record) { r.Key = record.StructuredData{"id": 1} }},
		{name: "key nil", ref: ".Key", value: nil, want: func(r *record.Record) { r.Key = nil }},
		{name: "key wrong type", ref: ".Key", value: 5, wantErr: []string{"want raw data (text) or structured data, got a number"}},
		{name: "after as text", ref: ".Payload.After", value: []byte("raw"),
			want: func(r *record.Record) { r.Payload.After = record.RawData("raw") }},
		{name: "payload", ref: ".Payload", value: record.Change{After: record.RawData("x")},
			want: func(r *record.Record) { r.Payload = record.Change{After: record.RawData("x")} }},
		{name: "payload wrong type", ref: ".Payload", value: "x", wantErr: []string{"want a record.Change"}},
		{name: "after field", ref: ".Payload.After.name", value: "carl",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["name"] = "carl" }},
		{name: "before new field", ref: ".Payload.Before.id", value: 7,
			want: func(r *record.Record) { r.Payload.Before.(record.StructuredData)["id"] = 7 }},
		{name: "nested field", ref: ".Payload.After.address.city", value: "Bergen",
			want: func(r *record.Record) {
				r.Payload.After.(record.StructuredData)["address"].(map[string]any)["city"] = "Bergen"
			}},
		{name: "quoted nested field", ref: `.Payload.After["x.y"]["z"]`, value: "v",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["x.y"] = map[string]any{"z": "v"} }},
		{name: "creates parents", ref: ".Payload.After.a.b.c", value: true,
			want: func(r *record.Record) {
				r.Payload.After.(record.StructuredData)["a"] = map[string]any{"b": map[string]any{"c": true}}
			}},
		{name: "replaces null parent", ref: ".Payload.After.p.q", value: "v",
			before: func(r *record.Record) { r.Payload.After.(record.StructuredData)["p"] = nil },
			want:   func(r *record.Record) { r.Payload.After.(record.StructuredData)["p"] = map[string]any{"q": "v"} }},
		{name: "nil payload becomes structured", ref: ".Payload.After.id", value: "1",
			before: func(r *record.Record) { r.Payload.After = nil },
			want:   func(r *record.Record) { r.Payload.After = record.StructuredData{"id": "1"} }},
		{name: "nil StructuredData becomes a map", ref: ".Payload.Before.id", value: "1",
			before: func(r *record.Record) { r.Payload.Before = record.StructuredData(nil) },
			want:   func(r *record.Record) { r.Payload.Before = record.StructuredData{"id": "1"} }},
		{name: "nil key becomes structured", ref: ".Key.id", value: "1",
			before: func(r *record.Record) { r.Key = nil },
			want:   func(r *record.Record) { r.Key = record.StructuredData{"id": "1"} }},
		{name: "field in raw key", ref: ".Key.id", value: "1",
			wantErr: []string{"cannot use .Key.id: .Key holds raw data, not structured data"}},
		{name: "field in raw payload", ref: ".Payload.After.x", value: "1",
			before:  func(r *record.Record) { r.Payload.After = record.RawData(`{"x":0}`) },
			wantErr: []string{"cannot use .Payload.After.x: .Payload.After holds raw data"}},
		{name: "field inside a string", ref: ".Payload.After.name.first", value: "1",
			wantErr: []string{"cannot use .Payload.After.name.first: .Payload.After.name is a string, not an object"}},
		{name: "field inside a list", ref: `.Payload.After["l"].x`, value: "1",
			before:  func(r *record.Record) { r.Payload.After.(record.StructuredData)["l"] = []any{1} },
			wantErr: []string{`.Payload.After.l is a list, not an object`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := ParseReference(tt.ref)
			wantErr(t, err)
			got, want := testRecord(), testRecord()
			if tt.before != nil {
				tt.before(&got)
				tt.before(&want)
			}
			err = ref.Set(&got, tt.value)
			wantErr(t, err, tt.wantErr...)
			if tt.want != nil {
				tt.want(&want)
			}
			// A failed Set leaves the record as it was.
			sameRecord(t, &got, &want)
		})
	}
}

func TestReferenceDelete(t *testing.T) {
	tests := []struct {
		name    string
		ref     string
		before  func(*record.Record)
		want    func(*record.Record)
		wantErr []string
	}{
		{name: "position", ref: ".Position", wantErr: []string{"cannot delete .Position"}},
		{name: "operation", ref: ".Operation", wantErr: []string{"cannot delete .Operation"}},
		{name: "metadata key", ref: ".Metadata.table", want: func(r *record.Record) { delete(r.Metadata, "table") }},
		{name: "quoted metadata key", ref: `.Metadata["opencdc.readAt"]`,
			want: func(r *record.Record) { delete(r.Metadata, "opencdc.readAt") }},
		{name: "missing metadata key", ref: ".Metadata.nope"},
		{name: "metadata key of nil metadata", ref: ".Metadata.x",
			before: func(r *record.Record) { r.Metadata = nil },
			want:   func(r *record.Record) { r.Metadata = record.Metadata{} }},
		{name: "whole metadata", ref: ".Metadata", want: func(r *record.Record) { r.Metadata = record.Metadata{} }},
		{name: "key", ref: ".Key", want: func(r *record.Record) { r.Key = nil }},
		{name: "payload", ref: ".Payload", want: func(r *record.Record) { r.Payload = record.Change{} }},
		{name: "before", ref: ".Payload.Before", want: func(r *record.Record) { r.Payload.Before = nil }},
		{name: "after", ref: ".Payload.After", want: func(r *record.Record) { r.Payload.After = nil }},
		{name: "after field", ref: ".Payload.After.age",
			want: func(r *record.Record) { delete(r.Payload.After.(record.StructuredData), "age") }},
		{name: "whole subtree", ref: ".Payload.After.address",
			want: func(r *record.Record) { delete(r.Payload.After.(record.StructuredData), "address") }},
		{name: "nested field", ref: ".Payload.After.address.zip",
			want: func(r *record.Record) {
				delete(r.Payload.After.(record.StructuredData)["address"].(map[string]any), "zip")
			}},
		{name: "quoted field", ref: `.Payload.After["a.b"]`,
			want: func(r *record.Record) { delete(r.Payload.After.(record.StructuredData), "a.b") }},
		{name: "missing field", ref: ".Payload.After.nope"},
		{name: "missing parent", ref: ".Payload.After.nope.x",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["nope"] = map[string]any{} }},
		{name: "null parent", ref: ".Payload.After.nope.x",
			before: func(r *record.Record) { r.Payload.After.(record.StructuredData)["nope"] = nil },
			want:   func(r *record.Record) { r.Payload.After.(record.StructuredData)["nope"] = map[string]any{} }},
		{name: "field of nil payload", ref: ".Payload.After.x",
			before: func(r *record.Record) { r.Payload.After = nil },
			want:   func(r *record.Record) { r.Payload.After = record.StructuredData{} }},
		{name: "nested field of nil key", ref: ".Key.a.b",
			before: func(r *record.Record) { r.Key = nil },
			want:   func(r *record.Record) { r.Key = record.StructuredData{"a": map[string]any{}} }},
		{name: "field of raw key", ref: ".Key.id", wantErr: []string{".Key holds raw data"}},
		{name: "field inside a number", ref: ".Payload.After.age.x", wantErr: []string{".Payload.After.age is a number"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := ParseReference(tt.ref)
			wantErr(t, err)
			got, want := testRecord(), testRecord()
			if tt.before != nil {
				tt.before(&got)
				tt.before(&want)
			}
			err = ref.Delete(&got)
			wantErr(t, err, tt.wantErr...)
			if tt.want != nil {
				tt.want(&want)
			}
			sameRecord(t, &got, &want)
		})
	}
}

func TestZeroReference(t *testing.T) {
	var ref Reference
	rec := testRecord()
	if _, err := ref.Get(&rec); err == nil {
		t.Error("Get on a zero Reference: no error")
	}
	if err := ref.Set(&rec, "x"); err == nil {
		t.Error("Set on a zero Reference: no error")
	}
	if err := ref.Delete(&rec); err == nil {
		t.Error("Delete on a zero Reference: no error")
	}
}
