package sdk

import (
	cerrors "github.com/conduitry/conduit/errors"
)

// Codes a connector attaches to its errors, HTTP-like so that an upstream
// status can be passed straight through with WithCode. Any code 100-599
// works; these only name the common ones. The comment of each says what the
// runtime does when a run ends with it: transient restarts the pipeline on
// backoff, fatal stops it (degraded) until a human starts it again.
const (
	CodeBadRequest         = cerrors.CodeBadRequest         // 400 fatal: bad settings or input
	CodeUnauthorized       = cerrors.CodeUnauthorized       // 401 fatal: credentials missing or wrong
	CodeForbidden          = cerrors.CodeForbidden          // 403 fatal: not allowed
	CodeNotFound           = cerrors.CodeNotFound           // 404 fatal: the resource does not exist
	CodeRequestTimeout     = cerrors.CodeRequestTimeout     // 408 transient
	CodeConflict           = cerrors.CodeConflict           // 409 fatal
	CodeUnprocessable      = cerrors.CodeUnprocessable      // 422 fatal: this record can never be written
	CodeTooEarly           = cerrors.CodeTooEarly           // 425 transient
	CodeTooManyRequests    = cerrors.CodeTooManyRequests    // 429 transient: rate limited
	CodeInternal           = cerrors.CodeInternal           // 500 transient
	CodeNotImplemented     = cerrors.CodeNotImplemented     // 501 fatal
	CodeBadGateway         = cerrors.CodeBadGateway         // 502 transient
	CodeUnavailable        = cerrors.CodeUnavailable        // 503 transient: "try again later"
	CodeGatewayTimeout     = cerrors.CodeGatewayTimeout     // 504 transient
	CodeInsufficientSpace  = cerrors.CodeInsufficientSpace  // 507 transient
	CodeNetworkAuthRequire = cerrors.CodeNetworkAuthRequire // 511 transient
)

// The helpers are functions rather than variables holding cerrors' functions
// so that nobody can reassign them: the package has no mutable state.

// Fatal marks err fatal: the runtime stops the pipeline (degraded) and
// waits for a human. The error keeps its code when that is already a fatal
// one, otherwise it gets CodeBadRequest (400). A nil err stays nil.
func Fatal(err error) error { return cerrors.Fatal(err) }

// Fatalf is Fatal(fmt.Errorf(format, args...)); %w keeps the wrapped
// error's chain.
func Fatalf(format string, args ...any) error { return cerrors.Fatalf(format, args...) }

// Transient marks err transient: the runtime restarts the pipeline on an
// exponential backoff. The error keeps its code when that is already a
// transient one, otherwise it gets CodeUnavailable (503). A nil err stays
// nil. Errors without any code are transient too; Transient makes the
// intent explicit and survives an enclosing error that has a fatal code.
func Transient(err error) error { return cerrors.Transient(err) }

// Transientf is Transient(fmt.Errorf(format, args...)).
func Transientf(format string, args ...any) error { return cerrors.Transientf(format, args...) }

// WithCode attaches code to err, typically an upstream HTTP status:
// sdk.WithCode(err, resp.StatusCode). The runtime classifies the run's end
// by the code table in the package documentation (429 transient, 422
// fatal, 503 transient, ...). A code outside 100-599 counts as no code. A
// nil err stays nil, so `return sdk.WithCode(err, 503)` is safe after any
// call.
func WithCode(err error, code int) error { return cerrors.WithCode(err, code) }

// WithDetails is WithCode with structured facts (a table name, an upstream
// request id) that travel with the error to the runtime, which shows them
// with the error. details must be JSON-encodable; if they are not, they are
// dropped and the code and message still arrive.
func WithDetails(err error, code int, details map[string]any) error {
	return cerrors.WithDetails(err, code, details)
}

// WithDependency is WithCode naming the external system the error is
// about (details.dependency), e.g. the database a destination writes to:
// when several pipelines fail on the same dependency, the runtime's
// breaker holds all but one of them until it is back, instead of every
// pipeline retrying it (docs/recovery.md, dependency breakers). A
// connector's dependency: setting in the pipeline file does the same for
// all its errors.
func WithDependency(err error, code int, dependency string) error {
	return cerrors.WithDetails(err, code, map[string]any{"dependency": dependency})
}

// ForRecord says that err is about the record at position, typically the
// one a destination's Write could not write: Write returns (n,
// sdk.ForRecord(records[n].Position, err)). A recovery rule with action
// dead-letter can then send that record to the pipeline's dead-letter
// queue and let the pipeline go on instead of restarting it, and a record
// that fails the same way run after run can be quarantined (see
// docs/recovery.md). A nil err stays nil.
func ForRecord(position Position, err error) error { return cerrors.ForRecord(position, err) }
