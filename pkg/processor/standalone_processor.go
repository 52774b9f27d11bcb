package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit-processor-sdk/pprocutils"
	conduitplugin "github.com/conduitio/conduit/pkg/plugin"
	"github.com/tetratelabs/wazero/sys"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// wasmProcessor is one processor of a pipeline run that runs a standalone
// (WASM) processor. Its instance of the module is made on the first record
// and closed by Close, or when the module stops by itself: a module that
// traps, panics, exits or runs out of memory ends the run (see EndsRun),
// and the next run - or the next record, when a dead-letter rule took the
// failed one - gets a fresh instance.
type wasmProcessor struct {
	s     *Standalone
	entry standaloneEntry
	// name is the processor's full name, standalone:<name>@<version>.
	name string
	// base names its instances: pipeline:processor.
	base     string
	settings config.Config
	log      *zap.Logger

	inst *wasmInstance
	in   [1]opencdc.Record
}

// wasmInstance is a running instance of a module.
type wasmInstance struct {
	id   string
	proc sdk.Processor
	out  *moduleOutput
}

// Process sends rec to the module and takes its result back. The module's
// error without a code rejects the record, like any processor's (fatal); a
// code of 100-599 (pprocutils.NewError(503, ...) in the module) classifies
// it by the code table.
func (p *wasmProcessor) Process(ctx context.Context, rec *record.Record) error {
	if p.inst == nil {
		if err := p.open(ctx); err != nil {
			return err
		}
	}
	p.in[0] = record.ToOpenCDC(rec)
	out := p.inst.proc.Process(ctx, p.in[:])
	p.in[0] = opencdc.Record{}
	if len(out) != 1 {
		return fmt.Errorf("%s returned %d results for one record", p.name, len(out))
	}
	switch r := out[0].(type) {
	case sdk.SingleRecord:
		record.FromOpenCDC((*opencdc.Record)(&r), rec)
		return nil
	case sdk.FilterRecord:
		return ErrFiltered
	case sdk.ErrorRecord:
		return p.recordError(ctx, r.Error)
	case sdk.MultiRecord:
		return fmt.Errorf("%s turned the record into %d records, which this runtime does not support yet", p.name, len(r))
	default:
		return fmt.Errorf("%s returned an unknown result %T", p.name, out[0])
	}
}

// recordError turns what the module (or Conduit's runtime around it) said
// about a record into the error Process returns.
func (p *wasmProcessor) recordError(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("%s rejected the record without an error", p.name)
	case errors.Is(err, conduitplugin.ErrPluginNotRunning):
		return p.stopped()
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The record is still inside the module, whose answer would come
		// when nobody waits for it: the instance cannot be used again.
		p.closeInstance(ctx)
		return fmt.Errorf("%s: %w", p.name, err)
	}
	var perr *pprocutils.Error
	if errors.As(err, &perr) && perr.ErrCode >= 100 && perr.ErrCode <= 599 {
		return cerrors.WithCode(errors.New(perr.Message), int(perr.ErrCode))
	}
	return err
}

// open makes an instance and configures and opens it. Its failures end the
// run: the module could not start, or refused its settings.
func (p *wasmProcessor) open(ctx context.Context) error {
	id := p.s.newID(p.base)
	out := p.s.watch(id, p.log)
	proc, err := p.s.reg.NewProcessor(p.s.instanceContext(ctx, out), fullName(p.entry), id)
	if err != nil {
		p.s.outputs.Delete(id)
		return EndRun(fmt.Errorf("%s: start %s: %w", p.name, p.entry.path, err))
	}
	p.inst = &wasmInstance{id: id, proc: proc, out: out}
	if err := proc.Configure(ctx, p.settings); err != nil {
		return p.failOpen(ctx, "configure", err)
	}
	if err := proc.Open(ctx); err != nil {
		return p.failOpen(ctx, "open", err)
	}
	return nil
}

func (p *wasmProcessor) failOpen(ctx context.Context, op string, err error) error {
	if errors.Is(err, conduitplugin.ErrPluginNotRunning) {
		return p.stopped()
	}
	p.closeInstance(ctx)
	return EndRun(fmt.Errorf("%s: %s: %w", p.name, op, err))
}

// stopped is the error of a module that stopped by itself: it says why,
// from the runtime's error and what the module printed last.
func (p *wasmProcessor) stopped() error {
	inst := p.inst
	p.inst = nil
	ctx, cancel := context.WithTimeout(context.Background(), standaloneCloseTimeout)
	defer cancel()
	runErr := inst.proc.Teardown(ctx)
	p.s.outputs.Delete(inst.id)
	inst.out.flush()
	return EndRun(fmt.Errorf("%s (%s) stopped: %s", p.name, filepath.Base(p.entry.path),
		stopReason(runErr, inst.out, p.s.cfg.MemoryLimit)))
}

// stopReason says why a module stopped, in one line.
func stopReason(runErr error, out *moduleOutput, limit uint64) string {
	var parts []string
	if out.outOfMemory.Load() {
		parts = append(parts, "ran out of memory (processors.memory-limit is "+limitText(limit)+")")
	}
	if s := out.summary(); s != "" {
		parts = append(parts, s)
	}
	var exit *sys.ExitError
	switch {
	case errors.As(runErr, &exit) && exit.ExitCode() != 0:
		parts = append(parts, fmt.Sprintf("the module exited with status %d", exit.ExitCode()))
	case runErr != nil && strings.Contains(runErr.Error(), "wasm error:"):
		msg := runErr.Error()
		msg = msg[strings.Index(msg, "wasm error:"):]
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		parts = append(parts, "WebAssembly trap: "+strings.TrimSpace(strings.TrimPrefix(msg, "wasm error:")))
	}
	if len(parts) == 0 {
		return "the module ended without saying why"
	}
	return strings.Join(parts, "; ")
}

// Close tears the instance down, if the processor made one. The engine
// calls it when the run ends.
func (p *wasmProcessor) Close(ctx context.Context) error {
	if p.inst == nil {
		return nil
	}
	inst := p.inst
	p.inst = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), standaloneCloseTimeout)
	defer cancel()
	err := inst.proc.Teardown(ctx)
	inst.out.flush()
	p.s.outputs.Delete(inst.id)
	if err != nil && !errors.Is(err, conduitplugin.ErrPluginNotRunning) {
		return fmt.Errorf("%s: teardown: %w", p.name, err)
	}
	return nil
}

// closeInstance gives the instance up; its teardown error says nothing
// the caller does not already report.
func (p *wasmProcessor) closeInstance(ctx context.Context) { _ = p.Close(ctx) }

// moduleLog receives the lines of Conduit's standalone runtime (zerolog
// JSON): what the modules print and log, and the runtime's own messages.
// A line of an instance goes to the instance's logger, and what a module
// prints is also kept for the error that says why it stopped.
type moduleLog struct{ s *Standalone }

// runtimeComponent is the component of the runtime's own lines about an
// instance; the lines of the module itself carry another.
const runtimeComponent = "standalone.wasmProcessor"

func (l *moduleLog) Write(p []byte) (int, error) {
	if l.s.muted.Load() {
		return len(p), nil
	}
	var ev map[string]any
	if err := json.Unmarshal(p, &ev); err != nil {
		l.s.log.Info("standalone processor runtime: " + strings.TrimSpace(string(p)))
		return len(p), nil
	}
	str := func(k string) string {
		v, _ := ev[k].(string)
		delete(ev, k)
		return v
	}
	level, msg, id, component := str("level"), str("message"), str("processor_id"), str("component")
	lg := l.s.log
	var out *moduleOutput
	if o, ok := l.s.outputs.Load(id); ok && id != "" {
		out = o.(*moduleOutput)
		lg = out.log
	}
	if component != runtimeComponent && id != "" {
		if out != nil {
			out.add(level, msg, ev)
			return len(p), nil
		}
	} else if lvl := zapLevel(level); lvl < zapcore.WarnLevel {
		// The runtime's own chatter (instances made and closed).
		return len(p), nil
	}
	fields := make([]zap.Field, 0, len(ev))
	for k, v := range ev {
		fields = append(fields, zap.Any(k, v))
	}
	lg.Log(zapLevel(level), "standalone processor runtime: "+msg, fields...)
	return len(p), nil
}

func zapLevel(s string) zapcore.Level {
	switch s {
	case "trace", "debug":
		return zapcore.DebugLevel
	case "warn":
		return zapcore.WarnLevel
	case "error", "fatal", "panic":
		return zapcore.ErrorLevel
	}
	return zapcore.InfoLevel
}

// maxModuleTail is how much of what a module printed last is kept, and
// maxModuleLine the longest line.
const (
	maxModuleTail = 4 << 10
	maxModuleLine = 1 << 10
)

// moduleOutput is what one instance printed and logged: its log lines go
// to log, and the last of them are kept.
type moduleOutput struct {
	log *zap.Logger
	// outOfMemory: the instance asked for more memory than its limit.
	outOfMemory atomic.Bool

	mu sync.Mutex
	// line holds what the module printed since its last newline (a Go
	// module prints a panic in many small writes).
	line strings.Builder
	// tail holds the last lines it printed, up to maxModuleTail bytes.
	tail []string
	size int
	// cause is the first line of a Go panic or fatal error it printed:
	// the stack trace that follows may be longer than the tail.
	cause string
	// lastError is the last message it logged at error level (the SDK
	// logs a recovered panic so).
	lastError string
}

// add takes a line of the module: a log event of its SDK (level set), or
// bytes it printed (no level).
func (o *moduleOutput) add(level, msg string, fields map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if level == "" {
		// What the module wrote to stdout or stderr, one write per call,
		// without the newline a write ended with: a Go module writes a
		// panic's newline on its own, which arrives empty. Text is joined
		// until then, or until the line is long.
		if msg == "" {
			o.endLine()
			return
		}
		o.line.WriteString(msg)
		if o.line.Len() >= maxModuleLine {
			o.endLine()
		}
		return
	}
	if zapLevel(level) >= zapcore.ErrorLevel {
		o.lastError = msg
	}
	zf := make([]zap.Field, 0, len(fields))
	for k, v := range fields {
		zf = append(zf, zap.Any(k, v))
	}
	o.log.Log(zapLevel(level), msg, zf...)
}

// endLine logs and keeps the line printed so far.
func (o *moduleOutput) endLine() {
	text := o.line.String()
	o.line.Reset()
	for _, ln := range strings.Split(text, "\n") {
		if strings.TrimSpace(ln) == "" {
			continue
		}
		o.log.Warn("standalone processor printed: " + ln)
		if o.cause == "" {
			for _, mark := range []string{"panic: ", "fatal error: "} {
				if i := strings.Index(ln, mark); i >= 0 {
					o.cause = truncate(ln[i:], maxSummary)
				}
			}
		}
		o.tail = append(o.tail, ln)
		o.size += len(ln)
		for o.size > maxModuleTail && len(o.tail) > 1 {
			o.size -= len(o.tail[0])
			o.tail = o.tail[1:]
		}
	}
}

// flush logs and keeps what is left of an unfinished line.
func (o *moduleOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.line.Len() > 0 {
		o.endLine()
	}
}

// summary is the line of the module's last output that says why it
// stopped: a Go panic or fatal error, else the last error it logged.
func (o *moduleOutput) summary() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cause != "" {
		return o.cause
	}
	if o.lastError != "" {
		return o.lastError
	}
	if len(o.tail) > 0 {
		return truncate(o.tail[len(o.tail)-1], maxSummary)
	}
	return ""
}

// maxSummary bounds the module's line quoted in an error.
const maxSummary = 300

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Compile-time checks of what the engine finds by type assertion.
var _ Closer = (*wasmProcessor)(nil)
