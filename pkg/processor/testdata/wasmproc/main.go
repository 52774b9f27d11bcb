//go:build wasm

// Command wasmproc is a standalone (WASM) processor built with Conduit's
// processor SDK, for the tests of standalone processors. It upper-cases a
// field of the payload and, for the values below, misbehaves on purpose:
//
//	fail     rejects the record with a plain error
//	fail503  rejects it with error code 503
//	drop     filters it out
//	panic    panics
//	exit     exits the module with status 3
//	trap     reads outside its linear memory (a WebAssembly trap)
//	oom      allocates until it runs out of memory
//	loop     never returns
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit-processor-sdk/pprocutils"
)

func main() { sdk.Run(&upper{}) }

type upper struct {
	sdk.UnimplementedProcessor
	field  string
	prefix string
}

func (p *upper) Specification() (sdk.Specification, error) {
	return sdk.Specification{
		Name:        "test.upper",
		Summary:     "Upper-cases a payload field.",
		Version:     "v0.1.0",
		Author:      "conduit tests",
		Description: "Upper-cases a payload field, and misbehaves on request.",
		Parameters: config.Parameters{
			"field":  {Default: "name", Type: config.ParameterTypeString, Description: "the payload field"},
			"prefix": {Type: config.ParameterTypeString, Description: "text put before the value"},
		},
	}, nil
}

func (p *upper) Configure(ctx context.Context, c config.Config) error {
	spec, _ := p.Specification()
	var cfg struct {
		Field  string `json:"field"`
		Prefix string `json:"prefix"`
	}
	if err := sdk.ParseConfig(ctx, c, &cfg, spec.Parameters); err != nil {
		return err
	}
	p.field, p.prefix = cfg.Field, cfg.Prefix
	return nil
}

func (p *upper) Process(_ context.Context, records []opencdc.Record) []sdk.ProcessedRecord {
	out := make([]sdk.ProcessedRecord, 0, len(records))
	for _, rec := range records {
		out = append(out, p.one(rec))
	}
	return out
}

// hoard keeps what oom allocates reachable; spin is what loop writes.
var (
	hoard [][]byte
	spin  int
)

func (p *upper) one(rec opencdc.Record) sdk.ProcessedRecord {
	data, ok := rec.Payload.After.(opencdc.StructuredData)
	if !ok {
		return sdk.ErrorRecord{Error: errors.New("payload is not structured data")}
	}
	v := fmt.Sprint(data[p.field])
	switch v {
	case "fail":
		return sdk.ErrorRecord{Error: fmt.Errorf("record %s is refused", rec.Key.Bytes())}
	case "fail503":
		return sdk.ErrorRecord{Error: pprocutils.NewError(503, "backend unavailable")}
	case "drop":
		return sdk.FilterRecord{}
	case "twice":
		// Two records of one, each with its own copy of the payload.
		var multi sdk.MultiRecord
		for i := range 2 {
			c := rec.Clone()
			c.Payload.After.(opencdc.StructuredData)[p.field] = fmt.Sprintf("%sTWICE-%d", p.prefix, i)
			multi = append(multi, c)
		}
		return multi
	case "panic":
		panic("boom on record " + string(rec.Key.Bytes()))
	case "exit":
		os.Exit(3)
	case "trap":
		// Far beyond any memory the module has: the runtime traps.
		p := (*uint64)(unsafe.Pointer(uintptr(0xfffffff0)))
		return sdk.SingleRecord(opencdc.Record{Key: opencdc.RawData(fmt.Sprint(*p))})
	case "loop":
		for n := 0; ; n++ {
			spin = n
		}
	case "oom":
		for {
			hoard = append(hoard, make([]byte, 16<<20))
		}
	}
	data[p.field] = p.prefix + strings.ToUpper(v)
	return sdk.SingleRecord(rec)
}
