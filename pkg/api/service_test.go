package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/store"
)

// fakePipeline follows the supervisor's rules for start and stop.
type fakePipeline struct {
	info PipelineInfo
	mu   sync.Mutex
	st   lifecycle.State
}

func (f *fakePipeline) Info() PipelineInfo { return f.info }

func (f *fakePipeline) State(context.Context) (lifecycle.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.Clone(), nil
}

func (f *fakePipeline) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Status != lifecycle.StatusStopped && f.st.Status != lifecycle.StatusDegraded {
		return &lifecycle.TransitionError{Event: "start", From: f.st.Status}
	}
	f.st.Status, f.st.FailCount, f.st.DegradedReason = lifecycle.StatusRunning, 0, ""
	return nil
}

func (f *fakePipeline) Stop(_ context.Context, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Status != lifecycle.StatusRunning && f.st.Status != lifecycle.StatusRecovering {
		return &lifecycle.TransitionError{Event: "stop", From: f.st.Status}
	}
	f.st.Status = lifecycle.StatusStopped
	if force {
		f.st.Status, f.st.DegradedReason = lifecycle.StatusDegraded, lifecycle.ReasonForceStop
	}
	return nil
}

type fakePipelines []*fakePipeline

func (f fakePipelines) List() []Supervised {
	out := make([]Supervised, len(f))
	for i, p := range f {
		out[i] = p
	}
	return out
}

// Invalid: one pipeline with a bad field, one file that does not parse.
func (f fakePipelines) Invalid() []ConfigError {
	return []ConfigError{
		{PipelineID: "bad", File: "pipelines/bad.yml", Line: 10, Err: errors.New(`pipelines/bad.yml:10: pipeline "bad": connectors[gen].settings.rate: "fast" is not a number`)},
		{File: "pipelines/broken.yml", Line: 2, Err: errors.New("pipelines/broken.yml:2: yaml: did not find expected key")},
	}
}

func (f fakePipelines) Get(id string) (Supervised, bool) {
	for _, p := range f {
		if p.info.ID == id {
			return p, true
		}
	}
	return nil, false
}

var testNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func testPipelines() fakePipelines {
	return fakePipelines{
		{info: PipelineInfo{ID: "orders", Name: "orders", File: "pipelines/orders.yml", Line: 3, Instance: "conduit-a",
			Definition: "version: \"2.2\"\npipelines:\n  - id: orders\n"}, st: lifecycle.State{Status: lifecycle.StatusRunning}},
		{info: PipelineInfo{ID: "flaky", Name: "flaky"}, st: lifecycle.State{
			Status: lifecycle.StatusRecovering, FailCount: 2, NextAttemptAt: testNow.Add(2 * time.Second),
			LastError: &lifecycle.ErrorInfo{At: testNow, Code: 503, Class: "transient", Source: "typed",
				Message: "dial tcp 127.0.0.1:5432: connect: connection refused", Component: "pg", ComponentKind: "source"},
			Episode: &lifecycle.Episode{StartedAt: testNow.Add(-time.Second), Attempts: []lifecycle.Attempt{
				{Number: 1, FailedAt: testNow.Add(-time.Second), Delay: time.Second, NextAttemptAt: testNow,
					Error: lifecycle.ErrorInfo{Code: 503, Class: "transient", Message: "refused"}},
				{Number: 2, FailedAt: testNow, Delay: 2 * time.Second, NextAttemptAt: testNow.Add(2 * time.Second),
					Error: lifecycle.ErrorInfo{Code: 503, Class: "transient", Message: "refused"}},
			}},
		}},
		{info: PipelineInfo{ID: "broken", Name: "broken"}, st: lifecycle.State{Status: lifecycle.StatusDegraded, DegradedReason: lifecycle.ReasonFatal,
			LastError: &lifecycle.ErrorInfo{Code: 422, Class: "fatal", Source: "json", Message: "column price does not exist", Component: "dst", ComponentKind: "destination"}}},
	}
}

type testServer struct {
	url, addr string
	log       *auditlog.Log
	pipelines fakePipelines
	srv       *Server
}

// startServer serves the API on a real loopback port with h2c, as the
// binary does.
func startServer(t *testing.T, token string) *testServer {
	t.Helper()
	return startServerWith(t, Options{Token: token}, ServerOptions{Token: token})
}

// startServerWith is startServer with options; opts.Metrics is set here.
func startServerWith(t *testing.T, opts Options, sopts ServerOptions) *testServer {
	t.Helper()
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	al, err := auditlog.Open(context.Background(), db, w, auditlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := testPipelines()
	svc := NewPipelineService(ps, al, func() time.Time { return testNow.Add(3 * time.Second) })
	opts.Metrics = metrics.New(nil).Handler()
	h := NewHandler(svc, opts)
	srv, err := Listen("127.0.0.1:0", h, sopts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = al.Close()
		_ = srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		w.Close()
	})
	return &testServer{url: "http://" + srv.Addr(), addr: srv.Addr(), log: al, pipelines: ps, srv: srv}
}

// h2cClient speaks cleartext HTTP/2, as gRPC needs.
func h2cClient() *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: protocols}}
}

func clients(url string, opts ...connect.ClientOption) map[string]conduitv1connect.PipelineServiceClient {
	return map[string]conduitv1connect.PipelineServiceClient{
		"connect": conduitv1connect.NewPipelineServiceClient(http.DefaultClient, url, opts...),
		"grpc":    conduitv1connect.NewPipelineServiceClient(h2cClient(), url, append(opts, connect.WithGRPC())...),
		"grpcweb": conduitv1connect.NewPipelineServiceClient(http.DefaultClient, url, append(opts, connect.WithGRPCWeb())...),
	}
}

func TestPipelinesOverEveryProtocol(t *testing.T) {
	ts := startServer(t, "")
	ctx := context.Background()
	for name, c := range clients(ts.url) {
		t.Run(name, func(t *testing.T) {
			list, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			// Three supervised pipelines and the invalid one.
			if n := len(list.Msg.GetPipelines()); n != 4 {
				t.Fatalf("listed %d pipelines, want 4", n)
			}
			degraded, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{
				Statuses: []conduitv1.PipelineStatus{conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED}}))
			if err != nil || len(degraded.Msg.GetPipelines()) != 1 || degraded.Msg.GetPipelines()[0].GetId() != "broken" {
				t.Fatalf("filter by degraded: %v %v", degraded, err)
			}
			got, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "flaky"}))
			if err != nil {
				t.Fatal(err)
			}
			p := got.Msg.GetPipeline()
			le := p.GetLastError()
			if p.GetStatus() != conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING || p.GetFailCount() != 2 ||
				!p.GetNextAttemptAt().AsTime().Equal(testNow.Add(2*time.Second)) ||
				le.GetCode() != 503 || le.GetClass() != conduitv1.ErrorClass_ERROR_CLASS_TRANSIENT || le.GetComponent() != "pg" ||
				len(p.GetEpisode().GetAttempts()) != 2 || p.GetEpisode().GetDuration().AsDuration() != 4*time.Second {
				t.Fatalf("GetPipeline returned %v", p)
			}
		})
	}
}

func TestStartAndStop(t *testing.T) {
	ts := startServer(t, "")
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)
	ctx := context.Background()
	stopped, err := c.StopPipeline(ctx, connect.NewRequest(&conduitv1.StopPipelineRequest{Id: "orders"}))
	if err != nil || stopped.Msg.GetPipeline().GetStatus() != conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED {
		t.Fatalf("stop: %v %v", stopped, err)
	}
	started, err := c.StartPipeline(ctx, connect.NewRequest(&conduitv1.StartPipelineRequest{Id: "broken"}))
	if err != nil || started.Msg.GetPipeline().GetStatus() != conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING {
		t.Fatalf("start of a degraded pipeline: %v %v", started, err)
	}
	forced, err := c.StopPipeline(ctx, connect.NewRequest(&conduitv1.StopPipelineRequest{Id: "broken", Force: true}))
	if err != nil || forced.Msg.GetPipeline().GetDegradedReason() != "force stop" {
		t.Fatalf("force stop: %v %v", forced, err)
	}
}

func TestErrorCodes(t *testing.T) {
	ts := startServer(t, "")
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want connect.Code
	}{
		{"get with empty id", func() error {
			_, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"get unknown", func() error {
			_, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"start running", func() error {
			_, err := c.StartPipeline(ctx, connect.NewRequest(&conduitv1.StartPipelineRequest{Id: "orders"}))
			return err
		}, connect.CodeFailedPrecondition},
		{"stop degraded", func() error {
			_, err := c.StopPipeline(ctx, connect.NewRequest(&conduitv1.StopPipelineRequest{Id: "broken"}))
			return err
		}, connect.CodeFailedPrecondition},
		{"events limit too large", func() error {
			_, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "orders", Limit: 5000}))
			return err
		}, connect.CodeInvalidArgument},
		{"events negative limit", func() error {
			_, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "orders", Limit: -1}))
			return err
		}, connect.CodeInvalidArgument},
		{"events unknown kind", func() error {
			_, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "orders", Kinds: []string{"exploded"}}))
			return err
		}, connect.CodeInvalidArgument},
		{"events of unknown pipeline", func() error {
			_, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"list with unknown status", func() error {
			_, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{Statuses: []conduitv1.PipelineStatus{42}}))
			return err
		}, connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := connect.CodeOf(err); got != tt.want {
				t.Fatalf("code %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestCurlStyleJSON is what the README shows: plain HTTP POST with JSON.
func TestCurlStyleJSON(t *testing.T) {
	ts := startServer(t, "")
	post := func(method, body string) (int, map[string]any) {
		resp, err := http.Post(ts.url+"/conduit.v1.PipelineService/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	code, out := post("GetPipeline", `{"id":"broken"}`)
	p, _ := out["pipeline"].(map[string]any)
	if code != 200 || p["status"] != "PIPELINE_STATUS_DEGRADED" || p["degradedReason"] != "fatal error" {
		t.Fatalf("GetPipeline: %d %v", code, out)
	}
	if le, _ := p["lastError"].(map[string]any); le["code"] != float64(422) || le["class"] != "ERROR_CLASS_FATAL" {
		t.Fatalf("last error %v", p["lastError"])
	}
	code, out = post("GetPipeline", `{"id":"nope"}`)
	if code != 404 || out["code"] != "not_found" {
		t.Fatalf("unknown pipeline: %d %v", code, out)
	}
	code, out = post("GetPipeline", `{"id": 12`)
	if code != 400 || out["code"] != "invalid_argument" {
		t.Fatalf("malformed JSON: %d %v", code, out)
	}
}

// Every pipeline comes with the instance that runs it: set in a cluster,
// empty when none holds it (and for an invalid pipeline, which none runs).
func TestPipelinesCarryTheInstanceThatRunsThem(t *testing.T) {
	ts := startServer(t, "")
	ctx := context.Background()
	want := map[string]string{"orders": "conduit-a", "flaky": "", "broken": "", "bad": ""}
	for name, c := range clients(ts.url) {
		t.Run(name, func(t *testing.T) {
			list, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, p := range list.Msg.GetPipelines() {
				got[p.GetId()] = p.GetInstance()
			}
			if !maps.Equal(got, want) {
				t.Fatalf("instances %v, want %v", got, want)
			}
			one, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "orders"}))
			if err != nil || one.Msg.GetPipeline().GetInstance() != "conduit-a" {
				t.Fatalf("GetPipeline: %v %v", one, err)
			}
			if got := one.Msg.GetPipeline().GetDefinition(); !strings.Contains(got, "- id: orders") {
				t.Fatalf("definition %q", got)
			}
		})
	}
	t.Run("curl", func(t *testing.T) {
		resp, err := http.Post(ts.url+"/conduit.v1.PipelineService/GetPipeline", "application/json", strings.NewReader(`{"id":"orders"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Pipeline map[string]any `json:"pipeline"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if out.Pipeline["instance"] != "conduit-a" {
			t.Fatalf("JSON pipeline %v", out.Pipeline)
		}
	})
}

func TestAuth(t *testing.T) {
	ts := startServer(t, "s3cret")
	ctx := context.Background()
	withToken := func(token string) connect.ClientOption {
		return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		}))
	}
	for name, c := range clients(ts.url) {
		t.Run(name+" without token", func(t *testing.T) {
			_, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("got %v, want unauthenticated", err)
			}
		})
	}
	for name, c := range clients(ts.url, withToken("wrong")) {
		t.Run(name+" wrong token", func(t *testing.T) {
			_, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("got %v, want unauthenticated", err)
			}
		})
	}
	for name, c := range clients(ts.url, withToken("s3cret")) {
		t.Run(name+" right token", func(t *testing.T) {
			if _, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{})); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("watch without token", func(t *testing.T) {
		c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)
		stream, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "orders"}))
		if err == nil {
			stream.Receive()
			err = stream.Err()
		}
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("got %v, want unauthenticated", err)
		}
	})
	t.Run("health needs no token", func(t *testing.T) {
		resp, err := http.Post(ts.url+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "SERVING") {
			t.Fatalf("health: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("metrics need the token", func(t *testing.T) {
		resp, err := http.Get(ts.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("metrics without token: %d", resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", ts.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("metrics with token: %d", resp.StatusCode)
		}
	})
}

func TestListenRefusesOpenNonLoopbackAddress(t *testing.T) {
	_, err := Listen("0.0.0.0:0", http.NotFoundHandler(), ServerOptions{})
	if !errors.Is(err, ErrInsecureAddress) || !strings.Contains(err.Error(), "0.0.0.0:0") {
		t.Fatalf("got %v, want ErrInsecureAddress naming the address", err)
	}
	srv, err := Listen("0.0.0.0:0", http.NotFoundHandler(), ServerOptions{Token: "token"})
	if err != nil {
		t.Fatalf("with a token: %v", err)
	}
	_ = srv.Shutdown(context.Background())
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		srv, err := Listen(addr, http.NotFoundHandler(), ServerOptions{})
		if err != nil {
			if strings.Contains(err.Error(), "cannot assign") { // no IPv6 here
				continue
			}
			t.Fatalf("%s: %v", addr, err)
		}
		_ = srv.Shutdown(context.Background())
	}
}

func TestReflectionListsTheServices(t *testing.T) {
	ts := startServer(t, "")
	client := grpcreflect.NewClient(h2cClient(), ts.url)
	stream := client.NewStream(context.Background())
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, string(n))
	}
	joined := strings.Join(got, " ")
	if !strings.Contains(joined, "conduit.v1.PipelineService") || !strings.Contains(joined, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", got)
	}
}

func TestListAndWatchEventsAcrossAReconnect(t *testing.T) {
	ts := startServer(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	appendEvent := func(kind auditlog.Kind) {
		t.Helper()
		if _, err := ts.log.Append(ctx, auditlog.Event{PipelineID: "flaky", Kind: kind, Message: string(kind)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []auditlog.Kind{auditlog.KindRunning, auditlog.KindFault, auditlog.KindRecovering} {
		appendEvent(k)
	}
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)

	list, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "flaky", NewestFirst: true, Limit: 2}))
	if err != nil || len(list.Msg.GetEvents()) != 2 || list.Msg.GetEvents()[0].GetSequence() != 3 {
		t.Fatalf("newest 2: %v %v", list, err)
	}
	filtered, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "flaky", Kinds: []string{"fault"}}))
	if err != nil || len(filtered.Msg.GetEvents()) != 1 || filtered.Msg.GetEvents()[0].GetKind() != "fault" {
		t.Fatalf("kind filter: %v %v", filtered, err)
	}

	watch := func(after uint64) (*connect.ServerStreamForClient[conduitv1.WatchPipelineEventsResponse], context.CancelFunc) {
		wctx, wcancel := context.WithCancel(ctx)
		s, err := c.WatchPipelineEvents(wctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "flaky", AfterSequence: after}))
		if err != nil {
			t.Fatal(err)
		}
		return s, wcancel
	}
	next := func(s *connect.ServerStreamForClient[conduitv1.WatchPipelineEventsResponse]) uint64 {
		t.Helper()
		if !s.Receive() {
			t.Fatalf("stream ended: %v", s.Err())
		}
		return s.Msg().GetEvent().GetSequence()
	}
	s, stop := watch(1)
	if a, b := next(s), next(s); a != 2 || b != 3 {
		t.Fatalf("replay after 1 gave %d, %d; want 2, 3", a, b)
	}
	appendEvent(auditlog.KindRestarted)
	if n := next(s); n != 4 {
		t.Fatalf("live event %d, want 4", n)
	}
	stop()
	_ = s.Close()

	// Reconnect after the last sequence seen: an event appended while
	// disconnected is replayed, then live ones follow, no duplicate.
	appendEvent(auditlog.KindRecovered)
	s, stop = watch(4)
	defer stop()
	if n := next(s); n != 5 {
		t.Fatalf("after reconnect got %d, want 5", n)
	}
	appendEvent(auditlog.KindRunning)
	if n := next(s); n != 6 {
		t.Fatalf("live after reconnect got %d, want 6", n)
	}
}

func TestOversizedRequestIsRejected(t *testing.T) {
	ts := startServer(t, "")
	big := `{"id":"` + strings.Repeat("x", MaxRequestBytes+10) + `"}`
	resp, err := http.Post(ts.url+"/conduit.v1.PipelineService/GetPipeline", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 || !bytes.Contains(body, []byte("resource_exhausted")) {
		t.Fatalf("oversized request: %d %s", resp.StatusCode, body)
	}
}

// FuzzHandlers sends arbitrary bodies to every procedure, as JSON and as
// protobuf: the server answers with a client error or success, never a
// panic or an internal error.
func FuzzHandlers(f *testing.F) {
	for _, seed := range []string{`{}`, `{"id":"orders"}`, `{"pipelineId":"flaky","limit":-3}`, `{"statuses":[99]}`,
		`{"id":null}`, "\x0a\x06orders", "\xff\xff\xff", `{"kinds":["fault",1]}`} {
		f.Add(seed)
	}
	ps := testPipelines()
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	al, err := auditlog.Open(context.Background(), db, w, auditlog.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler(NewPipelineService(ps, al, nil), Options{})
	procedures := []string{"ListPipelines", "GetPipeline", "ListPipelineEvents", "StartPipeline", "StopPipeline"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, proc := range procedures {
			for _, ct := range []string{"application/json", "application/proto"} {
				req, _ := http.NewRequest("POST", "http://localhost/conduit.v1.PipelineService/"+proc, strings.NewReader(body))
				req.Header.Set("Content-Type", ct)
				rec := &recorder{header: http.Header{}}
				h.ServeHTTP(rec, req)
				if rec.code >= 500 {
					t.Fatalf("%s %s with %q: status %d %s", proc, ct, body, rec.code, rec.body.String())
				}
			}
		}
		// Put the fakes back so the next input starts from the same state.
		for i, p := range testPipelines() {
			ps[i].st = p.st
		}
	})
}

type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) { r.code = code }

// Invalid pipelines are listed with their errors, and asking for one says
// why it does not run.
func TestInvalidPipelinesAreVisible(t *testing.T) {
	ts := startServer(t, "")
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)
	ctx := context.Background()
	list, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{
		Statuses: []conduitv1.PipelineStatus{conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING}}))
	if err != nil {
		t.Fatal(err)
	}
	ces := list.Msg.GetConfigErrors()
	if len(ces) != 2 || ces[0].GetPipelineId() != "bad" || ces[0].GetConfigFile() != "pipelines/bad.yml:10" ||
		!strings.Contains(ces[0].GetMessage(), `"fast" is not a number`) || ces[1].GetPipelineId() != "" {
		t.Fatalf("config errors %v", ces)
	}
	got, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "bad"}))
	if err != nil {
		t.Fatalf("GetPipeline of an invalid pipeline: %v", err)
	}
	if p := got.Msg.GetPipeline(); p.GetStatus() != conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID || len(p.GetConfigErrors()) != 1 ||
		!strings.Contains(p.GetConfigErrors()[0].GetMessage(), `"fast" is not a number`) || p.GetConfigFile() != "pipelines/bad.yml:10" || p.GetOrigin() != "file" {
		t.Fatalf("GetPipeline of an invalid pipeline: %v", p)
	}
	all, err := c.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{
		Statuses: []conduitv1.PipelineStatus{conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID}}))
	if err != nil {
		t.Fatal(err)
	}
	if ps := all.Msg.GetPipelines(); len(ps) != 1 || ps[0].GetId() != "bad" {
		t.Fatalf("listing invalid pipelines: %v", ps)
	}
	_, err = c.StartPipeline(ctx, connect.NewRequest(&conduitv1.StartPipelineRequest{Id: "bad"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("StartPipeline of an invalid pipeline: %v", err)
	}
}

// A deleted pipeline's audit log, with its deleted event, stays readable.
func TestDeletedPipelineEventsStayReadable(t *testing.T) {
	ts := startServer(t, "")
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)
	ctx := context.Background()
	for _, k := range []auditlog.Kind{auditlog.KindCreated, auditlog.KindDeleted} {
		if _, err := ts.log.Append(ctx, auditlog.Event{PipelineID: "gone", Kind: k, Actor: "config"}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "gone"}))
	if err != nil || len(list.Msg.GetEvents()) != 2 || list.Msg.GetEvents()[1].GetKind() != "deleted" {
		t.Fatalf("events of a deleted pipeline: %v %v", list, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.WatchPipelineEvents(wctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "gone"}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetEvent().GetKind() != "created" {
		t.Fatalf("watch of a deleted pipeline: %v", stream.Err())
	}
	cancel()
	_, err = c.ListPipelineEvents(ctx, connect.NewRequest(&conduitv1.ListPipelineEventsRequest{PipelineId: "never"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of a pipeline that never existed: %v", err)
	}
}

// TestWatchEveryPipeline follows the events of all pipelines without a
// pipeline id: live only, each pipeline's in order.
func TestWatchEveryPipeline(t *testing.T) {
	ts := startServer(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := conduitv1connect.NewPipelineServiceClient(http.DefaultClient, ts.url)

	if _, err := ts.log.Append(ctx, auditlog.Event{PipelineID: "orders", Kind: auditlog.KindRunning}); err != nil {
		t.Fatal(err)
	}
	refused, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{AfterSequence: 3}))
	if err == nil {
		// A stream's error comes with its first receive.
		if refused.Receive() {
			t.Fatal("a watch of every pipeline after a sequence sent an event")
		}
		err = refused.Err()
		_ = refused.Close()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "after_sequence") {
		t.Fatalf("after_sequence without a pipeline id: %v, want invalid argument naming after_sequence", err)
	}

	// The server registers the watch some time after the request, and
	// answers it only with the first event: write faults of flaky until
	// one arrives.
	firstSeen := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := ts.log.Append(ctx, auditlog.Event{PipelineID: "flaky", Kind: auditlog.KindFault}); err != nil {
				writer <- err
				return
			}
			select {
			case <-firstSeen:
				writer <- nil
				return
			case <-tick.C:
			}
		}
	}()
	stream, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{Kinds: []string{"fault", "stopped"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("stream ended: %v", stream.Err())
	}
	close(firstSeen)
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	// The writer may have written more faults before it saw the first
	// arrive; they come before what follows, and are skipped.
	last := ts.log.LastSequence("flaky")
	for _, e := range []auditlog.Event{
		{PipelineID: "flaky", Kind: auditlog.KindRecovering}, // filtered out
		{PipelineID: "orders", Kind: auditlog.KindStopped},
		{PipelineID: "flaky", Kind: auditlog.KindFault},
	} {
		if _, err := ts.log.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got := []string{}
	flakyAfter := last
	for len(got) < 2 {
		if !stream.Receive() {
			t.Fatalf("stream ended: %v", stream.Err())
		}
		e := stream.Msg().GetEvent()
		if e.GetPipelineId() == "flaky" && e.GetSequence() <= flakyAfter {
			continue // a fault the writer above wrote before it stopped
		}
		if e.GetPipelineId() == "flaky" {
			flakyAfter = e.GetSequence()
		}
		got = append(got, e.GetPipelineId()+" "+e.GetKind())
	}
	if want := []string{"orders stopped", "flaky fault"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAPipelineCarriesTheBreakerThatHoldsIt(t *testing.T) {
	p := pipelineToProto(PipelineInfo{ID: "orders"}, lifecycle.State{Status: lifecycle.StatusRecovering, HeldBy: "orders-db"}, testNow)
	if p.GetHeldBy() != "orders-db" {
		t.Fatalf("held_by %q, want orders-db", p.GetHeldBy())
	}
}

// retiredPipeline was listed, then its supervisor ended (the pipeline was
// deleted, updated or handed over) before its state was read.
type retiredPipeline struct{ fakePipeline }

func (r *retiredPipeline) State(context.Context) (lifecycle.State, error) {
	return lifecycle.State{}, lifecycle.ErrSupervisorDone
}

// withRetired lists a pipeline that is retired by the time it is read.
type withRetired struct {
	fakePipelines
	retired *retiredPipeline
}

func (w withRetired) List() []Supervised { return append(w.fakePipelines.List(), w.retired) }

// A pipeline retired while the list is made is left out (gone) or shown
// as it is now; the list does not fail as if the server shut down.
func TestListSkipsAPipelineRetiredMeanwhile(t *testing.T) {
	ps := withRetired{fakePipelines: testPipelines(), retired: &retiredPipeline{fakePipeline{info: PipelineInfo{ID: "gone"}}}}
	svc := NewPipelineService(ps, nil, func() time.Time { return testNow })
	res, err := svc.ListPipelines(context.Background(), connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
	if err != nil {
		t.Fatalf("ListPipelines: %v", err)
	}
	for _, p := range res.Msg.GetPipelines() {
		if p.GetId() == "gone" {
			t.Fatal("a pipeline deleted while the list was made is listed")
		}
	}
	if len(res.Msg.GetPipelines()) != len(testPipelines())+1 { // and "bad", invalid
		t.Fatalf("%d pipelines listed", len(res.Msg.GetPipelines()))
	}
}

// An event about one connector says which, also when it carries no error:
// dedup-skipped and dedup-unverified are about a destination.
func TestEventsNameTheirComponentWithoutAnError(t *testing.T) {
	pb := eventToProto(auditlog.Event{Sequence: 3, PipelineID: "orders", Kind: auditlog.KindDedupUnverified,
		Component: "out", ComponentKind: cerrors.ComponentDestination, Message: "destination out could not say what it holds"})
	if pb.GetComponent() != "out" || pb.GetComponentKind() != "destination" || pb.GetError() != nil {
		t.Fatalf("event %v: want component out (destination) and no error", pb)
	}
	withError := eventToProto(auditlog.Event{Kind: auditlog.KindFault, Component: "pg", ComponentKind: cerrors.ComponentSource,
		ErrorCode: 503, ErrorClass: cerrors.ClassTransient, ErrorMessage: "unavailable"})
	if withError.GetComponent() != "pg" || withError.GetError().GetComponent() != "pg" {
		t.Fatalf("fault event %v: want its component at the top and in its error", withError)
	}
}

// A value the store will not keep is the caller's input to shorten: an
// invalid argument, not an internal error.
func TestTooLargeValueIsTheCallersError(t *testing.T) {
	err := fmt.Errorf("apply pipelines: %w", store.ErrValueTooLarge)
	for name, got := range map[string]error{
		"internalError":   internalError(context.Background(), err),
		"transitionError": transitionError(err),
	} {
		if code := connect.CodeOf(got); code != connect.CodeInvalidArgument {
			t.Errorf("%s: code %v, want invalid_argument", name, code)
		}
	}
}
