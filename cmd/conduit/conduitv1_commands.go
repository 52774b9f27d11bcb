package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

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

func newConnectorPluginsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "connector-plugins",
		Aliases: []string{"connector-plugin", "connectorsplugins", "connectorplugins", "connectorplugin"},
		Short:   "List and describe the connector plugins a running conduit offers (Conduit's verbs)",
		Long:    v1CommandLong,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConnectorPluginsListCommand(), newConnectorPluginsDescribeCommand())
	return cmd
}

// listConnectorPlugins asks for the connector plugins whose name matches
// the regular expression name ("" for all), sorted by name.
func listConnectorPlugins(cmd *cobra.Command, client *v1Client, name string) (*apiv1.ListConnectorPluginsResponse, error) {
	resp, err := callV1[apiv1.ListConnectorPluginsRequest, apiv1.ListConnectorPluginsResponse](cmd.Context(), client,
		apiv1.ConnectorService_ListConnectorPlugins_FullMethodName, &apiv1.ListConnectorPluginsRequest{Name: name})
	if err != nil {
		return nil, client.explain(err, v1Subject{})
	}
	slices.SortFunc(resp.Plugins, func(a, b *apiv1.ConnectorPluginSpecifications) int { return strings.Compare(a.GetName(), b.GetName()) })
	return resp, nil
}

func newConnectorPluginsListCommand() *cobra.Command {
	var (
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the connector plugins (NAME, SUMMARY)",
		Example: `  conduit connector-plugins ls
  conduit connector-plugins ls --name kafka
  conduit connector-plugins ls --json | jq -r '.plugins[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := listConnectorPlugins(cmd, client, pluginNameFilter(name))
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp)
			}
			rows := make([]pluginRow, 0, len(resp.GetPlugins()))
			for _, p := range resp.GetPlugins() {
				rows = append(rows, pluginRow{p.GetName(), p.GetSummary()})
			}
			return writePluginsTable(humanOutput(cmd.OutOrStdout()), "connector", rows)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only the plugins whose name contains this (a regular expression)")
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newConnectorPluginsDescribeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe <plugin>",
		Aliases: []string{"desc"},
		Short:   "Show a connector plugin: summary, author, version and its source and destination parameters",
		Long: `Describe shows a connector plugin's specification. The plugin is named as
"connector-plugins ls" lists it (builtin:file@v0.1.0) or without its version
or builtin: prefix (builtin:file, file) when that names one plugin.`,
		Example: `  conduit connector-plugins describe builtin:file@v0.1.0
  conduit connector-plugins describe kafka --json | jq '.sourceParams | keys'`,
		Args: oneArg("plugin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := listConnectorPlugins(cmd, client, "")
			if err != nil {
				return err
			}
			p, err := findPlugin(resp.GetPlugins(), (*apiv1.ConnectorPluginSpecifications).GetName, "connector", args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), p)
			}
			return writeConnectorPlugin(humanOutput(cmd.OutOrStdout()), p)
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newProcessorPluginsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "processor-plugins",
		Aliases: []string{"processor-plugin", "processorsplugins", "processorplugins", "processorplugin"},
		Short:   "List and describe the processor plugins a running conduit offers (Conduit's verbs)",
		Long:    v1CommandLong,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newProcessorPluginsListCommand(), newProcessorPluginsDescribeCommand())
	return cmd
}

// listProcessorPlugins asks for the processor plugins whose name matches
// the regular expression name ("" for all), sorted by name.
func listProcessorPlugins(cmd *cobra.Command, client *v1Client, name string) (*apiv1.ListProcessorPluginsResponse, error) {
	resp, err := callV1[apiv1.ListProcessorPluginsRequest, apiv1.ListProcessorPluginsResponse](cmd.Context(), client,
		apiv1.ProcessorService_ListProcessorPlugins_FullMethodName, &apiv1.ListProcessorPluginsRequest{Name: name})
	if err != nil {
		return nil, client.explain(err, v1Subject{})
	}
	slices.SortFunc(resp.Plugins, func(a, b *apiv1.ProcessorPluginSpecifications) int { return strings.Compare(a.GetName(), b.GetName()) })
	return resp, nil
}

func newProcessorPluginsListCommand() *cobra.Command {
	var (
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the processor plugins (NAME, SUMMARY)",
		Example: `  conduit processor-plugins ls
  conduit processor-plugins ls --name field
  conduit processor-plugins ls --json | jq -r '.plugins[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := listProcessorPlugins(cmd, client, pluginNameFilter(name))
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), resp)
			}
			rows := make([]pluginRow, 0, len(resp.GetPlugins()))
			for _, p := range resp.GetPlugins() {
				rows = append(rows, pluginRow{p.GetName(), p.GetSummary()})
			}
			return writePluginsTable(humanOutput(cmd.OutOrStdout()), "processor", rows)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only the plugins whose name contains this (a regular expression)")
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newProcessorPluginsDescribeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "describe <plugin>",
		Aliases: []string{"desc"},
		Short:   "Show a processor plugin: summary, description, author, version and parameters",
		Long: `Describe shows a processor plugin's specification. The plugin is named as
"processor-plugins ls" lists it (field.set@v0.1.0) or without its version
(field.set) when that names one plugin.`,
		Example: `  conduit processor-plugins describe field.set
  conduit processor-plugins describe field.set --json | jq .parameters`,
		Args: oneArg("plugin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			resp, err := listProcessorPlugins(cmd, client, "")
			if err != nil {
				return err
			}
			p, err := findPlugin(resp.GetPlugins(), (*apiv1.ProcessorPluginSpecifications).GetName, "processor", args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeV1JSON(cmd.OutOrStdout(), p)
			}
			return writeProcessorPlugin(humanOutput(cmd.OutOrStdout()), p)
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
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
