package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	commonsconfig "github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-processor-sdk"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/record"
)

// configuredPipeline is a fake pipeline with its configuration.
type configuredPipeline struct {
	*fakePipeline
	cfg config.Pipeline
}

func (c configuredPipeline) Config() config.Pipeline { return c.cfg }

type v1Fakes []configuredPipeline

func (f v1Fakes) List() []Supervised {
	out := make([]Supervised, len(f))
	for i, p := range f {
		out[i] = p
	}
	return out
}

func (f v1Fakes) Get(id string) (Supervised, bool) {
	for _, p := range f {
		if p.info.ID == id {
			return p, true
		}
	}
	return nil, false
}

func (f v1Fakes) Invalid() []ConfigError {
	return []ConfigError{{PipelineID: "bad", File: "pipelines/bad.yml", Line: 10,
		Err: errors.New(`pipelines/bad.yml:10: pipeline "bad": connectors[gen].settings.rate: "fast" is not a number`)}}
}

// v1Pipelines: one of each status, the first with a connector's and a
// pipeline's processor.
func v1TestPipelines() v1Fakes {
	orders := config.Pipeline{ID: "orders", Name: "orders",
		Connectors: []config.Connector{
			{ID: "src", Type: config.TypeSource, Plugin: "builtin:generator", Settings: map[string]string{"rate": "10"},
				Processors: []config.Processor{{ID: "tag", Plugin: "field.set", Workers: 1, Settings: map[string]string{"field": ".Metadata.tag"}}}},
			{ID: "dst", Type: config.TypeDestination, Plugin: "builtin:postgres",
				Settings: map[string]string{"url": "postgres://app:hunter2@db:5432/app", "password": "hunter2"}},
		},
		Processors: []config.Processor{{ID: "drop", Plugin: "filter", Condition: `{{ eq .Metadata.drop "yes" }}`}},
		DLQ:        config.DLQ{Plugin: "builtin:log", WindowSize: 1},
	}
	p := func(id string, st lifecycle.State, cfg config.Pipeline, file string) configuredPipeline {
		cfg.ID, cfg.Name = id, id
		return configuredPipeline{fakePipeline: &fakePipeline{info: PipelineInfo{ID: id, Name: id, File: file, Line: 3}, st: st}, cfg: cfg}
	}
	return v1Fakes{
		p("orders", lifecycle.State{Status: lifecycle.StatusRunning, UpdatedAt: testNow, CreatedAt: testNow.Add(-time.Hour)}, orders, "pipelines/orders.yml"),
		p("flaky", lifecycle.State{Status: lifecycle.StatusRecovering, LastError: &lifecycle.ErrorInfo{Message: "connection refused"}}, config.Pipeline{}, "api:flaky.yml"),
		p("broken", lifecycle.State{Status: lifecycle.StatusDegraded, LastError: &lifecycle.ErrorInfo{Message: "column price does not exist"}}, config.Pipeline{}, "pipelines/broken.yml"),
		p("idle", lifecycle.State{Status: lifecycle.StatusStopped}, config.Pipeline{}, "pipelines/idle.yml"),
	}
}

// fakeV1 is the runtime's side of Conduit's API v1.
type fakeV1 struct {
	inspects chan chan<- record.Record // each Inspect hands its channel here
}

func (f *fakeV1) ConnectorPlugins() []pconnector.Specification {
	return []pconnector.Specification{
		{Name: "builtin:file@v0.1.0", Summary: "files", SourceParams: commonsconfig.Parameters{
			"path": {Type: commonsconfig.ParameterTypeString, Validations: []commonsconfig.Validation{commonsconfig.ValidationRequired{}}}}},
		{Name: "builtin:generator@v0.1.0", Summary: "generates"},
	}
}

func (f *fakeV1) ProcessorPlugins() []sdk.Specification {
	return []sdk.Specification{{Name: "builtin:field.set@v0.1.0", Summary: "sets a field",
		Parameters: commonsconfig.Parameters{"field": {Type: commonsconfig.ParameterTypeString}}}}
}

func (f *fakeV1) ValidateConnector(source bool, plugin string, settings map[string]string) error {
	if plugin != "builtin:file" || settings["path"] == "" {
		return errors.New(`settings.path: required`)
	}
	return nil
}

func (f *fakeV1) Inspect(ctx context.Context, pipelineID string, at InspectPoint) (<-chan record.Record, error) {
	if pipelineID != "orders" || (at != InspectPoint{Connector: "src"} && at != InspectPoint{Connector: "src", Processor: "tag", Out: true}) {
		return nil, ErrInspectUnknown
	}
	ch := make(chan record.Record, 1)
	context.AfterFunc(ctx, func() { close(ch) })
	f.inspects <- ch
	return ch, nil
}

type v1Server struct {
	addr string
	fake *fakeV1
	ps   v1Fakes
}

func startV1Server(t *testing.T, opts Options) *v1Server {
	t.Helper()
	fake := &fakeV1{inspects: make(chan chan<- record.Record, 4)}
	ps := v1TestPipelines()
	opts.ConduitV1 = fake
	h := NewHandler(NewPipelineService(ps, nil, nil).WithChanges(refusingChanges{}), opts)
	srv, err := Listen("127.0.0.1:0", h, ServerOptions{Token: opts.Token})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &v1Server{addr: srv.Addr(), fake: fake, ps: ps}
}

// refusingChanges refuses to delete a file's pipeline, as the runtime
// does.
type refusingChanges struct{ Changes }

func (refusingChanges) Delete(_ context.Context, id string) error {
	return &DefinedInFileError{ID: id, File: "pipelines/" + id + ".yml:3"}
}

func grpcConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Conduit's generated gRPC client reads every pipeline with Conduit's
// statuses, its connectors and processors with Conduit's ids, the plugin
// lists and the server's information.
func TestConduitV1ReadsOverGRPC(t *testing.T) {
	ts := startV1Server(t, Options{})
	conn := grpcConn(t, ts.addr)
	ctx := context.Background()
	pipelines := apiv1.NewPipelineServiceClient(conn)

	list, err := pipelines.ListPipelines(ctx, &apiv1.ListPipelinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*apiv1.Pipeline{}
	for _, p := range list.GetPipelines() {
		got[p.GetId()] = p
	}
	for id, want := range map[string]struct {
		status apiv1.Pipeline_Status
		err    string
	}{
		"orders": {apiv1.Pipeline_STATUS_RUNNING, ""},
		"flaky":  {apiv1.Pipeline_STATUS_RECOVERING, "connection refused"},
		"broken": {apiv1.Pipeline_STATUS_DEGRADED, "column price does not exist"},
		"idle":   {apiv1.Pipeline_STATUS_STOPPED, ""},
		// Invalid configurations are degraded, with the error naming the
		// file and field.
		"bad": {apiv1.Pipeline_STATUS_DEGRADED, `pipelines/bad.yml:10: pipeline "bad": connectors[gen].settings.rate`},
	} {
		p := got[id]
		if p.GetState().GetStatus() != want.status || !strings.Contains(p.GetState().GetError(), want.err) || (want.err == "" && p.GetState().GetError() != "") {
			t.Errorf("%s: state %v, want %v with error %q", id, p.GetState(), want.status, want.err)
		}
	}
	if len(got) != 5 {
		t.Errorf("listed %d pipelines, want 5", len(got))
	}
	orders := got["orders"]
	if !slices.Equal(orders.GetConnectorIds(), []string{"orders:src", "orders:dst"}) || !slices.Equal(orders.GetProcessorIds(), []string{"orders:drop"}) ||
		!orders.GetUpdatedAt().AsTime().Equal(testNow) || !orders.GetCreatedAt().AsTime().Equal(testNow.Add(-time.Hour)) {
		t.Errorf("orders: %v", orders)
	}
	if got["flaky"].GetCreatedAt() != nil {
		t.Errorf("a state without a creation time (written by an older version): createdAt %v, want none", got["flaky"].GetCreatedAt())
	}
	byName, err := pipelines.ListPipelines(ctx, &apiv1.ListPipelinesRequest{Name: "or.*"})
	if err != nil || len(byName.GetPipelines()) != 1 || byName.GetPipelines()[0].GetId() != "orders" {
		t.Errorf("name filter or.*: %v %v", byName, err)
	}
	if _, err := pipelines.GetPipeline(ctx, &apiv1.GetPipelineRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown pipeline: %v, want NotFound", err)
	}
	dlq, err := pipelines.GetDLQ(ctx, &apiv1.GetDLQRequest{Id: "orders"})
	if err != nil || dlq.GetDlq().GetPlugin() != "builtin:log" || dlq.GetDlq().GetWindowSize() != 1 {
		t.Errorf("GetDLQ: %v %v", dlq, err)
	}

	connectors := apiv1.NewConnectorServiceClient(conn)
	cl, err := connectors.ListConnectors(ctx, &apiv1.ListConnectorsRequest{PipelineId: "orders"})
	if err != nil || len(cl.GetConnectors()) != 2 {
		t.Fatalf("ListConnectors: %v %v", cl, err)
	}
	src, dst := cl.GetConnectors()[0], cl.GetConnectors()[1]
	if src.GetId() != "orders:src" || src.GetType() != apiv1.Connector_TYPE_SOURCE || src.GetPlugin() != "builtin:generator" ||
		src.GetPipelineId() != "orders" || src.GetConfig().GetSettings()["rate"] != "10" || !slices.Equal(src.GetProcessorIds(), []string{"orders:src:tag"}) {
		t.Errorf("source: %v", src)
	}
	// Credentials are masked, as in a pipeline's definition.
	if s := dst.GetConfig().GetSettings(); dst.GetType() != apiv1.Connector_TYPE_DESTINATION || s["password"] != config.Masked ||
		s["url"] != "postgres://app:"+config.Masked+"@db:5432/app" {
		t.Errorf("destination: %v", dst)
	}
	if one, err := connectors.GetConnector(ctx, &apiv1.GetConnectorRequest{Id: "orders:dst"}); err != nil || one.GetConnector().GetId() != "orders:dst" {
		t.Errorf("GetConnector: %v %v", one, err)
	}

	processors := apiv1.NewProcessorServiceClient(conn)
	pl, err := processors.ListProcessors(ctx, &apiv1.ListProcessorsRequest{ParentIds: []string{"orders:src"}})
	if err != nil || len(pl.GetProcessors()) != 1 {
		t.Fatalf("ListProcessors of orders:src: %v %v", pl, err)
	}
	if tag := pl.GetProcessors()[0]; tag.GetId() != "orders:src:tag" || tag.GetPlugin() != "field.set" ||
		tag.GetParent().GetType() != apiv1.Processor_Parent_TYPE_CONNECTOR || tag.GetConfig().GetWorkers() != 1 {
		t.Errorf("connector's processor: %v", tag)
	}
	drop, err := processors.GetProcessor(ctx, &apiv1.GetProcessorRequest{Id: "orders:drop"})
	if err != nil || drop.GetProcessor().GetParent().GetType() != apiv1.Processor_Parent_TYPE_PIPELINE || drop.GetProcessor().GetCondition() == "" {
		t.Errorf("pipeline's processor: %v %v", drop, err)
	}

	plugins, err := connectors.ListConnectorPlugins(ctx, &apiv1.ListConnectorPluginsRequest{Name: ".*file.*"})
	if err != nil || len(plugins.GetPlugins()) != 1 || plugins.GetPlugins()[0].GetName() != "builtin:file@v0.1.0" ||
		len(plugins.GetPlugins()[0].GetSourceParams()["path"].GetValidations()) != 1 {
		t.Errorf("ListConnectorPlugins .*file.*: %v %v", plugins, err)
	}
	pp, err := processors.ListProcessorPlugins(ctx, &apiv1.ListProcessorPluginsRequest{})
	if err != nil || len(pp.GetPlugins()) != 1 || pp.GetPlugins()[0].GetParameters()["field"] == nil {
		t.Errorf("ListProcessorPlugins: %v %v", pp, err)
	}
	//lint:ignore SA1019 the deprecated service is served for old clients
	old, err := apiv1.NewPluginServiceClient(conn).ListPlugins(ctx, &apiv1.ListPluginsRequest{})
	if err != nil || len(old.GetPlugins()) != 2 {
		t.Errorf("ListPlugins: %v %v", old, err)
	}
	info, err := apiv1.NewInformationServiceClient(conn).GetInfo(ctx, &apiv1.GetInfoRequest{})
	if err != nil || info.GetInfo().GetOs() == "" || info.GetInfo().GetVersion() == "" {
		t.Errorf("GetInfo: %v %v", info, err)
	}
	// Conduit's CLI checks health before anything else.
	for _, service := range []string{"", "PipelineService", "ConnectorService"} {
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v", service, h, err)
		}
	}
}

// Start and stop act; changes Conduit makes piece by piece are refused
// with FAILED_PRECONDITION naming where the pipeline is defined.
func TestConduitV1StartStopAndRefusedChanges(t *testing.T) {
	ts := startV1Server(t, Options{})
	conn := grpcConn(t, ts.addr)
	ctx := context.Background()
	pipelines := apiv1.NewPipelineServiceClient(conn)
	if _, err := pipelines.StopPipeline(ctx, &apiv1.StopPipelineRequest{Id: "orders"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.ps[0].State(ctx); st.Status != lifecycle.StatusStopped {
		t.Fatalf("after StopPipeline: %v", st.Status)
	}
	if _, err := pipelines.StopPipeline(ctx, &apiv1.StopPipelineRequest{Id: "orders"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stopping a stopped pipeline: %v, want FailedPrecondition", err)
	}
	if _, err := pipelines.StartPipeline(ctx, &apiv1.StartPipelineRequest{Id: "orders"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.ps[0].State(ctx); st.Status != lifecycle.StatusRunning {
		t.Fatalf("after StartPipeline: %v", st.Status)
	}
	if _, err := pipelines.StartPipeline(ctx, &apiv1.StartPipelineRequest{Id: "bad"}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "invalid") {
		t.Errorf("starting an invalid pipeline: %v", err)
	}

	connectors := apiv1.NewConnectorServiceClient(conn)
	processors := apiv1.NewProcessorServiceClient(conn)
	for name, call := range map[string]func() error{
		"UpdateConnector": func() error {
			_, err := connectors.UpdateConnector(ctx, &apiv1.UpdateConnectorRequest{Id: "orders:src", Config: &apiv1.Connector_Config{}})
			return err
		},
		"DeleteConnector": func() error {
			_, err := connectors.DeleteConnector(ctx, &apiv1.DeleteConnectorRequest{Id: "orders:dst"})
			return err
		},
		"CreateConnector": func() error {
			_, err := connectors.CreateConnector(ctx, &apiv1.CreateConnectorRequest{PipelineId: "orders", Type: apiv1.Connector_TYPE_DESTINATION, Plugin: "builtin:log"})
			return err
		},
		"UpdateProcessor": func() error {
			_, err := processors.UpdateProcessor(ctx, &apiv1.UpdateProcessorRequest{Id: "orders:src:tag"})
			return err
		},
		"CreateProcessor": func() error {
			_, err := processors.CreateProcessor(ctx, &apiv1.CreateProcessorRequest{Parent: &apiv1.Processor_Parent{Type: apiv1.Processor_Parent_TYPE_CONNECTOR, Id: "orders:src"}})
			return err
		},
		"UpdatePipeline": func() error {
			_, err := pipelines.UpdatePipeline(ctx, &apiv1.UpdatePipelineRequest{Id: "orders", Config: &apiv1.Pipeline_Config{Name: "x"}})
			return err
		},
		"DeletePipeline": func() error {
			_, err := pipelines.DeletePipeline(ctx, &apiv1.DeletePipelineRequest{Id: "orders"})
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "pipelines/orders.yml:3") {
			t.Errorf("%s: %v, want FailedPrecondition naming pipelines/orders.yml:3", name, err)
		}
	}
	// A pipeline applied through the API is changed by applying its file.
	_, err := connectors.UpdateConnector(ctx, &apiv1.UpdateConnectorRequest{Id: "flaky:x"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown connector: %v", err)
	}
	_, err = pipelines.UpdatePipeline(ctx, &apiv1.UpdatePipelineRequest{Id: "flaky"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "api:flaky.yml") || !strings.Contains(err.Error(), "pipelines apply") {
		t.Errorf("updating an applied pipeline: %v", err)
	}
	if _, err := pipelines.CreatePipeline(ctx, &apiv1.CreatePipelineRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("CreatePipeline: %v", err)
	}
	if _, err := connectors.ValidateConnector(ctx, &apiv1.ValidateConnectorRequest{Type: apiv1.Connector_TYPE_SOURCE, Plugin: "builtin:file",
		Config: &apiv1.Connector_Config{Settings: map[string]string{"path": "/tmp/x"}}}); err != nil {
		t.Errorf("ValidateConnector of a good connector: %v", err)
	}
	if _, err := connectors.ValidateConnector(ctx, &apiv1.ValidateConnectorRequest{Type: apiv1.Connector_TYPE_SOURCE, Plugin: "builtin:file"}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "settings.path") {
		t.Errorf("ValidateConnector without path: %v", err)
	}
}

// InspectConnector and InspectProcessorOut stream the records the runtime
// hands over, over gRPC and over HTTP as Conduit's gateway does.
func TestConduitV1Inspect(t *testing.T) {
	ts := startV1Server(t, Options{})
	conn := grpcConn(t, ts.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := apiv1.NewConnectorServiceClient(conn).InspectConnector(ctx, &apiv1.InspectConnectorRequest{Id: "orders:src"})
	if err != nil {
		t.Fatal(err)
	}
	ch := <-ts.fake.inspects
	ch <- record.Record{Position: record.Position("7"), Operation: record.OperationCreate, Key: record.RawData("k7"),
		Metadata: record.Metadata{"m": "v"}, Payload: record.Change{After: record.StructuredData{"id": 7}}}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetRecord(); string(r.GetPosition()) != "7" || string(r.GetKey().GetRawData()) != "k7" || r.GetMetadata()["m"] != "v" ||
		r.GetPayload().GetAfter().GetStructuredData().GetFields()["id"].GetNumberValue() != 7 {
		t.Errorf("inspected record: %v", r)
	}
	cancel()

	// A server stream reports its error at the first Recv.
	in, _ := apiv1.NewProcessorServiceClient(conn).InspectProcessorIn(context.Background(), &apiv1.InspectProcessorInRequest{Id: "orders:nope"})
	if _, err := in.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("inspecting an unknown processor: %v, want NotFound", err)
	}

	// Over HTTP: one {"result": record} per line, as Conduit's gateway
	// streams.
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "http://"+ts.addr+"/v1/processors/orders:src:tag/inspect-out", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	ch = <-ts.fake.inspects
	ch <- record.Record{Position: record.Position("8"), Operation: record.OperationUpdate, Metadata: record.Metadata{"tag": "x"}}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var chunk struct {
		Result struct {
			Position  string            `json:"position"`
			Operation string            `json:"operation"`
			Metadata  map[string]string `json:"metadata"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &chunk); err != nil || chunk.Result.Operation != "OPERATION_UPDATE" ||
		chunk.Result.Position != "OA==" || chunk.Result.Metadata["tag"] != "x" {
		t.Errorf("HTTP chunk %q: %+v %v", line, chunk, err)
	}
}

// Inspect streams count against api.max-watchers as event watches do.
func TestConduitV1InspectTakesAWatcherSlot(t *testing.T) {
	ts := startV1Server(t, Options{MaxWatchers: 1})
	conn := grpcConn(t, ts.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := apiv1.NewConnectorServiceClient(conn)
	first, err := c.InspectConnector(ctx, &apiv1.InspectConnectorRequest{Id: "orders:src"})
	if err != nil {
		t.Fatal(err)
	}
	<-ts.fake.inspects // the first stream is open
	second, err := c.InspectConnector(ctx, &apiv1.InspectConnectorRequest{Id: "orders:src"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "api.max-watchers") {
		t.Errorf("second stream: %v, want ResourceExhausted naming api.max-watchers", err)
	}
	_ = first
}

// Conduit's HTTP routes answer with Conduit's JSON shapes.
func TestConduitV1HTTPRoutes(t *testing.T) {
	ts := startV1Server(t, Options{})
	get := func(path string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+ts.addr+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, body := get("/v1/pipelines")
	var list []struct {
		ID    string `json:"id"`
		State struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"state"`
		Config struct {
			Name string `json:"name"`
		} `json:"config"`
		ConnectorIDs []string `json:"connectorIds"`
	}
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil || len(list) != 5 {
		t.Fatalf("GET /v1/pipelines: %d %v %s", code, err, body)
	}
	if list[0].ID != "orders" || list[0].State.Status != "STATUS_RUNNING" || list[0].Config.Name != "orders" || len(list[0].ConnectorIDs) != 2 {
		t.Errorf("first pipeline: %+v", list[0])
	}
	for path, want := range map[string]string{
		"/v1/pipelines/orders":                   `"status":"STATUS_RUNNING"`,
		"/v1/connectors?pipeline_id=orders":      `"type":"TYPE_SOURCE"`,
		"/v1/connectors/orders:src":              `"pipelineId":"orders"`,
		"/v1/processors":                         `"type":"TYPE_CONNECTOR"`,
		"/v1/connectors/plugins":                 `"name":"builtin:file@v0.1.0"`,
		"/v1/processors/plugins":                 `"name":"builtin:field.set@v0.1.0"`,
		"/v1/plugins":                            `"name":"builtin:generator@v0.1.0"`,
		"/v1/pipelines/orders/dead-letter-queue": `"plugin":"builtin:log"`,
		"/info":                                  `"os":`,
	} {
		code, body := get(path)
		if compact := strings.NewReplacer(" ", "", "\n", "").Replace(string(body)); code != http.StatusOK || !strings.Contains(compact, want) {
			t.Errorf("GET %s: %d, want %s in %s", path, code, want, body)
		}
	}
	// ?pretty indents, as under Conduit.
	if _, body := get("/v1/pipelines/orders?pretty"); !strings.Contains(string(body), "\n  \"id\":") {
		t.Errorf("?pretty: %s", body)
	}
	// Errors as grpc-gateway writes them.
	code, body = get("/v1/pipelines/nope")
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); code != http.StatusNotFound || err != nil || e.Code != int(codes.NotFound) || !strings.Contains(e.Message, "nope") {
		t.Errorf("unknown pipeline: %d %s", code, body)
	}
	// POST start and stop.
	res, err := http.Post("http://"+ts.addr+"/v1/pipelines/orders/stop", "application/json", strings.NewReader(`{"force":false}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST stop: %v %v", res, err)
	}
	res.Body.Close()
	if _, body := get("/v1/pipelines/orders"); !strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"STATUS_STOPPED"`) {
		t.Errorf("after stop: %s", body)
	}
	// /openapi: Conduit's UI, and its document to a client that asks for
	// JSON.
	code, body = get("/openapi", "Accept", "application/json")
	var doc struct {
		Swagger string                     `json:"swagger"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); code != http.StatusOK || err != nil || doc.Swagger != "2.0" || doc.Paths["/v1/pipelines"] == nil {
		t.Errorf("/openapi as JSON: %d %v %.200s", code, err, body)
	}
	if code, body := get("/openapi/"); code != http.StatusOK || !strings.Contains(string(body), "Swagger UI") {
		t.Errorf("/openapi/: %d %.200s", code, body)
	}
}

// The token, and without one the OS user of the client, guard Conduit's
// API v1 as they guard this one; refusals on the HTTP routes are written
// as Conduit's gateway writes errors.
func TestConduitV1IsGuardedLikeTheAPI(t *testing.T) {
	const token = "s3cret-token-0123"
	t.Run("token", func(t *testing.T) {
		ts := startV1Server(t, Options{Token: token})
		res, err := http.Get("http://" + ts.addr + "/v1/pipelines")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct {
			Code int `json:"code"`
		}
		if res.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Code != int(codes.Unauthenticated) {
			t.Errorf("without the token: %d %s", res.StatusCode, body)
		}
		conn := grpcConn(t, ts.addr)
		c := apiv1.NewPipelineServiceClient(conn)
		if _, err := c.ListPipelines(context.Background(), &apiv1.ListPipelinesRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("gRPC without the token: %v", err)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
		if _, err := c.ListPipelines(ctx, &apiv1.ListPipelinesRequest{}); err != nil {
			t.Errorf("gRPC with the token: %v", err)
		}
		// Health stays open, as Conduit's CLI checks it first.
		if h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health without the token: %v %v", h, err)
		}
	})
	t.Run("another OS user", func(t *testing.T) {
		svc := NewPipelineService(v1TestPipelines(), nil, nil)
		other := func(*net.TCPAddr, *net.TCPAddr) (uint32, error) { return otherUID, nil }
		h := NewHandler(svc, Options{ConduitV1: &fakeV1{}, peerUsers: other, owner: &ownUsers{uid: 1000}})
		for _, tc := range []struct{ method, path, contentType string }{
			{"GET", "/v1/pipelines", ""},
			{"GET", "/info", ""},
			{"GET", "/openapi/", ""},
			{"POST", "/api.v1.PipelineService/ListPipelines", "application/grpc"},
		} {
			req := requestFrom(tc.method, tc.path, "")
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
				req.ProtoMajor = 2
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			refused := rec.Code == http.StatusForbidden ||
				(tc.contentType != "" && rec.Header().Get("Grpc-Status") == "7")
			if !refused || (tc.contentType == "" && !strings.Contains(rec.Body.String(), "uid 65534")) {
				t.Errorf("%s %s as uid %d: %d %v %s", tc.method, tc.path, otherUID, rec.Code, rec.Header(), rec.Body)
			}
		}
	})
}

// api.grpc.address serves the same API on a second address, under the
// loopback rule of the first.
func TestSecondAddressServesTheSameAPI(t *testing.T) {
	h := NewHandler(NewPipelineService(v1TestPipelines(), nil, nil), Options{ConduitV1: &fakeV1{}})
	if _, err := Listen("127.0.0.1:0", h, ServerOptions{GRPCAddress: "0.0.0.0:0"}); !errors.Is(err, ErrInsecureAddress) ||
		!strings.Contains(err.Error(), "api.grpc.address") {
		t.Fatalf("a non-loopback api.grpc.address without a token: %v", err)
	}
	srv, err := Listen("127.0.0.1:0", h, ServerOptions{GRPCAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	for _, addr := range []string{srv.Addr(), srv.GRPCAddr()} {
		list, err := apiv1.NewPipelineServiceClient(grpcConn(t, addr)).ListPipelines(context.Background(), &apiv1.ListPipelinesRequest{})
		if err != nil || len(list.GetPipelines()) != 5 {
			t.Errorf("ListPipelines on %s: %v %v", addr, list, err)
		}
	}
	if srv.GRPCAddr() == srv.Addr() {
		t.Errorf("one address for both: %s", srv.Addr())
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// editingV1 is a runtime that changes applied pipelines.
type editingV1 struct {
	*fakeV1
	edits []PipelineEdit
	err   error
}

func (e *editingV1) EditPipeline(_ context.Context, id string, edit PipelineEdit) error {
	e.edits = append(e.edits, edit)
	return e.err
}

// A pipeline applied through the API takes Conduit's piecewise changes
// (the runtime changes its file); a file's is refused; a change the
// runtime finds invalid is INVALID_ARGUMENT.
func TestConduitV1EditsAppliedPipelines(t *testing.T) {
	rt := &editingV1{fakeV1: &fakeV1{}}
	h := NewHandler(NewPipelineService(v1TestPipelines(), nil, nil), Options{ConduitV1: rt})
	srv, err := Listen("127.0.0.1:0", h, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() {
		_ = srv.Shutdown(context.Background())
		<-done
	}()
	conn := grpcConn(t, srv.Addr())
	ctx := context.Background()
	pipelines := apiv1.NewPipelineServiceClient(conn)
	if _, err := pipelines.UpdatePipeline(ctx, &apiv1.UpdatePipelineRequest{Id: "flaky", Config: &apiv1.Pipeline_Config{Name: "flaky", Description: "d"}}); err != nil {
		t.Fatal(err)
	}
	if len(rt.edits) != 1 || rt.edits[0].Op != EditUpdatePipeline || rt.edits[0].Description != "d" {
		t.Fatalf("edits: %+v", rt.edits)
	}
	procs := apiv1.NewProcessorServiceClient(conn)
	_, err = procs.CreateProcessor(ctx, &apiv1.CreateProcessorRequest{Parent: &apiv1.Processor_Parent{Type: apiv1.Processor_Parent_TYPE_PIPELINE, Id: "flaky"},
		Plugin: "field.set", Config: &apiv1.Processor_Config{Settings: map[string]string{"field": ".Key"}}})
	// The fake does not change the pipeline, so the new processor is not
	// found afterwards; the edit is what counts here.
	if status.Code(err) != codes.NotFound || len(rt.edits) != 2 || rt.edits[1].Op != EditCreateProcessor || rt.edits[1].Plugin != "field.set" ||
		rt.edits[1].Processor == "" || rt.edits[1].Settings["field"] != ".Key" {
		t.Fatalf("CreateProcessor: %v, edits %+v", err, rt.edits)
	}
	if _, err := pipelines.UpdatePipeline(ctx, &apiv1.UpdatePipelineRequest{Id: "orders"}); status.Code(err) != codes.FailedPrecondition || len(rt.edits) != 2 {
		t.Errorf("a file's pipeline: %v, edits %d", err, len(rt.edits))
	}
	rt.err = &EditError{Err: errors.New(`connectors[gen].settings.bogus: unknown setting`)}
	if _, err := pipelines.UpdatePipeline(ctx, &apiv1.UpdatePipelineRequest{Id: "flaky"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an invalid change: %v", err)
	}
}

// A body over the API's request limit is refused on Conduit's HTTP routes
// too.
func TestConduitV1BoundsRequestBodies(t *testing.T) {
	ts := startV1Server(t, Options{})
	big := `{"config":{"settings":{"k":"` + strings.Repeat("x", MaxRequestBytes) + `"}}}`
	req, _ := http.NewRequest(http.MethodPut, "http://"+ts.addr+"/v1/connectors/orders:src", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || !strings.Contains(string(body), "too large") {
		t.Errorf("a body over %d bytes: %d %s", MaxRequestBytes, res.StatusCode, body)
	}
}
