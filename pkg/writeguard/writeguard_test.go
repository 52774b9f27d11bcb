package writeguard

import (
	"context"
	"errors"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
)

// otherKey is another package's context value.
type otherKey struct{}

func TestCheck(t *testing.T) {
	lost := errors.New("the lease may have expired")
	calls := 0
	refusing := func() error { calls++; return lost }
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{name: "no guard", ctx: context.Background()},
		{name: "a nil guard", ctx: With(context.Background(), nil)},
		{name: "a guard that allows", ctx: With(context.Background(), func() error { return nil })},
		{name: "a guard that refuses", ctx: With(context.Background(), refusing), want: lost},
		{name: "a guard under another value", ctx: context.WithValue(With(context.Background(), refusing), otherKey{}, 1), want: lost},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.ctx)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || cerrors.Classify(err).Class != cerrors.ClassTransient {
				t.Fatalf("Check = %v, want the guard's error, transient", err)
			}
		})
	}
	if calls != 2 {
		t.Errorf("the refusing guard was called %d times, want once per Check (2)", calls)
	}
}
