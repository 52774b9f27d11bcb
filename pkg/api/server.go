package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/conduitry/conduit/pkg/fdlimit"
)

// ErrInsecureAddress is returned by Listen for a non-loopback address
// without a token.
var ErrInsecureAddress = errors.New("refusing to serve the API on a non-loopback address without api.auth.token")

// Defaults of ServerOptions.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// ServerOptions configure Listen. Zero values take the defaults.
type ServerOptions struct {
	// Token is api.auth.token; without one Listen refuses a non-loopback
	// address.
	Token string
	// MaxConnections caps the connections served at once
	// (api.http.max-connections); 0 takes fdlimit.APIConnections of the
	// descriptor limit. A connection beyond it takes the place of the one
	// that has gone longest without a request in flight; when every one
	// has a request in flight, further connections wait in the kernel's
	// accept queue, holding no descriptor of the process, until one
	// closes.
	MaxConnections int
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a request, headers and body, from its
	// start; it ends once the body is read, so it does not limit a watch
	// stream.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response (not the response as a
	// whole: a watch stream runs for hours), so a client that stops
	// reading cannot hold a connection and a handler forever.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that has no request in flight; over
	// HTTP/2 it is also the silence after which the server pings a client.
	IdleTimeout time.Duration
	// Logger receives the HTTP server's own errors; nil discards them.
	Logger *zap.Logger
	// GRPCAddress, when set, is a second address serving the same handler
	// (api.grpc.address, where Conduit's clients call its gRPC API), under
	// the same rules and with a connection cap of its own.
	GRPCAddress string
}

func (o *ServerOptions) setDefaults() {
	if o.MaxConnections <= 0 {
		o.MaxConnections = fdlimit.MaxAPIConnections
		if lim, err := fdlimit.Limit(); err == nil {
			o.MaxConnections = fdlimit.APIConnections(lim)
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&o.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{&o.ReadTimeout, DefaultReadTimeout},
		{&o.WriteTimeout, DefaultWriteTimeout},
		{&o.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Server serves the handler on one port with HTTP/1.1 and cleartext HTTP/2
// (h2c), so Connect, gRPC and gRPC-Web clients and curl all work.
type Server struct {
	srv *http.Server
	ln  net.Listener
	// grpcLn listens on GRPCAddress; nil without one.
	grpcLn       net.Listener
	maxConns     int
	writeTimeout time.Duration
}

// Listen binds address. It refuses a non-loopback address when opts.Token
// is empty: an open API would let anyone on the network stop pipelines.
func Listen(address string, h http.Handler, opts ServerOptions) (*Server, error) {
	if opts.Token == "" && !isLoopback(address) {
		return nil, fmt.Errorf("api.http.address %s: %w (set CONDUIT_API_AUTH_TOKEN, or bind 127.0.0.1)", address, ErrInsecureAddress)
	}
	opts.setDefaults()
	if opts.Token == "" && !peerUsersKnown {
		opts.Logger.Warn("without api.auth.token any user of this machine may call the API: this operating system does not tell conduit which user a loopback client runs as; set a token on a machine others use")
	}
	if opts.GRPCAddress != "" && opts.Token == "" && !isLoopback(opts.GRPCAddress) {
		return nil, fmt.Errorf("api.grpc.address %s: %w (set CONDUIT_API_AUTH_TOKEN, or bind 127.0.0.1)", opts.GRPCAddress, ErrInsecureAddress)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("api.http.address %s: %w", address, err)
	}
	var grpcLn net.Listener
	if opts.GRPCAddress != "" {
		gl, err := net.Listen("tcp", opts.GRPCAddress)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("api.grpc.address %s: %w", opts.GRPCAddress, err)
		}
		grpcLn = newConnLimiter(gl, opts.MaxConnections, time.Now)
	}
	limiter := newConnLimiter(ln, opts.MaxConnections, time.Now)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &Server{
		srv: &http.Server{
			Handler:   withWriteDeadlines(h, opts.WriteTimeout),
			Protocols: protocols,
			// Each connection's client user is looked up once, however
			// many requests it carries.
			ConnContext: withPeerConn,
			ConnState:   trackConnState,
			// ReadTimeout ends neither stream: over HTTP/1.1 the server
			// lifts the deadline once the body is read, over HTTP/2 it
			// only ends reading the body. WriteTimeout would (it is a
			// deadline for the whole response), so withWriteDeadlines
			// sets one per write instead.
			ReadHeaderTimeout: opts.ReadHeaderTimeout,
			ReadTimeout:       opts.ReadTimeout,
			IdleTimeout:       opts.IdleTimeout,
			MaxHeaderBytes:    64 << 10,
			HTTP2: &http.HTTP2Config{
				// A watch client that vanished without closing its
				// connection is found by a ping and its connection closed.
				SendPingTimeout:  opts.IdleTimeout,
				WriteByteTimeout: opts.WriteTimeout,
			},
			ErrorLog: zap.NewStdLog(opts.Logger.Named("http")),
		},
		// At the cap a new connection takes the place of the longest
		// idle one, so idle clients cannot lock out probes and calls.
		ln:           limiter,
		grpcLn:       grpcLn,
		maxConns:     opts.MaxConnections,
		writeTimeout: opts.WriteTimeout,
	}, nil
}

// SetHandler replaces the handler given to Listen. It lets a process bind
// its port first, so that a port it cannot have stops it before it opens
// anything else, and build the handler from what it opens afterwards. Call
// it before Serve.
func (s *Server) SetHandler(h http.Handler) { s.srv.Handler = withWriteDeadlines(h, s.writeTimeout) }

// Addr is the address the server listens on (with the real port when the
// configured one was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// GRPCAddr is the address of the second listener (api.grpc.address), ""
// without one.
func (s *Server) GRPCAddr() string {
	if s.grpcLn == nil {
		return ""
	}
	return s.grpcLn.Addr().String()
}

// MaxConnections is the cap on connections served at once.
func (s *Server) MaxConnections() int { return s.maxConns }

// Serve serves until Shutdown, on both addresses when there are two; it
// returns nil after a shutdown.
func (s *Server) Serve() error {
	var g errgroup.Group
	for _, ln := range []net.Listener{s.ln, s.grpcLn} {
		if ln == nil {
			continue
		}
		g.Go(func() error {
			if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// Shutdown stops accepting connections and waits for calls in progress
// until ctx is done, then closes what is left (watch streams).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	// The server closes only the listeners Serve was given; one that was
	// never served is closed here.
	for _, ln := range []net.Listener{s.ln, s.grpcLn} {
		if ln == nil {
			continue
		}
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	return err
}

// trackConnState tells each connection's limiter (one per listener)
// which of its connections have a request in flight.
func trackConnState(c net.Conn, state http.ConnState) {
	if lc, ok := c.(*limitedConn); ok {
		lc.l.connState(c, state)
	}
}

func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	return isLoopbackHost(host)
}

// isLoopbackHost reports whether host (no port) is localhost or a loopback
// IP address.
func isLoopbackHost(host string) bool {
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
