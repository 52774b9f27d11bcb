package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/sdk"
)

// explain prints what the runtime makes of a connector's error: the wire
// JSON sdk.Serve sends, and how the runtime classifies the text it
// receives.
func explain(err error) {
	wire := cerrors.MarshalWire(err)
	c := cerrors.Classify(errors.New(string(wire)))
	fmt.Printf("sent:    %s\n", wire)
	fmt.Printf("runtime: %s %d\n", c.Class, c.Code)
}

// A connector whose credentials are wrong returns a fatal error: restarting
// cannot help, so the runtime stops the pipeline (degraded) until a human
// fixes the settings and starts it again. Wrapping with %w keeps the mark.
func ExampleFatal() {
	open := func() error {
		err := errors.New(`password authentication failed for user "conduit"`)
		return sdk.Fatal(fmt.Errorf("connect to db.internal:5432: %w", err))
	}
	explain(fmt.Errorf("open: %w", open()))
	// Output:
	// sent:    {"code":400,"message":"open: connect to db.internal:5432: password authentication failed for user \"conduit\""}
	// runtime: fatal 400
}

// A source that lost its broker returns a transient error: the runtime
// restarts the pipeline on an exponential backoff (1s, 2s, 4s, ...), and
// the new process opens at the last acknowledged position.
func ExampleTransient() {
	read := func() error {
		return sdk.Transientf("read: broker %s not available", "b-1")
	}
	explain(read())
	// Output:
	// sent:    {"code":503,"message":"read: broker b-1 not available"}
	// runtime: transient 503
}

// A connector that talks HTTP passes the upstream status straight through;
// the code table decides: 429 and 503 restart the pipeline, 422 and 501
// stop it. No code at all is transient too.
func ExampleWithCode() {
	post := func(resp *http.Response) error {
		if resp.StatusCode < 300 {
			return nil
		}
		err := fmt.Errorf("POST /v1/records: %s", resp.Status)
		return sdk.WithCode(err, resp.StatusCode)
	}
	for _, status := range []int{429, 422, 501, 503} {
		resp := &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status))}
		explain(fmt.Errorf("write: %w", post(resp)))
	}
	explain(errors.New("write: connection reset by peer"))
	// Output:
	// sent:    {"code":429,"message":"write: POST /v1/records: 429 Too Many Requests"}
	// runtime: transient 429
	// sent:    {"code":422,"message":"write: POST /v1/records: 422 Unprocessable Entity"}
	// runtime: fatal 422
	// sent:    {"code":501,"message":"write: POST /v1/records: 501 Not Implemented"}
	// runtime: fatal 501
	// sent:    {"code":503,"message":"write: POST /v1/records: 503 Service Unavailable"}
	// runtime: transient 503
	// sent:    {"message":"write: connection reset by peer"}
	// runtime: transient 0
}

// counterSource is a complete minimal source: it counts up from the
// position it is opened at, in steps of the setting "step".
type counterSource struct {
	step, n int
}

// Configure checks the settings; a bad one is fatal.
func (s *counterSource) Configure(_ context.Context, cfg sdk.Config) error {
	s.step = 1
	if v, ok := cfg.Settings["step"]; ok {
		step, err := strconv.Atoi(v)
		if err != nil || step < 1 {
			return sdk.Fatalf("setting %q: %q is not a whole number above 0", "step", v)
		}
		s.step = step
	}
	return nil
}

// Open resumes after pos, the last number the pipeline acknowledged.
func (s *counterSource) Open(_ context.Context, pos sdk.Position) error {
	if pos == nil {
		return nil
	}
	n, err := strconv.Atoi(string(pos))
	if err != nil {
		return sdk.Fatalf("position %q is not a number", pos)
	}
	s.n = n
	return nil
}

// Read returns max records at once; a real source would block until data
// is there and return ctx.Err() when ctx is done.
func (s *counterSource) Read(ctx context.Context, max int) ([]sdk.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs := make([]sdk.Record, max)
	for i := range recs {
		s.n += s.step
		pos := sdk.Position(strconv.Itoa(s.n))
		recs[i] = sdk.Record{
			Position:  pos,
			Operation: sdk.OperationCreate,
			// conduit adds opencdc.readAt and conduit.source.connector.id
			// ("pipeline:connector"), as Conduit does.
			Metadata: sdk.Metadata{},
			Key:      sdk.RawData(pos),
			Payload:  sdk.Change{After: sdk.StructuredData{"n": s.n}},
		}
	}
	return recs, nil
}

// Ack has nothing to confirm upstream: the position says it all.
func (s *counterSource) Ack(context.Context, []sdk.Position) error { return nil }

// Teardown has nothing to release.
func (s *counterSource) Teardown(context.Context) error { return nil }

// A complete minimal source. Its main would be
//
//	func main() { sdk.Serve(counter) }
//
// Here the example drives it the way the runtime does over the socket, for
// the second run of a pipeline that acknowledged up to 20.
func ExamplePlugin() {
	counter := sdk.Plugin{
		Name:      "counter",
		Version:   "v0.1.0",
		NewSource: func() sdk.Source { return &counterSource{} },
	}

	ctx := context.Background()
	src := counter.NewSource()
	if err := src.Configure(ctx, sdk.Config{ConnectorID: "numbers", Settings: map[string]string{"step": "10"}}); err != nil {
		panic(err)
	}
	if err := src.Open(ctx, sdk.Position("20")); err != nil {
		panic(err)
	}
	recs, _ := src.Read(ctx, 3)
	var positions []sdk.Position
	for _, r := range recs {
		fmt.Println(r.Position, r.Payload.After)
		positions = append(positions, r.Position)
	}
	fmt.Println(src.Ack(ctx, positions), src.Teardown(ctx))

	bad := counter.NewSource().Configure(ctx, sdk.Config{Settings: map[string]string{"step": "ten"}})
	explain(bad)
	// Output:
	// 30 map[n:30]
	// 40 map[n:40]
	// 50 map[n:50]
	// <nil> <nil>
	// sent:    {"code":400,"message":"setting \"step\": \"ten\" is not a whole number above 0"}
	// runtime: fatal 400
}

func ExampleWithDependency() {
	err := sdk.WithDependency(errors.New("insert into orders: connection refused"), 503, "orders-db")
	explain(fmt.Errorf("write: %w", err))
	// Output:
	// sent:    {"code":503,"message":"write: insert into orders: connection refused","details":{"dependency":"orders-db"}}
	// runtime: transient 503
}
