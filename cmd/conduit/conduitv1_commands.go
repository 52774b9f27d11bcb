package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/conduitio/conduit/proto/api/v1"
)

// Conduit's CLI verbs: connectors, processors, connector-plugins and
// processor-plugins (each list/ls and describe/desc) with Conduit's
// names, flags, table columns and --json output (its API v1's JSON), so a
// Conduit user's habits and scripts carry over. They call the Conduit API
// v1 that conduit serves (see v1Client).

// v1CommandLong is the help every Conduit verb shares: where it connects.
const v1CommandLong = `These commands carry Conduit's CLI verbs over, with Conduit's output:
--json prints what Conduit's CLI prints (its API v1's JSON). They call a
running "conduit run" at api.grpc.address when it is set (Conduit's CLI's
--api.grpc.address), else at api.http.address (default 127.0.0.1:8080),
sending api.auth.token if set; each comes from its flag, CONDUIT_ variable
or conduit.yml, like for "conduit run".`

// addJSONFlag adds Conduit's --json flag.
func addJSONFlag(cmd *cobra.Command, asJSON *bool) {
	cmd.Flags().BoolVar(asJSON, "json", false, "print the result as JSON, as Conduit's CLI does")
}

func newConnectorsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "connectors",
		Aliases: []string{"connector"},
		Short:   "List and describe the connectors of a running conduit (Conduit's verbs)",
		Long:    v1CommandLong,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConnectorsListCommand(), newConnectorsDescribeCommand())
	return cmd
}

func newConnectorsListCommand() *cobra.Command {
	var (
		pipelineID string
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the connectors of every pipeline (ID, PLUGIN, TYPE, PIPELINE_ID, CREATED, LAST_UPDATED)",
		Example: `  conduit connectors ls
  conduit connectors ls --pipeline-id orders
  conduit connectors ls --json | jq -r '.connectors[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := callV1[apiv1.ListConnectorsRequest, apiv1.ListConnectorsResponse](cmd.Context(), client,
				apiv1.ConnectorService_ListConnectors_FullMethodName, &apiv1.ListConnectorsRequest{PipelineId: pipelineID})
			if err != nil {
				return client.explain(err, v1Subject{})
			}
			slices.SortFunc(resp.Connectors, func(a, b *apiv1.Connector) int { return strings.Compare(a.GetId(), b.GetId()) })
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp)
			}
			return writeConnectorsTable(humanOutput(cmd.OutOrStdout()), resp.GetConnectors())
		},
	}
	cmd.Flags().StringVar(&pipelineID, "pipeline-id", "", "only the connectors of this pipeline")
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newConnectorsDescribeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe <connector-id>",
		Aliases: []string{"desc"},
		Short:   "Show a connector: type, plugin, pipeline, settings (credentials masked) and processors",
		Example: `  conduit connectors describe orders:source
  conduit connectors describe orders:source --json | jq .connector.config`,
		Args: oneArg("connector id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			about := v1Subject{"connector", args[0]}
			resp, err := callV1[apiv1.GetConnectorRequest, apiv1.GetConnectorResponse](cmd.Context(), client,
				apiv1.ConnectorService_GetConnector_FullMethodName, &apiv1.GetConnectorRequest{Id: args[0]})
			if err != nil {
				return client.explain(err, about)
			}
			processors := make([]*apiv1.Processor, 0, len(resp.GetConnector().GetProcessorIds()))
			for _, id := range resp.GetConnector().GetProcessorIds() {
				p, err := callV1[apiv1.GetProcessorRequest, apiv1.GetProcessorResponse](cmd.Context(), client,
					apiv1.ProcessorService_GetProcessor_FullMethodName, &apiv1.GetProcessorRequest{Id: id})
				if err != nil {
					return client.explain(err, v1Subject{"processor", id})
				}
				processors = append(processors, p.GetProcessor())
			}
			if asJSON {
				out, err := newConnectorDescription(resp.GetConnector(), processors)
				if err != nil {
					return err
				}
				return writeIndentedJSON(cmd.OutOrStdout(), out)
			}
			return writeConnector(humanOutput(cmd.OutOrStdout()), resp.GetConnector(), processors)
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newProcessorsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "processors",
		Aliases: []string{"processor"},
		Short:   "List and describe the processors of a running conduit (Conduit's verbs)",
		Long:    v1CommandLong,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newProcessorsListCommand(), newProcessorsDescribeCommand())
	return cmd
}

func newProcessorsListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the processors of every pipeline (ID, PLUGIN, PARENT, CONDITION, CREATED, LAST_UPDATED)",
		Example: `  conduit processors ls
  conduit processors ls --json | jq -r '.processors[] | .id + " " + .plugin'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := callV1[apiv1.ListProcessorsRequest, apiv1.ListProcessorsResponse](cmd.Context(), client,
				apiv1.ProcessorService_ListProcessors_FullMethodName, &apiv1.ListProcessorsRequest{})
			if err != nil {
				return client.explain(err, v1Subject{})
			}
			slices.SortFunc(resp.Processors, func(a, b *apiv1.Processor) int { return strings.Compare(a.GetId(), b.GetId()) })
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp)
			}
			return writeProcessorsTable(humanOutput(cmd.OutOrStdout()), resp.GetProcessors())
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newProcessorsDescribeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe <processor-id>",
		Aliases: []string{"desc"},
		Short:   "Show a processor: plugin, parent, condition, settings and workers",
		Example: `  conduit processors describe orders:source:tag
  conduit processors describe orders:source:tag --json`,
		Args: oneArg("processor id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := callV1[apiv1.GetProcessorRequest, apiv1.GetProcessorResponse](cmd.Context(), client,
				apiv1.ProcessorService_GetProcessor_FullMethodName, &apiv1.GetProcessorRequest{Id: args[0]})
			if err != nil {
				return client.explain(err, v1Subject{"processor", args[0]})
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp.GetProcessor())
			}
			return writeProcessor(humanOutput(cmd.OutOrStdout()), resp.GetProcessor())
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// pluginSpec is what the two plugin listings have in common.
type pluginSpec interface {
	proto.Message
	GetName() string
	GetSummary() string
}

// pluginVerbs describes one of Conduit's plugin commands (connector-plugins,
// processor-plugins): they differ only in the call, the output of describe
// and their texts.
type pluginVerbs[S pluginSpec] struct {
	kind    string // "connector" or "processor"
	aliases []string
	short   string // of the command
	// list asks the running conduit for the plugins whose name matches
	// the regular expression ("" for all).
	list func(ctx context.Context, client *v1Client, name string) ([]S, proto.Message, error)
	// describeShort, describeLong and the examples are describe's texts.
	describeShort, describeLong, listExample, describeExample string
	write                                                     func(io.Writer, S) error
}

func (v pluginVerbs[S]) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:     v.kind + "-plugins",
		Aliases: v.aliases,
		Short:   v.short,
		Long:    v1CommandLong,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(v.listCommand(), v.describeCommand())
	return cmd
}

// plugins lists the plugins sorted by name.
func (v pluginVerbs[S]) plugins(cmd *cobra.Command, client *v1Client, name string) ([]S, proto.Message, error) {
	plugins, resp, err := v.list(cmd.Context(), client, name)
	if err != nil {
		return nil, nil, client.explain(err, v1Subject{})
	}
	slices.SortFunc(plugins, func(a, b S) int { return strings.Compare(a.GetName(), b.GetName()) })
	return plugins, resp, nil
}

func (v pluginVerbs[S]) listCommand() *cobra.Command {
	var (
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the " + v.kind + " plugins (NAME, SUMMARY)",
		Example: v.listExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			plugins, resp, err := v.plugins(cmd, client, pluginNameFilter(name))
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp)
			}
			rows := make([]pluginRow, 0, len(plugins))
			for _, p := range plugins {
				rows = append(rows, pluginRow{p.GetName(), p.GetSummary()})
			}
			return writePluginsTable(humanOutput(cmd.OutOrStdout()), v.kind, rows)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only the plugins whose name contains this (a regular expression)")
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func (v pluginVerbs[S]) describeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe <plugin>",
		Aliases: []string{"desc"},
		Short:   v.describeShort,
		Long:    v.describeLong,
		Example: v.describeExample,
		Args:    oneArg("plugin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			plugins, _, err := v.plugins(cmd, client, "")
			if err != nil {
				return err
			}
			p, err := findPlugin(plugins, S.GetName, v.kind, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), p)
			}
			return v.write(humanOutput(cmd.OutOrStdout()), p)
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newConnectorPluginsCommand() *cobra.Command {
	return pluginVerbs[*apiv1.ConnectorPluginSpecifications]{
		kind:    "connector",
		aliases: []string{"connector-plugin", "connectorsplugins", "connectorplugins", "connectorplugin"},
		short:   "List and describe the connector plugins a running conduit offers (Conduit's verbs)",
		list: func(ctx context.Context, client *v1Client, name string) ([]*apiv1.ConnectorPluginSpecifications, proto.Message, error) {
			resp, err := callV1[apiv1.ListConnectorPluginsRequest, apiv1.ListConnectorPluginsResponse](ctx, client,
				apiv1.ConnectorService_ListConnectorPlugins_FullMethodName, &apiv1.ListConnectorPluginsRequest{Name: name})
			return resp.GetPlugins(), resp, err
		},
		describeShort: "Show a connector plugin: summary, author, version and its source and destination parameters",
		describeLong: `Describe shows a connector plugin's specification. The plugin is named as
"connector-plugins ls" lists it (builtin:file@v0.1.0) or without its version
or builtin: prefix (builtin:file, file) when that names one plugin.`,
		listExample: `  conduit connector-plugins ls
  conduit connector-plugins ls --name kafka
  conduit connector-plugins ls --json | jq -r '.plugins[].name'`,
		describeExample: `  conduit connector-plugins describe builtin:file@v0.1.0
  conduit connector-plugins describe kafka --json | jq '.sourceParams | keys'`,
		write: writeConnectorPlugin,
	}.command()
}

func newProcessorPluginsCommand() *cobra.Command {
	return pluginVerbs[*apiv1.ProcessorPluginSpecifications]{
		kind:    "processor",
		aliases: []string{"processor-plugin", "processorsplugins", "processorplugins", "processorplugin"},
		short:   "List and describe the processor plugins a running conduit offers (Conduit's verbs)",
		list: func(ctx context.Context, client *v1Client, name string) ([]*apiv1.ProcessorPluginSpecifications, proto.Message, error) {
			resp, err := callV1[apiv1.ListProcessorPluginsRequest, apiv1.ListProcessorPluginsResponse](ctx, client,
				apiv1.ProcessorService_ListProcessorPlugins_FullMethodName, &apiv1.ListProcessorPluginsRequest{Name: name})
			return resp.GetPlugins(), resp, err
		},
		describeShort: "Show a processor plugin: summary, description, author, version and parameters",
		describeLong: `Describe shows a processor plugin's specification. The plugin is named as
"processor-plugins ls" lists it (field.set@v0.1.0) or without its version
(field.set) when that names one plugin.`,
		listExample: `  conduit processor-plugins ls
  conduit processor-plugins ls --name field
  conduit processor-plugins ls --json | jq -r '.plugins[].name'`,
		describeExample: `  conduit processor-plugins describe field.set
  conduit processor-plugins describe field.set --json | jq .parameters`,
		write: writeProcessorPlugin,
	}.command()
}

// pluginNameFilter is Conduit's --name: a part of the name, as a regular
// expression.
func pluginNameFilter(name string) string {
	if name == "" {
		return ""
	}
	return ".*" + name + ".*"
}

// findPlugin picks the plugin a user named: by its full name, else by the
// name without "@version" and without its type ("builtin:",
// "standalone:") - when that names exactly one.
func findPlugin[P any](plugins []P, nameOf func(P) string, kind, name string) (P, error) {
	var zero P
	for _, p := range plugins {
		if nameOf(p) == name {
			return p, nil
		}
	}
	var matches []P
	var names []string
	for _, p := range plugins {
		full := nameOf(p)
		short, _, _ := strings.Cut(full, "@")
		_, bare, typed := strings.Cut(short, ":")
		if short == name || typed && bare == name {
			matches = append(matches, p)
			names = append(names, full)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return zero, fmt.Errorf("%s plugin %q not found (list them with: conduit %s-plugins ls)", kind, name, kind)
	}
	return zero, fmt.Errorf("%s plugin %q names %d plugins (%s): give the full name", kind, name, len(matches), strings.Join(names, ", "))
}

// oneArg accepts exactly one argument, named what.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want one %s: %s", what, cmd.UseLine())
		}
		return nil
	}
}
