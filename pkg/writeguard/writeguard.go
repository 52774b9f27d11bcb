// Package writeguard carries the engine's write guard
// (pipeline.Config.WriteGuard) to the destinations, so that they can check
// it again at their last moment before writing.
package writeguard

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
// Check at the last moment before the write leaves this process (the
// write system call of the file destination, the send of a batch to a
// connector's plugin). What a connector in another process or Conduit's
// SDK does after that is beyond it: there the window is the connector's
// own time before its records become visible.

type writeGuardKey struct{}

// With returns ctx carrying guard for Check; a nil guard returns ctx as
// it is.
func With(ctx context.Context, guard func() error) context.Context {
	if guard == nil {
		return ctx
	}
	return context.WithValue(ctx, writeGuardKey{}, guard)
}

// Check calls the write guard ctx carries: nil when there is
// none or it allows the write; otherwise its error, transient (the
// pipeline runs again where it may write). A destination that gets an
// error writes nothing more of the batch and returns it with the count of
// records it wrote before.
func Check(ctx context.Context) error {
	guard, _ := ctx.Value(writeGuardKey{}).(func() error)
	if guard == nil {
		return nil
	}
	if err := guard(); err != nil {
		return cerrors.Transient(err)
	}
	return nil
}
