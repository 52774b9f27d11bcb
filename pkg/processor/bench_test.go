package processor

import (
	"context"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// BenchmarkFieldSet measures field.set on a structured record, the common
// case: a template reading one payload field, stored in another.
func BenchmarkFieldSet(b *testing.B) {
	benchmarks := []struct {
		name      string
		field     string
		value     string
		condition string
	}{
		{name: "constant", field: ".Payload.After.source", value: "crm"},
		{name: "template", field: ".Payload.After.full", value: "{{ .Payload.After.name }}-x"},
		{name: "nested template", field: ".Payload.After.address.label", value: "{{ .Payload.After.address.city }} {{ .Payload.After.address.zip }}"},
		{name: "template with condition", field: ".Payload.After.full", value: "{{ .Payload.After.name }}-x",
			condition: `{{ eq .Metadata.table "users" }}`},
	}
	reg := NewRegistry(Builtin()...)
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			p, err := reg.New("field.set", Config{
				Settings:  map[string]string{"field": bm.field, "value": bm.value},
				Condition: bm.condition,
			})
			if err != nil {
				b.Fatal(err)
			}
			rec := testRecord()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Process(ctx, &rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFieldExclude measures deleting two fields (put back each time).
func BenchmarkFieldExclude(b *testing.B) {
	p, err := newFieldExclude(Config{Settings: map[string]string{"fields": ".Metadata.table,.Payload.After.age"}})
	if err != nil {
		b.Fatal(err)
	}
	rec := testRecord()
	after := rec.Payload.After.(record.StructuredData)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rec.Metadata["table"] = "users"
		after["age"] = 30
		if err := p.Process(ctx, &rec); err != nil {
			b.Fatal(err)
		}
	}
}
