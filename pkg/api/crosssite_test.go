package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// consolePage stands in for the console's handler.
var consolePage = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "<html>console</html>")
})

// rawRequest is a request as a browser (or curl) sends it: headers are
// given as name, value pairs.
type rawRequest struct {
	method, path, body string
	header             []string
}

func (rr rawRequest) do(t *testing.T, addr string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if rr.body != "" {
		body = strings.NewReader(rr.body)
	}
	req, err := http.NewRequest(rr.method, "http://"+addr+rr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(rr.header); i += 2 {
		req.Header.Set(rr.header[i], rr.header[i+1])
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// rawClient bounds a request that was let through to a stream.
var rawClient = &http.Client{Timeout: 5 * time.Second}

// Every route refuses a request a web page of another origin sent, by
// each of the signals, before it acts: the pipeline keeps running, and
// the refusal says which Origin and which setting would let it in.
func TestCrossSiteRequestsAreRefusedOnEveryRoute(t *testing.T) {
	ts := startV1Server(t, Options{Console: consolePage, Health: okHealth{}})
	_, port, _ := strings.Cut(ts.addr, ":")
	const evil = "http://evil.example"
	stopJSON := `{"id":"orders"}`
	tests := []struct {
		name string
		req  rawRequest
		// want is what the refusal must say besides the key.
		want string
	}{
		{"v1 no-cors text/plain POST", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Origin", evil, "Content-Type", "text/plain;charset=UTF-8", "Sec-Fetch-Site", "cross-site"}}, evil},
		{"v1 form POST", rawRequest{"POST", "/v1/pipelines/orders/stop", "a=b",
			[]string{"Origin", evil, "Content-Type", "application/x-www-form-urlencoded"}}, evil},
		{"v1 JSON POST of another origin", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Origin", evil, "Content-Type", "application/json"}}, evil},
		{"v1 from 127.0.0.1 at another port (same site)", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Origin", "http://127.0.0.1:1", "Content-Type", "application/json", "Sec-Fetch-Site", "same-site"}}, "http://127.0.0.1:1"},
		{"v1 from https on the same host and port", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Origin", "https://127.0.0.1:" + port, "Content-Type", "application/json"}}, "https://127.0.0.1:" + port},
		{"v1 Origin null (sandboxed frame)", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Origin", "null", "Content-Type", "application/json"}}, `Origin \"null\"`},
		{"v1 without Origin, Sec-Fetch-Site cross-site", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}}, "Sec-Fetch-Site: cross-site"},
		{"v1 without Origin, Sec-Fetch-Site same-site", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site"}}, "Sec-Fetch-Site: same-site"},
		{"v1 text/plain body from a browser that sends no Origin", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Content-Type", "text/plain", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"}}, "application/json"},
		{"v1 body without a content type from a browser", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Sec-Fetch-Mode", "no-cors"}}, "application/json"},
		{"v1 multipart body from a browser", rawRequest{"POST", "/v1/pipelines/orders/stop", "--x--",
			[]string{"Content-Type", "multipart/form-data; boundary=x", "User-Agent", "Mozilla/5.0"}}, "application/json"},
		{"v1 GET read by another origin", rawRequest{"GET", "/v1/pipelines/orders", "",
			[]string{"Origin", evil, "Sec-Fetch-Mode", "cors"}}, evil},
		{"v1 GET without Origin from another site (img, script)", rawRequest{"GET", "/v1/pipelines", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script"}}, "cross-site"},
		{"v1 inspect stream", rawRequest{"GET", "/v1/connectors/orders:src/inspect", "",
			[]string{"Origin", evil}}, evil},
		{"WebSocket upgrade to inspect", rawRequest{"GET", "/v1/connectors/orders:src/inspect", "",
			[]string{"Origin", evil, "Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
				"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}, evil},
		{"WebSocket upgrade to the console", rawRequest{"GET", "/ui/ws", "",
			[]string{"Origin", "http://localhost:1", "Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
				"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}, "http://localhost:1"},
		{"Connect no-cors text/plain", rawRequest{"POST", "/conduit.v1.PipelineService/StopPipeline", stopJSON,
			[]string{"Origin", evil, "Content-Type", "text/plain"}}, evil},
		{"Connect JSON of another origin", rawRequest{"POST", "/conduit.v1.PipelineService/StopPipeline", stopJSON,
			[]string{"Origin", evil, "Content-Type", "application/json", "Connect-Protocol-Version", "1"}}, evil},
		{"Connect text/plain from a browser without Origin", rawRequest{"POST", "/conduit.v1.PipelineService/StopPipeline", stopJSON,
			[]string{"Content-Type", "text/plain", "User-Agent", "Mozilla/5.0"}}, "text/plain"},
		{"Connect watch stream", rawRequest{"POST", "/conduit.v1.PipelineService/WatchPipelineEvents", "",
			[]string{"Origin", evil, "Content-Type", "application/connect+json"}}, evil},
		{"Conduit's API over the gateway's gRPC path", rawRequest{"POST", "/api.v1.PipelineService/StopPipeline", "",
			[]string{"Origin", evil, "Content-Type", "text/plain"}}, evil},
		{"console page fetched by another origin", rawRequest{"GET", "/ui/", "",
			[]string{"Origin", evil, "Sec-Fetch-Mode", "cors"}}, evil},
		{"console page in a frame of another site", rawRequest{"GET", "/ui/", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"}}, "cross-site"},
		{"health read by another origin", rawRequest{"GET", "/healthz", "",
			[]string{"Origin", evil}}, evil},
		{"preflight of another origin", rawRequest{"OPTIONS", "/v1/pipelines/orders/stop", "",
			[]string{"Origin", evil, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"}}, evil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.req.do(t, ts.addr)
			// A Connect stream answers 200 and ends the stream with the
			// error, as its protocol says.
			refused := resp.StatusCode == http.StatusForbidden ||
				(resp.Header.Get("Content-Type") == "application/connect+json" && strings.Contains(body, "permission_denied"))
			if !refused {
				t.Fatalf("status %d, want 403: %s", resp.StatusCode, body)
			}
			if !strings.Contains(body, tc.want) || (!strings.Contains(body, allowedOriginsKey) && !strings.Contains(body, "Content-Type")) {
				t.Errorf("the refusal does not say %q and %s (or the content type): %s", tc.want, allowedOriginsKey, body)
			}
			for name := range resp.Header {
				if strings.HasPrefix(name, "Access-Control-") {
					t.Errorf("a refused request got CORS header %s: %v", name, resp.Header[name])
				}
			}
			if st, _ := ts.ps[0].State(context.Background()); st.Status != lifecycle.StatusRunning {
				t.Fatalf("the pipeline is %v after a refused cross-site request", st.Status)
			}
		})
	}
}

// gRPC, gRPC-Web and Connect clients are refused in their own protocol
// when they carry a foreign Origin (a gRPC-Web page of another origin),
// and pass without one.
func TestCrossSiteRefusalSpeaksEachProtocol(t *testing.T) {
	ts := startV1Server(t, Options{})
	ctx := context.Background()
	origin := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Origin", "http://evil.example")
			return next(ctx, req)
		}
	}))
	for name, c := range clients("http://"+ts.addr, origin) {
		t.Run(name, func(t *testing.T) {
			_, err := c.StopPipeline(ctx, connect.NewRequest(&conduitv1.StopPipelineRequest{Id: "orders"}))
			if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), allowedOriginsKey) {
				t.Fatalf("StopPipeline with a foreign Origin: %v", err)
			}
		})
	}
	for name, c := range clients("http://" + ts.addr) {
		t.Run(name+" without Origin", func(t *testing.T) {
			if _, err := c.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "orders"})); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Conduit's API over grpc-go, with the header a gRPC-Web proxy in a
	// browser would pass on.
	pipelines := apiv1.NewPipelineServiceClient(grpcConn(t, ts.addr))
	_, err := pipelines.StopPipeline(metadata.AppendToOutgoingContext(ctx, "origin", "http://evil.example"),
		&apiv1.StopPipelineRequest{Id: "orders"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), allowedOriginsKey) {
		t.Fatalf("api.v1 StopPipeline over gRPC with a foreign Origin: %v", err)
	}
	if st, _ := ts.ps[0].State(ctx); st.Status != lifecycle.StatusRunning {
		t.Fatalf("the pipeline is %v after refused requests", st.Status)
	}
	if _, err := pipelines.GetPipeline(ctx, &apiv1.GetPipelineRequest{Id: "orders"}); err != nil {
		t.Fatalf("api.v1 over gRPC without Origin: %v", err)
	}
}

// The console's own pages (same origin), the CLIs and curl (no Origin,
// JSON), and a link followed to the console keep working.
func TestSameOriginAndNonBrowserClientsPass(t *testing.T) {
	ts := startV1Server(t, Options{Console: consolePage, Health: okHealth{}})
	_, port, _ := strings.Cut(ts.addr, ":")
	tests := []struct {
		name string
		req  rawRequest
		want int
	}{
		{"curl JSON to /v1", rawRequest{"GET", "/v1/pipelines/orders", "", nil}, http.StatusOK},
		{"the console's own Connect call", rawRequest{"POST", "/conduit.v1.PipelineService/GetPipeline", `{"id":"orders"}`,
			[]string{"Origin", "http://" + ts.addr, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin"}}, http.StatusOK},
		{"the console's own origin spelled localhost", rawRequest{"POST", "/conduit.v1.PipelineService/GetPipeline", `{"id":"orders"}`,
			[]string{"Origin", "http://LOCALHOST:" + port, "Host", "localhost:" + port, "Content-Type", "application/json"}}, http.StatusOK},
		{"a same-origin GET without Origin", rawRequest{"GET", "/ui/", "", []string{"Sec-Fetch-Site", "same-origin"}}, http.StatusOK},
		{"the console typed in the address bar", rawRequest{"GET", "/ui/", "", []string{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"}}, http.StatusOK},
		{"a link to the console from another site", rawRequest{"GET", "/ui/", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}}, http.StatusOK},
		{"a probe", rawRequest{"GET", "/healthz", "", nil}, http.StatusOK},
		{"JSON with a charset", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}",
			[]string{"Content-Type", "application/json; charset=utf-8"}}, http.StatusOK},
		// curl -d sends application/x-www-form-urlencoded; Conduit reads
		// the body as JSON, and so do the /v1 routes for a script.
		{"a script's curl -d without a JSON content type", rawRequest{"POST", "/v1/pipelines/orders/start", "{}",
			[]string{"Content-Type", "application/x-www-form-urlencoded", "User-Agent", "curl/8.1.2"}}, http.StatusOK},
		{"a script's body without a content type", rawRequest{"POST", "/v1/pipelines/orders/stop", "{}", nil}, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// http.Request's Host goes in its own field.
			req := tc.req
			resp, body := req.doWithHost(t, ts.addr)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if h := resp.Header.Get("Access-Control-Allow-Origin"); h != "" {
				t.Errorf("a same-origin or non-browser request got Access-Control-Allow-Origin %q", h)
			}
		})
	}
	if st, _ := ts.ps[0].State(context.Background()); st.Status != lifecycle.StatusStopped {
		t.Fatalf("curl's JSON stop did not stop the pipeline: %v", st.Status)
	}
}

// doWithHost is do with a "Host" pair in header put in the request's
// Host.
func (rr rawRequest) doWithHost(t *testing.T, addr string) (*http.Response, string) {
	t.Helper()
	var host string
	var rest []string
	for i := 0; i+1 < len(rr.header); i += 2 {
		if rr.header[i] == "Host" {
			host = rr.header[i+1]
			continue
		}
		rest = append(rest, rr.header[i], rr.header[i+1])
	}
	if host == "" {
		rr.header = rest
		return rr.do(t, addr)
	}
	req, err := http.NewRequest(rr.method, "http://"+addr+rr.path, strings.NewReader(rr.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(rest); i += 2 {
		req.Header.Set(rest[i], rest[i+1])
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// An origin listed in api.http.cors.allowed-origins passes, gets CORS
// headers and answers to its preflights (without the token, which the
// request that follows must still carry); other origins get neither.
func TestAllowedOriginsGetCORS(t *testing.T) {
	const (
		allowed = "http://dashboard.example:3000"
		token   = "s3cret-token-0123"
	)
	ts := startV1Server(t, Options{Token: token, AllowedOrigins: []string{"HTTP://Dashboard.example:3000"}})
	preflight := rawRequest{"OPTIONS", "/v1/pipelines/orders/stop", "",
		[]string{"Origin", allowed, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type"}}
	resp, body := preflight.do(t, ts.addr)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight of an allowed origin: %d %s", resp.StatusCode, body)
	}
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":  allowed,
		"Access-Control-Allow-Methods": "POST",
		"Access-Control-Allow-Headers": "Authorization, Content-Type",
		"Access-Control-Max-Age":       corsMaxAge,
	} {
		if got := resp.Header.Get(name); !strings.Contains(got, want) {
			t.Errorf("preflight %s = %q, want %q in it", name, got, want)
		}
	}
	if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentials (cookies) are allowed; the token travels in a header")
	}

	stop := rawRequest{"POST", "/v1/pipelines/orders/stop", "{}", []string{"Origin", allowed, "Content-Type", "application/json"}}
	if resp, body := stop.do(t, ts.addr); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an allowed origin without the token: %d %s", resp.StatusCode, body)
	}
	stop.header = append(stop.header, "Authorization", "Bearer "+token)
	resp, body = stop.do(t, ts.addr)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != allowed ||
		!strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Fatalf("an allowed origin with the token: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if st, _ := ts.ps[0].State(context.Background()); st.Status != lifecycle.StatusStopped {
		t.Fatalf("the allowed origin's stop: %v", st.Status)
	}
	// The allowed origin is not a way around the content type check.
	plain := rawRequest{"POST", "/v1/pipelines/orders/start", "{}",
		[]string{"Origin", allowed, "Content-Type", "text/plain", "Authorization", "Bearer " + token}}
	if resp, body := plain.do(t, ts.addr); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("text/plain from an allowed origin: %d %s", resp.StatusCode, body)
	}
	// Another origin, even with the token (a page cannot have it, but
	// check anyway), is refused before the token is looked at.
	other := rawRequest{"POST", "/v1/pipelines/orders/start", "{}",
		[]string{"Origin", "http://dashboard.example:3001", "Content-Type", "application/json", "Authorization", "Bearer " + token}}
	resp, body = other.do(t, ts.addr)
	var msg struct{ Message string }
	_ = json.Unmarshal([]byte(body), &msg)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg.Message, "dashboard.example:3001") ||
		resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("another origin with the token: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}

// A cross-site request is refused before anything reads its body, with
// or without a token.
func TestCrossSiteRefusedBeforeTheBodyIsRead(t *testing.T) {
	svc := newTestService(t)
	for _, token := range []string{"", "s3cret-token-0123"} {
		h := NewHandler(svc, Options{Token: token})
		body := &countingBody{left: 1 << 30}
		req := httptest.NewRequest("POST", "http://localhost:8080/v1/pipelines/orders/stop", body)
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || body.read != 0 {
			t.Fatalf("token %q: status %d, %d bytes read: %s", token, rec.Code, body.read, rec.Body)
		}
	}
}

func TestNormalizeOrigin(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"HTTP://LocalHost:80", "http://localhost", true},
		{"https://a.example:443", "https://a.example", true},
		{"http://[::1]:8080", "http://[::1]:8080", true},
		{"http://[::1]", "http://[::1]", true},
		{"null", "", false},
		{"file://", "", false},
		{"http://a.example/path", "", false},
		{"chrome-extension://abc", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := normalizeOrigin(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("normalizeOrigin(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
