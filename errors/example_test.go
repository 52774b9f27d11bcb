package errors_test

import (
	"errors"
	"fmt"

	cerrors "github.com/conduitry/conduit/errors"
)

// printVerdict prints what the supervisor and the audit log see.
func printVerdict(err error) {
	c := cerrors.Classify(err)
	fmt.Printf("%s %d (%s): %s\n", c.Class, c.Code, c.Source, c.Message)
}

// A destination connector whose configuration is wrong returns a fatal
// error: restarting cannot help, the pipeline waits for a human. The engine
// wraps it with context, which keeps the mark.
func ExampleFatal() {
	open := func() error {
		err := errors.New("password authentication failed for user \"conduit\"")
		return cerrors.Fatal(fmt.Errorf("connect to postgres: %w", err))
	}
	err := fmt.Errorf("open destination: %w", open())
	printVerdict(err)
	// Output:
	// fatal 400 (typed): open destination: connect to postgres: password authentication failed for user "conduit"
}

// A source connector that lost its broker returns a transient error: the
// pipeline is restarted on backoff.
func ExampleTransient() {
	read := func() error {
		return cerrors.Transientf("read: broker %s not available", "b-1")
	}
	printVerdict(read())
	// Output:
	// transient 503 (typed): read: broker b-1 not available
}

// A connector that talks HTTP passes the upstream status straight through;
// the code table decides the class.
func ExampleWithCode() {
	write := func(status int) error {
		if status < 300 {
			return nil
		}
		err := fmt.Errorf("POST /v1/records: %d", status)
		return cerrors.WithCode(err, status)
	}
	for _, status := range []int{200, 429, 422, 501, 502} {
		err := write(status)
		if err == nil {
			fmt.Printf("%d: ok\n", status)
			continue
		}
		printVerdict(err)
	}
	// Output:
	// 200: ok
	// transient 429 (typed): POST /v1/records: 429
	// fatal 422 (typed): POST /v1/records: 422
	// fatal 501 (typed): POST /v1/records: 501
	// transient 502 (typed): POST /v1/records: 502
}

// Classify decides from a typed code first, then from the wire JSON in the
// text (an error from a connector in another process, maybe wrapped by the
// host), and otherwise falls back to transient.
func ExampleClassify() {
	for _, err := range []error{
		cerrors.WithCode(errors.New("no such table: users"), cerrors.CodeNotFound),
		errors.New(`{"code":503,"message":"dial tcp 127.0.0.1:5432: connect: connection refused"}`),
		fmt.Errorf("write: %w", errors.New(`{"code":400,"message":"bad"}`)),
		errors.New("connection reset by peer"),
	} {
		printVerdict(err)
	}
	// Output:
	// fatal 404 (typed): no such table: users
	// transient 503 (json): dial tcp 127.0.0.1:5432: connect: connection refused
	// fatal 400 (json): write: bad
	// transient 0 (default): connection reset by peer
}

// Processor errors without a code are fatal by rule: running a deterministic
// processor again gives the same error. A transient code still wins.
func ExampleClassifyOr() {
	c := cerrors.ClassifyOr(errors.New("field .payload.id: not a number"), cerrors.ClassFatal)
	fmt.Println(c.Class, c.Source)
	c = cerrors.ClassifyOr(cerrors.Transient(errors.New("lookup service busy")), cerrors.ClassFatal)
	fmt.Println(c.Class, c.Source)
	// Output:
	// fatal rule
	// transient typed
}

// A connector process sends its errors to the host as wire JSON; the host
// classifies the text it receives as the connector would have.
func ExampleMarshalWire() {
	err := cerrors.WithDetails(errors.New("duplicate key"), cerrors.CodeConflict, map[string]any{"key": "order-17"})
	b := cerrors.MarshalWire(fmt.Errorf("write: %w", err))
	fmt.Println(string(b))

	received := errors.New(string(b))
	c := cerrors.Classify(received)
	fmt.Println(c.Class, c.Code, c.Source, c.Message, c.Details)
	// Output:
	// {"code":409,"message":"write: duplicate key","details":{"key":"order-17"}}
	// fatal 409 json write: duplicate key map[key:order-17]
}
