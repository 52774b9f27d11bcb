package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/conduitry/conduit/pkg/config"
)

// v1Client calls Conduit's API v1 (package api.v1 of Conduit's proto) that
// conduit serves beside its own, for the commands that carry Conduit's CLI
// verbs over. It speaks gRPC over cleartext HTTP/2, as Conduit's CLI
// does: conduit serves api.v1 with a gRPC server, which takes nothing
// else (not the Connect protocol the pipelines commands speak).
type v1Client struct {
	http     *http.Client
	base     string
	opts     []connect.ClientOption
	address  string
	hasToken bool
}

// newV1Client builds the client from the configuration (flag > env >
// conduit.yml > default), at the address the pipelines commands use
// (apiAddressOf).
func newV1Client(cmd *cobra.Command) (*v1Client, error) {
	cfg, _, err := config.Load(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv})
	if err != nil {
		return nil, err
	}
	return dialV1(apiAddressOf(cfg), cfg.API.Auth.Token), nil
}

// dialV1 returns a gRPC client of the API at address over cleartext
// HTTP/2 (conduit's listeners speak h2c), sending token, if any, as a
// bearer token on every call.
func dialV1(address, token string) *v1Client {
	address = dialableAddress(address)
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	httpClient := &http.Client{Transport: &http.Transport{
		Protocols:       protocols,
		DialContext:     (&net.Dialer{Timeout: dialTimeout}).DialContext,
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}}
	opts := []connect.ClientOption{connect.WithGRPC()}
	if token != "" {
		opts = append(opts, connect.WithInterceptors(bearerToken(token)))
	}
	return &v1Client{http: httpClient, base: "http://" + address, opts: opts, address: address, hasToken: token != ""}
}

// callV1 calls one unary method of Conduit's API v1 (procedure is its full
// name, e.g. apiv1.ConnectorService_ListConnectors_FullMethodName).
func callV1[Req, Res any](ctx context.Context, c *v1Client, procedure string, req *Req) (*Res, error) {
	resp, err := connect.NewClient[Req, Res](c.http, c.base+procedure, c.opts...).CallUnary(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// streamV1 opens one server stream of Conduit's API v1 and calls recv
// with each message until the stream ends, ctx is done or recv returns
// false.
func streamV1[Req, Res any](ctx context.Context, c *v1Client, procedure string, req *Req, recv func(*Res) bool) error {
	stream, err := connect.NewClient[Req, Res](c.http, c.base+procedure, c.opts...).CallServerStream(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		if !recv(stream.Msg()) {
			return nil
		}
	}
	return stream.Err()
}

// v1Subject is what a call was about, for its error: a kind ("connector",
// "processor plugin") and the id the user gave.
type v1Subject struct{ kind, id string }

// explain turns an error of Conduit's API v1 into the one line a user
// should read.
func (c *v1Client) explain(err error, about v1Subject) error {
	if err == nil {
		return nil
	}
	if unreachable(err) {
		return fmt.Errorf("cannot reach the conduit API at %s (is it running? start it with: conduit run; or point at it with --api.grpc.address or --api.http.address)", c.address)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		if about.id != "" {
			return fmt.Errorf("%s %q not found", about.kind, about.id)
		}
	case connect.CodeUnauthenticated:
		if c.hasToken {
			return fmt.Errorf("the conduit API at %s rejected the token: check the one set with %s", c.address, tokenHelp)
		}
		return fmt.Errorf("the conduit API at %s requires a token: set it with %s", c.address, tokenHelp)
	case connect.CodeUnimplemented:
		return fmt.Errorf("%s does not serve Conduit's API v1 (%s); check --api.grpc.address / --api.http.address", c.address, ce.Message())
	case connect.CodeUnavailable:
		return fmt.Errorf("the conduit API at %s is unavailable: %s", c.address, ce.Message())
	case connect.CodeCanceled:
		return errors.New("interrupted")
	}
	if about.id != "" {
		return fmt.Errorf("%s %q: %s: %s", about.kind, about.id, ce.Code(), ce.Message())
	}
	return fmt.Errorf("%s: %s", ce.Code(), ce.Message())
}
