package processor

import (
	"context"
	"errors"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// TestSettingErrors checks that every bad setting is a *SettingError naming
// the setting, with a message that says what to do.
func TestSettingErrors(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	tests := []struct {
		name     string
		plugin   string
		settings map[string]string
		setting  string   // the setting the error names; "" = no error
		want     []string // substrings of the message
	}{
		// field.set
		{name: "set ok", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "k"}},
		{name: "set missing field", plugin: "field.set", settings: map[string]string{"value": "x"},
			setting: "field", want: []string{"is required", ".Payload.After.name"}},
		{name: "set blank field", plugin: "field.set", settings: map[string]string{"field": " ", "value": "x"},
			setting: "field", want: []string{"is required"}},
		{name: "set missing value", plugin: "field.set", settings: map[string]string{"field": ".Key"},
			setting: "value", want: []string{"is required", "Go template"}},
		{name: "set bad reference", plugin: "field.set", settings: map[string]string{"field": ".payload.after.x", "value": "x"},
			setting: "field", want: []string{`invalid reference ".payload.after.x"`, "did you mean .Payload?"}},
		{name: "set position", plugin: "field.set", settings: map[string]string{"field": ".Position", "value": "x"},
			setting: "field", want: []string{"cannot set .Position"}},
		{name: "set whole metadata", plugin: "field.set", settings: map[string]string{"field": ".Metadata", "value": "x"},
			setting: "field", want: []string{"cannot set .Metadata to text", ".Metadata.key"}},
		{name: "set whole payload", plugin: "field.set", settings: map[string]string{"field": ".Payload", "value": "x"},
			setting: "field", want: []string{"cannot set .Payload to text"}},
		{name: "set bad template", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "{{ .Key "},
			setting: "value", want: []string{"invalid Go template", "template: value:1"}},
		{name: "set unknown function", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "{{ nope .Key }}"},
			setting: "value", want: []string{`function "nope" not defined`}},
		{name: "set constant bad operation", plugin: "field.set", settings: map[string]string{"field": ".Operation", "value": "upsert"},
			setting: "value", want: []string{"cannot set .Operation", `unknown operation "upsert"`}},
		{name: "set constant operation", plugin: "field.set", settings: map[string]string{"field": ".Operation", "value": "delete"}},
		{name: "set unknown setting", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "x", "Value2": "y"},
			setting: "Value2", want: []string{"unknown setting", "known settings: field, sdk.schema.*, value"}},
		{name: "set misspelled setting", plugin: "field.set", settings: map[string]string{"Field": ".Key", "value": "x"},
			setting: "field", want: []string{"is required"}},
		{name: "set case hint", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "x", "VALUE": "y"},
			setting: "VALUE", want: []string{`did you mean "value"?`}},

		// sdk.schema.*
		{name: "sdk schema accepted", plugin: "field.set", settings: map[string]string{"field": ".Key", "value": "x",
			"sdk.schema.decode.payload.enabled": "false", "sdk.schema.decode.key.enabled": "true",
			"sdk.schema.encode.payload.enabled": "false", "sdk.schema.encode.key.enabled": "false",
			"sdk.schema.encode.type": "avro", "sdk.schema.encode.payload.subject": "p", "sdk.schema.encode.key.subject": "k"}},
		{name: "sdk schema not a bool", plugin: "filter", settings: map[string]string{"sdk.schema.decode.payload.enabled": "nope"},
			setting: "sdk.schema.decode.payload.enabled", want: []string{`"nope" is not a boolean`}},
		{name: "sdk schema type", plugin: "filter", settings: map[string]string{"sdk.schema.encode.type": "protobuf"},
			setting: "sdk.schema.encode.type", want: []string{"the only one is avro"}},
		{name: "sdk schema unknown key", plugin: "error", settings: map[string]string{"sdk.schema.decode.everything": "true"},
			setting: "sdk.schema.decode.everything", want: []string{"unknown setting"}},
		{name: "other sdk key", plugin: "error", settings: map[string]string{"sdk.batch.size": "10"},
			setting: "sdk.batch.size", want: []string{"unknown setting"}},

		// field.exclude
		{name: "exclude ok", plugin: "field.exclude", settings: map[string]string{"fields": ".Metadata.a, .Payload.After[\"x,y\"],.Key"}},
		{name: "exclude missing fields", plugin: "field.exclude", settings: map[string]string{},
			setting: "fields", want: []string{"is required", "comma-separated"}},
		{name: "exclude position", plugin: "field.exclude", settings: map[string]string{"fields": ".Key,.Position"},
			setting: "fields", want: []string{"cannot exclude .Position"}},
		{name: "exclude operation", plugin: "field.exclude", settings: map[string]string{"fields": ".Operation"},
			setting: "fields", want: []string{"cannot exclude .Operation"}},
		{name: "exclude bad reference", plugin: "field.exclude", settings: map[string]string{"fields": ".Key,.Payload.After.a-b"},
			setting: "fields", want: []string{`invalid reference ".Payload.After.a-b"`}},
		{name: "exclude empty entry", plugin: "field.exclude", settings: map[string]string{"fields": ".Key,,.Metadata.a"},
			setting: "fields", want: []string{"entry 2", "is empty"}},
		{name: "exclude trailing comma", plugin: "field.exclude", settings: map[string]string{"fields": ".Key,"},
			setting: "fields", want: []string{"entry 2", "is empty"}},
		{name: "exclude unknown setting", plugin: "field.exclude", settings: map[string]string{"fields": ".Key", "field": ".Key"},
			setting: "field", want: []string{"unknown setting", "known settings: fields, sdk.schema.*"}},

		// filter
		{name: "filter ok", plugin: "filter", settings: nil},
		{name: "filter takes no settings", plugin: "filter", settings: map[string]string{"condition": "true"},
			setting: "condition", want: []string{"unknown setting", "this plugin has no settings"}},

		// error
		{name: "error ok", plugin: "error", settings: map[string]string{"message": "boom", "code": "503"}},
		{name: "error bad template", plugin: "error", settings: map[string]string{"message": "{{ if }}"},
			setting: "message", want: []string{"invalid Go template", "template: message:1"}},
		{name: "error code not a number", plugin: "error", settings: map[string]string{"code": "teapot"},
			setting: "code", want: []string{`"teapot" is not a whole number`}},
		{name: "error code too small", plugin: "error", settings: map[string]string{"code": "99"},
			setting: "code", want: []string{"between 100 and 599"}},
		{name: "error code too big", plugin: "error", settings: map[string]string{"code": "600"},
			setting: "code", want: []string{"between 100 and 599"}},
		{name: "error unknown setting", plugin: "error", settings: map[string]string{"msg": "x"},
			setting: "msg", want: []string{"known settings: code, message, sdk.schema.*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.New(tt.plugin, Config{Settings: tt.settings})
			if tt.setting == "" {
				wantErr(t, err)
				if p == nil {
					t.Fatal("no processor")
				}
				return
			}
			var se *SettingError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *SettingError", err)
			}
			if se.Setting != tt.setting {
				t.Errorf("SettingError.Setting = %q, want %q (%v)", se.Setting, tt.setting, err)
			}
			wantErr(t, err, tt.want...)
		})
	}
}

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name    string
		field   string
		value   string
		rec     func(*record.Record) // changes testRecord() before processing
		want    func(*record.Record) // the expected change
		wantErr []string
	}{
		{name: "constant into metadata", field: ".Metadata.source", value: "crm",
			want: func(r *record.Record) { r.Metadata["source"] = "crm" }},
		{name: "template from payload", field: ".Payload.After.full", value: "{{ .Payload.After.name }}-x",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["full"] = "bob-x" }},
		{name: "nested and quoted", field: `.Payload.After["a.b"]`, value: "{{ .Payload.After.address.city }}",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["a.b"] = "Oslo" }},
		{name: "numbers become text", field: ".Payload.After.age", value: "{{ .Payload.After.age }}",
			want: func(r *record.Record) { r.Payload.After.(record.StructuredData)["age"] = "30" }},
		{name: "metadata with dots via index", field: ".Metadata.read", value: `{{ index .Metadata "opencdc.readAt" }}`,
			want: func(r *record.Record) { r.Metadata["read"] = "1700000000" }},
		{name: "raw key as text", field: ".Metadata.key", value: "k={{ .Key }}",
			want: func(r *record.Record) { r.Metadata["key"] = "k=42" }},
		{name: "position and operation", field: ".Metadata.p", value: "{{ .Position }}/{{ .Operation }}",
			want: func(r *record.Record) { r.Metadata["p"] = "pos-1/update" }},
		{name: "missing values are empty", field: ".Metadata.m",
			value: "[{{ .Payload.After.nope }}|{{ .Metadata.nope }}|{{ .Payload.After.address.nope }}|{{ index .Payload.After \"nope\" }}]",
			want:  func(r *record.Record) { r.Metadata["m"] = "[|||]" }},
		{name: "missing value in a nested scope", field: ".Metadata.m",
			value: "{{ with .Payload.After.address }}[{{ .nope }}{{ .city }}]{{ end }}",
			want:  func(r *record.Record) { r.Metadata["m"] = "[Oslo]" }},
		{name: "absent payload reads as empty", field: ".Metadata.m", value: "[{{ .Payload.Before.name }}]",
			rec:  func(r *record.Record) { r.Payload.Before = nil },
			want: func(r *record.Record) { r.Metadata["m"] = "[]" }},
		{name: "variables and conditionals", field: ".Metadata.m",
			value: `{{ $n := .Payload.After.name }}{{ if eq $n "bob" }}B{{ else }}?{{ end }}{{ printf "%03d" .Payload.After.age }}`,
			want:  func(r *record.Record) { r.Metadata["m"] = "B030" }},
		{name: "key", field: ".Key", value: "{{ .Payload.After.name }}",
			want: func(r *record.Record) { r.Key = record.RawData("bob") }},
		{name: "whole after becomes raw", field: ".Payload.After", value: "x",
			want: func(r *record.Record) { r.Payload.After = record.RawData("x") }},
		{name: "operation from template", field: ".Operation", value: `{{ if .Payload.After.name }}delete{{ end }}`,
			want: func(r *record.Record) { r.Operation = record.OperationDelete }},
		{name: "invalid operation from template", field: ".Operation", value: `{{ .Payload.After.name }}`,
			wantErr: []string{"cannot set .Operation", `unknown operation "bob"`}},
		{name: "nil payload becomes structured", field: ".Payload.Before.id", value: "{{ .Key }}",
			rec:  func(r *record.Record) { r.Payload.Before = nil },
			want: func(r *record.Record) { r.Payload.Before = record.StructuredData{"id": "42"} }},
		{name: "field in raw data", field: ".Key.id", value: "1",
			wantErr: []string{"cannot use .Key.id: .Key holds raw data"}},
		{name: "render error names the setting", field: ".Metadata.x", value: "{{ .Payload.After.name.first }}",
			wantErr: []string{`setting "value": template: value:1:`, "first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newFieldSet(Config{Settings: map[string]string{"field": tt.field, "value": tt.value}})
			if err != nil {
				t.Fatal(err)
			}
			got, want := testRecord(), testRecord()
			if tt.rec != nil {
				tt.rec(&got)
				tt.rec(&want)
			}
			err = p.Process(context.Background(), &got)
			wantErr(t, err, tt.wantErr...)
			if tt.want != nil {
				tt.want(&want)
			}
			sameRecord(t, &got, &want)
		})
	}

	t.Run("the buffer is reused but results are not shared", func(t *testing.T) {
		p, err := newFieldSet(Config{Settings: map[string]string{"field": ".Metadata.n", "value": "{{ .Payload.After.name }}"}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := testRecord(), testRecord()
		b.Payload.After.(record.StructuredData)["name"] = "zed"
		for _, r := range []*record.Record{&a, &b} {
			if err := p.Process(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		if a.Metadata["n"] != "bob" || b.Metadata["n"] != "zed" {
			t.Errorf("got %q and %q, want bob and zed", a.Metadata["n"], b.Metadata["n"])
		}
	})
}

func TestFieldExclude(t *testing.T) {
	tests := []struct {
		name    string
		fields  string
		rec     func(*record.Record)
		want    func(*record.Record)
		wantErr []string
	}{
		{name: "metadata keys", fields: `.Metadata.table, .Metadata["opencdc.readAt"]`,
			want: func(r *record.Record) { r.Metadata = record.Metadata{} }},
		{name: "payload fields", fields: ".Payload.After.age,.Payload.Before.name",
			want: func(r *record.Record) {
				delete(r.Payload.After.(record.StructuredData), "age")
				delete(r.Payload.Before.(record.StructuredData), "name")
			}},
		{name: "nested and whole subtree", fields: ".Payload.After.address.zip, .Payload.After[\"a.b\"]",
			want: func(r *record.Record) {
				delete(r.Payload.After.(record.StructuredData)["address"].(map[string]any), "zip")
				delete(r.Payload.After.(record.StructuredData), "a.b")
			}},
		{name: "whole parts", fields: ".Key,.Payload.Before",
			want: func(r *record.Record) { r.Key, r.Payload.Before = nil, nil }},
		{name: "all metadata and payload", fields: ".Metadata,.Payload",
			want: func(r *record.Record) { r.Metadata, r.Payload = record.Metadata{}, record.Change{} }},
		{name: "missing fields are fine", fields: ".Metadata.nope,.Payload.After.nope.deeper,.Key.x",
			rec: func(r *record.Record) { r.Key = nil },
			// As in Conduit, the objects on the way are created.
			want: func(r *record.Record) {
				r.Key = record.StructuredData{}
				r.Payload.After.(record.StructuredData)["nope"] = map[string]any{}
			}},
		{name: "field in raw data", fields: ".Key.id", wantErr: []string{".Key holds raw data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newFieldExclude(Config{Settings: map[string]string{"fields": tt.fields}})
			if err != nil {
				t.Fatal(err)
			}
			got, want := testRecord(), testRecord()
			if tt.rec != nil {
				tt.rec(&got)
				tt.rec(&want)
			}
			err = p.Process(context.Background(), &got)
			wantErr(t, err, tt.wantErr...)
			if tt.want != nil {
				tt.want(&want)
			}
			sameRecord(t, &got, &want)
		})
	}
}

func TestFilter(t *testing.T) {
	p, err := newFilter(Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord()
	if err := p.Process(context.Background(), &rec); !errors.Is(err, ErrFiltered) {
		t.Errorf("Process = %v, want ErrFiltered", err)
	}
	want := testRecord()
	sameRecord(t, &rec, &want)
}

func TestErrorProcessor(t *testing.T) {
	tests := []struct {
		name      string
		settings  map[string]string
		wantMsg   string
		wantCode  int // 0: no *cerrors.Error in the chain
		wantClass cerrors.Class
	}{
		{name: "default message", wantMsg: "error processor triggered", wantClass: cerrors.ClassFatal},
		{name: "template message", settings: map[string]string{"message": "bad record {{ .Key }} from {{ .Metadata.table }}"},
			wantMsg: "bad record 42 from users", wantClass: cerrors.ClassFatal},
		{name: "transient code", settings: map[string]string{"code": "503", "message": "try later"},
			wantMsg: "try later", wantCode: 503, wantClass: cerrors.ClassTransient},
		{name: "fatal code", settings: map[string]string{"code": " 422 "},
			wantMsg: "error processor triggered", wantCode: 422, wantClass: cerrors.ClassFatal},
		{name: "empty rendered message", settings: map[string]string{"message": "{{ .Metadata.nope }}"},
			wantMsg: "error processor triggered", wantClass: cerrors.ClassFatal},
		{name: "blank code means none", settings: map[string]string{"code": ""},
			wantMsg: "error processor triggered", wantClass: cerrors.ClassFatal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newError(Config{Settings: tt.settings})
			if err != nil {
				t.Fatal(err)
			}
			rec := testRecord()
			err = p.Process(context.Background(), &rec)
			if err == nil || err.Error() != tt.wantMsg {
				t.Fatalf("Process = %v, want %q", err, tt.wantMsg)
			}
			var coded *cerrors.Error
			if got := errors.As(err, &coded); got != (tt.wantCode != 0) || (got && coded.Code != tt.wantCode) {
				t.Errorf("coded = %v (%v), want code %d", got, coded, tt.wantCode)
			}
			// The engine's rule: processor errors without a code are fatal.
			if c := cerrors.ClassifyProcessor(err); c.Class != tt.wantClass {
				t.Errorf("class = %v, want %v", c.Class, tt.wantClass)
			}
		})
	}

	t.Run("render error", func(t *testing.T) {
		p, err := newError(Config{Settings: map[string]string{"message": "{{ .Key.id }}"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := testRecord()
		wantErr(t, p.Process(context.Background(), &rec), `setting "message": template: message:1:`)
	})
}
