package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fakeHealth struct {
	live  error
	ready Readiness
}

func (f fakeHealth) Live(context.Context) error      { return f.live }
func (f fakeHealth) Ready(context.Context) Readiness { return f.ready }

func TestProbes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		health fakeHealth
		method string
		path   string
		code   int
		body   string
	}{
		{"live", fakeHealth{}, http.MethodGet, "/healthz", 200, "ok\n"},
		{"store broken", fakeHealth{live: errors.New("the store does not answer")}, http.MethodGet, "/healthz", 503, "not ok: the store does not answer\n"},
		{"ready", fakeHealth{ready: Readiness{Ready: true}}, http.MethodGet, "/readyz", 200, `{"ready":true,"degraded":[]}` + "\n"},
		{"starting", fakeHealth{ready: Readiness{Reason: "starting or shutting down"}}, http.MethodGet, "/readyz", 503,
			`{"ready":false,"reason":"starting or shutting down","degraded":[]}` + "\n"},
		{"head", fakeHealth{ready: Readiness{Ready: true}}, http.MethodHead, "/readyz", 200, ""},
		{"post", fakeHealth{}, http.MethodPost, "/healthz", 405, "method not allowed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A token is set and none is sent, and the Host is not this
			// machine: probes are answered anyway.
			h := NewHandler(NewPipelineService(testPipelines(), nil, nil), Options{Token: "s3cret", Health: tc.health})
			req := httptest.NewRequest(tc.method, "http://10.0.0.7:8080"+tc.path, strings.NewReader(""))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
		})
	}
}
