package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	opencdcv1 "github.com/conduitio/conduit-commons/proto/opencdc/v1"
	"github.com/conduitio/conduit-processor-sdk/pprocutils"
	processorv1 "github.com/conduitio/conduit-processor-sdk/proto/processor/v1"
	"github.com/tetratelabs/wazero/sys"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// wasmProcessor is one processor of a pipeline run that runs a standalone
// (WASM) processor. Its instance of the module is made on the first record
// and closed by Close, or when the module stops by itself: a module that
// traps, panics, exits or runs out of memory ends the run (see EndRun),
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
	out  *moduleOutput
	// req and protoRec are reused from record to record.
	req      processorv1.CommandRequest
	protoRec opencdcv1.Record
}

// Process sends rec to the module and takes its result back. The module's
// error without a code rejects the record, like any processor's (fatal); a
// code of 100-599 (pprocutils.NewError(503, ...) in the module) classifies
// it by the code table.
func (p *wasmProcessor) Process(ctx context.Context, rec *record.Record) error {
	_, err := p.ProcessMulti(ctx, rec, nil)
	return err
}

// ProcessMulti is Process for a module that may turn one record into
// several (sdk.MultiRecord), which the engine then positions, acknowledges
// and deduplicates one by one as it does split's (Splitter).
func (p *wasmProcessor) ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) ([]record.Record, error) {
	if p.inst == nil {
		if err := p.open(ctx); err != nil {
			return out, err
		}
	}
	p.protoRec.Reset()
	if err := record.ToOpenCDC(rec).ToProto(&p.protoRec); err != nil {
		return out, fmt.Errorf("%s: %w", p.name, err)
	}
	p.req.Request = &processorv1.CommandRequest_Process{Process: &processorv1.Process_Request{Records: []*opencdcv1.Record{&p.protoRec}}}
	resp, err := p.inst.call(ctx, &p.req)
	if err != nil {
		// callError stops the instance unless it answered: only then may
		// the request be used again (the module reads it while it runs).
		return out, p.callError(ctx, "process", err)
	}
	p.release()
	pr := resp.GetProcess()
	if pr == nil {
		p.closeInstance(ctx)
		return out, EndRun(fmt.Errorf("%s answered a record with %T", p.name, resp.Response))
	}
	if len(pr.Records) != 1 {
		return out, fmt.Errorf("%s returned %d results for one record", p.name, len(pr.Records))
	}
	switch r := pr.Records[0].Record.(type) {
	case *processorv1.Process_ProcessedRecord_SingleRecord:
		var got opencdc.Record
		if err := got.FromProto(r.SingleRecord); err != nil {
			return out, fmt.Errorf("%s returned a record that cannot be read: %w", p.name, err)
		}
		record.FromOpenCDC(&got, rec)
		return out, nil
	case *processorv1.Process_ProcessedRecord_FilterRecord:
		return out, ErrFiltered
	case *processorv1.Process_ProcessedRecord_ErrorRecord:
		e := r.ErrorRecord.GetError()
		if e == nil {
			return out, fmt.Errorf("%s rejected the record without an error", p.name)
		}
		if e.Code >= 100 && e.Code <= 599 {
			return out, cerrors.WithCode(errors.New(e.Message), int(e.Code))
		}
		return out, errors.New(e.Message)
	case *processorv1.Process_ProcessedRecord_MultiRecord:
		recs := r.MultiRecord.GetRecords()
		switch len(recs) {
		case 0:
			return out, ErrFiltered
		case 1:
			var got opencdc.Record
			if err := got.FromProto(recs[0]); err != nil {
				return out, fmt.Errorf("%s returned a record that cannot be read: %w", p.name, err)
			}
			record.FromOpenCDC(&got, rec)
			return out, nil
		}
		for i, pr := range recs {
			var got opencdc.Record
			if err := got.FromProto(pr); err != nil {
				return out, fmt.Errorf("%s returned a record (%d of %d) that cannot be read: %w", p.name, i+1, len(recs), err)
			}
			var derived record.Record
			record.FromOpenCDC(&got, &derived)
			derived.Position = append(record.Position(nil), rec.Position...)
			out = append(out, derived)
		}
		return out, nil
	default:
		return out, fmt.Errorf("%s returned an unknown result %T", p.name, pr.Records[0].Record)
	}
}

// release drops what the request holds of the engine's record (the
// conversion shares its maps and bytes), once the module has answered.
func (p *wasmProcessor) release() {
	p.req.Request = nil
	p.protoRec.Reset()
}

// callError is the error of a command the module did not answer.
func (p *wasmProcessor) callError(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, errModuleStopped):
		return p.stopped()
	case ctx.Err() != nil:
		// The command may still be inside the module: the instance
		// cannot be used again.
		p.killInstance()
		return fmt.Errorf("%s: %s: %w", p.name, op, err)
	}
	var perr *pprocutils.Error
	if errors.As(err, &perr) && op == "process" {
		p.release()
		// The SDK answers with an error when it fails before the
		// processor runs (a record it cannot read).
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.closeInstance(ctx)
	return EndRun(fmt.Errorf("%s: %s: %w", p.name, op, err))
}

// open makes an instance and configures and opens it. Its failures end the
// run: the module could not start, or refused its settings.
func (p *wasmProcessor) open(ctx context.Context) error {
	p.out = newModuleOutput(p.log)
	inst, err := p.s.rt.start(p.entry.compiled, p.s.newID(p.base), p.s.cfg.MemoryLimit, p.out)
	if err != nil {
		return EndRun(fmt.Errorf("%s: start %s: %w", p.name, p.entry.path, err))
	}
	p.inst = inst
	if _, err := inst.call(ctx, &processorv1.CommandRequest{Request: &processorv1.CommandRequest_Configure{
		Configure: &processorv1.Configure_Request{Parameters: p.settings}}}); err != nil {
		return p.callError(ctx, "configure", err)
	}
	if _, err := inst.call(ctx, &processorv1.CommandRequest{Request: &processorv1.CommandRequest_Open{
		Open: &processorv1.Open_Request{}}}); err != nil {
		return p.callError(ctx, "open", err)
	}
	return nil
}

// stopped is the error of a module that stopped by itself: it says why,
// from the runtime's error and what the module printed last.
func (p *wasmProcessor) stopped() error {
	inst, out := p.inst, p.out
	p.inst = nil
	inst.kill()
	out.flush()
	out.trace()
	return EndRun(fmt.Errorf("%s (%s) stopped: %s", p.name, filepath.Base(p.entry.path),
		stopReason(inst, out, p.s.cfg.MemoryLimit)))
}

// stopReason says why a module stopped, in one line.
func stopReason(inst *wasmInstance, out *moduleOutput, limit uint64) string {
	var parts []string
	if inst.outOfMemory.Load() {
		parts = append(parts, "ran out of memory (processors.memory-limit is "+limitText(limit)+")")
	}
	if s := out.summary(); s != "" {
		parts = append(parts, s)
	}
	var exit *sys.ExitError
	switch err := inst.exitErr; {
	case errors.As(err, &exit):
		parts = append(parts, fmt.Sprintf("the module exited with status %d", exit.ExitCode()))
	case err != nil:
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if strings.HasPrefix(msg, "wasm error: ") {
			msg = "WebAssembly trap: " + strings.TrimPrefix(msg, "wasm error: ")
		}
		parts = append(parts, msg)
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
	inst.close(ctx)
	p.out.flush()
	return nil
}

// closeInstance gives the instance up gracefully.
func (p *wasmProcessor) closeInstance(ctx context.Context) { _ = p.Close(ctx) }

// killInstance gives the instance up at once.
func (p *wasmProcessor) killInstance() {
	if p.inst != nil {
		p.inst.kill()
		p.inst = nil
		p.out.flush()
	}
}

// maxModuleTail is how much of what a module printed last is kept, and
// maxModuleLine the longest line.
const (
	maxModuleTail = 4 << 10
	maxModuleLine = 4 << 10
)

// maxSummary bounds the module's line quoted in an error.
const maxSummary = 300

// moduleOutput is the standard output and error of one instance. Lines of
// the SDK's logger (zerolog JSON) go to log at their level, other lines as
// warnings; the last lines are kept for the error that says why the module
// stopped. The module writes from its own goroutine; the instance's owner
// reads.
type moduleOutput struct {
	log *zap.Logger

	mu sync.Mutex
	// line holds what was written since the last newline.
	line []byte
	// tail holds the last lines, up to maxModuleTail bytes.
	tail []string
	size int
	// cause is the first line of a Go panic or fatal error printed; stack
	// holds the beginning of the stack trace that follows, and
	// stackDropped counts the lines of it left out.
	cause        string
	stack        strings.Builder
	stackDropped int
	// lastError is the last message logged at error level (the SDK logs a
	// panic it recovered so).
	lastError string
}

func newModuleOutput(log *zap.Logger) *moduleOutput { return &moduleOutput{log: log} }

func (o *moduleOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			o.line = append(o.line, b...)
			if len(o.line) >= maxModuleLine {
				o.endLine()
			}
			break
		}
		o.line = append(o.line, b[:i]...)
		o.endLine()
		b = b[i+1:]
	}
	return n, nil
}

// endLine takes the line written so far.
func (o *moduleOutput) endLine() {
	ln := string(o.line)
	o.line = o.line[:0]
	if strings.TrimSpace(ln) == "" {
		return
	}
	if o.logged(ln) {
		return
	}
	if o.cause != "" {
		// After a panic's first line comes its stack trace, a line per
		// frame: its beginning is logged as one entry when the module
		// has stopped (trace).
		if o.stack.Len() < maxModuleTail {
			o.stack.WriteString(ln)
			o.stack.WriteByte('\n')
		} else {
			o.stackDropped++
		}
		return
	}
	o.log.Warn("standalone processor printed: " + ln)
	for _, mark := range []string{"panic: ", "fatal error: "} {
		if i := strings.Index(ln, mark); i >= 0 {
			o.cause = truncate(ln[i:], maxSummary)
		}
	}
	o.tail = append(o.tail, ln)
	o.size += len(ln)
	for o.size > maxModuleTail && len(o.tail) > 1 {
		o.size -= len(o.tail[0])
		o.tail = o.tail[1:]
	}
}

// trace logs, as one entry, the beginning of the stack trace the module
// printed after a panic or fatal error.
func (o *moduleOutput) trace() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stack.Len() == 0 {
		return
	}
	o.log.Warn("standalone processor stack trace", zap.String("cause", o.cause),
		zap.String("trace", o.stack.String()), zap.Int("lines_left_out", o.stackDropped))
	o.stack.Reset()
}

// logged takes a line of the SDK's logger, reporting whether it was one.
func (o *moduleOutput) logged(ln string) bool {
	if !strings.HasPrefix(ln, "{") {
		return false
	}
	var ev map[string]any
	if json.Unmarshal([]byte(ln), &ev) != nil {
		return false
	}
	level, _ := ev["level"].(string)
	msg, _ := ev["message"].(string)
	delete(ev, "level")
	delete(ev, "message")
	delete(ev, "time")
	lvl := zapcore.InfoLevel
	switch level {
	case "trace", "debug":
		lvl = zapcore.DebugLevel
	case "warn":
		lvl = zapcore.WarnLevel
	case "error", "fatal", "panic":
		lvl = zapcore.ErrorLevel
		o.lastError = msg
		if e, ok := ev["error"].(string); ok && e != "" {
			o.lastError += ": " + e
		}
	}
	fields := make([]zap.Field, 0, len(ev))
	for k, v := range ev {
		fields = append(fields, zap.Any(k, v))
	}
	o.log.Log(lvl, "standalone processor: "+msg, fields...)
	return true
}

// flush takes what is left of an unfinished line.
func (o *moduleOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.line) > 0 {
		o.endLine()
	}
}

// summary is the line of the module's last output that says why it
// stopped: a Go panic or fatal error, else the last error it logged, else
// its last line.
func (o *moduleOutput) summary() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.cause != "":
		return o.cause
	case o.lastError != "":
		return truncate(o.lastError, maxSummary)
	case len(o.tail) > 0:
		return truncate(o.tail[len(o.tail)-1], maxSummary)
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Compile-time check of what the engine finds by type assertion.
var _ Closer = (*wasmProcessor)(nil)
