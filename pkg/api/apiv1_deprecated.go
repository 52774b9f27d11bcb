package api

//lint:file-ignore SA1019 Conduit's deprecated PluginService is served for the clients that still call it.

import (
	"context"

	commonsconfig "github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
)

// v1Plugins is Conduit's deprecated PluginService: the connector plugins
// in its old shape.
type v1Plugins struct {
	apiv1.UnimplementedPluginServiceServer
	s *conduitV1Service
}

func (v v1Plugins) ListPlugins(_ context.Context, req *apiv1.ListPluginsRequest) (*apiv1.ListPluginsResponse, error) {
	re, err := nameFilter(req.GetName())
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListPluginsResponse{}
	for _, spec := range v.s.rt.ConnectorPlugins() {
		pb := deprecatedSpecToProto(spec)
		if re == nil || re.MatchString(pb.Name) {
			out.Plugins = append(out.Plugins, pb)
		}
	}
	return out, nil
}

// deprecatedSpecToProto is s in the shape of Conduit's deprecated
// PluginService, whose types and validations number as config.v1's do.
func deprecatedSpecToProto(s pconnector.Specification) *apiv1.PluginSpecifications {
	params := func(p commonsconfig.Parameters) map[string]*apiv1.PluginSpecifications_Parameter {
		out := map[string]*apiv1.PluginSpecifications_Parameter{}
		for name, param := range p {
			pp := &apiv1.PluginSpecifications_Parameter{Description: param.Description, Default: param.Default,
				Type: apiv1.PluginSpecifications_Parameter_Type(param.Type)} //nolint:gosec // a small enum
			for _, v := range param.Validations {
				pp.Validations = append(pp.Validations, &apiv1.PluginSpecifications_Parameter_Validation{
					Type: apiv1.PluginSpecifications_Parameter_Validation_Type(v.Type()), Value: v.Value()}) //nolint:gosec // a small enum
			}
			out[name] = pp
		}
		return out
	}
	return &apiv1.PluginSpecifications{Name: s.Name, Summary: s.Summary, Description: s.Description,
		Version: s.Version, Author: s.Author, SourceParams: params(s.SourceParams), DestinationParams: params(s.DestinationParams)}
}
