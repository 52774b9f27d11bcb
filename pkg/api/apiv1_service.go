package api

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"connectrpc.com/connect"
	opencdcv1 "github.com/conduitio/conduit-commons/proto/opencdc/v1"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/record"
)

// conduitV1Service answers Conduit's API v1 from the runtime. Its five
// gRPC services are thin views of it (pipelines(), connectors(), ...).
type conduitV1Service struct {
	ps      Pipelines
	changes Changes // nil: pipelines cannot be deleted
	rt      ConduitV1
}

func (s *conduitV1Service) pipelines() v1Pipelines     { return v1Pipelines{s: s} }
func (s *conduitV1Service) connectors() v1Connectors   { return v1Connectors{s: s} }
func (s *conduitV1Service) processors() v1Processors   { return v1Processors{s: s} }
func (s *conduitV1Service) plugins() v1Plugins         { return v1Plugins{s: s} }
func (s *conduitV1Service) information() v1Information { return v1Information{} }

// v1Pipeline is one pipeline as the runtime knows it, read once per call.
type v1Pipeline struct {
	info  PipelineInfo
	state lifecycle.State
	cfg   config.Pipeline
	// invalid is the error of a pipeline whose configuration does not
	// make one: Conduit has no such status, so it is shown degraded with
	// the error.
	invalid error
	sup     Supervised // nil for an invalid pipeline
}

// list reads every pipeline: those that run and those whose
// configuration is invalid.
func (s *conduitV1Service) list(ctx context.Context) ([]v1Pipeline, error) {
	var out []v1Pipeline
	seen := map[string]bool{}
	for _, p := range s.ps.List() {
		vp, err := s.read(ctx, p)
		if errors.Is(err, lifecycle.ErrSupervisorDone) {
			// Retired since the listing: as it is now, unless gone.
			q, ok := s.ps.Get(p.Info().ID)
			if !ok {
				continue
			}
			vp, err = s.read(ctx, q)
		}
		if err != nil {
			return nil, v1Internal(ctx, err)
		}
		seen[vp.info.ID] = true
		out = append(out, vp)
	}
	for _, ce := range s.ps.Invalid() {
		if ce.PipelineID == "" || seen[ce.PipelineID] {
			continue
		}
		seen[ce.PipelineID] = true
		out = append(out, invalidV1(ce))
	}
	return out, nil
}

func invalidV1(ce ConfigError) v1Pipeline {
	return v1Pipeline{info: PipelineInfo{ID: ce.PipelineID, Name: ce.PipelineID, File: ce.File, Line: ce.Line},
		state: lifecycle.State{Status: lifecycle.StatusDegraded}, invalid: ce.Err}
}

func (s *conduitV1Service) read(ctx context.Context, p Supervised) (v1Pipeline, error) {
	st, err := p.State(ctx)
	if err != nil {
		return v1Pipeline{}, err
	}
	vp := v1Pipeline{info: p.Info(), state: st, sup: p}
	if c, ok := p.(Configured); ok {
		vp.cfg = c.Config()
	}
	return vp, nil
}

// get reads the pipeline id.
func (s *conduitV1Service) get(ctx context.Context, id string) (v1Pipeline, error) {
	if id == "" {
		return v1Pipeline{}, status.Error(codes.InvalidArgument, "id: a pipeline id is required")
	}
	if p, ok := s.ps.Get(id); ok {
		vp, err := s.read(ctx, p)
		if err != nil {
			return v1Pipeline{}, v1Internal(ctx, err)
		}
		return vp, nil
	}
	for _, ce := range s.ps.Invalid() {
		if ce.PipelineID == id {
			return invalidV1(ce), nil
		}
	}
	return v1Pipeline{}, status.Errorf(codes.NotFound, "pipeline %q not found", id)
}

// v1Internal maps an error reading the runtime to a gRPC status.
func v1Internal(ctx context.Context, err error) error {
	return v1Status(internalError(ctx, err))
}

// v1Status turns this API's errors (Connect errors) into gRPC statuses:
// both use the same codes.
func v1Status(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return status.Error(codes.Code(ce.Code()), ce.Message())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// definedBy says where a pipeline is defined, for refusals.
func (vp v1Pipeline) definedBy() string {
	switch {
	case vp.info.File == "":
		return "created through the API"
	case isAPIFileName(vp.info.File):
		return "applied through the API as " + fileLine(vp.info.File, vp.info.Line)
	default:
		return "defined in " + fileLine(vp.info.File, vp.info.Line)
	}
}

func isAPIFileName(f string) bool { return strings.HasPrefix(f, "api:") }

// refuseChange is the answer to a change Conduit makes piece by piece and
// this product makes by pipeline file: FAILED_PRECONDITION saying where
// the pipeline is defined and how to change it.
func refuseChange(vp v1Pipeline, what string) error {
	how := "change it there; conduit reloads the file"
	if vp.info.File == "" || isAPIFileName(vp.info.File) {
		how = "apply its changed pipeline file (conduit pipelines apply, or ApplyPipelines of conduit.v1.PipelineService)"
	}
	return status.Errorf(codes.FailedPrecondition,
		"%s: pipeline %q is %s, and conduit changes a pipeline as a whole, from its pipeline file: %s", what, vp.info.ID, vp.definedBy(), how)
}

// applied reports whether the pipeline was applied through the API, so
// that its kept file may be changed.
func (vp v1Pipeline) applied() bool {
	return vp.sup != nil && (vp.info.File == "" || isAPIFileName(vp.info.File))
}

// edit makes e to an applied pipeline by changing and applying its file
// again; a file's pipeline is refused (refuseChange).
func (s *conduitV1Service) edit(ctx context.Context, vp v1Pipeline, what string, e PipelineEdit) error {
	ed, ok := s.rt.(PipelineEditor)
	if !ok || !vp.applied() {
		return refuseChange(vp, what)
	}
	err := ed.EditPipeline(ctx, vp.info.ID, e)
	var (
		dif *DefinedInFileError
		ee  *EditError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dif), errors.Is(err, ErrNotEditable):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", what, err)
	case errors.As(err, &ee):
		return status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	default:
		return v1Status(transitionError(err))
	}
}

// nameFilter compiles Conduit's name filter: a regular expression the
// whole name must match.
func nameFilter(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^" + expr + "$")
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "name: invalid regular expression %q: %v", expr, err)
	}
	return re, nil
}

// -- pipelines ---------------------------------------------------------------

type v1Pipelines struct {
	apiv1.UnimplementedPipelineServiceServer
	s *conduitV1Service
}

func (v v1Pipelines) ListPipelines(ctx context.Context, req *apiv1.ListPipelinesRequest) (*apiv1.ListPipelinesResponse, error) {
	re, err := nameFilter(req.GetName())
	if err != nil {
		return nil, err
	}
	list, err := v.s.list(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListPipelinesResponse{}
	for _, vp := range list {
		if re != nil && !re.MatchString(vp.info.Name) {
			continue
		}
		out.Pipelines = append(out.Pipelines, vp.toProto())
	}
	return out, nil
}

func (v v1Pipelines) GetPipeline(ctx context.Context, req *apiv1.GetPipelineRequest) (*apiv1.GetPipelineResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.GetPipelineResponse{Pipeline: vp.toProto()}, nil
}

func (v v1Pipelines) CreatePipeline(context.Context, *apiv1.CreatePipelineRequest) (*apiv1.CreatePipelineResponse, error) {
	return nil, status.Error(codes.FailedPrecondition,
		"conduit creates a pipeline with its connectors and processors from a pipeline file, not piece by piece: put the file under pipelines.path, or apply it (conduit pipelines apply, or ApplyPipelines of conduit.v1.PipelineService)")
}

func (v v1Pipelines) ImportPipeline(context.Context, *apiv1.ImportPipelineRequest) (*apiv1.ImportPipelineResponse, error) {
	return nil, status.Error(codes.FailedPrecondition,
		"a pipeline of Conduit's API v1 does not carry its connectors' and processors' settings, so conduit cannot run it: apply its pipeline file instead (conduit pipelines apply, or ApplyPipelines of conduit.v1.PipelineService)")
}

func (v v1Pipelines) UpdatePipeline(ctx context.Context, req *apiv1.UpdatePipelineRequest) (*apiv1.UpdatePipelineResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := v.s.edit(ctx, vp, "not updated", PipelineEdit{Op: EditUpdatePipeline,
		Name: req.GetConfig().GetName(), Description: req.GetConfig().GetDescription()}); err != nil {
		return nil, err
	}
	vp, err = v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdatePipelineResponse{Pipeline: vp.toProto()}, nil
}

func (v v1Pipelines) UpdateDLQ(ctx context.Context, req *apiv1.UpdateDLQRequest) (*apiv1.UpdateDLQResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return nil, refuseChange(vp, "dead-letter queue not updated")
}

func (v v1Pipelines) DeletePipeline(ctx context.Context, req *apiv1.DeletePipelineRequest) (*apiv1.DeletePipelineResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if v.s.changes == nil {
		return nil, status.Error(codes.Unimplemented, "this server cannot change its pipelines")
	}
	err = v.s.changes.Delete(ctx, vp.info.ID)
	var dif *DefinedInFileError
	switch {
	case err == nil:
		return &apiv1.DeletePipelineResponse{}, nil
	case errors.As(err, &dif):
		return nil, status.Errorf(codes.FailedPrecondition, "not deleted: %v (conduit would run it again at the next reload)", err)
	case errors.Is(err, ErrPipelineNotFound):
		return nil, status.Errorf(codes.NotFound, "pipeline %q not found", vp.info.ID)
	default:
		return nil, v1Status(transitionError(err))
	}
}

func (v v1Pipelines) StartPipeline(ctx context.Context, req *apiv1.StartPipelineRequest) (*apiv1.StartPipelineResponse, error) {
	sup, err := v.supervised(ctx, req.GetId(), "not started")
	if err != nil {
		return nil, err
	}
	if err := sup.Start(ctx); err != nil {
		return nil, v1Status(transitionError(err))
	}
	return &apiv1.StartPipelineResponse{}, nil
}

func (v v1Pipelines) StopPipeline(ctx context.Context, req *apiv1.StopPipelineRequest) (*apiv1.StopPipelineResponse, error) {
	sup, err := v.supervised(ctx, req.GetId(), "not stopped")
	if err != nil {
		return nil, err
	}
	if err := sup.Stop(ctx, req.GetForce()); err != nil {
		return nil, v1Status(transitionError(err))
	}
	return &apiv1.StopPipelineResponse{}, nil
}

func (v v1Pipelines) supervised(ctx context.Context, id, what string) (Supervised, error) {
	vp, err := v.s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if vp.sup == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%s: pipeline %q is invalid and does not run until its file is fixed: %v", what, id, vp.invalid)
	}
	return vp.sup, nil
}

func (v v1Pipelines) GetDLQ(ctx context.Context, req *apiv1.GetDLQRequest) (*apiv1.GetDLQResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.GetDLQResponse{Dlq: dlqToProto(vp.cfg.DLQ)}, nil
}

func (v v1Pipelines) ExportPipeline(ctx context.Context, req *apiv1.ExportPipelineRequest) (*apiv1.ExportPipelineResponse, error) {
	vp, err := v.s.get(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.ExportPipelineResponse{Pipeline: vp.toProto()}, nil
}

// -- connectors --------------------------------------------------------------

type v1Connectors struct {
	apiv1.UnimplementedConnectorServiceServer
	s *conduitV1Service
}

func (v v1Connectors) ListConnectors(ctx context.Context, req *apiv1.ListConnectorsRequest) (*apiv1.ListConnectorsResponse, error) {
	list, err := v.s.list(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListConnectorsResponse{}
	for _, vp := range list {
		if req.GetPipelineId() != "" && vp.info.ID != req.GetPipelineId() {
			continue
		}
		for _, c := range vp.cfg.Connectors {
			out.Connectors = append(out.Connectors, vp.connectorToProto(c))
		}
	}
	return out, nil
}

// connector finds a connector by Conduit's id, "pipeline:connector".
func (s *conduitV1Service) connector(ctx context.Context, id string) (v1Pipeline, config.Connector, error) {
	for _, vp := range s.candidates(ctx, id) {
		for _, c := range vp.cfg.Connectors {
			if record.NodeID(vp.info.ID, c.ID) == id {
				return vp, c, nil
			}
		}
	}
	return v1Pipeline{}, config.Connector{}, status.Errorf(codes.NotFound,
		"connector %q not found (a connector's id is its pipeline's id and its own, as pipeline:connector)", id)
}

// candidates are the pipelines whose id a component id may start with.
func (s *conduitV1Service) candidates(ctx context.Context, id string) []v1Pipeline {
	var out []v1Pipeline
	for i := range len(id) {
		if id[i] != ':' {
			continue
		}
		if vp, err := s.get(ctx, id[:i]); err == nil {
			out = append(out, vp)
		}
	}
	return out
}

func (v v1Connectors) GetConnector(ctx context.Context, req *apiv1.GetConnectorRequest) (*apiv1.GetConnectorResponse, error) {
	vp, c, err := v.s.connector(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.GetConnectorResponse{Connector: vp.connectorToProto(c)}, nil
}

func (v v1Connectors) CreateConnector(ctx context.Context, req *apiv1.CreateConnectorRequest) (*apiv1.CreateConnectorResponse, error) {
	vp, err := v.s.get(ctx, req.GetPipelineId())
	if err != nil {
		return nil, err
	}
	if t := req.GetType(); t != apiv1.Connector_TYPE_SOURCE && t != apiv1.Connector_TYPE_DESTINATION {
		return nil, status.Error(codes.InvalidArgument, "type: TYPE_SOURCE or TYPE_DESTINATION is required")
	}
	// Conduit names a new connector with a UUID; a name given is the id
	// here, as a pipeline file's connectors are named by their ids.
	id := req.GetConfig().GetName()
	if id == "" {
		id = uuid.NewString()
	}
	if err := v.s.edit(ctx, vp, "connector not created", PipelineEdit{Op: EditCreateConnector, Connector: id,
		Source: req.GetType() == apiv1.Connector_TYPE_SOURCE, Plugin: req.GetPlugin(), Settings: req.GetConfig().GetSettings(),
		Name: req.GetConfig().GetName()}); err != nil {
		return nil, err
	}
	vp, c, err := v.s.connector(ctx, record.NodeID(vp.info.ID, id))
	if err != nil {
		return nil, err
	}
	return &apiv1.CreateConnectorResponse{Connector: vp.connectorToProto(c)}, nil
}

func (v v1Connectors) UpdateConnector(ctx context.Context, req *apiv1.UpdateConnectorRequest) (*apiv1.UpdateConnectorResponse, error) {
	vp, c, err := v.s.connector(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := v.s.edit(ctx, vp, fmt.Sprintf("connector %q not updated", c.ID), PipelineEdit{Op: EditUpdateConnector, Connector: c.ID,
		Plugin: req.GetPlugin(), Settings: req.GetConfig().GetSettings(), Name: req.GetConfig().GetName()}); err != nil {
		return nil, err
	}
	vp, c, err = v.s.connector(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateConnectorResponse{Connector: vp.connectorToProto(c)}, nil
}

func (v v1Connectors) DeleteConnector(ctx context.Context, req *apiv1.DeleteConnectorRequest) (*apiv1.DeleteConnectorResponse, error) {
	vp, c, err := v.s.connector(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := v.s.edit(ctx, vp, fmt.Sprintf("connector %q not deleted", c.ID), PipelineEdit{Op: EditDeleteConnector, Connector: c.ID}); err != nil {
		return nil, err
	}
	return &apiv1.DeleteConnectorResponse{}, nil
}

func (v v1Connectors) ValidateConnector(_ context.Context, req *apiv1.ValidateConnectorRequest) (*apiv1.ValidateConnectorResponse, error) {
	var source bool
	switch req.GetType() {
	case apiv1.Connector_TYPE_SOURCE:
		source = true
	case apiv1.Connector_TYPE_DESTINATION:
	default:
		return nil, status.Error(codes.InvalidArgument, "type: TYPE_SOURCE or TYPE_DESTINATION is required")
	}
	if err := v.s.rt.ValidateConnector(source, req.GetPlugin(), req.GetConfig().GetSettings()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	return &apiv1.ValidateConnectorResponse{}, nil
}

func (v v1Connectors) ListConnectorPlugins(_ context.Context, req *apiv1.ListConnectorPluginsRequest) (*apiv1.ListConnectorPluginsResponse, error) {
	re, err := nameFilter(req.GetName())
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListConnectorPluginsResponse{}
	for _, spec := range v.s.rt.ConnectorPlugins() {
		pb := connectorSpecToProto(spec)
		if re == nil || re.MatchString(pb.Name) {
			out.Plugins = append(out.Plugins, pb)
		}
	}
	return out, nil
}

func (v v1Connectors) InspectConnector(req *apiv1.InspectConnectorRequest, stream apiv1.ConnectorService_InspectConnectorServer) error {
	pipelineID, at, err := v.s.connectorPoint(req.GetId())
	if err != nil {
		return err
	}
	return v.s.inspect(stream.Context(), pipelineID, at, func(r *opencdcv1.Record) error {
		return stream.Send(&apiv1.InspectConnectorResponse{Record: r})
	})
}

// connectorPoint finds what InspectConnector inspects.
func (s *conduitV1Service) connectorPoint(id string) (string, InspectPoint, error) {
	vp, c, err := s.connector(context.Background(), id)
	if err != nil {
		return "", InspectPoint{}, err
	}
	return vp.info.ID, InspectPoint{Connector: c.ID}, nil
}

// -- processors --------------------------------------------------------------

type v1Processors struct {
	apiv1.UnimplementedProcessorServiceServer
	s *conduitV1Service
}

// v1Processor is a processor with its parent.
type v1Processor struct {
	proc      config.Processor
	connector string // "" for a pipeline's processor
}

func (vp v1Pipeline) processors() []v1Processor {
	var out []v1Processor
	for _, p := range vp.cfg.Processors {
		out = append(out, v1Processor{proc: p})
	}
	for _, c := range vp.cfg.Connectors {
		for _, p := range c.Processors {
			out = append(out, v1Processor{proc: p, connector: c.ID})
		}
	}
	return out
}

// processorID is Conduit's id of a processor: pipeline:processor, or
// pipeline:connector:processor for a connector's.
func (vp v1Pipeline) processorID(p v1Processor) string {
	if p.connector != "" {
		return vp.info.ID + ":" + p.connector + ":" + p.proc.ID
	}
	return vp.info.ID + ":" + p.proc.ID
}

func (v v1Processors) ListProcessors(ctx context.Context, req *apiv1.ListProcessorsRequest) (*apiv1.ListProcessorsResponse, error) {
	list, err := v.s.list(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListProcessorsResponse{}
	for _, vp := range list {
		for _, p := range vp.processors() {
			pb := vp.processorToProto(p)
			if len(req.GetParentIds()) == 0 || slices.Contains(req.GetParentIds(), pb.GetParent().GetId()) {
				out.Processors = append(out.Processors, pb)
			}
		}
	}
	return out, nil
}

func (s *conduitV1Service) processor(ctx context.Context, id string) (v1Pipeline, v1Processor, error) {
	for _, vp := range s.candidates(ctx, id) {
		for _, p := range vp.processors() {
			if vp.processorID(p) == id {
				return vp, p, nil
			}
		}
	}
	return v1Pipeline{}, v1Processor{}, status.Errorf(codes.NotFound,
		"processor %q not found (a processor's id is pipeline:processor, or pipeline:connector:processor for a connector's)", id)
}

func (v v1Processors) GetProcessor(ctx context.Context, req *apiv1.GetProcessorRequest) (*apiv1.GetProcessorResponse, error) {
	vp, p, err := v.s.processor(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.GetProcessorResponse{Processor: vp.processorToProto(p)}, nil
}

func (v v1Processors) CreateProcessor(ctx context.Context, req *apiv1.CreateProcessorRequest) (*apiv1.CreateProcessorResponse, error) {
	parent := req.GetParent().GetId()
	var (
		vp        v1Pipeline
		connector string
		err       error
	)
	switch req.GetParent().GetType() {
	case apiv1.Processor_Parent_TYPE_CONNECTOR:
		var c config.Connector
		vp, c, err = v.s.connector(ctx, parent)
		connector = c.ID
	case apiv1.Processor_Parent_TYPE_PIPELINE:
		vp, err = v.s.get(ctx, parent)
	default:
		return nil, status.Error(codes.InvalidArgument, "parent.type: TYPE_PIPELINE or TYPE_CONNECTOR is required")
	}
	if err != nil {
		return nil, err
	}
	plugin := req.GetPlugin()
	if plugin == "" {
		//lint:ignore SA1019 Conduit's older clients send the plugin as type
		plugin = req.GetType()
	}
	id := uuid.NewString()
	if err := v.s.edit(ctx, vp, "processor not created", PipelineEdit{Op: EditCreateProcessor, Connector: connector, Processor: id,
		Plugin: plugin, Settings: req.GetConfig().GetSettings(), Workers: int(req.GetConfig().GetWorkers()), Condition: req.GetCondition()}); err != nil {
		return nil, err
	}
	created := vp.processorID(v1Processor{proc: config.Processor{ID: id}, connector: connector})
	vp, p, err := v.s.processor(ctx, created)
	if err != nil {
		return nil, err
	}
	return &apiv1.CreateProcessorResponse{Processor: vp.processorToProto(p)}, nil
}

func (v v1Processors) UpdateProcessor(ctx context.Context, req *apiv1.UpdateProcessorRequest) (*apiv1.UpdateProcessorResponse, error) {
	vp, p, err := v.s.processor(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := v.s.edit(ctx, vp, fmt.Sprintf("processor %q not updated", p.proc.ID), PipelineEdit{Op: EditUpdateProcessor,
		Connector: p.connector, Processor: p.proc.ID, Plugin: req.GetPlugin(), Settings: req.GetConfig().GetSettings(),
		Workers: int(req.GetConfig().GetWorkers())}); err != nil {
		return nil, err
	}
	vp, p, err = v.s.processor(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateProcessorResponse{Processor: vp.processorToProto(p)}, nil
}

func (v v1Processors) DeleteProcessor(ctx context.Context, req *apiv1.DeleteProcessorRequest) (*apiv1.DeleteProcessorResponse, error) {
	vp, p, err := v.s.processor(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := v.s.edit(ctx, vp, fmt.Sprintf("processor %q not deleted", p.proc.ID), PipelineEdit{Op: EditDeleteProcessor,
		Connector: p.connector, Processor: p.proc.ID}); err != nil {
		return nil, err
	}
	return &apiv1.DeleteProcessorResponse{}, nil
}

func (v v1Processors) ListProcessorPlugins(_ context.Context, req *apiv1.ListProcessorPluginsRequest) (*apiv1.ListProcessorPluginsResponse, error) {
	re, err := nameFilter(req.GetName())
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListProcessorPluginsResponse{}
	for _, spec := range v.s.rt.ProcessorPlugins() {
		pb := processorSpecToProto(spec)
		if re == nil || re.MatchString(pb.Name) {
			out.Plugins = append(out.Plugins, pb)
		}
	}
	return out, nil
}

func (v v1Processors) InspectProcessorIn(req *apiv1.InspectProcessorInRequest, stream apiv1.ProcessorService_InspectProcessorInServer) error {
	pipelineID, at, err := v.s.processorPoint(req.GetId(), false)
	if err != nil {
		return err
	}
	return v.s.inspect(stream.Context(), pipelineID, at, func(r *opencdcv1.Record) error {
		return stream.Send(&apiv1.InspectProcessorInResponse{Record: r})
	})
}

func (v v1Processors) InspectProcessorOut(req *apiv1.InspectProcessorOutRequest, stream apiv1.ProcessorService_InspectProcessorOutServer) error {
	pipelineID, at, err := v.s.processorPoint(req.GetId(), true)
	if err != nil {
		return err
	}
	return v.s.inspect(stream.Context(), pipelineID, at, func(r *opencdcv1.Record) error {
		return stream.Send(&apiv1.InspectProcessorOutResponse{Record: r})
	})
}

// processorPoint finds what InspectProcessorIn or Out inspects.
func (s *conduitV1Service) processorPoint(id string, out bool) (string, InspectPoint, error) {
	vp, p, err := s.processor(context.Background(), id)
	if err != nil {
		return "", InspectPoint{}, err
	}
	return vp.info.ID, InspectPoint{Connector: p.connector, Processor: p.proc.ID, Out: out}, nil
}

// inspect sends the records passing at until ctx is done or send fails.
func (s *conduitV1Service) inspect(ctx context.Context, pipelineID string, at InspectPoint, send func(*opencdcv1.Record) error) error {
	records, err := s.rt.Inspect(ctx, pipelineID, at)
	if err != nil {
		return inspectError(ctx, err)
	}
	for rec := range records {
		pb, err := recordToProto(&rec)
		if err != nil {
			return err
		}
		if err := send(pb); err != nil {
			return err
		}
	}
	return nil
}

func inspectError(ctx context.Context, err error) error {
	if errors.Is(err, ErrInspectUnknown) {
		return status.Errorf(codes.NotFound, "%v", err)
	}
	return v1Internal(ctx, err)
}

// recordToProto is rec in Conduit's OpenCDC proto.
func recordToProto(rec *record.Record) (*opencdcv1.Record, error) {
	pb := &opencdcv1.Record{}
	if err := record.ToOpenCDC(rec).ToProto(pb); err != nil {
		return nil, status.Errorf(codes.Internal, "record at position %q: %v", rec.Position, err)
	}
	return pb, nil
}

// -- plugins and information -------------------------------------------------

type v1Information struct {
	apiv1.UnimplementedInformationServiceServer
}

func (v1Information) GetInfo(context.Context, *apiv1.GetInfoRequest) (*apiv1.GetInfoResponse, error) {
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	return &apiv1.GetInfoResponse{Info: &apiv1.Info{Version: version, Os: runtime.GOOS, Arch: runtime.GOARCH}}, nil
}
