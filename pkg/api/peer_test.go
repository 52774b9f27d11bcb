package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID is the user the tests run clients as: nobody.
const otherUID = 65534

// requestFrom is a request as net/http hands it to the handler of a
// loopback connection.
func requestFrom(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", "application/json")
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	return req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
}

func TestOnlyConduitsUserAndRootWithoutAToken(t *testing.T) {
	const token = "s3cret-token-0123"
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	svc := newTestService(t)
	user := func(uid uint32, err error) peerUsers {
		return func(*net.TCPAddr, *net.TCPAddr) (uint32, error) { return uid, err }
	}
	owner := &ownUsers{uid: 1000}
	const list = "/conduit.v1.PipelineService/ListPipelines"
	tests := []struct {
		name, token, bearer, method, path string
		peers                             peerUsers
		want                              int
		wantMsg                           []string
	}{
		{"conduit's own user", "", "", "POST", list, user(1000, nil), http.StatusOK, nil},
		{"root", "", "", "POST", list, user(0, nil), http.StatusOK, nil},
		{"another user", "", "", "POST", list, user(otherUID, nil), http.StatusForbidden,
			[]string{"uid 65534", "uid 1000", "api.auth.token", "Authorization: Bearer"}},
		{"another user's bearer means nothing without a token", "", "Bearer x", "POST", list, user(otherUID, nil), http.StatusForbidden, nil},
		{"a user that cannot be found", "", "", "POST", list, user(0, errors.New("no such socket")), http.StatusForbidden,
			[]string{"could not tell", "no such socket", "api.auth.token"}},
		{"a system that cannot tell users apart", "", "", "POST", list, user(0, errPeerUnsupported), http.StatusOK, nil},
		{"metrics for another user", "", "", "GET", "/metrics", user(otherUID, nil), http.StatusForbidden, nil},
		{"metrics for conduit's user", "", "", "GET", "/metrics", user(1000, nil), http.StatusOK, nil},
		{"the console for another user", "", "", "GET", "/ui/", user(otherUID, nil), http.StatusForbidden, nil},
		{"the console for conduit's user", "", "", "GET", "/ui/", user(1000, nil), http.StatusOK, nil},
		{"healthz for another user", "", "", "GET", "/healthz", user(otherUID, nil), http.StatusOK, nil},
		{"gRPC health for another user", "", "", "POST", "/grpc.health.v1.Health/Check", user(otherUID, nil), http.StatusOK, nil},
		{"with a token another user sends it", token, "Bearer " + token, "POST", list, user(otherUID, nil), http.StatusOK, nil},
		{"with a token another user's console pages ask for it", token, "", "GET", "/ui/", user(otherUID, nil), http.StatusOK, nil},
		{"with a token another user's metrics need it", token, "", "GET", "/metrics", user(otherUID, nil), http.StatusUnauthorized, nil},
		{"with a token conduit's own user needs it too", token, "", "POST", list, user(1000, nil), http.StatusUnauthorized, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(svc, Options{Token: tt.token, Console: page, Metrics: page, Health: okHealth{},
				peerUsers: tt.peers, owner: owner})
			req := requestFrom(tt.method, tt.path, "{}")
			if tt.bearer != "" {
				req.Header.Set("Authorization", tt.bearer)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(rec.Body.String(), m) {
					t.Errorf("the answer does not say %q: %s", m, rec.Body)
				}
			}
		})
	}
}

type okHealth struct{}

func (okHealth) Live(context.Context) error      { return nil }
func (okHealth) Ready(context.Context) Readiness { return Readiness{Ready: true} }

// One lookup per connection, however many requests it carries.
func TestClientUserIsLookedUpOncePerConnection(t *testing.T) {
	lookups := 0
	opts := Options{peerUsers: func(*net.TCPAddr, *net.TCPAddr) (uint32, error) {
		lookups++ // the connection's requests come one after the other
		return uint32(os.Geteuid()), nil
	}}
	ts := startServerWith(t, opts, ServerOptions{})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for range 3 {
		resp, err := client.Post(ts.url+"/conduit.v1.PipelineService/ListPipelines", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if lookups != 1 {
		t.Fatalf("%d lookups for three requests on one connection, want 1", lookups)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a client as another user needs root")
	}
}

// publicTestBinary copies the test binary where another user can run it
// (go test builds it in a directory only its user may enter).
func publicTestBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "conduit-api-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
