package api

import (
	"bytes"
	"errors"
	"net/http"

	commonsconfig "github.com/conduitio/conduit-commons/config"
	configv1 "github.com/conduitio/conduit-commons/proto/config/v1"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-processor-sdk"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
)

// v1Status maps this product's statuses one to one to Conduit's.
var v1StatusOf = map[lifecycle.Status]apiv1.Pipeline_Status{
	lifecycle.StatusRunning:    apiv1.Pipeline_STATUS_RUNNING,
	lifecycle.StatusStopped:    apiv1.Pipeline_STATUS_STOPPED,
	lifecycle.StatusDegraded:   apiv1.Pipeline_STATUS_DEGRADED,
	lifecycle.StatusRecovering: apiv1.Pipeline_STATUS_RECOVERING,
}

func (vp v1Pipeline) toProto() *apiv1.Pipeline {
	pb := &apiv1.Pipeline{
		Id:        vp.info.ID,
		State:     &apiv1.Pipeline_State{Status: v1StatusOf[vp.state.Status]},
		Config:    &apiv1.Pipeline_Config{Name: vp.info.Name, Description: vp.info.Description},
		CreatedAt: timeToProto(vp.state.CreatedAt),
		UpdatedAt: timeToProto(vp.state.UpdatedAt),
	}
	switch {
	case vp.invalid != nil:
		pb.State.Error = vp.invalid.Error()
	case vp.state.LastError != nil && (vp.state.Status == lifecycle.StatusDegraded || vp.state.Status == lifecycle.StatusRecovering):
		pb.State.Error = vp.state.LastError.Message
	}
	for _, c := range vp.cfg.Connectors {
		pb.ConnectorIds = append(pb.ConnectorIds, vp.info.ID+":"+c.ID)
	}
	for _, p := range vp.cfg.Processors {
		pb.ProcessorIds = append(pb.ProcessorIds, vp.processorID(v1Processor{proc: p}))
	}
	return pb
}

func (vp v1Pipeline) connectorToProto(c config.Connector) *apiv1.Connector {
	pb := &apiv1.Connector{
		Id:         vp.info.ID + ":" + c.ID,
		Type:       apiv1.Connector_TYPE_DESTINATION,
		Plugin:     c.Plugin,
		PipelineId: vp.info.ID,
		Config:     &apiv1.Connector_Config{Name: c.Name, Settings: maskedSettings(c.Settings)},
		CreatedAt:  timeToProto(vp.state.CreatedAt),
		UpdatedAt:  timeToProto(vp.state.UpdatedAt),
	}
	if c.Type == config.TypeSource {
		pb.Type = apiv1.Connector_TYPE_SOURCE
	}
	for _, p := range c.Processors {
		pb.ProcessorIds = append(pb.ProcessorIds, vp.processorID(v1Processor{proc: p, connector: c.ID}))
	}
	return pb
}

func (vp v1Pipeline) processorToProto(p v1Processor) *apiv1.Processor {
	parent := &apiv1.Processor_Parent{Type: apiv1.Processor_Parent_TYPE_PIPELINE, Id: vp.info.ID}
	if p.connector != "" {
		parent = &apiv1.Processor_Parent{Type: apiv1.Processor_Parent_TYPE_CONNECTOR, Id: vp.info.ID + ":" + p.connector}
	}
	return &apiv1.Processor{
		Id:        vp.processorID(p),
		Config:    &apiv1.Processor_Config{Settings: maskedSettings(p.proc.Settings), Workers: int32(max(p.proc.Workers, 1))},
		Condition: p.proc.Condition,
		Plugin:    p.proc.Plugin,
		Parent:    parent,
		CreatedAt: timeToProto(vp.state.CreatedAt),
		UpdatedAt: timeToProto(vp.state.UpdatedAt),
	}
}

func dlqToProto(d config.DLQ) *apiv1.Pipeline_DLQ {
	return &apiv1.Pipeline_DLQ{Plugin: d.Plugin, Settings: maskedSettings(d.Settings),
		WindowSize: uint64(max(d.WindowSize, 0)), WindowNackThreshold: uint64(max(d.WindowNackThreshold, 0))}
}

// maskedSettings are settings as the API shows them: credentials masked
// as in a pipeline's definition.
func maskedSettings(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = config.MaskSetting(k, v)
	}
	return out
}

func paramsToProto(p commonsconfig.Parameters) map[string]*configv1.Parameter {
	out := map[string]*configv1.Parameter{}
	p.ToProto(out)
	return out
}

func connectorSpecToProto(s pconnector.Specification) *apiv1.ConnectorPluginSpecifications {
	return &apiv1.ConnectorPluginSpecifications{Name: s.Name, Summary: s.Summary, Description: s.Description,
		Version: s.Version, Author: s.Author,
		SourceParams: paramsToProto(s.SourceParams), DestinationParams: paramsToProto(s.DestinationParams)}
}

func processorSpecToProto(s sdk.Specification) *apiv1.ProcessorPluginSpecifications {
	return &apiv1.ProcessorPluginSpecifications{Name: s.Name, Summary: s.Summary, Description: s.Description,
		Version: s.Version, Author: s.Author, Parameters: paramsToProto(s.Parameters)}
}

// inspectHTTP serves an inspect route over HTTP as Conduit's gateway
// does: each record as {"result": <record>} on a line of its own, for as
// long as the client stays. Each stream takes a watcher slot, as event
// watches do.
func (s *conduitV1Service) inspectHTTP(watchers *watcherLimits, point func(id string) (string, InspectPoint, error)) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		pipelineID, at, err := point(params["id"])
		if err != nil {
			st, _ := status.FromError(err)
			writeConduitHTTPError(w, r, st.Code(), st.Message())
			return
		}
		client := clientAddress(r.RemoteAddr)
		if err := watchers.acquire(client); err != nil {
			writeConduitHTTPError(w, r, codes.ResourceExhausted, errors.Unwrap(err).Error())
			return
		}
		defer watchers.release(client)
		records, err := s.rt.Inspect(r.Context(), pipelineID, at)
		if err != nil {
			st, _ := status.FromError(inspectError(r.Context(), err))
			writeConduitHTTPError(w, r, st.Code(), st.Message())
			return
		}
		// The headers go out at once, so a client knows the stream is
		// open before the first record passes.
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		marshal := protojson.MarshalOptions{EmitUnpopulated: true}
		var line bytes.Buffer
		for rec := range records {
			pb, err := recordToProto(&rec)
			if err == nil {
				var b []byte
				b, err = marshal.Marshal(pb)
				line.Reset()
				line.WriteString(`{"result":`)
				line.Write(b)
				line.WriteString("}\n")
			}
			if err != nil {
				st, _ := status.FromError(err)
				line.Reset()
				line.WriteString(`{"error":`)
				b, _ := protojson.Marshal(st.Proto())
				line.Write(b)
				line.WriteString("}\n")
				_, _ = w.Write(line.Bytes())
				return
			}
			if _, err := w.Write(line.Bytes()); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
