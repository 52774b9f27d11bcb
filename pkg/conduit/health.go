package conduit

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/store"
)

// consoleURL is where a browser on this machine opens the web console of
// the API listening at addr: an address that listens on every interface
// (0.0.0.0, ::) is reached as localhost.
func consoleURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + api.ConsolePath
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + api.ConsolePath
}

// runtimeHealth answers the probes.
type runtimeHealth struct{ r *Runtime }

var _ api.Health = runtimeHealth{}

// Live reads the process marker: the store answers. A database server
// that cannot be reached does not make the process unhealthy - a restart
// of the process would not bring it back, and every instance would be
// restarted at once - it makes it not ready.
func (h runtimeHealth) Live(ctx context.Context) error {
	_, err := h.r.db.Get(ctx, []byte(store.KeyProcess))
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("the store does not answer: %w", err)
	}
	return nil
}

// Ready is true while Run supervises the pipelines and the database can
// be reached, unless a pipeline is degraded and
// api.readyz.fail-on-degraded is on.
func (h runtimeHealth) Ready(ctx context.Context) api.Readiness {
	r := h.r
	degraded := r.pipes.Degraded()
	rd := api.Readiness{Ready: r.ready.Load(), Degraded: degraded}
	_, err := r.db.Get(ctx, []byte(store.KeyProcess))
	switch {
	case !rd.Ready:
		rd.Reason = "starting or shutting down"
	case errors.Is(err, store.ErrUnavailable):
		rd.Ready, rd.Reason = false, err.Error()
	case len(degraded) > 0 && r.cfg.API.Readyz.FailOnDegraded:
		rd.Ready, rd.Reason = false, "pipelines are degraded (api.readyz.fail-on-degraded)"
	}
	return rd
}
