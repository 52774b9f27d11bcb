package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	cerrors "github.com/conduitry/conduit/errors"
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
func unavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08 is connection exceptions; 57P01-03 are the server
		// shutting down, crashing or starting up; 53300 too many
		// connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err)
}

// wrapf is dbErr with what was being done: "renewing the leases: ...".
func wrapf(ctx context.Context, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, dbErr(ctx, err))...)
}
