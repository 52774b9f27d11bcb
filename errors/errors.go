// Package errors classifies the errors that end a pipeline run as transient
// (restart it) or fatal (stop it; a human must act), by HTTP-like numeric
// codes that connectors attach to their errors. Import it as cerrors:
//
//	import cerrors "github.com/conduitry/conduit/errors"
//
// The code table (DESIGN.md section 4):
//
//	408, 425, 429          transient
//	other 400-499          fatal
//	501                    fatal
//	other 500-599          transient
//	no code, unknown code  transient (the safe default)
//
// In Go, a code travels as a wrapper found with errors.As, so it survives any
// depth of %w wrapping and errors.Join. Across a process boundary it travels
// as JSON text, {"code":503,"message":"...","details":{...}}, which Classify
// parses back. It is not a general error library: it only answers "what
// kind of failure is this".
package errors

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// Codes connectors use most. Any integer 100-599 is accepted; these only
// give the common ones names.
const (
	CodeBadRequest         = 400 // fatal: the input or configuration is wrong
	CodeUnauthorized       = 401 // fatal: credentials are missing or wrong
	CodeForbidden          = 403 // fatal: not allowed
	CodeNotFound           = 404 // fatal: the resource does not exist
	CodeRequestTimeout     = 408 // transient
	CodeConflict           = 409 // fatal
	CodePayloadTooLarge    = 413 // fatal: the message can never fit
	CodeUnprocessable      = 422 // fatal: this record can never be written
	CodeTooEarly           = 425 // transient
	CodeTooManyRequests    = 429 // transient: rate limited
	CodeInternal           = 500 // transient
	CodeNotImplemented     = 501 // fatal
	CodeBadGateway         = 502 // transient
	CodeUnavailable        = 503 // transient: the usual "try again later"
	CodeGatewayTimeout     = 504 // transient
	CodeInsufficientSpace  = 507 // transient
	CodeNetworkAuthRequire = 511 // transient
)

// DefaultFatalCode is the code Fatal gives an error that has no fatal code
// of its own; DefaultTransientCode the one Transient gives.
const (
	DefaultFatalCode     = CodeBadRequest
	DefaultTransientCode = CodeUnavailable
)

// Class is what the supervisor does about an error, named as the audit
// log, the persisted state and the API spell it. The zero value is invalid
// so that an unclassified error cannot pass for a classified one.
type Class string

// Classes.
const (
	ClassTransient Class = "transient"
	ClassFatal     Class = "fatal"
)

// String returns the class's name; an invalid class prints as Class(...)
// so that it stands out (the zero value as Class(0)).
func (c Class) String() string {
	switch c {
	case ClassTransient, ClassFatal:
		return string(c)
	case "":
		return "Class(0)"
	default:
		return fmt.Sprintf("Class(%q)", string(c))
	}
}

// ParseClass is the inverse of Class.String.
func ParseClass(s string) (Class, error) {
	switch c := Class(s); c {
	case ClassTransient, ClassFatal:
		return c, nil
	}
	return "", fmt.Errorf("unknown error class %q (want transient or fatal)", s)
}

// ClassOf returns the class of a code by the table above. Codes outside
// 400-599 are transient.
func ClassOf(code int) Class {
	switch {
	case code == 408 || code == 425 || code == 429:
		return ClassTransient
	case code >= 400 && code <= 499:
		return ClassFatal
	case code == 501:
		return ClassFatal
	default:
		return ClassTransient
	}
}

// validCode reports whether code looks like an HTTP status at all.
func validCode(code int) bool { return code >= 100 && code <= 599 }

// Error is an error with a code. Create it with WithCode, Fatal or
// Transient; find it with errors.As.
type Error struct {
	Code int
	// Details are optional structured facts (a table name, an upstream
	// request id) that travel with the error across the process boundary.
	Details map[string]any
	Err     error
	// fromWire marks an error FromWire decoded, so that Classify reports
	// it as classified by JSON, which is how it was.
	fromWire bool
}

// Error returns the text of the wrapped error; the code is not part of the
// text, so wrapping does not change what the user reads. A nil *Error (the
// typed-nil trap: a func returning a nil *Error as error) gives "<nil>"
// rather than panicking, so Classify keeps its never-panics promise.
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Err == nil {
		return fmt.Sprintf("error code %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error (nil for a nil *Error).
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// findError returns the first non-nil *Error in err's tree for which match
// holds, searching in the order errors.As does: err itself, then what it
// unwraps to, depth first, errors.Join branches left to right, honouring an
// As(any) bool method. Unlike a bare errors.As it does not stop at the first
// *Error: WithCode(Fatal(err), 0) (an upstream status that was not there)
// must not hide the fatal code underneath it.
func findError(err error, match func(*Error) bool) *Error {
	for err != nil {
		if e, ok := err.(*Error); ok {
			if e != nil && match(e) {
				return e
			}
		} else if x, ok := err.(interface{ As(any) bool }); ok {
			var e *Error
			if x.As(&e) && e != nil && match(e) {
				return e
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, branch := range x.Unwrap() {
				if e := findError(branch, match); e != nil {
					return e
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// findCoded returns the outermost *Error in err's tree whose code is in
// 100-599, or nil: the error that decides the classification.
func findCoded(err error) *Error {
	return findError(err, func(e *Error) bool { return validCode(e.Code) })
}

// WithCode attaches code to err. A nil err stays nil, so
// `return cerrors.WithCode(err, 503)` is safe after any call.
func WithCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// WithDetails attaches code and details to err.
func WithDetails(err error, code int, details map[string]any) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Details: details, Err: err}
}

// Fatal marks err fatal: the pipeline is degraded and waits for a human. The
// code of err is kept when it is already a fatal one, otherwise it becomes
// DefaultFatalCode (400), so the mark also survives the JSON wire format,
// which carries only the code.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	if coded := findCoded(err); coded != nil && ClassOf(coded.Code) == ClassFatal {
		return &Error{Code: coded.Code, Err: err}
	}
	return &Error{Code: DefaultFatalCode, Err: err}
}

// Transient marks err transient: the pipeline is restarted on backoff. The
// code of err is kept when it is already a transient one, otherwise it
// becomes DefaultTransientCode (503).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	if coded := findCoded(err); coded != nil && ClassOf(coded.Code) == ClassTransient {
		return &Error{Code: coded.Code, Err: err}
	}
	return &Error{Code: DefaultTransientCode, Err: err}
}

// Fatalf is Fatal(fmt.Errorf(format, args...)).
func Fatalf(format string, args ...any) error { return Fatal(fmt.Errorf(format, args...)) }

// Transientf is Transient(fmt.Errorf(format, args...)).
func Transientf(format string, args ...any) error {
	return Transient(fmt.Errorf(format, args...))
}

// FromWire turns the wire JSON text a process sent (what MarshalWire
// makes) into an error: one with the code it carries, whose text is the
// message inside the JSON, and that Classify reports as classified by
// json. Text that is not the wire object, or has no valid code, becomes a
// plain error (transient by default). Hosts of standalone connectors use
// it instead of wrapping the raw text, so a prefix they add can never hide
// the code.
func FromWire(text string) error {
	c, ok := parseWire(text)
	switch {
	case !ok:
		return errors.New(text)
	case c.Source != SourceJSON:
		return errors.New(c.Message)
	default:
		return &Error{Code: c.Code, Details: c.Details, Err: errors.New(c.Message), fromWire: true}
	}
}

// DetailPosition is the detail that names the record an error is about:
// the record's position, base64-encoded (standard encoding with padding) in
// the wire JSON's details.
const DetailPosition = "position"

// recordError names the record an error is about.
type recordError struct {
	position []byte
	err      error
}

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

// ForRecord says that err is about the record at position: a recovery
// rule with action dead-letter (DESIGN 5.2) can then send that record to
// the dead-letter queue and let the pipeline go on, and a record that
// fails the same way run after run can be quarantined. Across the process
// boundary the position travels as details.position. A nil err stays nil.
func ForRecord(position []byte, err error) error {
	if err == nil {
		return nil
	}
	return &recordError{position: bytes.Clone(position), err: err}
}

// RecordOf returns the position of the record err is about: one ForRecord
// named in this process, or the details.position of an error that came
// over the wire. ok is false when err names no record.
func RecordOf(err error) (position []byte, ok bool) {
	var re *recordError
	if errors.As(err, &re) {
		return re.position, true
	}
	if s, isText := Classify(err).Details[DetailPosition].(string); isText {
		if p, decErr := base64.StdEncoding.DecodeString(s); decErr == nil {
			return p, true
		}
	}
	return nil, false
}
