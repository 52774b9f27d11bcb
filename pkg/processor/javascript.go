package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/require"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

// JavaScriptLimits bound what a custom.javascript script may take. They
// are the operator's (conduit.yml), not the pipeline's: a pipeline file,
// which the API may also write, cannot raise them.
type JavaScriptLimits struct {
	// Timeout bounds one call of the script (its top level when the
	// processor is built, process() for each record); 0 is
	// DefaultJavaScriptTimeout.
	Timeout time.Duration
	// MemoryLimit bounds how much the process's live heap may grow while
	// one call runs (see jsWatch for how it is measured); 0 is
	// DefaultJavaScriptMemoryLimit.
	MemoryLimit uint64
	// RequirePath is the directory require() reads modules from; empty
	// refuses every require.
	RequirePath string

	// tick is how often a call that outlived grace is checked; grace is
	// how long a call runs before it is watched at all (most calls end
	// well within it, and cost no more than a timer). Zero: the defaults.
	tick, grace time.Duration
}

// Defaults of JavaScriptLimits, and of processors.javascript.timeout and
// processors.javascript.memory-limit.
const (
	DefaultJavaScriptTimeout     = 30 * time.Second
	DefaultJavaScriptMemoryLimit = 256 << 20
)

func (l JavaScriptLimits) withDefaults() JavaScriptLimits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultJavaScriptTimeout
	}
	if l.MemoryLimit == 0 {
		l.MemoryLimit = DefaultJavaScriptMemoryLimit
	}
	if l.tick <= 0 {
		l.tick = 5 * time.Millisecond
	}
	if l.grace <= 0 {
		l.grace = 10 * time.Millisecond
	}
	l.grace = min(l.grace, l.Timeout)
	return l
}

// jsEntrypoint is the function a script defines, called once per record.
const jsEntrypoint = "process"

// javaScript is custom.javascript: it runs a user's script, as Conduit's
// processor of that name does, on a goja runtime of its own. Unlike
// Conduit's, each call is bounded (JavaScriptLimits) and interrupted when
// the run's context ends, so a script that loops or allocates without end
// costs its record, not the process; require() reads only from the
// directory the operator named.
//
// The engine calls it from one goroutine, so it keeps one runtime (the
// script's globals live on from record to record, as under Conduit, where
// they live on in a pooled runtime). A call that was interrupted leaves
// its runtime in an unknown state: it is dropped, and the next record
// gets a fresh one.
type javaScript struct {
	prog    *goja.Program
	modules *require.Registry
	limits  JavaScriptLimits
	// logger is what scripts see as `logger` (the zerolog API of
	// Conduit's processor); its output is discarded, as it was when this
	// processor was Conduit's own.
	logger log.CtxLogger
	// scriptKey is the setting the script came from, for its errors.
	scriptKey string

	vm *jsVM
}

// jsVM is a runtime with the script loaded and its process function.
type jsVM struct {
	rt      *goja.Runtime
	process goja.Callable
}

func newJavaScript(limits JavaScriptLimits) func(Config) (Processor, error) {
	limits = limits.withDefaults()
	return func(cfg Config) (Processor, error) {
		s := plugin.NewSettings(cfg.Settings)
		script, hasScript := s.Raw("script")
		path, hasPath := s.Raw("script.path")
		sdkSchemaSettings(s)
		if err := s.Done(); err != nil {
			return nil, err
		}
		p := &javaScript{limits: limits, logger: log.Nop(), scriptKey: "script"}
		switch {
		case hasScript && hasPath:
			return nil, &SettingError{Setting: "script.path", Err: errors.New("only one of script and script.path may be set")}
		case hasPath:
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, &SettingError{Setting: "script.path", Err: fmt.Errorf("cannot read the script: %w", err)}
			}
			script, p.scriptKey = string(b), "script.path"
		case !hasScript:
			return nil, &SettingError{Setting: "script", Err: errors.New("one of script and script.path is required (the JavaScript code, with a function process(record))")}
		}
		prog, err := goja.Compile("", script, false)
		if err != nil {
			return nil, &SettingError{Setting: p.scriptKey, Err: err}
		}
		p.prog = prog
		p.modules = require.NewRegistry(require.WithLoader(moduleLoader(limits.RequirePath)))
		// The script's top level runs once here, as Conduit's Open runs
		// it: a script without process(), or whose top level throws, is a
		// bad setting. It is bounded like a call.
		vm, err := p.newVM(context.Background())
		if err != nil {
			return nil, &SettingError{Setting: p.scriptKey, Err: err}
		}
		p.vm = vm
		return p, nil
	}
}

// newVM makes a runtime with the helpers Conduit's processor gives scripts
// and runs the script's top level on it.
func (p *javaScript) newVM(ctx context.Context) (*jsVM, error) {
	rt := goja.New()
	p.modules.Enable(rt)
	for name, v := range map[string]any{
		"logger":         &p.logger,
		"Record":         jsNewRecord(rt),
		"RawData":        jsNewRawData(rt),
		"StructuredData": jsNewStructuredData(rt),
	} {
		if err := rt.Set(name, v); err != nil {
			return nil, fmt.Errorf("cannot define %s: %w", name, err)
		}
	}
	if err := p.guard(ctx, rt, func() error {
		_, err := rt.RunProgram(p.prog)
		return err
	}); err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(rt.Get(jsEntrypoint))
	if !ok {
		return nil, fmt.Errorf("the script defines no function %s(record)", jsEntrypoint)
	}
	return &jsVM{rt: rt, process: fn}, nil
}

// Process calls the script's process() with rec and takes its result back:
// a record replaces rec, null (or nothing) filters it out, an exception
// rejects it with the exception as the error.
func (p *javaScript) Process(ctx context.Context, rec *record.Record) error {
	if p.vm == nil {
		vm, err := p.newVM(ctx)
		if err != nil {
			return fmt.Errorf("custom.javascript: %w", err)
		}
		p.vm = vm
	}
	vm := p.vm
	arg := vm.rt.ToValue(toJSRecord(record.ToOpenCDC(rec)))
	var out goja.Value
	err := p.guard(ctx, vm.rt, func() error {
		var err error
		out, err = vm.process(goja.Undefined(), arg)
		return err
	})
	var stopped *jsStopped
	if errors.As(err, &stopped) {
		// The runtime was stopped at an unknown point, or its heap is
		// what exceeded the budget: the next record gets a fresh one.
		p.vm = nil
		// Hand what the script held back now, rather than at the
		// scavenger's pace: the process may be close to its limit. A
		// stopped script is rare enough for the collection this costs.
		freeOSMemory()
		return err
	}
	if err != nil {
		return err
	}
	return fromJSRecord(out, rec)
}

// guard runs f, a call into rt, under the limits: it is interrupted when
// it runs longer than the timeout, when the heap grows by more than the
// memory limit, or when ctx ends. Such a call returns a *jsStopped. A Go
// panic inside the call (a helper given something it cannot take) is
// returned as an error, also a *jsStopped since the runtime's state is
// then unknown.
func (p *javaScript) guard(ctx context.Context, rt *goja.Runtime, f func() error) (err error) {
	w := startJSWatch(ctx, rt, p.limits)
	defer func() {
		if v := recover(); v != nil {
			err = &jsStopped{err: fmt.Errorf("custom.javascript panicked: %v", v)}
		}
		if stop := w.end(); stop != nil {
			// Interrupted, even if the call managed to return (the
			// interrupt is then still pending on the runtime).
			err = stop
		}
	}()
	return f()
}

// toJSRecord is the record as the script sees it, shaped as Conduit's
// processor shapes it: the same field names and Go types, so that what a
// script reads and writes behaves as under Conduit. Structured data and
// metadata are the record's own maps (the script changes them in place);
// raw data is a pointer to a copy of the slice header, which the script may
// replace.
func toJSRecord(r opencdc.Record) *jsRecord {
	return &jsRecord{
		Position:  r.Position,
		Operation: r.Operation.String(),
		Metadata:  r.Metadata,
		Key:       toJSData(r.Key),
		Payload:   jsChange{Before: toJSData(r.Payload.Before), After: toJSData(r.Payload.After)},
	}
}

// jsRecord is a record for the script (see toJSRecord).
type jsRecord struct {
	Position  []byte
	Operation string
	Metadata  map[string]string
	Key       any
	Payload   jsChange
}

// jsChange is a record's payload for the script.
type jsChange struct {
	Before any
	After  any
}

func toJSData(d opencdc.Data) any {
	switch v := d.(type) {
	case opencdc.RawData:
		return &v
	case opencdc.StructuredData:
		return map[string]any(v)
	}
	return nil
}

func fromJSData(v any) opencdc.Data {
	switch d := v.(type) {
	case *opencdc.RawData:
		return *d
	case map[string]any:
		return opencdc.StructuredData(d)
	}
	return nil
}

// fromJSRecord stores what process() returned in rec.
func fromJSRecord(v goja.Value, rec *record.Record) error {
	exported := v.Export()
	if exported == nil {
		return ErrFiltered
	}
	jr, ok := exported.(*jsRecord)
	if !ok {
		return fmt.Errorf("custom.javascript: process() returned %s; it must return a record (the one it was given, or new Record()), or null to drop it", v)
	}
	var op opencdc.Operation
	if err := op.UnmarshalText([]byte(jr.Operation)); err != nil {
		return fmt.Errorf("custom.javascript: the record's Operation: %w", err)
	}
	out := opencdc.Record{
		Position:  jr.Position,
		Operation: op,
		Metadata:  jr.Metadata,
		Key:       fromJSData(jr.Key),
		Payload:   opencdc.Change{Before: fromJSData(jr.Payload.Before), After: fromJSData(jr.Payload.After)},
	}
	record.FromOpenCDC(&out, rec)
	return nil
}

// jsNewRecord is the script's Record(): a new, empty record whose metadata
// is already there to be written.
func jsNewRecord(rt *goja.Runtime) func(goja.ConstructorCall) *goja.Object {
	return func(goja.ConstructorCall) *goja.Object {
		return rt.ToValue(&jsRecord{Metadata: map[string]string{}}).ToObject(rt)
	}
}

// jsNewRawData is the script's RawData([text]).
func jsNewRawData(rt *goja.Runtime) func(goja.ConstructorCall) *goja.Object {
	return func(call goja.ConstructorCall) *goja.Object {
		var d opencdc.RawData
		if len(call.Arguments) > 0 {
			d = opencdc.RawData(call.Argument(0).String())
		}
		return rt.ToValue(&d).ToObject(rt)
	}
}

// jsNewStructuredData is the script's StructuredData(): an empty map.
func jsNewStructuredData(rt *goja.Runtime) func(goja.ConstructorCall) *goja.Object {
	return func(goja.ConstructorCall) *goja.Object {
		return rt.ToValue(map[string]any{}).ToObject(rt)
	}
}
