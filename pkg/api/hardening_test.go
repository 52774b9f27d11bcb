package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/store"
)

// healthRequest is a complete HTTP/1.1 health check that asks the server
// to close the connection after answering.
const healthRequest = "POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n" +
	"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitClosed reads c until the server closes it, failing after within.
func waitClosed(t *testing.T, c net.Conn, within time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v", within)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestDefaultConnectionCapFollowsTheFileLimit(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", http.NotFoundHandler(), ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if n := srv.MaxConnections(); n < 8 || n > 1024 {
		t.Fatalf("MaxConnections() = %d, want a share of the file limit within 8-1024", n)
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	const timeout = 50 * time.Millisecond
	ts := startServerWith(t, Options{}, ServerOptions{ReadHeaderTimeout: timeout, ReadTimeout: timeout, IdleTimeout: timeout})
	t.Run("no request", func(t *testing.T) {
		waitClosed(t, dial(t, ts.addr), 5*time.Second)
	})
	t.Run("headers but not the body", func(t *testing.T) {
		c := dial(t, ts.addr)
		// 2 bytes of the 100 announced.
		if _, err := io.WriteString(c, strings.Replace(healthRequest, "Content-Length: 2", "Content-Length: 100", 1)); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c, 5*time.Second)
	})
	t.Run("HTTP/1.1 keep-alive after a request", func(t *testing.T) {
		c := dial(t, ts.addr)
		req := strings.Replace(healthRequest, "Connection: close", "Connection: keep-alive", 1)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.Close {
			t.Fatal("the server closed a keep-alive connection right away; nothing tested")
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); isTimeout(err) {
			t.Fatal("an idle keep-alive connection stayed open")
		}
	})
	t.Run("HTTP/2 without streams", func(t *testing.T) {
		c := dial(t, ts.addr)
		// The client preface and an empty SETTINGS frame.
		if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c, 5*time.Second)
	})
}

// TestWatchOutlivesTheTimeouts: every timeout is short, yet a watch stream
// goes on delivering events after all of them passed, over HTTP/1.1
// (Connect, gRPC-Web, and curl's fixed-length body, which the server reads
// to its end and then watches the connection) and HTTP/2 (gRPC).
func TestWatchOutlivesTheTimeouts(t *testing.T) {
	const timeout = 50 * time.Millisecond
	ts := startServerWith(t, Options{}, ServerOptions{
		ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	appendEvent := func() uint64 {
		t.Helper()
		e, err := ts.log.Append(ctx, auditlog.Event{PipelineID: "orders", Kind: auditlog.KindRunning})
		if err != nil {
			t.Fatal(err)
		}
		return e.Sequence
	}
	first := appendEvent()
	// next returns the sequence of a stream's next event.
	streams := map[string]func() (uint64, error){}
	for name, c := range clients(ts.url) {
		s, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "orders"}))
		if err != nil {
			t.Fatal(err)
		}
		streams[name] = func() (uint64, error) {
			if !s.Receive() {
				return 0, fmt.Errorf("stream ended: %w", s.Err())
			}
			return s.Msg().GetEvent().GetSequence(), nil
		}
	}
	streams["curl"] = rawConnectWatch(t, ts.addr, `{"pipelineId":"orders"}`)
	for name, next := range streams {
		if seq, err := next(); err != nil || seq != first {
			t.Fatalf("%s: replay gave %d, %v", name, seq, err)
		}
	}
	// A connection opened after the streams started is closed by the
	// header timeout, so every timeout armed for the streams has passed
	// when it is.
	waitClosed(t, dial(t, ts.addr), 5*time.Second)
	want := appendEvent()
	for name, next := range streams {
		if seq, err := next(); err != nil || seq != want {
			t.Fatalf("%s: the stream did not outlive the timeouts: got %d, %v", name, seq, err)
		}
	}
}

// rawConnectWatch starts a Connect server stream over HTTP/1.1 as curl
// would send it, with a Content-Length, and returns a function reading the
// sequence of each event.
func rawConnectWatch(t *testing.T, addr, request string) func() (uint64, error) {
	t.Helper()
	return startRawWatch(t, dial(t, addr), request)
}

// startRawWatch is rawConnectWatch on the connection c.
func startRawWatch(t *testing.T, c net.Conn, request string) func() (uint64, error) {
	t.Helper()
	env := make([]byte, 5, 5+len(request))
	binary.BigEndian.PutUint32(env[1:], uint32(len(request)))
	env = append(env, request...)
	head := fmt.Sprintf("POST /conduit.v1.PipelineService/WatchPipelineEvents HTTP/1.1\r\nHost: localhost\r\n"+
		"Content-Type: application/connect+json\r\nContent-Length: %d\r\n\r\n", len(env))
	if _, err := c.Write(append([]byte(head), env...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: status %d", resp.StatusCode)
	}
	return func() (uint64, error) {
		var prefix [5]byte
		if _, err := io.ReadFull(resp.Body, prefix[:]); err != nil {
			return 0, err
		}
		msg := make([]byte, binary.BigEndian.Uint32(prefix[1:]))
		if _, err := io.ReadFull(resp.Body, msg); err != nil {
			return 0, err
		}
		if prefix[0]&2 != 0 { // end of stream
			return 0, fmt.Errorf("stream ended: %s", msg)
		}
		var out struct {
			Event struct {
				Sequence uint64 `json:"sequence,string"`
			} `json:"event"`
		}
		err := json.Unmarshal(msg, &out)
		return out.Event.Sequence, err
	}
}

// countingBody is a huge request body that counts what was read of it.
type countingBody struct {
	left, read int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.left))
	clear(p[:n])
	b.left -= int64(n)
	b.read += int64(n)
	return n, nil
}

func newTestService(t *testing.T) *PipelineService {
	t.Helper()
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	al, err := auditlog.Open(context.Background(), db, w, auditlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = al.Close()
		w.Close()
	})
	return NewPipelineService(testPipelines(), al, nil)
}

func TestRejectedBeforeTheBodyIsRead(t *testing.T) {
	svc := newTestService(t)
	tests := []struct {
		name, token, host, contentType string
		wantStatus                     int
	}{
		{"no token, connect", "s3cret-token-0123", "localhost:8080", "application/json", http.StatusUnauthorized},
		// gRPC answers 200 with the status in a header.
		{"no token, gRPC", "s3cret-token-0123", "localhost:8080", "application/grpc", http.StatusOK},
		{"foreign host without a token", "", "attacker.example", "application/json", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(svc, Options{Token: tt.token})
			body := &countingBody{left: 1 << 30}
			req := httptest.NewRequest("POST", "http://"+tt.host+"/conduit.v1.PipelineService/StopPipeline", body)
			req.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if body.read != 0 {
				t.Fatalf("%d bytes of the body were read before the request was refused", body.read)
			}
			if tt.contentType == "application/grpc" && rec.Header().Get("Grpc-Status") == "" {
				t.Fatalf("no grpc-status in %v", rec.Header())
			}
		})
	}
}

func TestHostWithoutToken(t *testing.T) {
	do := func(t *testing.T, url, host, token, method, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/"+method, strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	const svcPath = "conduit.v1.PipelineService"
	t.Run("no token", func(t *testing.T) {
		ts := startServer(t, "")
		for _, host := range []string{"attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", "localhost.attacker.example", "10.0.0.1:8080"} {
			code, out := do(t, ts.url, host, "", svcPath+"/StopPipeline", `{"id":"orders"}`)
			msg, _ := out["message"].(string)
			if code != http.StatusForbidden || !strings.Contains(msg, "api.auth.token") || !strings.Contains(msg, host) {
				t.Fatalf("Host %s: %d %v", host, code, out)
			}
		}
		if st, _ := ts.pipelines[0].State(context.Background()); st.Status != lifecycle.StatusRunning {
			t.Fatalf("a request to a foreign Host changed the pipeline: %v", st.Status)
		}
		for _, host := range []string{"localhost", "localhost:8080", "LocalHost:1", "127.0.0.1", "127.0.0.1:8080", "127.1.2.3:9", "[::1]:8080", "[::1]"} {
			if code, out := do(t, ts.url, host, "", svcPath+"/GetPipeline", `{"id":"orders"}`); code != http.StatusOK {
				t.Fatalf("Host %s: %d %v", host, code, out)
			}
		}
		if code, out := do(t, ts.url, "attacker.example", "", "grpc.health.v1.Health/Check", `{}`); code != http.StatusOK {
			t.Fatalf("health with a foreign Host: %d %v", code, out)
		}
	})
	t.Run("with a token any Host is fine", func(t *testing.T) {
		ts := startServer(t, "s3cret-token-0123")
		if code, out := do(t, ts.url, "conduit.example.com", "s3cret-token-0123", svcPath+"/GetPipeline", `{"id":"orders"}`); code != http.StatusOK {
			t.Fatalf("%d %v", code, out)
		}
	})
}

func TestBearerScheme(t *testing.T) {
	const token = "s3cret-token-0123"
	tests := []struct {
		header string
		want   bool
	}{
		{"Bearer " + token, true},
		{"bearer " + token, true},
		{"BEARER " + token, true},
		{"bEaReR " + token, true},
		{"Bearer   " + token, true}, // 1*SP
		{"Bearer" + token, false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Basic " + token, false},
		{"Bearer " + token + "x", false},
		{"Bearer " + token[:len(token)-1], false},
		{token, false},
		{"", false},
	}
	for _, tt := range tests {
		if got := validBearer(tt.header, token); got != tt.want {
			t.Errorf("validBearer(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
	// And end to end.
	ts := startServer(t, token)
	req, _ := http.NewRequest("POST", ts.url+"/conduit.v1.PipelineService/ListPipelines", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf(`"bearer" in lower case: status %d`, resp.StatusCode)
	}
}

func TestUnknownNamesAreRejected(t *testing.T) {
	ts := startServer(t, "")
	tests := []struct {
		name, method, body, wantInMessage string
	}{
		{"unknown enum name", "ListPipelines", `{"statuses":["PIPELINE_STATUS_BOGUS"]}`, "statuses"},
		{"unknown enum name beside a known one", "ListPipelines", `{"statuses":["PIPELINE_STATUS_RUNNING","RUNNING"]}`, "statuses"},
		{"undefined enum number", "ListPipelines", `{"statuses":[99]}`, "statuses[0]"},
		{"unspecified enum", "ListPipelines", `{"statuses":["PIPELINE_STATUS_UNSPECIFIED"]}`, "statuses[0]"},
		{"misspelled field", "StopPipeline", `{"id":"orders","forse":true}`, "forse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.url+"/conduit.v1.PipelineService/"+tt.method, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct{ Code, Message string }
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != http.StatusBadRequest || out.Code != "invalid_argument" || !strings.Contains(out.Message, tt.wantInMessage) {
				t.Fatalf("%s: %d %+v, want invalid_argument naming %s", tt.body, resp.StatusCode, out, tt.wantInMessage)
			}
		})
	}
	if st, _ := ts.pipelines[0].State(context.Background()); st.Status != lifecycle.StatusRunning {
		t.Fatalf("a rejected request changed the pipeline: %v", st.Status)
	}
	// Known names still work, in the JSON enum spelling and as numbers.
	resp, err := http.Post(ts.url+"/conduit.v1.PipelineService/ListPipelines", "application/json",
		strings.NewReader(`{"statuses":["PIPELINE_STATUS_DEGRADED",1]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("known statuses: %d", resp.StatusCode)
	}
}

func TestWatcherLimits(t *testing.T) {
	watch := func(t *testing.T, ts *testServer) (context.CancelFunc, error) {
		t.Helper()
		c := conduitv1connect.NewPipelineServiceClient(h2cClient(), ts.url, connect.WithGRPC())
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "orders"}))
		if err == nil && !s.Receive() { // the replayed event proves the watch is open
			err = s.Err()
		}
		if err != nil {
			cancel()
			return nil, err
		}
		t.Cleanup(cancel)
		return cancel, nil
	}
	withEvent := func(t *testing.T, opts Options) *testServer {
		ts := startServerWith(t, opts, ServerOptions{})
		if _, err := ts.log.Append(context.Background(), auditlog.Event{PipelineID: "orders", Kind: auditlog.KindRunning}); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	exhausted := func(t *testing.T, err error, key string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "("+key+")") {
			t.Fatalf("got %v, want RESOURCE_EXHAUSTED naming %s", err, key)
		}
	}

	t.Run("per client, and a closed watch frees its slot", func(t *testing.T) {
		ts := withEvent(t, Options{MaxWatchers: 10, MaxWatchersPerClient: 2})
		first, err := watch(t, ts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := watch(t, ts); err != nil {
			t.Fatal(err)
		}
		_, err = watch(t, ts)
		exhausted(t, err, "api.max-watchers-per-client")
		first()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := watch(t, ts)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slot of a closed watch was not freed: %v", err)
			}
		}
	})
	t.Run("in all", func(t *testing.T) {
		ts := withEvent(t, Options{MaxWatchers: 2, MaxWatchersPerClient: 10})
		for range 2 {
			if _, err := watch(t, ts); err != nil {
				t.Fatal(err)
			}
		}
		_, err := watch(t, ts)
		exhausted(t, err, "api.max-watchers")
	})
	t.Run("clients are counted apart", func(t *testing.T) {
		l := newWatcherLimits(3, 2)
		for _, c := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"} {
			if err := l.acquire(c); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
		}
		if err := l.acquire("10.0.0.3"); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("a fourth watch of three allowed: %v", err)
		}
		l.release("10.0.0.1")
		if err := l.acquire("10.0.0.3"); err != nil {
			t.Fatalf("after a release: %v", err)
		}
		if l.total != 3 || len(l.byClient) != 3 {
			t.Fatalf("total %d, clients %v", l.total, l.byClient)
		}
	})
}

// TestIdleWatcherMemory measures what the server holds for an open, idle
// watch stream (heap and goroutine stacks, the audit log watcher
// included), so that a buffer allocated up front per watcher cannot come
// back unnoticed. The client runs in another process (this test binary, as
// TestWatchClientProcess) so that only the server's memory is counted.
func TestIdleWatcherMemory(t *testing.T) {
	const n = 200
	ts := startServerWith(t, Options{MaxWatchers: n + 1, MaxWatchersPerClient: n + 1}, ServerOptions{})
	if _, err := ts.log.Append(context.Background(), auditlog.Event{PipelineID: "orders", Kind: auditlog.KindRunning}); err != nil {
		t.Fatal(err)
	}
	run := func(watchers int) (stop func()) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatchClientProcess$")
		cmd.Env = append(os.Environ(), watchClientEnv+"="+ts.url, fmt.Sprintf("%s_N=%d", watchClientEnv, watchers))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			t.Fatalf("watch client: %q %v", line, err)
		}
		return func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		}
	}
	// Warm up: the connection and the server's pools exist before measuring.
	stop := run(1)
	before := inUse()
	stop()
	stop = run(n + 1)
	defer stop()
	per := (int64(inUse()) - int64(before)) / n
	t.Logf("the server holds %d bytes per idle watcher", per)
	// Two goroutines (the handler's and the audit log watcher's, 8 KiB of
	// stack each) and about 16 KiB of heap: the HTTP/2 stream with its
	// 4 KiB write buffer, the request, the Connect stream, the watcher.
	if per > 48<<10 {
		t.Fatalf("an idle watcher holds %d bytes of the server, want at most 48 KiB", per)
	}
}

const watchClientEnv = "CONDUIT_TEST_WATCH_CLIENT"

// TestWatchClientProcess is the client of TestIdleWatcherMemory: it opens
// the watches, says "ready" and holds them until its stdin closes.
func TestWatchClientProcess(t *testing.T) {
	url := os.Getenv(watchClientEnv)
	if url == "" {
		return // run by TestIdleWatcherMemory only
	}
	var n int
	if _, err := fmt.Sscan(os.Getenv(watchClientEnv+"_N"), &n); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := conduitv1connect.NewPipelineServiceClient(h2cClient(), url, connect.WithGRPC())
	for range n {
		s, err := c.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{PipelineId: "orders"}))
		if err != nil || !s.Receive() {
			t.Fatalf("watch: %v %v", err, s.Err())
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
