package sdk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
)

func TestInfo(t *testing.T) {
	tests := []struct {
		name     string
		plugin   Plugin
		src, dst bool
	}{
		{name: "source", plugin: sourcePlugin(&fakeSource{}), src: true},
		{name: "destination", plugin: destinationPlugin(&fakeDestination{}), dst: true},
		{name: "both", plugin: Plugin{
			Name:           "fake",
			Version:        "v1.2.3",
			NewSource:      func() Source { return &fakeSource{} },
			NewDestination: func() Destination { return &fakeDestination{} },
		}, src: true, dst: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.plugin)
			resp, err := h.info.Info(context.Background(), connect.NewRequest(&connectorv1.InfoRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Msg
			if got.GetName() != "fake" || got.GetVersion() != "v1.2.3" || got.GetProtocolVersion() != 1 ||
				got.GetSource() != tt.src || got.GetDestination() != tt.dst {
				t.Errorf("Info = %v", got)
			}
		})
	}
}

// TestErrorWire is the point of the SDK's error handling: whatever form
// the connector's error has, the runtime receives the wire JSON with the
// code of the classification, so fatal stays fatal across the process.
func TestErrorWire(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name  string
		err   error
		want  string
		class cerrors.Class
	}{
		{
			name:  "code under three %w",
			err:   fmt.Errorf("open: %w", fmt.Errorf("connect: %w", fmt.Errorf("auth: %w", WithCode(base, CodeUnauthorized)))),
			want:  `{"code":401,"message":"open: connect: auth: boom"}`,
			class: cerrors.ClassFatal,
		},
		{
			name:  "fatal under three %w",
			err:   fmt.Errorf("a: %w", fmt.Errorf("b: %w", fmt.Errorf("c: %w", Fatal(base)))),
			want:  `{"code":400,"message":"a: b: c: boom"}`,
			class: cerrors.ClassFatal,
		},
		{
			name:  "transient under three %w",
			err:   fmt.Errorf("a: %w", fmt.Errorf("b: %w", fmt.Errorf("c: %w", Transientf("broker %s down", "b-1")))),
			want:  `{"code":503,"message":"a: b: c: broker b-1 down"}`,
			class: cerrors.ClassTransient,
		},
		{
			name:  "joined, the coded one second",
			err:   errors.Join(errors.New("close: broken pipe"), fmt.Errorf("flush: %w", WithCode(base, CodeUnprocessable))),
			want:  `{"code":422,"message":"close: broken pipe\nflush: boom"}`,
			class: cerrors.ClassFatal,
		},
		{
			name:  "joined under %w",
			err:   fmt.Errorf("teardown: %w", errors.Join(Transient(errors.New("x")), errors.New("y"))),
			want:  `{"code":503,"message":"teardown: x\ny"}`,
			class: cerrors.ClassTransient,
		},
		{
			name:  "details",
			err:   fmt.Errorf("write: %w", WithDetails(base, CodeConflict, map[string]any{"key": "order-17"})),
			want:  `{"code":409,"message":"write: boom","details":{"key":"order-17"}}`,
			class: cerrors.ClassFatal,
		},
		{
			name:  "plain text has no code",
			err:   errors.New("connection reset by peer"),
			want:  `{"message":"connection reset by peer"}`,
			class: cerrors.ClassTransient,
		},
		{
			name:  "wire JSON from another process keeps its code",
			err:   fmt.Errorf("upstream: %w", errors.New(`{"code":404,"message":"no such table"}`)),
			want:  `{"code":404,"message":"upstream: no such table"}`,
			class: cerrors.ClassFatal,
		},
		{
			name:  "a code outside 100-599 is no code",
			err:   WithCode(base, 42),
			want:  `{"message":"boom"}`,
			class: cerrors.ClassTransient,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Run("source Open", func(t *testing.T) {
				src := &fakeSource{errs: map[string]error{"Open": tt.err}}
				h := newHarness(t, sourcePlugin(src))
				if err := h.configureSource(t, nil); err != nil {
					t.Fatal(err)
				}
				err := h.openSource("")
				wantWire(t, err, tt.want, tt.class)
				if code, _ := wire(t, err); code != connect.CodeUnknown {
					t.Errorf("connect code %v, want unknown", code)
				}
			})
			t.Run("source Read", func(t *testing.T) {
				src := &fakeSource{readFn: func(context.Context, int) ([]Record, error) { return nil, tt.err }}
				h := newHarness(t, sourcePlugin(src))
				if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
					t.Fatal(err)
				}
				_, err := h.read(context.Background(), 10)
				wantWire(t, err, tt.want, tt.class)
			})
			t.Run("source Ack", func(t *testing.T) {
				src := &fakeSource{errs: map[string]error{"Ack": tt.err}}
				h := newHarness(t, sourcePlugin(src))
				if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
					t.Fatal(err)
				}
				_, err := h.src.Ack(context.Background(), connect.NewRequest(&connectorv1.AckRequest{Positions: [][]byte{[]byte("1")}}))
				wantWire(t, err, tt.want, tt.class)
			})
			t.Run("destination Write", func(t *testing.T) {
				dst := &fakeDestination{writeFn: func([]Record) (int, error) { return 0, tt.err }}
				h := newHarness(t, destinationPlugin(dst))
				if err := h.configureDestination(t); err != nil {
					t.Fatal(err)
				}
				resp, err := h.write(t, []Record{testRecord(1)})
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetWritten() != 0 || resp.GetError() != tt.want {
					t.Errorf("WriteResponse = %d, %s; want 0, %s", resp.GetWritten(), resp.GetError(), tt.want)
				}
			})
			t.Run("destination Teardown", func(t *testing.T) {
				dst := &fakeDestination{errs: map[string]error{"Teardown": tt.err}}
				h := newHarness(t, destinationPlugin(dst))
				if err := h.configureDestination(t); err != nil {
					t.Fatal(err)
				}
				_, err := h.dst.Teardown(context.Background(), connect.NewRequest(&connectorv1.DestinationServiceTeardownRequest{}))
				wantWire(t, err, tt.want, tt.class)
			})
		})
	}
}

// A Configure error without a code is fatal: settings do not heal on a
// restart. One with a code keeps it.
func TestConfigureErrorDefaultsToFatal(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		want  string
		class cerrors.Class
	}{
		{"no code", fmt.Errorf("setting %q: required", "url"), `{"code":400,"message":"setting \"url\": required"}`, cerrors.ClassFatal},
		{"transient", Transientf("schema registry unavailable"), `{"code":503,"message":"schema registry unavailable"}`, cerrors.ClassTransient},
		{"fatal code", WithCode(errors.New("forbidden"), CodeForbidden), `{"code":403,"message":"forbidden"}`, cerrors.ClassFatal},
		{"wire JSON", errors.New(`{"code":429,"message":"slow down"}`), `{"code":429,"message":"slow down"}`, cerrors.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{errs: map[string]error{"Configure": tt.err}}
			h := newHarness(t, sourcePlugin(src))
			wantWire(t, h.configureSource(t, nil), tt.want, tt.class)
		})
	}
}

func TestSourceRoundTrip(t *testing.T) {
	src := &fakeSource{}
	h := newHarness(t, sourcePlugin(src))
	ctx := context.Background()

	if err := h.configureSource(t, map[string]string{"rate": "10"}); err != nil {
		t.Fatal(err)
	}
	if want := (Config{PipelineID: "p1", ConnectorID: "c1", Settings: map[string]string{"rate": "10"}}); !reflect.DeepEqual(src.cfg, want) {
		t.Errorf("Configure got %+v, want %+v", src.cfg, want)
	}
	if err := h.openSource("7"); err != nil {
		t.Fatal(err)
	}
	if string(src.pos) != "7" {
		t.Errorf("Open got position %q, want 7", src.pos)
	}

	want := []Record{testRecord(1), testRecord(2), testRecord(3)}
	src.readFn = func(_ context.Context, max int) ([]Record, error) {
		if max != 5 {
			t.Errorf("Read got max %d, want 5", max)
		}
		return want, nil
	}
	got, err := h.read(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read\n got %v\nwant %v", got, want)
	}

	if _, err := h.src.Ack(ctx, connect.NewRequest(&connectorv1.AckRequest{Positions: [][]byte{[]byte("1"), []byte("2"), []byte("3")}})); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(src.acked, []string{"1", "2", "3"}) {
		t.Errorf("acked %v, want 1 2 3 in order", src.acked)
	}

	if _, err := h.src.Teardown(ctx, connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.tornDown:
	default:
		t.Error("Teardown did not tell Serve to stop")
	}
	// Serve reads one batch ahead, so there may be a second Read, anywhere
	// after the first; the rest keeps its order.
	calls := src.Calls()
	reads := 0
	calls = slices.DeleteFunc(calls, func(c string) bool {
		if c == "Read" {
			reads++
			return true
		}
		return false
	})
	if want := []string{"Configure", "Open", "Ack", "Teardown"}; !reflect.DeepEqual(calls, want) || reads < 1 || reads > 2 {
		t.Errorf("calls %v with %d Reads, want %v with 1 or 2 Reads", calls, reads, want)
	}
}

// An empty position means "from the beginning", the same as none.
func TestOpenEmptyPositionIsNil(t *testing.T) {
	src := &fakeSource{}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	if src.pos != nil {
		t.Errorf("Open got %q, want nil", src.pos)
	}
}

// A Read that returns nothing is called again, so the runtime only ever
// receives records or an error.
func TestReadRetriesEmpty(t *testing.T) {
	var calls atomic.Int32
	src := &fakeSource{readFn: func(context.Context, int) ([]Record, error) {
		n := calls.Add(1)
		if n < 3 {
			return nil, nil
		}
		return []Record{testRecord(int(n))}, nil
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	got, err := h.read(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Position) != "3" {
		t.Errorf("got %v, want record 3 (after two empty reads)", got)
	}
}

// TestReadAheadKeepsOrderAndSplits: the batch read ahead answers the next
// request, in order; a request that asks for fewer than the read ahead got
// receives part of it and the rest comes next, nothing lost or repeated.
func TestReadAheadKeepsOrderAndSplits(t *testing.T) {
	var next atomic.Int32
	src := &fakeSource{readFn: func(_ context.Context, max int) ([]Record, error) {
		return nextRecords(&next, max), nil
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range []int{4, 4, 2, 2, 2, 4} {
		recs, err := h.read(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > n {
			t.Fatalf("asked for %d, got %d", n, len(recs))
		}
		for _, r := range recs {
			got = append(got, string(r.Position))
		}
	}
	wantInOrder(t, got)
	if len(got) < 14 {
		t.Fatalf("got %d records from six requests, want at least 14", len(got))
	}
}

// Records the runtime would reject, far from the cause, are refused with a
// fatal error that names the bug.
func TestReadRejectsBadRecords(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
		want string
	}{
		{"more than max", []Record{testRecord(1), testRecord(2), testRecord(3)}, "returned 3 records, more than the 2 asked for"},
		{"no position", []Record{{Operation: OperationCreate}}, "record 0 of 1 has no position"},
		{"no operation", []Record{{Position: Position("9")}}, `record 0 (position "9") has no valid operation`},
		{"unencodable payload", []Record{{Position: Position("9"), Operation: OperationCreate,
			Payload: Change{After: StructuredData{"c": make(chan int)}}}}, "unsupported value type chan int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{readFn: func(context.Context, int) ([]Record, error) { return tt.recs, nil }}
			h := newHarness(t, sourcePlugin(src))
			if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
				t.Fatal(err)
			}
			_, err := h.read(context.Background(), 2)
			_, msg := wire(t, err)
			c := cerrors.Classify(errors.New(msg))
			if c.Class != cerrors.ClassFatal || !strings.Contains(c.Message, tt.want) {
				t.Errorf("got %s (%s), want fatal containing %q", msg, c.Class, tt.want)
			}
		})
	}
}

// Read and Ack run at the same time: an Ack is not held up by a Read that
// waits for data.
func TestAckWhileReadWaits(t *testing.T) {
	reading := make(chan struct{})
	release := make(chan struct{})
	src := &fakeSource{readFn: func(ctx context.Context, _ int) ([]Record, error) {
		close(reading)
		select {
		case <-release:
			return []Record{testRecord(1)}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := h.read(context.Background(), 1)
		readErr <- err
	}()
	<-reading
	if _, err := h.src.Ack(context.Background(), connect.NewRequest(&connectorv1.AckRequest{Positions: [][]byte{[]byte("0")}})); err != nil {
		t.Fatalf("Ack during Read: %v", err)
	}
	close(release)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
}

// Teardown stops a Read that waits (its ctx is cancelled) instead of
// waiting for it forever, and only then tears the source down.
func TestTeardownCancelsWaitingRead(t *testing.T) {
	reading := make(chan struct{})
	src := &fakeSource{readFn: func(ctx context.Context, _ int) ([]Record, error) {
		close(reading)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := h.read(context.Background(), 1)
		readErr <- err
	}()
	<-reading
	if _, err := h.src.Teardown(context.Background(), connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{})); err != nil {
		t.Fatal(err)
	}
	err := <-readErr
	if code, msg := wire(t, err); code != connect.CodeCanceled || msg != `{"message":"context canceled"}` {
		t.Errorf("Read ended with %v %s, want canceled with the wire JSON", code, msg)
	}
	if calls := src.Calls(); calls[len(calls)-1] != "Teardown" {
		t.Errorf("calls %v: Teardown must come after Read returned", calls)
	}
}

// The runtime cancelling a Read reaches the source's ctx.
func TestReadCancelledByRuntime(t *testing.T) {
	cancelled := make(chan struct{})
	src := &fakeSource{readFn: func(ctx context.Context, _ int) ([]Record, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.read(ctx, 1); err == nil {
		t.Fatal("Read returned no error after the runtime cancelled it")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the source's ctx was not cancelled")
	}
}

// ReadStream sends the source's records batch after batch, in order and
// never more than asked for per batch, and ends with the source's error in
// the wire JSON, so that a fatal error stays fatal in the runtime.
func TestReadStreamKeepsOrderAndEndsWithTheSourceError(t *testing.T) {
	var next atomic.Int32
	src := &fakeSource{readFn: func(_ context.Context, max int) ([]Record, error) {
		if next.Load() >= 20 {
			return nil, fmt.Errorf("read page: %w", Fatal(WithCode(errors.New("table dropped"), 410)))
		}
		return nextRecords(&next, min(max, 3)), nil
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	stream, err := h.src.ReadStream(context.Background(), connect.NewRequest(&connectorv1.ReadStreamRequest{MaxRecords: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var got []string
	for stream.Receive() {
		b := stream.Msg().GetBatch()
		if b.GetCount() > 2 {
			t.Fatalf("a batch of %d records, asked for at most 2", b.GetCount())
		}
		recs, err := decodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Position))
		}
	}
	if len(got) != 20 {
		t.Fatalf("got %d records before the error, want 20: %v", len(got), got)
	}
	wantInOrder(t, got)
	var ce *connect.Error
	if !errors.As(stream.Err(), &ce) {
		t.Fatalf("the stream ended with %v, want the source's error", stream.Err())
	}
	c := cerrors.Classify(errors.New(ce.Message()))
	if c.Class != cerrors.ClassFatal || c.Code != 410 || !strings.Contains(c.Message, "table dropped") {
		t.Fatalf("the stream's error classifies as %+v, want fatal 410 with the message", c)
	}
}

// The runtime ends a stream by cancelling it (a teardown, a stop): the
// source's Read that waits for data must hear of it.
func TestReadStreamCancelledByRuntime(t *testing.T) {
	reading, cancelled := make(chan struct{}), make(chan struct{})
	src := &fakeSource{readFn: func(ctx context.Context, _ int) ([]Record, error) {
		close(reading)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The call returns with the first batch, which never comes.
	ended := make(chan bool, 1)
	go func() {
		stream, err := h.src.ReadStream(ctx, connect.NewRequest(&connectorv1.ReadStreamRequest{MaxRecords: 1}))
		ended <- err == nil && stream.Receive()
	}()
	select {
	case <-reading:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream never called the source's Read")
	}
	cancel()
	select {
	case gotBatch := <-ended:
		if gotBatch {
			t.Fatal("a batch arrived from a source that had none")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled stream did not end")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the source's ctx was not cancelled")
	}
}

// Concurrent Reads (which the runtime does not make, but a cancelled one
// may overlap the next) must not share the reused encode buffer while a
// response is being sent; the race detector checks it.
func TestConcurrentReadsKeepTheirBatches(t *testing.T) {
	src := &fakeSource{}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				recs, err := h.read(context.Background(), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if len(recs) != 1 || string(recs[0].Key.Bytes()) != string(recs[0].Position) {
					t.Errorf("got a torn batch: %v", recs)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDestinationRoundTrip(t *testing.T) {
	dst := &fakeDestination{}
	h := newHarness(t, destinationPlugin(dst))
	ctx := context.Background()
	if err := h.configureDestination(t); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dst.Open(ctx, connect.NewRequest(&connectorv1.DestinationServiceOpenRequest{})); err != nil {
		t.Fatal(err)
	}
	want := []Record{testRecord(1), testRecord(2)}
	resp, err := h.write(t, want)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetWritten() != 2 || resp.GetError() != "" {
		t.Errorf("WriteResponse = %v, want 2 written and no error", resp)
	}
	if !reflect.DeepEqual(dst.written, want) {
		t.Errorf("written\n got %v\nwant %v", dst.written, want)
	}
	if _, err := h.dst.Teardown(ctx, connect.NewRequest(&connectorv1.DestinationServiceTeardownRequest{})); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Configure", "Open", "Write", "Teardown"}; !reflect.DeepEqual(dst.Calls(), want) {
		t.Errorf("calls %v, want %v", dst.Calls(), want)
	}
}

func TestPartialWrite(t *testing.T) {
	tests := []struct {
		name        string
		n           int
		err         error
		wantWritten int32
		wantErr     string
	}{
		{"two of three, transient", 2, Transientf("disk busy"), 2, `{"code":503,"message":"disk busy"}`},
		{"one of three, fatal under %w", 1, fmt.Errorf("record 2: %w", WithCode(errors.New("rejected"), CodeUnprocessable)),
			1, `{"code":422,"message":"record 2: rejected"}`},
		{"none, plain text", 0, errors.New("EOF"), 0, `{"message":"EOF"}`},
		{"negative count is none", -1, errors.New("EOF"), 0, `{"message":"EOF"}`},
		{"short without error is a bug", 1, nil, 1,
			`{"code":400,"message":"destination Write wrote 1 of 3 records and returned no error (a bug in the destination)"}`},
		{"all and an error", 3, Transientf("flush"), 3, `{"code":503,"message":"flush"}`},
		{"more than all is all", 5, nil, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := &fakeDestination{writeFn: func([]Record) (int, error) { return tt.n, tt.err }}
			h := newHarness(t, destinationPlugin(dst))
			if err := h.configureDestination(t); err != nil {
				t.Fatal(err)
			}
			resp, err := h.write(t, []Record{testRecord(1), testRecord(2), testRecord(3)})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetWritten() != tt.wantWritten || resp.GetError() != tt.wantErr {
				t.Errorf("WriteResponse = %d, %s\n                   want %d, %s", resp.GetWritten(), resp.GetError(), tt.wantWritten, tt.wantErr)
			}
		})
	}
}

// A batch the destination cannot decode is the runtime's bug: fatal, and
// the destination never sees it.
func TestWriteBadBatch(t *testing.T) {
	tests := []struct {
		name  string
		batch *connectorv1.RecordBatch
	}{
		{"count above the data", &connectorv1.RecordBatch{Count: 1000, Data: []byte{1, 0}}},
		{"negative count", &connectorv1.RecordBatch{Count: -1, Data: []byte{1}}},
		{"wrong version", &connectorv1.RecordBatch{Count: 1, Data: []byte{9, 0, 1, 0, 0, 0, 0}}},
		{"truncated", &connectorv1.RecordBatch{Count: 2, Data: []byte{1, 1, '1', 1, 0, 0, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := &fakeDestination{}
			h := newHarness(t, destinationPlugin(dst))
			if err := h.configureDestination(t); err != nil {
				t.Fatal(err)
			}
			_, err := h.dst.Write(context.Background(), connect.NewRequest(&connectorv1.WriteRequest{Batch: tt.batch}))
			_, msg := wire(t, err)
			if c := cerrors.Classify(errors.New(msg)); c.Class != cerrors.ClassFatal || !strings.Contains(msg, "malformed record batch") {
				t.Errorf("got %s, want a fatal malformed batch", msg)
			}
			if len(dst.written) != 0 {
				t.Errorf("destination got %v", dst.written)
			}
		})
	}
}

// Calls out of order are the runtime breaking the protocol: fatal, with a
// message that says which call and why. Teardown is the exception: there
// is always something (or nothing) to tear down.
func TestCallsOutOfOrder(t *testing.T) {
	ctx := context.Background()
	ack := func(h *harness) error {
		_, err := h.src.Ack(ctx, connect.NewRequest(&connectorv1.AckRequest{Positions: [][]byte{[]byte("1")}}))
		return err
	}
	read := func(h *harness) error { _, err := h.read(ctx, 1); return err }
	openDst := func(h *harness) error {
		_, err := h.dst.Open(ctx, connect.NewRequest(&connectorv1.DestinationServiceOpenRequest{}))
		return err
	}
	write := func(h *harness) error {
		_, err := h.dst.Write(ctx, connect.NewRequest(&connectorv1.WriteRequest{Batch: &connectorv1.RecordBatch{}}))
		return err
	}
	teardownSrc := func(h *harness) error {
		_, err := h.src.Teardown(ctx, connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{}))
		return err
	}
	both := Plugin{
		Name:           "fake",
		NewSource:      func() Source { return &fakeSource{} },
		NewDestination: func() Destination { return &fakeDestination{} },
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, h *harness)
		call  func(h *harness) error
		want  string // "" means the call succeeds
	}{
		{"source Open before Configure", nil, func(h *harness) error { return h.openSource("") }, "source Open called before a successful Configure"},
		{"Read before Configure", nil, read, "source Read called before a successful Configure"},
		{"Ack before Configure", nil, ack, "source Ack called before a successful Configure"},
		{"destination Open before Configure", nil, openDst, "destination Open called before a successful Configure"},
		{"Write before Configure", nil, write, "destination Write called before a successful Configure"},
		{"Teardown before Configure", nil, teardownSrc, ""},
		{"Read after a failed Configure", func(t *testing.T, h *harness) {
			h.srv.plugin.NewSource = func() Source { return &fakeSource{errs: map[string]error{"Configure": errors.New("bad")}} }
			_ = h.configureSource(t, nil)
		}, read, "source Read called before a successful Configure"},
		{"Configure twice", func(t *testing.T, h *harness) {
			if err := h.configureSource(t, nil); err != nil {
				t.Fatal(err)
			}
		}, func(h *harness) error { return h.configureSource(t, nil) }, "already configured as a source"},
		{"Write to a source", func(t *testing.T, h *harness) {
			if err := h.configureSource(t, nil); err != nil {
				t.Fatal(err)
			}
		}, write, "destination Write called, but this plugin process runs a source"},
		{"Read after Teardown", func(t *testing.T, h *harness) {
			if err := errors.Join(h.configureSource(t, nil), teardownSrc(h)); err != nil {
				t.Fatal(err)
			}
		}, read, "source Read called after Teardown"},
		{"Teardown twice", func(t *testing.T, h *harness) {
			if err := errors.Join(h.configureSource(t, nil), teardownSrc(h)); err != nil {
				t.Fatal(err)
			}
		}, teardownSrc, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, both)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			err := tt.call(h)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			_, msg := wire(t, err)
			if c := cerrors.Classify(errors.New(msg)); c.Class != cerrors.ClassFatal || !strings.Contains(c.Message, tt.want) {
				t.Errorf("got %s (%s), want fatal containing %q", msg, c.Class, tt.want)
			}
		})
	}
}

// A plugin without a destination does not serve DestinationService.
func TestUnservedRole(t *testing.T) {
	h := newHarness(t, sourcePlugin(&fakeSource{}))
	err := h.configureDestination(t)
	if code, _ := wire(t, err); code != connect.CodeUnimplemented {
		t.Errorf("got %v, want unimplemented", err)
	}
}

// A panic in the connector becomes an error without a code, as a crash
// would be, and the process keeps serving (Teardown still works).
func TestPanicIsReported(t *testing.T) {
	src := &fakeSource{readFn: func(context.Context, int) ([]Record, error) { panic("index out of range") }}
	h := newHarness(t, sourcePlugin(src))
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	_, err := h.read(context.Background(), 1)
	wantWire(t, err, `{"message":"Read: panic: index out of range"}`, cerrors.ClassTransient)
	if _, err := h.src.Teardown(context.Background(), connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{})); err != nil {
		t.Fatal(err)
	}
}
