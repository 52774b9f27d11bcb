package sdk

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/record"
)

// fakeSource records what it was called with and fails as errs says.
// Read returns what readFn returns, or one record per call when it is nil.
type fakeSource struct {
	mu       sync.Mutex
	calls    []string
	cfg      Config
	pos      Position
	acked    []string
	errs     map[string]error
	readFn   func(ctx context.Context, max int) ([]Record, error)
	ackFn    func(ctx context.Context) error
	nextRead int
}

func (f *fakeSource) called(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	return f.errs[method]
}

func (f *fakeSource) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeSource) Configure(_ context.Context, cfg Config) error {
	f.mu.Lock()
	f.cfg = cfg
	f.mu.Unlock()
	return f.called("Configure")
}

func (f *fakeSource) Open(_ context.Context, pos Position) error {
	f.mu.Lock()
	f.pos = pos
	f.mu.Unlock()
	return f.called("Open")
}

func (f *fakeSource) Read(ctx context.Context, max int) ([]Record, error) {
	if err := f.called("Read"); err != nil {
		return nil, err
	}
	if f.readFn != nil {
		return f.readFn(ctx, max)
	}
	f.mu.Lock()
	f.nextRead++
	n := f.nextRead
	f.mu.Unlock()
	return []Record{testRecord(n)}, nil
}

func (f *fakeSource) Ack(ctx context.Context, positions []Position) error {
	if err := f.called("Ack"); err != nil {
		return err
	}
	if f.ackFn != nil {
		if err := f.ackFn(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range positions {
		f.acked = append(f.acked, string(p))
	}
	return nil
}

func (f *fakeSource) Teardown(context.Context) error { return f.called("Teardown") }

// fakeDestination keeps copies of what it was asked to write. writeFn,
// when set, decides how many records of a batch are written.
type fakeDestination struct {
	mu      sync.Mutex
	calls   []string
	errs    map[string]error
	written []Record
	writeFn func(recs []Record) (int, error)
}

func (f *fakeDestination) called(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	return f.errs[method]
}

func (f *fakeDestination) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeDestination) Configure(context.Context, Config) error { return f.called("Configure") }
func (f *fakeDestination) Open(context.Context) error              { return f.called("Open") }
func (f *fakeDestination) Teardown(context.Context) error          { return f.called("Teardown") }

func (f *fakeDestination) Write(_ context.Context, recs []Record) (int, error) {
	if err := f.called("Write"); err != nil {
		return 0, err
	}
	n, err := len(recs), error(nil)
	if f.writeFn != nil {
		n, err = f.writeFn(recs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs[:max(0, min(n, len(recs)))] {
		f.written = append(f.written, r.Clone())
	}
	return n, err
}

// testRecord is a record with position and key n and a structured payload.
// nextRecords returns n records numbered on from next (1, 2, 3, ... across
// calls), as a source that reads a sequence would.
func nextRecords(next *atomic.Int32, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = testRecord(int(next.Add(1)))
	}
	return recs
}

func testRecord(n int) Record {
	pos := Position(strconv.Itoa(n))
	return Record{
		Position:  pos,
		Operation: OperationCreate,
		Metadata:  Metadata{"m": "v"},
		Key:       RawData(pos),
		Payload:   Change{After: StructuredData{"id": int64(n), "name": "n" + strconv.Itoa(n)}},
	}
}

// harness serves a plugin on an httptest server (HTTP/1.1) and talks to it
// with the generated Connect clients, the way the runtime does.
type harness struct {
	srv      *server
	info     connectorv1connect.PluginServiceClient
	src      connectorv1connect.SourceServiceClient
	dst      connectorv1connect.DestinationServiceClient
	tornDown chan struct{}
}

func newHarness(t *testing.T, p Plugin) *harness {
	t.Helper()
	h := &harness{tornDown: make(chan struct{})}
	var once sync.Once
	h.srv = newServer(p, io.Discard, func() { once.Do(func() { close(h.tornDown) }) })
	ts := httptest.NewServer(h.srv.handler())
	t.Cleanup(ts.Close)
	h.info = connectorv1connect.NewPluginServiceClient(ts.Client(), ts.URL)
	h.src = connectorv1connect.NewSourceServiceClient(ts.Client(), ts.URL)
	h.dst = connectorv1connect.NewDestinationServiceClient(ts.Client(), ts.URL)
	return h
}

func sourcePlugin(src Source) Plugin {
	return Plugin{Name: "fake", Version: "v1.2.3", NewSource: func() Source { return src }}
}

func destinationPlugin(dst Destination) Plugin {
	return Plugin{Name: "fake", Version: "v1.2.3", NewDestination: func() Destination { return dst }}
}

func (h *harness) configureSource(t *testing.T, settings map[string]string) error {
	t.Helper()
	_, err := h.src.Configure(context.Background(), connect.NewRequest(&connectorv1.SourceServiceConfigureRequest{
		Config: &connectorv1.ConnectorConfig{PipelineId: "p1", ConnectorId: "c1", Settings: settings},
	}))
	return err
}

func (h *harness) configureDestination(t *testing.T) error {
	t.Helper()
	_, err := h.dst.Configure(context.Background(), connect.NewRequest(&connectorv1.DestinationServiceConfigureRequest{
		Config: &connectorv1.ConnectorConfig{PipelineId: "p1", ConnectorId: "d1"},
	}))
	return err
}

func (h *harness) openSource(pos string) error {
	_, err := h.src.Open(context.Background(), connect.NewRequest(&connectorv1.SourceServiceOpenRequest{Position: []byte(pos)}))
	return err
}

func (h *harness) read(ctx context.Context, n int) ([]Record, error) {
	resp, err := h.src.Read(ctx, connect.NewRequest(&connectorv1.ReadRequest{MaxRecords: int32(n)}))
	if err != nil {
		return nil, err
	}
	return decodeBatch(resp.Msg.GetBatch())
}

// decodeBatch decodes what a Read or a ReadStream sent.
func decodeBatch(b *connectorv1.RecordBatch) ([]Record, error) {
	recs := make([]Record, b.GetCount())
	if _, err := record.DecodeBatch(b.GetData(), len(recs), recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// wantInOrder fails t unless positions are "1", "2", "3", ...
func wantInOrder(t *testing.T, positions []string) {
	t.Helper()
	for i, p := range positions {
		if p != strconv.Itoa(i+1) {
			t.Fatalf("records %v: not 1, 2, 3, ... in order", positions)
		}
	}
}

func (h *harness) write(t *testing.T, recs []Record) (*connectorv1.WriteResponse, error) {
	t.Helper()
	data, err := record.AppendBatch(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.dst.Write(context.Background(), connect.NewRequest(&connectorv1.WriteRequest{
		Batch: &connectorv1.RecordBatch{Count: int32(len(recs)), Data: data},
	}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// wire returns the Connect code and the message of a call's error: the
// message is what the runtime classifies.
func wire(t *testing.T, err error) (connect.Code, string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a Connect error", err, err)
	}
	return ce.Code(), ce.Message()
}

// wantWire checks that err arrived as exactly the JSON want and that the
// runtime classifies it as class.
func wantWire(t *testing.T, err error, want string, class cerrors.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	_, msg := wire(t, err)
	if msg != want {
		t.Errorf("wire message\n got %s\nwant %s", msg, want)
	}
	if c := cerrors.Classify(errors.New(msg)); c.Class != class {
		t.Errorf("runtime classifies %s as %s (%s), want %s", msg, c.Class, c.Source, class)
	}
}
