package processor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/conduitio/conduit-processor-sdk/pprocutils"
	processorv1 "github.com/conduitio/conduit-processor-sdk/proto/processor/v1"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"google.golang.org/protobuf/proto"
)

// The host side of Conduit's standalone processor protocol, the one
// modules built with Conduit's processor SDK speak: the module runs its
// main function (_start), which loops asking the host for the next command
// (the import conduit.command_request) and answering it
// (conduit.command_response), both as protobuf messages of the SDK's
// processor/v1 package written into and read from the module's memory. A
// command that does not fit the module's buffer is kept and its size
// returned, so that the module asks again with a larger buffer. When the
// host has no more commands, command_request returns the SDK's
// no-more-commands code and the module exits. conduit.create_schema and
// conduit.get_schema serve the SDK's schema service; there is no schema
// registry here, so they fail with the SDK's error codes.

// Environment a module of Conduit's processor SDK expects: the SDK refuses
// to run without the cookie, names its logger by the processor id, and
// logs at the level.
const (
	wasmCookieKey   = "CONDUIT_MAGIC_COOKIE"
	wasmCookieValue = "3stnegqd0x02axggy0vrc4izjeq2zik6g7somyb3ye4vy5iivvjm5s1edppl5oja"
	wasmIDKey       = "CONDUIT_PROCESSOR_ID"
	wasmLogLevelKey = "CONDUIT_LOG_LEVEL"
)

// errModuleStopped: the module is no longer running, so it cannot answer.
var errModuleStopped = errors.New("module stopped")

// wasmRuntime compiles and runs the modules. One per Standalone; it lives
// as long as the process.
type wasmRuntime struct {
	rt wazero.Runtime
}

// newWasmRuntime makes the runtime, with WASI and the host functions of
// Conduit's protocol. Compiled code is kept in cache when it is not nil,
// so that the next start of conduit loads a module without compiling it.
//
// testdata/wasmcompile compiles with the same configuration: keep them
// together.
func newWasmRuntime(ctx context.Context, cache wazero.CompilationCache) (*wasmRuntime, error) {
	// A cancelled instance stops even inside an endless loop.
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	if cache != nil {
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("WASI: %w", err)
	}
	_, err := rt.NewHostModuleBuilder("conduit").
		NewFunctionBuilder().WithFunc(hostCommandRequest).Export("command_request").
		NewFunctionBuilder().WithFunc(hostCommandResponse).Export("command_response").
		NewFunctionBuilder().WithFunc(hostCreateSchema).Export("create_schema").
		NewFunctionBuilder().WithFunc(hostGetSchema).Export("get_schema").
		Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("host module: %w", err)
	}
	return &wasmRuntime{rt: rt}, nil
}

// wasmInstance is a running instance of a module. One goroutine at a time
// calls it (call, close); the module runs on a goroutine of its own, which
// ends when the module does.
type wasmInstance struct {
	requests  chan *processorv1.CommandRequest
	responses chan *processorv1.CommandResponse
	// parked is a command that did not fit the module's buffer.
	parked []byte
	cancel context.CancelFunc
	closed bool
	// done is closed when the module has stopped; exitErr then says how
	// (nil when it exited with status 0).
	done    chan struct{}
	exitErr error
	// outOfMemory: the module asked for more memory than its limit.
	outOfMemory atomic.Bool
}

type instanceKey struct{}

// start instantiates compiled and runs its main function. The module's
// output goes to out; its memory is bounded by memoryLimit.
func (r *wasmRuntime) start(compiled wazero.CompiledModule, id string, memoryLimit uint64, out *moduleOutput) (*wasmInstance, error) {
	inst := &wasmInstance{
		requests:  make(chan *processorv1.CommandRequest),
		responses: make(chan *processorv1.CommandResponse, 1),
		done:      make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	inst.cancel = cancel
	ctx = context.WithValue(ctx, instanceKey{}, inst)
	ctx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(
		func(capacity, _ uint64) experimental.LinearMemory {
			return &boundedMemory{buf: make([]byte, 0, min(capacity, memoryLimit)), limit: memoryLimit, hit: &inst.outOfMemory}
		}))
	mod, err := r.rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().
		WithName(id).
		WithEnv(wasmCookieKey, wasmCookieValue).
		WithEnv(wasmIDKey, id).
		WithEnv(wasmLogLevelKey, "info").
		WithStdout(out).
		WithStderr(out).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		// _start is called below, on the module's goroutine.
		WithStartFunctions())
	if err != nil {
		cancel()
		return nil, err
	}
	start := mod.ExportedFunction("_start")
	if start == nil {
		cancel()
		_ = mod.Close(context.Background())
		return nil, errors.New("the module has no _start function (build it as a program: package main, GOOS=wasip1)")
	}
	go func() {
		defer close(inst.done)
		defer cancel()
		_, err := start.Call(ctx)
		_ = mod.Close(context.Background())
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			err = nil
		}
		inst.exitErr = err
	}()
	return inst, nil
}

// call sends req to the module and waits for its answer, until ctx ends. An
// error the module answers with is returned as a *pprocutils.Error; when
// the module stopped, the error wraps errModuleStopped. After an error
// other than the module's answer the instance cannot be used again: the
// caller closes it.
func (inst *wasmInstance) call(ctx context.Context, req *processorv1.CommandRequest) (*processorv1.CommandResponse, error) {
	select {
	case inst.requests <- req:
	case <-inst.done:
		return nil, errModuleStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case resp := <-inst.responses:
		if e, ok := resp.Response.(*processorv1.CommandResponse_Error); ok {
			return nil, pprocutils.NewError(e.Error.GetCode(), e.Error.GetMessage())
		}
		return resp, nil
	case <-inst.done:
		return nil, errModuleStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close asks the module to tear down and exit, and stops it when it does
// not within ctx. It returns once the module has stopped.
func (inst *wasmInstance) close(ctx context.Context) {
	if inst.closed {
		<-inst.done
		return
	}
	inst.closed = true
	_, _ = inst.call(ctx, &processorv1.CommandRequest{Request: &processorv1.CommandRequest_Teardown{Teardown: &processorv1.Teardown_Request{}}})
	// No more commands: the module exits.
	close(inst.requests)
	select {
	case <-inst.done:
	case <-ctx.Done():
		inst.cancel()
		<-inst.done
	}
}

// kill stops the module at once and waits until it has stopped.
func (inst *wasmInstance) kill() {
	inst.closed = true
	inst.cancel()
	<-inst.done
}

func instanceOf(ctx context.Context) *wasmInstance {
	inst, _ := ctx.Value(instanceKey{}).(*wasmInstance)
	return inst
}

// hostCommandRequest writes the next command into the module's buffer at
// ptr, of size bytes, and returns its size; or only its size, when it does
// not fit; or the SDK's no-more-commands code.
func hostCommandRequest(ctx context.Context, m api.Module, ptr, size uint32) uint32 {
	inst := instanceOf(ctx)
	if inst == nil {
		return pprocutils.ErrorCodeInternal
	}
	if inst.parked == nil {
		var req *processorv1.CommandRequest
		var ok bool
		select {
		case req, ok = <-inst.requests:
		case <-ctx.Done():
		}
		if !ok {
			return pprocutils.ErrorCodeNoMoreCommands
		}
		b, err := proto.Marshal(req)
		if err != nil {
			return pprocutils.ErrorCodeUnknownCommandRequest
		}
		inst.parked = b
	}
	n := uint32(len(inst.parked)) //nolint:gosec // commands are far below 4GiB
	if size < n {
		return n
	}
	if !m.Memory().Write(ptr, inst.parked) {
		return pprocutils.ErrorCodeMemoryOutOfRange
	}
	inst.parked = nil
	return n
}

// hostCommandResponse reads the module's answer to the last command.
func hostCommandResponse(ctx context.Context, m api.Module, ptr, size uint32) uint32 {
	inst := instanceOf(ctx)
	if inst == nil {
		return pprocutils.ErrorCodeInternal
	}
	b, ok := m.Memory().Read(ptr, size)
	if !ok {
		return pprocutils.ErrorCodeMemoryOutOfRange
	}
	resp := &processorv1.CommandResponse{}
	if err := proto.Unmarshal(b, resp); err != nil {
		return pprocutils.ErrorCodeUnknownCommandResponse
	}
	select {
	case inst.responses <- resp:
	case <-ctx.Done():
	}
	return 0
}

// hostCreateSchema and hostGetSchema serve the SDK's schema service: there
// is no schema registry here.
func hostCreateSchema(context.Context, api.Module, uint32, uint32) uint32 {
	return pprocutils.ErrorCodeInternal
}

func hostGetSchema(context.Context, api.Module, uint32, uint32) uint32 {
	return pprocutils.ErrorCodeSubjectNotFound
}
