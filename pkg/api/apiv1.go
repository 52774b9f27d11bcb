package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit/pkg/http/openapi"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/record"
)

// Conduit's API v1 (the package api.v1 of Conduit's proto, its generated
// code used as it is published) is served beside this API on the same
// port, as Conduit serves it: its gRPC services, the HTTP routes of its
// google.api.http annotations under /v1/ (and /info), and /openapi. A
// Conduit user's CLI, scripts and generated clients keep working. It
// shows what this API shows, in Conduit's shapes: statuses map one to one,
// and what only this product has (the recovery episode, rules, events)
// stays in conduit.v1.

// ConduitV1 is what Conduit's API v1 needs of the runtime beyond
// Pipelines.
type ConduitV1 interface {
	// ConnectorPlugins and ProcessorPlugins describe the plugins a
	// pipeline may use, sorted by name.
	ConnectorPlugins() []pconnector.Specification
	ProcessorPlugins() []sdk.Specification
	// ValidateConnector checks a connector's plugin and settings as a
	// pipeline file's are checked; it opens nothing.
	ValidateConnector(source bool, plugin string, settings map[string]string) error
	// Inspect sends copies of the records that pass at in pipelineID
	// until ctx is done, then closes the channel. Records are dropped,
	// not waited for, when the reader falls behind.
	Inspect(ctx context.Context, pipelineID string, at InspectPoint) (<-chan record.Record, error)
}

// InspectPoint is where records are inspected: a connector (what a
// source read, what a destination is given) or a processor's input or
// output.
type InspectPoint struct {
	// Connector is a connector's id in its pipeline; Processor a
	// processor's (with Connector set for a connector's processor).
	Connector, Processor string
	// Out inspects what a processor returns instead of what it is given.
	Out bool
}

// Configured is a pipeline that tells the configuration it runs with;
// Conduit's API v1 shows its connectors and processors from it. A
// pipeline that does not is shown without them.
type Configured interface {
	Config() config.Pipeline
}

// ErrInspectUnknown is returned by Inspect for a component the pipeline
// does not have.
var ErrInspectUnknown = errors.New("no such connector or processor")

// conduitHealthServices are the service names Conduit's gRPC health
// server answers for.
var conduitHealthServices = []string{"PipelineService", "ConnectorService", "ProcessorService",
	"ConnectorPluginService", "ProcessorPluginService"}

// conduitV1Services are the gRPC services of Conduit's API v1, for
// reflection.
var conduitV1Services = []string{"api.v1.PipelineService", "api.v1.ConnectorService", "api.v1.ProcessorService",
	"api.v1.PluginService", "api.v1.InformationService"}

// connectMessage is the message of a Connect error, without the code
// Error() puts in front of it.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// conduitV1Routes are the paths of Conduit's HTTP routes; its gRPC
// services are served under /<service>/.
var conduitV1Routes = []string{"/v1/", "/info", "/openapi", "/openapi/"}

// isConduitV1HTTP reports whether path is one of Conduit's HTTP routes,
// whose errors are written as Conduit writes them.
func isConduitV1HTTP(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/info" || path == "/openapi" || strings.HasPrefix(path, "/openapi/")
}

// newConduitV1Handler serves Conduit's API v1: gRPC (api.v1.*) through a
// grpc-go server, the HTTP routes through grpc-gateway in process.
func newConduitV1Handler(svc *conduitV1Service, watchers *watcherLimits) (http.Handler, error) {
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			client := ""
			if p, ok := peer.FromContext(ss.Context()); ok && p.Addr != nil {
				client = clientAddress(p.Addr.String())
			}
			if err := watchers.acquire(client); err != nil {
				return status.Error(codes.ResourceExhausted, errors.Unwrap(err).Error())
			}
			defer watchers.release(client)
			return handler(srv, ss)
		}),
	)
	apiv1.RegisterPipelineServiceServer(gs, svc.pipelines())
	apiv1.RegisterConnectorServiceServer(gs, svc.connectors())
	apiv1.RegisterProcessorServiceServer(gs, svc.processors())
	apiv1.RegisterPluginServiceServer(gs, svc.plugins())
	apiv1.RegisterInformationServiceServer(gs, svc.information())

	gw := runtime.NewServeMux(
		// Conduit answers ?pretty with indented JSON.
		runtime.WithMarshalerOption(prettyJSON, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{Indent: "  ", Multiline: true, EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}),
	)
	ctx := context.Background()
	for _, register := range []func() error{
		func() error { return apiv1.RegisterPipelineServiceHandlerServer(ctx, gw, svc.pipelines()) },
		func() error { return apiv1.RegisterConnectorServiceHandlerServer(ctx, gw, svc.connectors()) },
		func() error { return apiv1.RegisterProcessorServiceHandlerServer(ctx, gw, svc.processors()) },
		func() error { return apiv1.RegisterPluginServiceHandlerServer(ctx, gw, svc.plugins()) },
		func() error { return apiv1.RegisterInformationServiceHandlerServer(ctx, gw, svc.information()) },
	} {
		if err := register(); err != nil {
			return nil, err
		}
	}
	// The in-process gateway does not stream; the inspect routes are
	// served here, in the gateway's format (one {"result": ...} per line).
	// Registered last, they take precedence over the generated ones.
	for path, at := range map[string]func(id string) (string, InspectPoint, error){
		"/v1/connectors/{id}/inspect":    svc.connectorPoint,
		"/v1/processors/{id}/inspect-in": func(id string) (string, InspectPoint, error) { return svc.processorPoint(id, false) },
		"/v1/processors/{id}/inspect-out": func(id string) (string, InspectPoint, error) {
			return svc.processorPoint(id, true)
		},
	} {
		if err := gw.HandlePath(http.MethodGet, path, svc.inspectHTTP(watchers, at)); err != nil {
			return nil, err
		}
	}
	// /openapi is Conduit's: its OpenAPI UI, with the document at
	// /openapi/api/v1/api.swagger.json, both from Conduit's module. A
	// client that asks for JSON gets the document itself.
	ui := http.StripPrefix("/openapi/", openapi.Handler())
	if err := gw.HandlePath(http.MethodGet, "/openapi/**", func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		ui.ServeHTTP(w, r)
	}); err != nil {
		return nil, err
	}
	if err := gw.HandlePath(http.MethodGet, "/openapi", func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			serveOpenAPIDocument(w, r, openapi.Handler())
			return
		}
		http.Redirect(w, r, "/openapi/", http.StatusFound)
	}); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api.v1.") {
			gs.ServeHTTP(w, r)
			return
		}
		if _, ok := r.URL.Query()["pretty"]; ok {
			r.Header.Set("Accept", prettyJSON)
		}
		// The gateway reads a body whole: bounded as every request of
		// this API is.
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		gw.ServeHTTP(w, r)
	}), nil
}

const prettyJSON = "application/json+pretty"

// openAPIDocument is where Conduit's OpenAPI UI keeps the document.
const openAPIDocument = "/openapi/api/v1/api.swagger.json"

// serveOpenAPIDocument answers with the OpenAPI document of Conduit's API
// v1 itself.
func serveOpenAPIDocument(w http.ResponseWriter, r *http.Request, ui http.Handler) {
	doc := r.Clone(r.Context())
	doc.URL.Path, doc.URL.RawPath = strings.TrimPrefix(openAPIDocument, "/openapi"), ""
	ui.ServeHTTP(w, doc)
}

// writeConduitHTTPError writes err as grpc-gateway writes errors on
// Conduit's HTTP routes: {"code": <gRPC code>, "message": ..., "details":
// []} with the matching HTTP status.
func writeConduitHTTPError(w http.ResponseWriter, r *http.Request, code codes.Code, msg string) {
	runtime.DefaultHTTPErrorHandler(r.Context(), runtime.NewServeMux(), &runtime.JSONPb{}, w, r, status.Error(code, msg))
}
