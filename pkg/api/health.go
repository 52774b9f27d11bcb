package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Health answers the HTTP probes /healthz and /readyz.
type Health interface {
	// Live reports whether the process and its store work.
	Live(ctx context.Context) error
	// Ready reports whether the pipelines are loaded and supervised.
	Ready(ctx context.Context) Readiness
}

// Readiness is what /readyz says.
type Readiness struct {
	Ready bool `json:"ready"`
	// Reason says why not ready.
	Reason string `json:"reason,omitempty"`
	// Degraded are the ids of the degraded pipelines.
	Degraded []string `json:"degraded"`
}

// probeTimeout bounds a probe: a store that does not answer in time is
// as good as broken to an orchestrator.
const probeTimeout = 2 * time.Second

// probePaths are answered without a token and whatever the Host header:
// orchestrators probe pods by address and carry no credentials.
var probePaths = map[string]bool{"/healthz": true, "/readyz": true}

func healthHandler(h Health) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !probeMethod(w, r) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := h.Live(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			writeBody(w, r, []byte("not ok: "+err.Error()+"\n"))
			return
		}
		writeBody(w, r, []byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !probeMethod(w, r) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		rd := h.Ready(ctx)
		if rd.Degraded == nil {
			rd.Degraded = []string{}
		}
		body, err := json.Marshal(rd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		writeBody(w, r, append(body, '\n'))
	})
	return mux
}

// writeBody writes b unless the request is a HEAD.
func writeBody(w http.ResponseWriter, r *http.Request, b []byte) {
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func probeMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}
