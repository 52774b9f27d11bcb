package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
)

// MaxRequestBytes bounds a request message; every request of this API is
// a few ids and flags.
const MaxRequestBytes = 1 << 20

// ErrInsecureAddress is returned by Listen for a non-loopback address
// without a token.
var ErrInsecureAddress = errors.New("refusing to serve the API on a non-loopback address without api.auth.token")

// Options configure the handler.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every call but gRPC health (and on /metrics).
	Token string
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	Logger  *zap.Logger
}

// NewHandler returns the API's HTTP handler: PipelineService, gRPC health,
// gRPC reflection (v1 and v1alpha, so grpcurl works) and /metrics.
func NewHandler(svc *PipelineService, opts Options) http.Handler {
	auth := connect.WithInterceptors(&tokenInterceptor{token: opts.Token})
	limits := []connect.HandlerOption{auth, connect.WithReadMaxBytes(MaxRequestBytes)}

	mux := http.NewServeMux()
	mux.Handle(conduitv1connect.NewPipelineServiceHandler(svc, limits...))
	// Health is deliberately open: load balancers and orchestrators probe
	// it without credentials, and it reveals nothing.
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(conduitv1connect.PipelineServiceName),
		connect.WithReadMaxBytes(MaxRequestBytes)))
	reflector := grpcreflect.NewStaticReflector(conduitv1connect.PipelineServiceName, grpchealth.HealthV1ServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limits...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limits...))
	if opts.Metrics != nil {
		mux.Handle("/metrics", requireToken(opts.Token, opts.Metrics))
	}
	return mux
}

// Server serves the handler on one port with HTTP/1.1 and cleartext HTTP/2
// (h2c), so Connect, gRPC and gRPC-Web clients and curl all work.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *zap.Logger
}

// Listen binds address. It refuses a non-loopback address when token is
// empty: an open API would let anyone on the network stop pipelines.
func Listen(address, token string, h http.Handler, log *zap.Logger) (*Server, error) {
	if token == "" && !isLoopback(address) {
		return nil, fmt.Errorf("api.http.address %s: %w (set CONDUIT_API_AUTH_TOKEN, or bind 127.0.0.1)", address, ErrInsecureAddress)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("api.http.address %s: %w", address, err)
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{
		srv: &http.Server{
			Handler:           h,
			Protocols:         protocols,
			ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          zap.NewStdLog(log.Named("http")),
		},
		ln:  ln,
		log: log,
	}, nil
}

// Addr is the address the server listens on (with the real port when the
// configured one was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until Shutdown; it returns nil after a shutdown.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections and waits for calls in progress
// until ctx is done, then closes what is left (watch streams).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return err
}

func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenInterceptor checks the bearer token on unary and streaming calls.
type tokenInterceptor struct{ token string }

func (t *tokenInterceptor) check(h http.Header) error {
	if t.token == "" || validBearer(h.Get("Authorization"), t.token) {
		return nil
	}
	return connect.NewError(connect.CodeUnauthenticated, errors.New(`missing or wrong "Authorization: Bearer <token>" (api.auth.token)`))
}

func (t *tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := t.check(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (t *tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (t *tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := t.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

func validBearer(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !validBearer(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthenticated: send Authorization: Bearer <api.auth.token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
