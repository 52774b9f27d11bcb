package processor

import (
	"context"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// BenchmarkStandaloneProcess is one record through the test processor's
// module: conversion to protobuf, the command, the module's work, and back.
func BenchmarkStandaloneProcess(b *testing.B) {
	s, _ := testStandalone(b)
	p, err := NewRegistry().WithStandalone(s).New("test.upper", Config{PipelineID: "bench", ProcessorID: "up"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.(Closer).Close(context.Background())
	rec := upperRecord("1", "alice")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec.Payload.After.(record.StructuredData)["name"] = "alice"
		if err := p.Process(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}
