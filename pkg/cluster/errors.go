package cluster

import (
	"context"
	"errors"
	"fmt"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/pgfault"
)

// ErrUnavailable is PostgreSQL out of reach: the connection was refused or
// lost, the server is restarting or has no connection left. What failed
// may succeed when tried again.
var ErrUnavailable = errors.New("PostgreSQL is unavailable")

// errEmptyID refuses an instance without an id.
var errEmptyID = errors.New("cluster.instance-id: empty")

// postgresError is what PostgreSQL or the driver refused, as text: the
// driver's error types stay in this package, as they stay in pkg/store.
type postgresError struct {
	text string
	// unavailable: the server could not be reached (ErrUnavailable).
	unavailable bool
}

func (e *postgresError) Error() string {
	if e.unavailable {
		return ErrUnavailable.Error() + ": " + e.text
	}
	return "PostgreSQL: " + e.text
}

func (e *postgresError) Is(target error) bool { return e.unavailable && target == ErrUnavailable }

// dbErr turns an error of the driver into this package's: the context's
// error once it is done, ErrUnavailable (with CodeUnavailable) when the
// server could not be reached, otherwise PostgreSQL's refusal as text.
// This package's own errors, and those dbErr made, pass as they are, so
// that it may be applied on every way out of the package.
func dbErr(ctx context.Context, err error) error {
	switch {
	case err == nil || own(err):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case unavailable(err):
		return cerrors.WithCode(&postgresError{text: err.Error(), unavailable: true}, cerrors.CodeUnavailable)
	}
	return &postgresError{text: err.Error()}
}

// own reports whether err is this package's, or the context's.
func own(err error) bool {
	var pe *postgresError
	var refused *RefusedError
	var maybe errMaybeAlive
	if errors.As(err, &pe) || errors.As(err, &refused) || errors.As(err, &maybe) {
		return true
	}
	for _, e := range []error{ErrDuplicateInstance, ErrLeaseLost, ErrNotRegistered, ErrTTLMismatch, ErrOwnerChanged,
		ErrNotAnswered, ErrSchemaTooNew, errEmptyID, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unavailable reports whether err says the server could not be reached or
// went away, rather than refusing what was asked (as pkg/store tells).
func unavailable(err error) bool { return pgfault.Unavailable(err) }

// wrapf is dbErr with what was being done: "renewing the leases: ...".
func wrapf(ctx context.Context, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, dbErr(ctx, err))...)
}
