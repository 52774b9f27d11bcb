package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/config"
)

// dialTimeout bounds connecting to the API; a local server answers at once.
const dialTimeout = 5 * time.Second

// tokenHelp says where the API token is set, for error messages.
const tokenHelp = "--api.auth.token, CONDUIT_API_AUTH_TOKEN or api.auth.token in conduit.yml"

// apiClient is the PipelineService client of the pipelines commands. It
// keeps the address and whether a token was sent so that errors can say
// what to fix.
type apiClient struct {
	conduitv1connect.PipelineServiceClient
	rules    conduitv1connect.RecoveryRuleServiceClient
	notes    conduitv1connect.NotificationServiceClient
	address  string
	hasToken bool
}

// newAPIClient builds the client from the configuration (flag > env >
// conduit.yml > default), like `conduit run` reads it, at apiAddressOf.
func newAPIClient(cmd *cobra.Command) (*apiClient, error) {
	// Unknown CONDUIT_ variables are left to `conduit run` to warn about;
	// the pipeline commands print only what was asked for.
	cfg, _, err := config.Load(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv})
	if err != nil {
		return nil, err
	}
	return dialAPI(apiAddressOf(cfg), cfg.API.Auth.Token), nil
}

// apiAddressOf is where the CLI finds the API: api.grpc.address when it
// is set (Conduit's CLI's --api.grpc.address; it serves the same API),
// else api.http.address.
func apiAddressOf(cfg config.Config) string {
	if cfg.API.GRPC.Address != "" {
		return cfg.API.GRPC.Address
	}
	return cfg.API.HTTP.Address
}

// dialAPI returns a client of the API at address (host:port) that speaks
// the Connect protocol over plain HTTP and sends token, if any, as a
// bearer token on every call, streams included.
func dialAPI(address, token string) *apiClient {
	address = dialableAddress(address)
	httpClient := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		DialContext:     (&net.Dialer{Timeout: dialTimeout}).DialContext,
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}}
	var opts []connect.ClientOption
	if token != "" {
		opts = append(opts, connect.WithInterceptors(bearerToken(token)))
	}
	return &apiClient{
		PipelineServiceClient: conduitv1connect.NewPipelineServiceClient(httpClient, "http://"+address, opts...),
		rules:                 conduitv1connect.NewRecoveryRuleServiceClient(httpClient, "http://"+address, opts...),
		notes:                 conduitv1connect.NewNotificationServiceClient(httpClient, "http://"+address, opts...),
		address:               address,
		hasToken:              token != "",
	}
}

// dialableAddress turns a listen address into one to connect to: a server
// listening on all interfaces (":8080", "0.0.0.0:8080") is reached on
// loopback.
func dialableAddress(address string) string {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	switch host {
	case "", "0.0.0.0":
		return net.JoinHostPort("127.0.0.1", port)
	case "::":
		return net.JoinHostPort("::1", port)
	}
	return address
}

// bearerToken adds "Authorization: Bearer <token>" to unary calls and
// streams.
type bearerToken string

func (t bearerToken) header() string { return "Bearer " + string(t) }

func (t bearerToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", t.header())
		return next(ctx, req)
	}
}

func (t bearerToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", t.header())
		return conn
	}
}

func (t bearerToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// explain turns an API error into the one line a user should read.
// pipelineID names the pipeline the call was about ("" for none).
func (c *apiClient) explain(err error, pipelineID string) error {
	if err == nil {
		return nil
	}
	if unreachable(err) {
		return fmt.Errorf("cannot reach the conduit API at %s (is it running? start it with: conduit run)", c.address)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		if pipelineID != "" {
			return fmt.Errorf("pipeline %q not found", pipelineID)
		}
	case connect.CodeUnauthenticated:
		if c.hasToken {
			return fmt.Errorf("the conduit API at %s rejected the token: check the one set with %s", c.address, tokenHelp)
		}
		return fmt.Errorf("the conduit API at %s requires a token: set it with %s", c.address, tokenHelp)
	case connect.CodeFailedPrecondition:
		if pipelineID != "" {
			return fmt.Errorf("pipeline %q: %s", pipelineID, ce.Message())
		}
	case connect.CodeUnimplemented:
		return fmt.Errorf("%s does not serve the conduit API (%s); check --api.http.address", c.address, ce.Message())
	case connect.CodeUnavailable:
		return fmt.Errorf("the conduit API at %s is unavailable: %s", c.address, ce.Message())
	case connect.CodeCanceled:
		return errors.New("interrupted")
	}
	return fmt.Errorf("%s: %s", ce.Code(), ce.Message())
}

// unreachable reports whether err means that nothing answered at the
// address: the connection was refused or could not be made.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
