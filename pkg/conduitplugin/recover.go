package conduitplugin

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-connector-sdk"
)

// A connector compiled into this process runs its methods on the engine's
// goroutines and the SDK's: a panic there - a nil pointer on an S3 object
// without a content type, say - would end the whole process and every
// pipeline in it. The methods the SDK calls are guarded instead: a panic
// becomes the method's error, which fails this connector's run like any
// other error (transient unless a rule says otherwise), and the supervisor
// restarts it with a new instance. Goroutines a connector starts itself
// are out of reach.

// guard turns a panic of the calling method into *err.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = panicError(r)
	}
}

// panicError describes a recovered panic and where it happened: the first
// frame below the runtime's, which the error's reader can find in the
// connector's source.
func panicError(r any) error {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Errorf("connector panicked: %v (in %s at %s:%d)", r, f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return fmt.Errorf("connector panicked: %v", r)
		}
	}
}

// InProcessSDKDestination is InProcessDestination for impl, a destination
// written with Conduit's SDK and compiled into this process, made into a
// plugin here with its methods guarded against panics.
func InProcessSDKDestination(impl sdk.Destination, cfg pconnector.PluginConfig, params config.Parameters) DestinationPlugin {
	return InProcessDestination(sdk.NewDestinationPlugin(guardedDestination{impl}, cfg, params))
}

// guardedDestination is an SDK destination whose methods return a panic
// as their error.
type guardedDestination struct {
	sdk.Destination
}

func (d guardedDestination) Open(ctx context.Context) (err error) {
	defer guard(&err)
	return d.Destination.Open(ctx)
}

func (d guardedDestination) Write(ctx context.Context, r []opencdc.Record) (n int, err error) {
	defer guard(&err)
	return d.Destination.Write(ctx, r)
}

func (d guardedDestination) Teardown(ctx context.Context) (err error) {
	defer guard(&err)
	return d.Destination.Teardown(ctx)
}

func (d guardedDestination) LifecycleOnCreated(ctx context.Context, c config.Config) (err error) {
	defer guard(&err)
	return d.Destination.LifecycleOnCreated(ctx, c)
}

func (d guardedDestination) LifecycleOnUpdated(ctx context.Context, before, after config.Config) (err error) {
	defer guard(&err)
	return d.Destination.LifecycleOnUpdated(ctx, before, after)
}

func (d guardedDestination) LifecycleOnDeleted(ctx context.Context, c config.Config) (err error) {
	defer guard(&err)
	return d.Destination.LifecycleOnDeleted(ctx, c)
}

func (s gatedSource) Open(ctx context.Context, p opencdc.Position) (err error) {
	defer guard(&err)
	return s.Source.Open(ctx, p)
}

func (s gatedSource) Ack(ctx context.Context, p opencdc.Position) (err error) {
	defer guard(&err)
	return s.Source.Ack(ctx, p)
}

func (s gatedSource) Teardown(ctx context.Context) (err error) {
	defer guard(&err)
	return s.Source.Teardown(ctx)
}

func (s gatedSource) LifecycleOnCreated(ctx context.Context, c config.Config) (err error) {
	defer guard(&err)
	return s.Source.LifecycleOnCreated(ctx, c)
}

func (s gatedSource) LifecycleOnUpdated(ctx context.Context, before, after config.Config) (err error) {
	defer guard(&err)
	return s.Source.LifecycleOnUpdated(ctx, before, after)
}

func (s gatedSource) LifecycleOnDeleted(ctx context.Context, c config.Config) (err error) {
	defer guard(&err)
	return s.Source.LifecycleOnDeleted(ctx, c)
}
