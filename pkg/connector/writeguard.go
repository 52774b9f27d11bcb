package connector

import (
	"context"

	cerrors "github.com/conduitry/conduit/errors"
)

// The engine checks its write guard (pipeline.Config.WriteGuard) right
// before every Write call. A destination that takes time inside Write
// before its records become visible - encoding a batch, preparing a
// statement - leaves a window after that check: an instance paused there
// (SIGSTOP, a frozen VM) past its lease would, once continued, write
// records its successor writes too. The engine therefore also hands the
// guard to Write in its context, and a destination checks it again with
// CheckWriteGuard at the last moment before the write itself (the write
// system call, the commit). Out-of-process connectors cannot; for them
// the engine's check is the one.

type writeGuardKey struct{}

// WithWriteGuard returns ctx carrying guard for CheckWriteGuard; a nil
// guard returns ctx as it is.
func WithWriteGuard(ctx context.Context, guard func() error) context.Context {
	if guard == nil {
		return ctx
	}
	return context.WithValue(ctx, writeGuardKey{}, guard)
}

// CheckWriteGuard calls the write guard ctx carries: nil when there is
// none or it allows the write; otherwise its error, transient (the
// pipeline runs again where it may write). A destination that gets an
// error writes nothing more of the batch and returns it with the count of
// records it wrote before.
func CheckWriteGuard(ctx context.Context) error {
	guard, _ := ctx.Value(writeGuardKey{}).(func() error)
	if guard == nil {
		return nil
	}
	if err := guard(); err != nil {
		return cerrors.Transient(err)
	}
	return nil
}
