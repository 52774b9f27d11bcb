package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// The console's pages hold no data: with a token they are served without
// it (they ask the person for it) while every API call still needs it;
// without a token they follow the API's loopback and user rules.
func TestConsolePagesAndTheGuard(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	serve := func(h http.Handler, method, host, path string) int {
		req := requestFrom(method, path, "{}")
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	withToken := NewHandler(NewPipelineService(testPipelines(), nil, nil), Options{Token: "console-token-0123456", Console: page})
	if code := serve(withToken, http.MethodGet, "conduit.internal:8080", "/ui/"); code != http.StatusOK {
		t.Errorf("the console's page with a token set, asked without it: %d", code)
	}
	if code := serve(withToken, http.MethodPost, "conduit.internal:8080", "/conduit.v1.PipelineService/ListPipelines"); code != http.StatusUnauthorized {
		t.Errorf("an API call without the token: %d", code)
	}
	ownUser := func(*net.TCPAddr, *net.TCPAddr) (uint32, error) { return uint32(os.Geteuid()), nil }
	open := NewHandler(NewPipelineService(testPipelines(), nil, nil), Options{Console: page, peerUsers: ownUser})
	if code := serve(open, http.MethodGet, "127.0.0.1:8080", "/ui/"); code != http.StatusOK {
		t.Errorf("the console on loopback without a token: %d", code)
	}
	if code := serve(open, http.MethodGet, "attacker.example:8080", "/ui/"); code != http.StatusForbidden {
		t.Errorf("the console asked by another name without a token: %d", code)
	}
	without := NewHandler(NewPipelineService(testPipelines(), nil, nil), Options{Token: "console-token-0123456"})
	if code := serve(without, http.MethodGet, "127.0.0.1:8080", "/ui/"); code == http.StatusOK {
		t.Errorf("no console configured, yet /ui/ answers 200")
	}
}
