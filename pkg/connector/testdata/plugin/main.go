// Command plugin is the standalone connector the tests of pkg/connector run.
// It speaks the plugin protocol with connect-go directly (not through
// pkg/sdk), so the host is tested against the protocol itself.
//
// What it does before the handshake depends on the name it is run as
// (the tests link it under several names):
//
//	hang        writes a line to stderr and never listens
//	crash       writes two lines to stderr and exits with status 2
//	proto2      answers the handshake with protocol version 2
//	sourceonly  cannot be a destination
//	stubborn    ignores SIGTERM (and says so on stderr)
//	conduitv1   a connector of Conduit's SDK before v0.10: no `specs`
//	            command, and the handshake of version 1 of Conduit's
//	            connector protocol
//	anything    a source and destination driven by its settings
//
// Settings (all optional):
//
//	records          source: produce this many records after the open
//	                 position, then block in Read until the call is cancelled
//	read.error       source: Read fails with this message
//	crash.on         read or write: write "dying" to stderr and exit 3
//	configure.error  Configure fails with this message
//	write.fail-at    destination: write this many records of each batch,
//	write.error      then fail with write.error
//	read.size        source: every record's payload.after is this many bytes
//	read.gzip        source: Read answers with a gzip body of this many
//	                 zero bytes, whether or not the client accepts gzip
//	env.show         at Configure, print "env NAME=value" (or "env NAME
//	                 unset") for each of these comma-separated names, then
//	                 "env conduit NAME" for every variable whose name starts
//	                 with CONDUIT_ in any case, then "env end"
//
// It prints what happens on stdout ("ack 1,2", "write 1 {...}", "read
// waiting", "teardown source"), which the tests read from the host's log.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/record"
)

func main() {
	mode := filepath.Base(os.Args[0])
	switch mode {
	case "hang":
		fmt.Fprintln(os.Stderr, "warming up forever")
		select {}
	case "crash":
		fmt.Fprintln(os.Stderr, "loading config")
		fmt.Fprintln(os.Stderr, "boom: missing license key")
		os.Exit(2)
	case "conduitv1":
		if len(os.Args) > 1 {
			fmt.Fprintln(os.Stderr, "error running plugin: unknown environment")
			os.Exit(1)
		}
		fmt.Printf("1|1|unix|%s|grpc|\n", filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock"))
		select {}
	case "stubborn":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		go func() {
			for range sig {
				fmt.Fprintln(os.Stderr, "got SIGTERM, ignoring it")
			}
		}()
	}
	if v := os.Getenv("CONDUIT_PLUGIN_PROTOCOL"); v != "1" {
		fmt.Fprintf(os.Stderr, "CONDUIT_PLUGIN_PROTOCOL is %q, want 1\n", v)
		os.Exit(3)
	}
	socket := os.Getenv("CONDUIT_PLUGIN_SOCKET")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p := &plugin{mode: mode}
	mux := http.NewServeMux()
	mux.Handle(connectorv1connect.NewPluginServiceHandler(p))
	mux.Handle(connectorv1connect.NewSourceServiceHandler(p))
	// This plugin stands for one built before ReadStream existed: the
	// route is not there at all, so the runtime must fall back to Read.
	mux.Handle(connectorv1connect.SourceServiceReadStreamProcedure, http.NotFoundHandler())
	mux.Handle(connectorv1connect.NewDestinationServiceHandler(p.destination()))
	fmt.Fprintln(os.Stderr, "listening on", socket)
	if err := http.Serve(ln, p.gzipBomb(mux)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// gzipBomb answers Read with the read.gzip setting's zero bytes,
// compressed, however the client asked: a plugin that sends what the
// runtime did not ask for.
func (p *plugin) gzipBomb(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size, _ := strconv.Atoi(p.setting("read.gzip"))
		if size <= 0 || r.URL.Path != connectorv1connect.SourceServiceReadProcedure {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/proto")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		zw := gzip.NewWriter(w)
		zeros := make([]byte, 64<<10)
		for size > 0 {
			n := min(size, len(zeros))
			if _, err := zw.Write(zeros[:n]); err != nil {
				return // the client hung up
			}
			size -= n
		}
		_ = zw.Close()
	})
}

type plugin struct {
	mode string

	mu       sync.Mutex
	settings map[string]string
	next     int // the next record's sequence number
	last     int // the last record to produce
}

func (p *plugin) setting(k string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings[k]
}

func fail(msg string) error { return connect.NewError(connect.CodeUnknown, errors.New(msg)) }

func (p *plugin) Info(context.Context, *connect.Request[connectorv1.InfoRequest]) (*connect.Response[connectorv1.InfoResponse], error) {
	info := &connectorv1.InfoResponse{Name: "test-plugin", Version: "v0.0.1", ProtocolVersion: 1, Source: true, Destination: true}
	switch p.mode {
	case "proto2":
		info.ProtocolVersion = 2
	case "sourceonly":
		info.Destination = false
	}
	return connect.NewResponse(info), nil
}

func (p *plugin) configure(cfg *connectorv1.ConnectorConfig) error {
	p.mu.Lock()
	p.settings = cfg.GetSettings()
	p.mu.Unlock()
	fmt.Printf("configure pipeline=%s connector=%s\n", cfg.GetPipelineId(), cfg.GetConnectorId())
	if names := p.setting("env.show"); names != "" {
		printEnv(strings.Split(names, ","))
	}
	if msg := p.setting("configure.error"); msg != "" {
		return fail(msg)
	}
	return nil
}

func printEnv(names []string) {
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			fmt.Printf("env %s=%s\n", name, v)
		} else {
			fmt.Printf("env %s unset\n", name)
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(name), "CONDUIT_") {
			fmt.Printf("env conduit %s\n", name)
		}
	}
	fmt.Println("env end")
}

func (p *plugin) crash(op string) {
	if p.setting("crash.on") == op {
		fmt.Fprintln(os.Stderr, "dying")
		os.Exit(3)
	}
}

// Source.

func (p *plugin) Configure(_ context.Context, req *connect.Request[connectorv1.SourceServiceConfigureRequest]) (*connect.Response[connectorv1.SourceServiceConfigureResponse], error) {
	return connect.NewResponse(&connectorv1.SourceServiceConfigureResponse{}), p.configure(req.Msg.GetConfig())
}

func (p *plugin) Open(_ context.Context, req *connect.Request[connectorv1.SourceServiceOpenRequest]) (*connect.Response[connectorv1.SourceServiceOpenResponse], error) {
	start := 0
	if pos := req.Msg.GetPosition(); len(pos) > 0 {
		n, err := strconv.Atoi(string(pos))
		if err != nil {
			return nil, fail(fmt.Sprintf(`{"code":400,"message":"bad position %q"}`, pos))
		}
		start = n
	}
	count, _ := strconv.Atoi(p.setting("records"))
	p.mu.Lock()
	p.next, p.last = start+1, start+count
	p.mu.Unlock()
	return connect.NewResponse(&connectorv1.SourceServiceOpenResponse{}), nil
}

// ReadStream only satisfies the generated interface; main does not route
// to it (see there).
func (p *plugin) ReadStream(context.Context, *connect.Request[connectorv1.ReadStreamRequest], *connect.ServerStream[connectorv1.ReadStreamResponse]) error {
	return connect.NewError(connect.CodeUnimplemented, errors.New("not routed"))
}

func (p *plugin) Read(ctx context.Context, req *connect.Request[connectorv1.ReadRequest]) (*connect.Response[connectorv1.ReadResponse], error) {
	p.crash("read")
	if msg := p.setting("read.error"); msg != "" {
		return nil, fail(msg)
	}
	p.mu.Lock()
	var recs []record.Record
	for ; p.next <= p.last && len(recs) < int(req.Msg.GetMaxRecords()); p.next++ {
		n := p.next
		recs = append(recs, record.Record{
			Position:  record.Position(strconv.Itoa(n)),
			Operation: record.OperationCreate,
			Metadata:  record.Metadata{"test": "yes"},
			Key:       record.RawData("k" + strconv.Itoa(n)),
			Payload:   record.Change{After: record.StructuredData{"id": int64(n), "name": "rec" + strconv.Itoa(n)}},
		})
		if size, _ := strconv.Atoi(p.settings["read.size"]); size > 0 {
			recs[len(recs)-1].Payload.After = record.RawData(bytes.Repeat([]byte{'x'}, size))
		}
	}
	p.mu.Unlock()
	if len(recs) == 0 {
		fmt.Println("read waiting")
		<-ctx.Done()
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	data, err := record.AppendBatch(nil, recs)
	if err != nil {
		return nil, fail(err.Error())
	}
	return connect.NewResponse(&connectorv1.ReadResponse{Batch: &connectorv1.RecordBatch{Count: int32(len(recs)), Data: data}}), nil
}

func (p *plugin) Ack(_ context.Context, req *connect.Request[connectorv1.AckRequest]) (*connect.Response[connectorv1.AckResponse], error) {
	var pos []string
	for _, b := range req.Msg.GetPositions() {
		pos = append(pos, string(b))
	}
	fmt.Println("ack " + strings.Join(pos, ","))
	return connect.NewResponse(&connectorv1.AckResponse{}), nil
}

func (p *plugin) Teardown(context.Context, *connect.Request[connectorv1.SourceServiceTeardownRequest]) (*connect.Response[connectorv1.SourceServiceTeardownResponse], error) {
	fmt.Println("teardown source")
	return connect.NewResponse(&connectorv1.SourceServiceTeardownResponse{}), nil
}

// Destination. The generated handler interfaces share method names between
// the services, so the destination methods live on a second type.

type destination struct{ *plugin }

func (p *plugin) destination() destination { return destination{p} }

func (d destination) Configure(_ context.Context, req *connect.Request[connectorv1.DestinationServiceConfigureRequest]) (*connect.Response[connectorv1.DestinationServiceConfigureResponse], error) {
	return connect.NewResponse(&connectorv1.DestinationServiceConfigureResponse{}), d.configure(req.Msg.GetConfig())
}

func (d destination) Open(context.Context, *connect.Request[connectorv1.DestinationServiceOpenRequest]) (*connect.Response[connectorv1.DestinationServiceOpenResponse], error) {
	return connect.NewResponse(&connectorv1.DestinationServiceOpenResponse{}), nil
}

func (d destination) Write(_ context.Context, req *connect.Request[connectorv1.WriteRequest]) (*connect.Response[connectorv1.WriteResponse], error) {
	d.crash("write")
	b := req.Msg.GetBatch()
	recs := make([]record.Record, b.GetCount())
	n, err := record.DecodeBatch(b.GetData(), int(b.GetCount()), recs)
	if err != nil {
		return nil, fail(fmt.Sprintf(`{"code":400,"message":%q}`, err.Error()))
	}
	limit := n
	if at := d.setting("write.fail-at"); at != "" {
		limit, _ = strconv.Atoi(at)
		limit = min(limit, n)
	}
	for _, r := range recs[:limit] {
		after := "-"
		if r.Payload.After != nil {
			after = string(r.Payload.After.Bytes())
		}
		fmt.Printf("write %s %s\n", r.Position, after)
	}
	resp := &connectorv1.WriteResponse{Written: int32(limit)}
	if limit < n {
		resp.Error = d.setting("write.error")
	}
	return connect.NewResponse(resp), nil
}

func (d destination) Teardown(context.Context, *connect.Request[connectorv1.DestinationServiceTeardownRequest]) (*connect.Response[connectorv1.DestinationServiceTeardownResponse], error) {
	fmt.Println("teardown destination")
	return connect.NewResponse(&connectorv1.DestinationServiceTeardownResponse{}), nil
}

// LastPosition answers as a plugin built before the call existed does.
func (d destination) LastPosition(context.Context, *connect.Request[connectorv1.LastPositionRequest]) (*connect.Response[connectorv1.LastPositionResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("conduitry.connector.v1.DestinationService.LastPosition is not implemented"))
}
