package errors_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
)

// Shorthands for the wanted classifications.
const (
	transient = cerrors.ClassTransient
	fatal     = cerrors.ClassFatal

	typed = cerrors.SourceTyped
	wire  = cerrors.SourceJSON
	def   = cerrors.SourceDefault
	rule  = cerrors.SourceRule
)

// assertClassification compares every field, Details included: a nil want
// Details means the classification must carry none.
func assertClassification(t *testing.T, got, want cerrors.Classification) {
	t.Helper()
	if got.Class != want.Class {
		t.Errorf("Class = %v, want %v", got.Class, want.Class)
	}
	if got.Code != want.Code {
		t.Errorf("Code = %d, want %d", got.Code, want.Code)
	}
	if got.Message != want.Message {
		t.Errorf("Message = %q, want %q", got.Message, want.Message)
	}
	if got.Source != want.Source {
		t.Errorf("Source = %v, want %v", got.Source, want.Source)
	}
	if !reflect.DeepEqual(got.Details, want.Details) {
		t.Errorf("Details = %#v, want %#v", got.Details, want.Details)
	}
}

// wrapN wraps err n times with %w, as n layers of callers adding context
// would: wrapN(err, 2) reads "layer 2: layer 1: <err>".
func wrapN(err error, n int) error {
	for i := 1; i <= n; i++ {
		err = fmt.Errorf("layer %d: %w", i, err)
	}
	return err
}

// prefixN is the text wrapN(err, n) adds in front of err's text.
func prefixN(n int) string {
	var b strings.Builder
	for i := n; i >= 1; i-- {
		fmt.Fprintf(&b, "layer %d: ", i)
	}
	return b.String()
}

// wrapper is a caller's own error type that wraps with Unwrap instead of %w.
type wrapper struct {
	op  string
	err error
}

func (w *wrapper) Error() string { return w.op + " failed: " + w.err.Error() }
func (w *wrapper) Unwrap() error { return w.err }

// asCoded converts itself to a *cerrors.Error through an As method, the
// other way errors.As lets a type take part in the search.
type asCoded struct{ code int }

func (a asCoded) Error() string { return "as-coded " + strconv.Itoa(a.code) }
func (a asCoded) As(target any) bool {
	if p, ok := target.(**cerrors.Error); ok {
		*p = &cerrors.Error{Code: a.code, Err: errors.New("inner")}
		return true
	}
	return false
}

func TestClassifyCodeTable(t *testing.T) {
	tests := []struct {
		name string
		code int
		want cerrors.Class
		// wantCode is the code Classify reports: the code itself when it
		// is valid, 0 when it is not.
		wantCode int
		source   cerrors.Source
	}{
		{name: "408 request timeout", code: 408, want: transient, wantCode: 408, source: typed},
		{name: "425 too early", code: 425, want: transient, wantCode: 425, source: typed},
		{name: "429 too many requests", code: 429, want: transient, wantCode: 429, source: typed},

		{name: "400 bad request", code: 400, want: fatal, wantCode: 400, source: typed},
		{name: "401 unauthorized", code: 401, want: fatal, wantCode: 401, source: typed},
		{name: "403 forbidden", code: 403, want: fatal, wantCode: 403, source: typed},
		{name: "404 not found", code: 404, want: fatal, wantCode: 404, source: typed},
		{name: "407 next to 408", code: 407, want: fatal, wantCode: 407, source: typed},
		{name: "409 conflict", code: 409, want: fatal, wantCode: 409, source: typed},
		{name: "422 unprocessable", code: 422, want: fatal, wantCode: 422, source: typed},
		{name: "424 next to 425", code: 424, want: fatal, wantCode: 424, source: typed},
		{name: "426 next to 425", code: 426, want: fatal, wantCode: 426, source: typed},
		{name: "428 next to 429", code: 428, want: fatal, wantCode: 428, source: typed},
		{name: "430 next to 429", code: 430, want: fatal, wantCode: 430, source: typed},
		{name: "499 last 4xx", code: 499, want: fatal, wantCode: 499, source: typed},

		{name: "501 not implemented", code: 501, want: fatal, wantCode: 501, source: typed},

		{name: "500 internal", code: 500, want: transient, wantCode: 500, source: typed},
		{name: "502 bad gateway", code: 502, want: transient, wantCode: 502, source: typed},
		{name: "503 unavailable", code: 503, want: transient, wantCode: 503, source: typed},
		{name: "504 gateway timeout", code: 504, want: transient, wantCode: 504, source: typed},
		{name: "507 insufficient space", code: 507, want: transient, wantCode: 507, source: typed},
		{name: "599 last 5xx", code: 599, want: transient, wantCode: 599, source: typed},

		{name: "100 first valid", code: 100, want: transient, wantCode: 100, source: typed},
		{name: "200 ok", code: 200, want: transient, wantCode: 200, source: typed},
		{name: "204 no content", code: 204, want: transient, wantCode: 204, source: typed},
		{name: "302 found", code: 302, want: transient, wantCode: 302, source: typed},
		{name: "399 last 3xx", code: 399, want: transient, wantCode: 399, source: typed},

		{name: "0 invalid", code: 0, want: transient, wantCode: 0, source: def},
		{name: "-1 invalid", code: -1, want: transient, wantCode: 0, source: def},
		{name: "99 invalid", code: 99, want: transient, wantCode: 0, source: def},
		{name: "600 invalid", code: 600, want: transient, wantCode: 0, source: def},
		{name: "1000 invalid", code: 1000, want: transient, wantCode: 0, source: def},
		{name: "-422 invalid", code: -422, want: transient, wantCode: 0, source: def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cerrors.WithCode(errors.New("upstream said no"), tt.code)
			assertClassification(t, cerrors.Classify(err), cerrors.Classification{
				Class: tt.want, Code: tt.wantCode, Message: "upstream said no", Source: tt.source,
			})
			if tt.source == typed {
				if got := cerrors.ClassOf(tt.code); got != tt.want {
					t.Errorf("ClassOf(%d) = %v, want %v", tt.code, got, tt.want)
				}
			}
		})
	}
}

// TestClassOfEveryCode sweeps every valid code against DESIGN.md's table,
// written as sets rather than ranges, so an off-by-one in a range shows.
func TestClassOfEveryCode(t *testing.T) {
	transient4xx := map[int]bool{408: true, 425: true, 429: true}
	for code := 100; code <= 599; code++ {
		want := transient
		if (code/100 == 4 && !transient4xx[code]) || code == 501 {
			want = fatal
		}
		if got := cerrors.ClassOf(code); got != want {
			t.Errorf("ClassOf(%d) = %v, want %v", code, got, want)
		}
		c := cerrors.Classify(cerrors.WithCode(errors.New("x"), code))
		if c.Class != want || c.Code != code || c.Source != typed {
			t.Errorf("Classify(WithCode(x, %d)) = %+v, want %v %d typed", code, c, want, code)
		}
	}
}

func TestClassifyTyped(t *testing.T) {
	base := errors.New("relation \"users\" does not exist")
	msg := base.Error()
	details := map[string]any{"table": "users", "attempt": 3}

	var nilCoded *cerrors.Error

	tests := []struct {
		name string
		err  error
		want cerrors.Classification
	}{
		{name: "WithCode unwrapped", err: cerrors.WithCode(base, 422),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: msg, Source: typed}},
		{name: "WithCode through 1 %w", err: wrapN(cerrors.WithCode(base, 422), 1),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: prefixN(1) + msg, Source: typed}},
		{name: "WithCode through 3 %w", err: wrapN(cerrors.WithCode(base, 429), 3),
			want: cerrors.Classification{Class: transient, Code: 429, Message: prefixN(3) + msg, Source: typed}},
		{name: "WithCode through 10 %w", err: wrapN(cerrors.WithCode(base, 501), 10),
			want: cerrors.Classification{Class: fatal, Code: 501, Message: prefixN(10) + msg, Source: typed}},

		{name: "Fatal through 1 %w", err: wrapN(cerrors.Fatal(base), 1),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(1) + msg, Source: typed}},
		{name: "Fatal through 3 %w", err: wrapN(cerrors.Fatal(base), 3),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(3) + msg, Source: typed}},
		{name: "Fatal through 10 %w", err: wrapN(cerrors.Fatal(base), 10),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(10) + msg, Source: typed}},

		{name: "Transient through 1 %w", err: wrapN(cerrors.Transient(base), 1),
			want: cerrors.Classification{Class: transient, Code: 503, Message: prefixN(1) + msg, Source: typed}},
		{name: "Transient through 3 %w", err: wrapN(cerrors.Transient(base), 3),
			want: cerrors.Classification{Class: transient, Code: 503, Message: prefixN(3) + msg, Source: typed}},
		{name: "Transient through 10 %w", err: wrapN(cerrors.Transient(base), 10),
			want: cerrors.Classification{Class: transient, Code: 503, Message: prefixN(10) + msg, Source: typed}},

		{name: "Fatalf wraps its %w argument",
			err:  cerrors.Fatalf("write batch %d: %w", 7, cerrors.WithCode(base, 422)),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "write batch 7: " + msg, Source: typed}},
		{name: "Transientf of plain text",
			err:  cerrors.Transientf("broker %s not ready", "b-1"),
			want: cerrors.Classification{Class: transient, Code: 503, Message: "broker b-1 not ready", Source: typed}},

		{name: "errors.Join first branch",
			err:  errors.Join(cerrors.Fatal(base), errors.New("close: already closed")),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: msg + "\nclose: already closed", Source: typed}},
		{name: "errors.Join second branch",
			err:  errors.Join(errors.New("close: already closed"), cerrors.WithCode(base, 429)),
			want: cerrors.Classification{Class: transient, Code: 429, Message: "close: already closed\n" + msg, Source: typed}},
		{name: "errors.Join wrapped and inside a wrapped branch",
			err:  wrapN(errors.Join(errors.New("a"), wrapN(cerrors.Fatal(base), 2)), 1),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(1) + "a\n" + prefixN(2) + msg, Source: typed}},

		{name: "custom wrapper with Unwrap",
			err:  &wrapper{op: "flush", err: cerrors.WithCode(base, 404)},
			want: cerrors.Classification{Class: fatal, Code: 404, Message: "flush failed: " + msg, Source: typed}},
		{name: "custom wrapper around %w around custom wrapper",
			err:  &wrapper{op: "a", err: wrapN(&wrapper{op: "b", err: cerrors.Transient(base)}, 2)},
			want: cerrors.Classification{Class: transient, Code: 503, Message: "a failed: " + prefixN(2) + "b failed: " + msg, Source: typed}},
		{name: "custom type with an As method",
			err:  wrapN(asCoded{code: 403}, 1),
			want: cerrors.Classification{Class: fatal, Code: 403, Message: prefixN(1) + "as-coded 403", Source: typed}},

		{name: "outermost code wins over an inner one",
			err:  cerrors.WithCode(wrapN(cerrors.WithCode(base, 503), 2), 422),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: prefixN(2) + msg, Source: typed}},
		{name: "outermost transient wins over an inner fatal",
			err:  wrapN(cerrors.WithCode(wrapN(cerrors.Fatal(base), 1), 429), 1),
			want: cerrors.Classification{Class: transient, Code: 429, Message: prefixN(1) + prefixN(1) + msg, Source: typed}},

		{name: "Fatal of a fatal code keeps it",
			err:  cerrors.Fatal(cerrors.WithCode(base, 422)),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: msg, Source: typed}},
		{name: "Fatal of a wrapped fatal code keeps it",
			err:  cerrors.Fatal(wrapN(cerrors.WithCode(base, 401), 3)),
			want: cerrors.Classification{Class: fatal, Code: 401, Message: prefixN(3) + msg, Source: typed}},
		{name: "Fatal of a transient code becomes 400",
			err:  cerrors.Fatal(cerrors.WithCode(base, 503)),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: msg, Source: typed}},
		{name: "Fatal of 408 becomes 400",
			err:  cerrors.Fatal(wrapN(cerrors.WithCode(base, 408), 1)),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(1) + msg, Source: typed}},
		{name: "Fatal of an invalid code becomes 400",
			err:  cerrors.Fatal(cerrors.WithCode(base, 0)),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: msg, Source: typed}},
		{name: "Transient of a fatal code becomes 503",
			err:  cerrors.Transient(cerrors.WithCode(base, 400)),
			want: cerrors.Classification{Class: transient, Code: 503, Message: msg, Source: typed}},
		{name: "Transient of 501 becomes 503",
			err:  cerrors.Transient(wrapN(cerrors.WithCode(base, 501), 2)),
			want: cerrors.Classification{Class: transient, Code: 503, Message: prefixN(2) + msg, Source: typed}},
		{name: "Transient of a transient code keeps it",
			err:  cerrors.Transient(cerrors.WithCode(base, 429)),
			want: cerrors.Classification{Class: transient, Code: 429, Message: msg, Source: typed}},
		{name: "Transient of Fatal becomes 503",
			err:  cerrors.Transient(cerrors.Fatal(base)),
			want: cerrors.Classification{Class: transient, Code: 503, Message: msg, Source: typed}},
		{name: "Transient of an invalid code becomes 503",
			err:  cerrors.Transient(cerrors.WithCode(base, 1000)),
			want: cerrors.Classification{Class: transient, Code: 503, Message: msg, Source: typed}},

		// An invalid code (an upstream status that was 0 because there was
		// no response) must not hide the valid one it wraps.
		{name: "invalid outer code does not hide an inner fatal",
			err:  cerrors.WithCode(wrapN(cerrors.Fatal(base), 1), 0),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: prefixN(1) + msg, Source: typed}},
		{name: "Fatal looks past an invalid code to a fatal one",
			err:  cerrors.Fatal(cerrors.WithCode(cerrors.WithCode(base, 422), 0)),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: msg, Source: typed}},
		{name: "invalid code alone is the default",
			err:  cerrors.WithCode(base, 0),
			want: cerrors.Classification{Class: transient, Code: 0, Message: msg, Source: def}},
		{name: "invalid code around wire text falls through to the JSON",
			err:  cerrors.WithCode(errors.New(`{"code":404,"message":"no such topic"}`), 700),
			want: cerrors.Classification{Class: fatal, Code: 404, Message: "no such topic", Source: wire}},
		{name: "a typed code wins over wire text",
			err:  cerrors.WithCode(errors.New(`{"code":400,"message":"bad"}`), 503),
			want: cerrors.Classification{Class: transient, Code: 503, Message: `{"code":400,"message":"bad"}`, Source: typed}},

		{name: "details of the typed error",
			err:  wrapN(cerrors.WithDetails(base, 422, details), 2),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: prefixN(2) + msg, Source: typed, Details: details}},
		{name: "details survive Fatal around WithDetails",
			err:  cerrors.Fatal(wrapN(cerrors.WithDetails(base, 422, details), 1)),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: prefixN(1) + msg, Source: typed, Details: details}},
		{name: "details survive a recode with WithCode",
			err:  cerrors.WithCode(cerrors.WithDetails(base, 503, details), 409),
			want: cerrors.Classification{Class: fatal, Code: 409, Message: msg, Source: typed, Details: details}},
		{name: "outer details win over inner ones",
			err:  cerrors.WithDetails(cerrors.WithDetails(base, 503, map[string]any{"inner": true}), 409, details),
			want: cerrors.Classification{Class: fatal, Code: 409, Message: msg, Source: typed, Details: details}},

		{name: "Error without a wrapped error",
			err:  &cerrors.Error{Code: 503},
			want: cerrors.Classification{Class: transient, Code: 503, Message: "error code 503", Source: typed}},
		{name: "typed nil *Error does not panic",
			err:  nilCoded,
			want: cerrors.Classification{Class: transient, Message: "<nil>", Source: def}},
		{name: "wrapped typed nil *Error does not panic",
			err:  fmt.Errorf("open: %w", nilCoded),
			want: cerrors.Classification{Class: transient, Message: "open: <nil>", Source: def}},
		{name: "Fatal of a typed nil *Error",
			err:  cerrors.Fatal(nilCoded),
			want: cerrors.Classification{Class: fatal, Code: 400, Message: "<nil>", Source: typed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertClassification(t, cerrors.Classify(tt.err), tt.want)
		})
	}
}

func TestNilInNilOut(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{name: "WithCode", err: cerrors.WithCode(nil, 503)},
		{name: "WithDetails", err: cerrors.WithDetails(nil, 422, map[string]any{"a": "b"})},
		{name: "Fatal", err: cerrors.Fatal(nil)},
		{name: "Transient", err: cerrors.Transient(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An untyped nil, not a nil *Error in a non-nil interface.
			if tt.err != nil {
				t.Fatalf("got %#v, want untyped nil", tt.err)
			}
		})
	}
	t.Run("Classify", func(t *testing.T) {
		assertClassification(t, cerrors.Classify(nil), cerrors.Classification{})
	})
	t.Run("ClassifyOr", func(t *testing.T) {
		assertClassification(t, cerrors.ClassifyOr(nil, fatal), cerrors.Classification{})
	})
	t.Run("MarshalWire", func(t *testing.T) {
		if got := cerrors.MarshalWire(nil); got != nil {
			t.Fatalf("MarshalWire(nil) = %q, want nil", got)
		}
	})
}

// nestedWire is a wire object whose details nest depth objects deep; the
// suffix form looks at no more than 32 '{' from the right.
func nestedWire(depth int) string {
	return `{"code":422,"message":"bad","details":` +
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "}"
}

func TestClassifyWire(t *testing.T) {
	const refused = "dial tcp 127.0.0.1:5432: connect: connection refused"

	tests := []struct {
		name string
		text string
		want cerrors.Classification
	}{
		{name: "whole text",
			text: `{"code":503,"message":"` + refused + `"}`,
			want: cerrors.Classification{Class: transient, Code: 503, Message: refused, Source: wire}},
		{name: "whole text fatal",
			text: `{"code":401,"message":"password authentication failed"}`,
			want: cerrors.Classification{Class: fatal, Code: 401, Message: "password authentication failed", Source: wire}},
		{name: "with details",
			text: `{"code":422,"message":"bad record","details":{"table":"users","id":7,"tags":["a"]}}`,
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "bad record", Source: wire,
				Details: map[string]any{"table": "users", "id": float64(7), "tags": []any{"a"}}}},
		{name: "details null",
			text: `{"code":503,"message":"x","details":null}`,
			want: cerrors.Classification{Class: transient, Code: 503, Message: "x", Source: wire}},
		{name: "fields in another order",
			text: `{"details":{"k":"v"},"message":"x","code":429}`,
			want: cerrors.Classification{Class: transient, Code: 429, Message: "x", Source: wire, Details: map[string]any{"k": "v"}}},
		{name: "unknown fields are ignored",
			text: `{"code":404,"message":"gone","trace":"abc"}`,
			want: cerrors.Classification{Class: fatal, Code: 404, Message: "gone", Source: wire}},
		{name: "surrounding whitespace",
			text: "\n\t  {\"code\":503,\"message\":\"" + refused + "\"}  \r\n",
			want: cerrors.Classification{Class: transient, Code: 503, Message: refused, Source: wire}},
		{name: "whitespace inside the object",
			text: "{ \"code\" : 501 ,\n \"message\" : \"no\" }",
			want: cerrors.Classification{Class: fatal, Code: 501, Message: "no", Source: wire}},
		{name: "escapes in the message are decoded",
			text: `{"code":400,"message":"line 1\nquote \" \u00e9 \u003c"}`,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: "line 1\nquote \" é <", Source: wire}},
		{name: "empty message",
			text: `{"code":400,"message":""}`,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: "", Source: wire}},
		{name: "integral float code",
			text: `{"code":503.0,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Code: 503, Message: "x", Source: wire}},
		{name: "exponent code",
			text: `{"code":4.22e2,"message":"x"}`,
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "x", Source: wire}},

		{name: "suffix form",
			text: `write: {"code":400,"message":"bad"}`,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: "write: bad", Source: wire}},
		{name: "suffix form after two prefixes",
			text: `sync: write: {"code":409,"message":"duplicate key"}`,
			want: cerrors.Classification{Class: fatal, Code: 409, Message: "sync: write: duplicate key", Source: wire}},
		{name: "suffix form with trailing whitespace",
			text: "write: {\"code\":503,\"message\":\"busy\"}\n",
			want: cerrors.Classification{Class: transient, Code: 503, Message: "write: busy", Source: wire}},
		{name: "suffix form with nested details",
			text: `write: {"code":422,"message":"bad","details":{"row":{"id":1,"cols":{"a":null}}}}`,
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "write: bad", Source: wire,
				Details: map[string]any{"row": map[string]any{"id": float64(1), "cols": map[string]any{"a": nil}}}}},
		{name: "suffix form with braces in the message",
			text: `get: {"code":404,"message":"no key {id} in {table}"}`,
			want: cerrors.Classification{Class: fatal, Code: 404, Message: "get: no key {id} in {table}", Source: wire}},
		{name: "suffix form after another object",
			text: `{"a":1} {"code":400,"message":"bad"}`,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: `{"a":1} bad`, Source: wire}},
		{name: "suffix form details 30 deep are found",
			text: "write: " + nestedWire(30),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "write: bad", Source: wire,
				Details: nestedMap(30)}},
		// maxWireCandidates: deeper details are not looked for in the
		// suffix form, so the error falls back to the default.
		{name: "suffix form details 40 deep are not found",
			text: "write: " + nestedWire(40),
			want: cerrors.Classification{Class: transient, Message: "write: " + nestedWire(40), Source: def}},
		{name: "whole text details 40 deep are found",
			text: nestedWire(40),
			want: cerrors.Classification{Class: fatal, Code: 422, Message: "bad", Source: wire,
				Details: nestedMap(40)}},

		// A message but no usable code: the object is ours, so the message
		// is taken from it, but the class is the default.
		{name: "string code",
			text: `{"code":"503","message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "float code",
			text: `{"code":503.5,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "missing code",
			text: `{"message":"` + refused + `"}`,
			want: cerrors.Classification{Class: transient, Message: refused, Source: def}},
		{name: "missing code suffix form",
			text: `write: {"message":"bad"}`,
			want: cerrors.Classification{Class: transient, Message: "write: bad", Source: def}},
		{name: "code 999",
			text: `{"code":999,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code 99",
			text: `{"code":99,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "negative code",
			text: `{"code":-400,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code too big for an int",
			text: `{"code":1e300,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code null",
			text: `{"code":null,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code true",
			text: `{"code":true,"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code object",
			text: `{"code":{"v":400},"message":"x"}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def}},
		{name: "code 999 with details keeps the details",
			text: `{"code":999,"message":"x","details":{"k":"v"}}`,
			want: cerrors.Classification{Class: transient, Message: "x", Source: def, Details: map[string]any{"k": "v"}}},

		// A code but no message: nothing better than the text to show.
		{name: "code without message",
			text: `{"code":503}`,
			want: cerrors.Classification{Class: transient, Code: 503, Message: `{"code":503}`, Source: wire}},
		{name: "code without message suffix form",
			text: `write: {"code":400}`,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: `write: {"code":400}`, Source: wire}},

		// Not the wire object at all: the whole text is the message.
		{name: "string code without message is not ours",
			text: `{"code":"503"}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":"503"}`, Source: def}},
		{name: "code null without message is not ours",
			text: `{"code":null}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":null}`, Source: def}},
		{name: "an array",
			text: `[{"code":400,"message":"bad"}]`,
			want: cerrors.Classification{Class: transient, Message: `[{"code":400,"message":"bad"}]`, Source: def}},
		{name: "empty object",
			text: `{}`,
			want: cerrors.Classification{Class: transient, Message: `{}`, Source: def}},
		{name: "some other object",
			text: `{"status":"down","retry":true}`,
			want: cerrors.Classification{Class: transient, Message: `{"status":"down","retry":true}`, Source: def}},
		{name: "details alone are not ours",
			text: `{"details":{"k":"v"}}`,
			want: cerrors.Classification{Class: transient, Message: `{"details":{"k":"v"}}`, Source: def}},
		{name: "the wire object nested in another is not ours",
			text: `{"error":{"code":400,"message":"bad"}}`,
			want: cerrors.Classification{Class: transient, Message: `{"error":{"code":400,"message":"bad"}}`, Source: def}},
		{name: "truncated",
			text: `{"code":503`,
			want: cerrors.Classification{Class: transient, Message: `{"code":503`, Source: def}},
		{name: "truncated after the message",
			text: `{"code":400,"message":"bad"`,
			want: cerrors.Classification{Class: transient, Message: `{"code":400,"message":"bad"`, Source: def}},
		{name: "trailing comma",
			text: `{"code":400,"message":"bad",}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":400,"message":"bad",}`, Source: def}},
		{name: "single quotes",
			text: `{'code':400,'message':'bad'}`,
			want: cerrors.Classification{Class: transient, Message: `{'code':400,'message':'bad'}`, Source: def}},
		{name: "ends in a brace but is not JSON",
			text: `panic in func() { return nil }`,
			want: cerrors.Classification{Class: transient, Message: `panic in func() { return nil }`, Source: def}},
		{name: "only a closing brace",
			text: `}`,
			want: cerrors.Classification{Class: transient, Message: `}`, Source: def}},
		{name: "object in the middle followed by text",
			text: `write: {"code":400,"message":"bad"} (after 3 retries)`,
			want: cerrors.Classification{Class: transient, Message: `write: {"code":400,"message":"bad"} (after 3 retries)`, Source: def}},
		{name: "object followed by a second closing brace",
			text: `{"code":400,"message":"bad"}}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":400,"message":"bad"}}`, Source: def}},
		{name: "details not an object",
			text: `{"code":400,"message":"bad","details":"row 7"}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":400,"message":"bad","details":"row 7"}`, Source: def}},
		{name: "message not a string",
			text: `{"code":400,"message":42}`,
			want: cerrors.Classification{Class: transient, Message: `{"code":400,"message":42}`, Source: def}},

		{name: "plain text",
			text: "connection reset by peer",
			want: cerrors.Classification{Class: transient, Message: "connection reset by peer", Source: def}},
		{name: "plain text mentioning a code",
			text: "upstream returned 400 Bad Request",
			want: cerrors.Classification{Class: transient, Message: "upstream returned 400 Bad Request", Source: def}},
		{name: "empty text",
			text: "",
			want: cerrors.Classification{Class: transient, Message: "", Source: def}},
		{name: "whitespace only",
			text: " \n\t",
			want: cerrors.Classification{Class: transient, Message: " \n\t", Source: def}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertClassification(t, cerrors.Classify(errors.New(tt.text)), tt.want)
			// Wrapping the received text with %w adds a prefix but no
			// *Error, so the classification must be the suffix form's (as
			// long as the object is within the suffix form's 32 braces).
			if tt.want.Source == wire && tt.text == strings.TrimSpace(tt.text) && strings.Count(tt.text, "{") <= 32 {
				got := cerrors.Classify(fmt.Errorf("host: %w", errors.New(tt.text)))
				if got.Class != tt.want.Class || got.Code != tt.want.Code || got.Message != "host: "+tt.want.Message {
					t.Errorf("wrapped: got %+v, want %v %d %q", got, tt.want.Class, tt.want.Code, "host: "+tt.want.Message)
				}
			}
		})
	}
}

// nestedMap is {"a":{"a":...1}} depth levels deep, as encoding/json decodes
// strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth).
func nestedMap(depth int) map[string]any {
	var v any = float64(1)
	for range depth {
		v = map[string]any{"a": v}
	}
	return v.(map[string]any)
}

func TestClassifyOr(t *testing.T) {
	plain := errors.New("division by zero")

	tests := []struct {
		name  string
		err   error
		class cerrors.Class
		want  cerrors.Classification
	}{
		{name: "uncoded becomes fatal by rule", err: wrapN(plain, 1), class: fatal,
			want: cerrors.Classification{Class: fatal, Message: prefixN(1) + plain.Error(), Source: rule}},
		{name: "uncoded becomes transient by rule", err: plain, class: transient,
			want: cerrors.Classification{Class: transient, Message: plain.Error(), Source: rule}},
		{name: "invalid code is uncoded", err: cerrors.WithCode(plain, 0), class: fatal,
			want: cerrors.Classification{Class: fatal, Message: plain.Error(), Source: rule}},
		{name: "coded transient stays transient", err: wrapN(cerrors.WithCode(plain, 503), 2), class: fatal,
			want: cerrors.Classification{Class: transient, Code: 503, Message: prefixN(2) + plain.Error(), Source: typed}},
		{name: "Transient stays transient", err: cerrors.Transient(plain), class: fatal,
			want: cerrors.Classification{Class: transient, Code: 503, Message: plain.Error(), Source: typed}},
		{name: "coded fatal stays fatal", err: cerrors.Fatal(plain), class: transient,
			want: cerrors.Classification{Class: fatal, Code: 400, Message: plain.Error(), Source: typed}},
		{name: "wire transient stays transient", err: errors.New(`{"code":429,"message":"slow down"}`), class: fatal,
			want: cerrors.Classification{Class: transient, Code: 429, Message: "slow down", Source: wire}},
		{name: "wire without code takes the rule", err: errors.New(`map: {"message":"nil field"}`), class: fatal,
			want: cerrors.Classification{Class: fatal, Message: "map: nil field", Source: rule}},
		{name: "empty text takes the rule", err: errors.New(""), class: fatal,
			want: cerrors.Classification{Class: fatal, Message: "", Source: rule}},
		{name: "nil", err: nil, class: fatal, want: cerrors.Classification{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertClassification(t, cerrors.ClassifyOr(tt.err, tt.class), tt.want)
		})
	}
}

func TestClassifyProcessor(t *testing.T) {
	plain := errors.New("field .payload.id: not a number")
	if c := cerrors.ClassifyProcessor(plain); c.Class != fatal || c.Code != 0 {
		t.Errorf("uncoded processor error = %+v, want fatal without a code", c)
	}
	if c := cerrors.ClassifyProcessor(fmt.Errorf("lookup: %w", cerrors.WithCode(plain, 503))); c.Class != transient || c.Code != 503 {
		t.Errorf("processor error coded 503 = %+v, want transient 503", c)
	}
	if c := cerrors.ClassifyProcessor(errors.New(`{"code":429,"message":"slow down"}`)); c.Class != transient || c.Code != 429 {
		t.Errorf("processor error with a wire code = %+v, want transient 429", c)
	}
}

func TestClassString(t *testing.T) {
	tests := []struct {
		name  string
		class cerrors.Class
		text  string
	}{
		{name: "transient", class: transient, text: "transient"},
		{name: "fatal", class: fatal, text: "fatal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.class.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			got, err := cerrors.ParseClass(tt.text)
			if err != nil || got != tt.class {
				t.Errorf("ParseClass(%q) = %v, %v; want %v, nil", tt.text, got, err, tt.class)
			}
		})
	}
	t.Run("zero value is not valid", func(t *testing.T) {
		var zero cerrors.Class
		if zero == transient || zero == fatal {
			t.Fatalf("zero Class is %v", zero)
		}
		if got := zero.String(); got != "Class(0)" {
			t.Errorf("String() = %q, want Class(0)", got)
		}
	})
	for _, bad := range []string{"", "Class(0)", "Class(3)", "Fatal", "TRANSIENT", " fatal", "default"} {
		t.Run("parse "+strconv.Quote(bad), func(t *testing.T) {
			if got, err := cerrors.ParseClass(bad); err == nil {
				t.Errorf("ParseClass(%q) = %v, nil; want an error", bad, got)
			}
		})
	}
}

func TestSourceString(t *testing.T) {
	tests := []struct {
		name   string
		source cerrors.Source
		text   string
	}{
		{name: "typed", source: typed, text: "typed"},
		{name: "json", source: wire, text: "json"},
		{name: "default", source: def, text: "default"},
		{name: "rule", source: rule, text: "rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.source.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			got, err := cerrors.ParseSource(tt.text)
			if err != nil || got != tt.source {
				t.Errorf("ParseSource(%q) = %v, %v; want %v, nil", tt.text, got, err, tt.source)
			}
		})
	}
	t.Run("zero value is not valid", func(t *testing.T) {
		var zero cerrors.Source
		for _, tt := range tests {
			if zero == tt.source {
				t.Fatalf("zero Source is %v", zero)
			}
		}
		if got := zero.String(); got != "Source(0)" {
			t.Errorf("String() = %q, want Source(0)", got)
		}
	})
	for _, bad := range []string{"", "Source(0)", "Source(5)", "JSON", "Typed", "transient"} {
		t.Run("parse "+strconv.Quote(bad), func(t *testing.T) {
			if got, err := cerrors.ParseSource(bad); err == nil {
				t.Errorf("ParseSource(%q) = %v, nil; want an error", bad, got)
			}
		})
	}
}

func TestMarshalWire(t *testing.T) {
	base := errors.New("column \"email\" violates not-null constraint")
	msg := `column \"email\" violates not-null constraint`

	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "wrapped Fatal", err: wrapN(cerrors.Fatal(base), 3),
			want: `{"code":400,"message":"` + prefixN(3) + msg + `"}`},
		{name: "wrapped 422", err: wrapN(cerrors.WithCode(base, 422), 3),
			want: `{"code":422,"message":"` + prefixN(3) + msg + `"}`},
		{name: "Transient", err: cerrors.Transient(base),
			want: `{"code":503,"message":"` + msg + `"}`},
		{name: "uncoded has no code", err: wrapN(base, 1),
			want: `{"message":"` + prefixN(1) + msg + `"}`},
		{name: "invalid code has no code", err: cerrors.WithCode(base, 1000),
			want: `{"message":"` + msg + `"}`},
		{name: "details", err: cerrors.WithDetails(base, 422, map[string]any{"table": "users", "row": 7}),
			want: `{"code":422,"message":"` + msg + `","details":{"row":7,"table":"users"}}`},
		{name: "details kept through Fatal", err: cerrors.Fatal(cerrors.WithDetails(base, 409, map[string]any{"key": "k1"})),
			want: `{"code":409,"message":"` + msg + `","details":{"key":"k1"}}`},
		{name: "details that cannot be JSON are dropped", err: cerrors.WithDetails(base, 422, map[string]any{"ch": make(chan int)}),
			want: `{"code":422,"message":"` + msg + `"}`},
		{name: "wire text is re-encoded, not nested", err: errors.New(`write: {"code":429,"message":"slow down"}`),
			want: `{"code":429,"message":"write: slow down"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(cerrors.MarshalWire(tt.err)); got != tt.want {
				t.Errorf("MarshalWire =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestMarshalWireRoundTrip sends errors across the process boundary: what
// the receiver classifies from the text must be what the sender classified.
func TestMarshalWireRoundTrip(t *testing.T) {
	base := errors.New("kafka: broker b-1 not available")
	details := map[string]any{"topic": "orders", "partition": float64(3), "ids": []any{"a", "b"}, "nested": map[string]any{"ok": false}}

	tests := []struct {
		name string
		err  error
		// wantClass and wantCode pin the verdict on both sides.
		wantClass   cerrors.Class
		wantCode    int
		wantDetails map[string]any
	}{
		{name: "plain", err: base, wantClass: transient},
		{name: "Fatal", err: cerrors.Fatal(base), wantClass: fatal, wantCode: 400},
		{name: "Transient", err: cerrors.Transient(base), wantClass: transient, wantCode: 503},
		{name: "429", err: cerrors.WithCode(base, 429), wantClass: transient, wantCode: 429},
		{name: "501", err: cerrors.WithCode(base, 501), wantClass: fatal, wantCode: 501},
		{name: "Fatal 3x wrapped", err: wrapN(cerrors.Fatal(base), 3), wantClass: fatal, wantCode: 400},
		{name: "422 3x wrapped", err: wrapN(cerrors.WithCode(base, 422), 3), wantClass: fatal, wantCode: 422},
		{name: "Transient 10x wrapped", err: wrapN(cerrors.Transient(base), 10), wantClass: transient, wantCode: 503},
		{name: "invalid code", err: cerrors.WithCode(base, 0), wantClass: transient},
		// errors.As searches an errors.Join depth first, left to right, so
		// the first coded branch decides, whatever its class.
		{name: "Join fatal then transient: fatal wins",
			err:       errors.Join(cerrors.Fatal(base), cerrors.Transient(errors.New("close timeout"))),
			wantClass: fatal, wantCode: 400},
		{name: "Join transient then fatal: transient wins",
			err:       errors.Join(cerrors.Transient(errors.New("close timeout")), cerrors.WithCode(base, 422)),
			wantClass: transient, wantCode: 503},
		{name: "Join plain then fatal: fatal",
			err:       errors.Join(errors.New("close timeout"), wrapN(cerrors.Fatal(base), 1)),
			wantClass: fatal, wantCode: 400},
		{name: "awkward characters",
			err:       cerrors.Fatal(errors.New("quote \" backslash \\ tab \t newline \n <html> & \u2028 é 日本 \x00")),
			wantClass: fatal, wantCode: 400},
		{name: "empty message", err: cerrors.WithCode(errors.New(""), 409), wantClass: fatal, wantCode: 409},
		{name: "message that looks like wire JSON", err: cerrors.WithCode(errors.New(`{"code":503,"message":"x"}`), 400),
			wantClass: fatal, wantCode: 400},
		{name: "already wire text", err: errors.New(`{"code":404,"message":"gone"}`), wantClass: fatal, wantCode: 404},
		{name: "already wire text with prefix", err: fmt.Errorf("write: %w", errors.New(`{"code":503,"message":"busy"}`)),
			wantClass: transient, wantCode: 503},
		{name: "details", err: wrapN(cerrors.WithDetails(base, 422, details), 2),
			wantClass: fatal, wantCode: 422, wantDetails: details},
		{name: "details under Fatal", err: cerrors.Fatal(cerrors.WithDetails(base, 403, details)),
			wantClass: fatal, wantCode: 403, wantDetails: details},
		{name: "details that cannot be JSON", err: cerrors.WithDetails(base, 429, map[string]any{"f": func() {}}),
			wantClass: transient, wantCode: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := cerrors.Classify(tt.err)
			if sent.Class != tt.wantClass || sent.Code != tt.wantCode {
				t.Fatalf("sender: %v %d, want %v %d", sent.Class, sent.Code, tt.wantClass, tt.wantCode)
			}
			b := cerrors.MarshalWire(tt.err)
			got := cerrors.Classify(errors.New(string(b)))
			wantSource := def
			if tt.wantCode != 0 {
				wantSource = wire
			}
			assertClassification(t, got, cerrors.Classification{
				Class: tt.wantClass, Code: tt.wantCode, Message: sent.Message, Source: wantSource, Details: tt.wantDetails,
			})
			// A second hop (a host passing the error on) changes nothing.
			if again := cerrors.MarshalWire(errors.New(string(b))); string(again) != string(b) {
				t.Errorf("second hop:\n%s\nfirst hop:\n%s", again, b)
			}
		})
	}
}

func TestFromWire(t *testing.T) {
	tests := []struct {
		name, text string
		want       cerrors.Classification
	}{
		{name: "fatal", text: `{"code":422,"message":"column price does not exist"}`,
			want: cerrors.Classification{Class: cerrors.ClassFatal, Code: 422, Source: cerrors.SourceJSON, Message: `write: column price does not exist`}},
		{name: "transient with details", text: `{"code":503,"message":"busy","details":{"retry":1}}`,
			want: cerrors.Classification{Class: cerrors.ClassTransient, Code: 503, Source: cerrors.SourceJSON, Message: `write: busy`, Details: map[string]any{"retry": float64(1)}}},
		{name: "no code", text: `{"message":"odd"}`,
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault, Message: `write: odd`}},
		{name: "plain text", text: `connection reset`,
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault, Message: `write: connection reset`}},
		{name: "deeply nested details still classify", text: `{"code":400,"message":"bad","details":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`,
			want: cerrors.Classification{Class: cerrors.ClassFatal, Code: 400, Source: cerrors.SourceJSON, Message: `write: bad`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cerrors.Classify(fmt.Errorf("write: %w", cerrors.FromWire(tt.text)))
			if tt.name == "deeply nested details still classify" {
				got.Details = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// An error names its record through any wrapping and across the wire.
func TestForRecordSurvivesWrappingAndTheWire(t *testing.T) {
	pos := []byte{0, 1, 2, 'k', 0xff}
	err := fmt.Errorf("write batch: %w", cerrors.ForRecord(pos, cerrors.WithDetails(errors.New("row rejected"), 422, map[string]any{"table": "orders"})))
	if got, ok := cerrors.RecordOf(err); !ok || !bytes.Equal(got, pos) {
		t.Fatalf("RecordOf in process = %v %v, want %v", got, ok, pos)
	}
	wire := cerrors.MarshalWire(err)
	back := cerrors.FromWire(string(wire))
	if got, ok := cerrors.RecordOf(back); !ok || !bytes.Equal(got, pos) {
		t.Fatalf("RecordOf after the wire (%s) = %v %v, want %v", wire, got, ok, pos)
	}
	c := cerrors.Classify(back)
	if c.Code != 422 || c.Details["table"] != "orders" {
		t.Errorf("after the wire: %+v, want code 422 and the table detail kept", c)
	}
	// The caller's details are not changed by marshalling.
	details := map[string]any{"table": "orders"}
	_ = cerrors.MarshalWire(cerrors.ForRecord(pos, cerrors.WithDetails(errors.New("x"), 503, details)))
	if _, changed := details[cerrors.DetailPosition]; changed {
		t.Error("MarshalWire added the position to the caller's details map")
	}
	for _, notNamed := range []error{errors.New("connection refused"), cerrors.FromWire(`{"code":503,"message":"x","details":{"position":"%%%"}}`), nil} {
		if p, ok := cerrors.RecordOf(notNamed); ok {
			t.Errorf("RecordOf(%v) = %v, want none", notNamed, p)
		}
	}
	if cerrors.ForRecord(pos, nil) != nil {
		t.Error("ForRecord(pos, nil) is not nil")
	}
}

// A component's error is classified by its kind: an uncoded processor error
// is fatal (running it again gives the same error), an uncoded connector
// error transient; a code decides for every kind.
func TestClassifyComponent(t *testing.T) {
	plain := errors.New("boom")
	coded := cerrors.WithCode(errors.New("slow down"), 429)
	tests := []struct {
		kind cerrors.ComponentKind
		err  error
		want cerrors.Class
	}{
		{cerrors.ComponentProcessor, plain, cerrors.ClassFatal},
		{cerrors.ComponentSource, plain, cerrors.ClassTransient},
		{cerrors.ComponentDestination, plain, cerrors.ClassTransient},
		{"", plain, cerrors.ClassTransient},
		{cerrors.ComponentProcessor, coded, cerrors.ClassTransient},
		{cerrors.ComponentSource, coded, cerrors.ClassTransient},
	}
	for _, tt := range tests {
		if got := cerrors.ClassifyComponent(tt.kind, tt.err).Class; got != tt.want {
			t.Errorf("%q %v: %s, want %s", tt.kind, tt.err, got, tt.want)
		}
	}
}
