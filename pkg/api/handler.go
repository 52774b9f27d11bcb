package api

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
)

// MaxRequestBytes bounds a request message; every request of this API is
// a few ids and flags.
const MaxRequestBytes = 1 << 20

// Defaults of Options.
const (
	DefaultMaxWatchers          = 256
	DefaultMaxWatchersPerClient = 32
)

// Options configure the handler.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request but the health checks, whoever sends it. Without it
	// only requests addressed to localhost or a loopback address, from a
	// client running as conduit's own OS user or root, are answered.
	Token string
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	Logger  *zap.Logger
	// MaxWatchers caps the event watch streams open at once
	// (api.max-watchers); 0 means DefaultMaxWatchers.
	MaxWatchers int
	// MaxWatchersPerClient caps them per client IP address
	// (api.max-watchers-per-client); 0 means DefaultMaxWatchersPerClient.
	MaxWatchersPerClient int
	// Health serves /healthz and /readyz; nil leaves them out.
	Health Health
	// Rules serves RecoveryRuleService; nil leaves it out.
	Rules Rules
	// Notifications serves NotificationService; nil leaves it out.
	Notifications Notifications
	// ConduitV1 serves Conduit's API v1 beside this one (its gRPC
	// services, its /v1/ HTTP routes, /info and /openapi); nil leaves it
	// out. The same token, user and loopback rules and the same watcher
	// limits apply to it.
	ConduitV1 ConduitV1
	// Console serves the web console's pages under ConsolePath; nil
	// leaves it out. The pages hold no data: with a token they are
	// served without it and ask for it; without a token the loopback
	// and user rules apply to them as to the API.
	Console http.Handler
	// AllowedOrigins are the web origins (scheme://host[:port]) besides
	// the API's own whose pages may call the API from a browser
	// (api.http.cors.allowed-origins); they get CORS headers. Every other
	// cross-site browser request is refused.
	AllowedOrigins []string

	// peerUsers and owner replace the system's lookup of a client's OS
	// user and conduit's own user in tests.
	peerUsers peerUsers
	owner     *ownUsers
}

// ConsolePath is where the web console is served.
const ConsolePath = "/ui/"

// healthPaths are the procedures answered without a token: load balancers
// and orchestrators probe them without credentials, and they reveal
// nothing.
var healthPaths = map[string]bool{
	"/" + grpchealth.HealthV1ServiceName + "/Check": true,
	"/" + grpchealth.HealthV1ServiceName + "/Watch": true,
}

// NewHandler returns the API's HTTP handler: PipelineService, gRPC health,
// gRPC reflection (v1 and v1alpha, so grpcurl works), /metrics, /healthz
// and /readyz, and Conduit's API v1 when opts.ConduitV1 is set.
func NewHandler(svc *PipelineService, opts Options) http.Handler {
	if opts.MaxWatchers <= 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	if opts.MaxWatchersPerClient <= 0 {
		opts.MaxWatchersPerClient = DefaultMaxWatchersPerClient
	}
	limits := []connect.HandlerOption{
		connect.WithReadMaxBytes(MaxRequestBytes),
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
	}
	// One limit for every server stream, of either API.
	streams := newWatcherLimits(opts.MaxWatchers, opts.MaxWatchersPerClient)
	watchers := connect.WithInterceptors(streams)

	mux := http.NewServeMux()
	mux.Handle(conduitv1connect.NewPipelineServiceHandler(svc, append(limits, watchers)...))
	services := []string{conduitv1connect.PipelineServiceName}
	if opts.Rules != nil {
		mux.Handle(conduitv1connect.NewRecoveryRuleServiceHandler(NewRuleService(opts.Rules), limits...))
		services = append(services, conduitv1connect.RecoveryRuleServiceName)
	}
	if opts.Notifications != nil {
		mux.Handle(conduitv1connect.NewNotificationServiceHandler(NewNotificationService(opts.Notifications), limits...))
		services = append(services, conduitv1connect.NotificationServiceName)
	}
	healthNames, reflected := services, append(services, grpchealth.HealthV1ServiceName)
	if opts.ConduitV1 != nil {
		v1, err := newConduitV1Handler(&conduitV1Service{ps: svc.pipelines, changes: svc.changes, rt: opts.ConduitV1}, streams)
		if err != nil {
			// Only a route that does not parse fails: a wiring mistake.
			panic(fmt.Sprintf("serving Conduit's API v1: %v", err))
		}
		for _, route := range conduitV1Routes {
			mux.Handle(route, v1)
		}
		for _, service := range conduitV1Services {
			mux.Handle("/"+service+"/", v1)
		}
		// Conduit's health server answers for its services by these names.
		healthNames = append(slices.Clone(services), conduitHealthServices...)
		reflected = append(reflected, conduitV1Services...)
	}
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(healthNames...),
		connect.WithReadMaxBytes(MaxRequestBytes)))
	reflector := grpcreflect.NewStaticReflector(reflected...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limits...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limits...))
	if opts.Metrics != nil {
		mux.Handle("/metrics", opts.Metrics)
	}
	if opts.Console != nil {
		mux.Handle(ConsolePath, opts.Console)
		mux.Handle(strings.TrimSuffix(ConsolePath, "/"), opts.Console)
	}
	if opts.Health != nil {
		probes := healthHandler(opts.Health)
		for path := range probePaths {
			mux.Handle(path, probes)
		}
	}
	g := &guard{next: mux, token: opts.Token, errors: connect.NewErrorWriter(), console: opts.Console != nil,
		crossSite: newCrossSite(opts.AllowedOrigins), peerUsers: opts.peerUsers, owner: processUsers()}
	if g.peerUsers == nil {
		g.peerUsers = systemPeerUsers
	}
	if opts.owner != nil {
		g.owner = *opts.owner
	}
	return g
}

// guard decides from the headers and the connection alone whether a
// request is answered, so an unauthenticated client cannot make the
// server read (and buffer) a body: first it refuses cross-site browser
// requests (crossSite), on every route, health checks included; then
// with a token it checks the token;
// without one it answers only requests addressed to this machine, so a
// web page that rebinds its DNS name to 127.0.0.1 cannot drive the API
// from a browser, and only from clients running as conduit's own OS user
// or root, so another user of the machine (or another container of the
// pod) cannot make conduit read or write files for it.
type guard struct {
	next   http.Handler
	token  string
	errors *connect.ErrorWriter
	// console: the console's pages are served; with a token they need
	// none (they ask the person for it).
	console bool
	// crossSite refuses requests of web pages of other origins.
	crossSite crossSite
	// peerUsers finds a client's OS user; owner says which may call
	// without a token.
	peerUsers peerUsers
	owner     ownUsers
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	allowedOrigin, err := g.crossSite.check(r)
	if err != nil {
		g.reject(w, r, err)
		return
	}
	if allowedOrigin != "" {
		// A preflight carries no token: it only asks whether the page
		// may send the request that follows, which is checked in turn.
		if isPreflight(r) {
			answerPreflight(w, allowedOrigin)
			return
		}
		corsHeaders(w.Header(), allowedOrigin)
	}
	switch {
	case healthPaths[r.URL.Path], probePaths[r.URL.Path]:
	case g.token != "" && g.console && isConsolePath(r.URL.Path):
	case g.token == "":
		if host := requestHost(r); !isLoopbackHost(host) {
			g.reject(w, r, connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"the Host header %q is not this machine: without api.auth.token the API answers only requests addressed to localhost or a loopback address (set a token to serve other names)", r.Host)))
			return
		}
		if err := g.checkUser(r); err != nil {
			g.reject(w, r, err)
			return
		}
	case !validBearer(r.Header.Get("Authorization"), g.token):
		w.Header().Set("WWW-Authenticate", "Bearer")
		g.reject(w, r, connect.NewError(connect.CodeUnauthenticated,
			errors.New(`missing or wrong "Authorization: Bearer <token>" (api.auth.token)`)))
		return
	}
	if !healthPaths[r.URL.Path] && !probePaths[r.URL.Path] && !(g.token != "" && g.console && isConsolePath(r.URL.Path)) {
		if done := markAdmitted(r); done != nil {
			defer done()
		}
	}
	g.next.ServeHTTP(w, r)
}

// tokenHelp says how to let other users in, for refusals.
const tokenHelp = `to let other users call it, start conduit with api.auth.token set (CONDUIT_API_AUTH_TOKEN) and send the token as "Authorization: Bearer <token>"`

// checkUser admits, without a token, only clients running as conduit's
// own OS user or root. Where the system cannot tell users apart it admits
// every loopback client (Listen warns about it); where it can but the
// lookup fails the request is refused: a client it cannot place is not
// trusted.
func (g *guard) checkUser(r *http.Request) error {
	uid, err := peerUID(r, g.peerUsers)
	switch {
	case errors.Is(err, errPeerUnsupported):
		return nil
	case err != nil:
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"could not tell which OS user this client runs as (%v): without api.auth.token only conduit's own user (uid %d) and root may call the API; %s", err, g.owner.uid, tokenHelp))
	case !g.owner.allowed(uid):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"this client runs as uid %d: without api.auth.token only conduit's own OS user (uid %d) and root may call the API; %s", uid, g.owner.uid, tokenHelp))
	}
	return nil
}

func isConsolePath(path string) bool {
	return path == strings.TrimSuffix(ConsolePath, "/") || strings.HasPrefix(path, ConsolePath)
}

// reject answers in the request's RPC protocol (gRPC clients read a
// status, not an HTTP code), or as Connect JSON for plain HTTP.
func (g *guard) reject(w http.ResponseWriter, r *http.Request, err error) {
	if isConduitV1HTTP(r.URL.Path) {
		// Conduit's HTTP routes answer errors in grpc-gateway's shape.
		writeConduitHTTPError(w, r, codes.Code(connect.CodeOf(err)), connectMessage(err))
		return
	}
	_ = g.errors.Write(w, r, err)
}

// requestHost is the request's Host (the :authority over HTTP/2) without
// its port.
func requestHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.Host); err == nil {
		return host
	}
	return r.Host
}

// validBearer checks an Authorization header: the scheme is
// case-insensitive and followed by one or more spaces (RFC 7235).
func validBearer(header, token string) bool {
	scheme, credentials, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	credentials = strings.TrimLeft(credentials, " ")
	return subtle.ConstantTimeCompare([]byte(credentials), []byte(token)) == 1
}

// strictJSON is the protobuf JSON codec with unknown names rejected.
// Connect's own JSON codec discards unknown fields, and protojson then
// also skips unknown enum names, so {"statuses":["PIPELINE_STATUS_BOGUS"]}
// would list every pipeline and a misspelled "forse" would stop one
// gracefully. Requests come from people and scripts typing JSON; a
// mistake gets an error naming the field, as a misspelled key in
// conduit.yml does.
type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", message)
	}
	return protojson.Marshal(m)
}

func (c strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("an empty body is not a JSON object; send {} for an empty request")
	}
	return protojson.Unmarshal(data, m)
}

// IsBinary tells Connect how to put a message in a GET query.
func (c strictJSON) IsBinary() bool { return false }
