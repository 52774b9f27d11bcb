package processor

import (
	"context"
	"testing"
)

// Templates written for Conduit use Sprig's functions; each runs here in
// the three places templates are: a field.set value, a condition and an
// error message.
func TestTemplatesHaveSprigFunctions(t *testing.T) {
	tests := []struct {
		name string
		// value is rendered by field.set into .Metadata.out.
		value string
		want  string
	}{
		{name: "upper", value: "{{ upper .Payload.After.name }}", want: "BOB"},
		{name: "pipe into upper", value: "{{ .Metadata.table | upper }}", want: "USERS"},
		{name: "hasPrefix", value: `{{ hasPrefix "us" .Metadata.table }}`, want: "true"},
		{name: "default for a missing value", value: `{{ .Metadata.nope | default "none" }}`, want: "none"},
		{name: "replace and trim", value: `{{ trim "  a-b " | replace "-" "_" }}`, want: "a_b"},
		{name: "toJson", value: `{{ toJson .Payload.After.address }}`, want: `{"city":"Oslo","zip":"0150"}`},
		{name: "b64enc of the key", value: `{{ b64enc (toString .Key) }}`, want: "NDI="},
		{name: "a missing metadata key through a function is empty", value: "[{{ .Metadata.nope | trim }}]", want: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newFieldSet(Config{Settings: map[string]string{"field": ".Metadata.out", "value": tt.value}})
			if err != nil {
				t.Fatal(err)
			}
			rec := testRecord()
			if err := p.Process(context.Background(), &rec); err != nil {
				t.Fatal(err)
			}
			if got := rec.Metadata["out"]; got != tt.want {
				t.Errorf("rendered %q, want %q", got, tt.want)
			}
		})
	}

	conditions := []struct {
		condition string
		runs      bool
	}{
		{`{{ hasPrefix "us" .Metadata.table }}`, true},
		{`{{ hasSuffix "xyz" .Metadata.table }}`, false},
		{`{{ eq (upper .Payload.After.name) "BOB" }}`, true},
		{`{{ contains "ob" .Payload.After.name }}`, true},
		{`{{ empty .Metadata.nope }}`, true},
	}
	reg := NewRegistry(Builtin()...)
	for _, c := range conditions {
		t.Run("condition "+c.condition, func(t *testing.T) {
			p, err := reg.New("field.set", Config{
				Settings:  map[string]string{"field": ".Metadata.ran", "value": "yes"},
				Condition: c.condition,
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := testRecord()
			if err := p.Process(context.Background(), &rec); err != nil {
				t.Fatal(err)
			}
			if _, ran := rec.Metadata["ran"]; ran != c.runs {
				t.Errorf("processor ran = %v, want %v", ran, c.runs)
			}
		})
	}

	t.Run("error message", func(t *testing.T) {
		p, err := newError(Config{Settings: map[string]string{"message": "bad {{ .Metadata.table | upper | quote }}"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := testRecord()
		if err := p.Process(context.Background(), &rec); err == nil || err.Error() != `bad "USERS"` {
			t.Errorf("Process = %v, want bad \"USERS\"", err)
		}
	})
}
