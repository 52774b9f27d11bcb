package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	commonsconfig "github.com/conduitio/conduit-commons/config"
	"github.com/spf13/cobra"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
)

// Conduit's `pipelines init`: a pipeline file from a template. Without
// --source and --destination it is Conduit's runnable demo (a generator
// that makes a record a second, logged by the log destination); with them,
// every parameter of the built-in connectors named is written and
// explained, for the user to fill in.

// Conduit's defaults of `pipelines init`.
const (
	initDefaultSource      = "generator"
	initDefaultDestination = "log"
	initDemoName           = "demo-pipeline"
)

// initConnector is a connector of the template: its plugin as the user
// names it in a pipeline file, the parameters written for it, and those
// set (live, at their default) whatever the parameter says.
type initConnector struct {
	plugin string
	params commonsconfig.Parameters
	set    map[string]bool
}

func newPipelinesInitCommand() *cobra.Command {
	var (
		source, destination string
		force               bool
	)
	cmd := &cobra.Command{
		Use:   "init [pipeline-name]",
		Short: "Write a pipeline file from a template, as Conduit's `pipelines init` does",
		Long: `Init writes <pipelines.path>/<pipeline-name>.yaml, a pipeline file conduit
runs (pipelines.path as "conduit run" reads it: --pipelines.path, its
CONDUIT_ variable or conduit.yml; default ./pipelines).

Without --source and --destination it is a runnable demo, demo-pipeline: a
generator making one record a second, written to the log. With either, the
pipeline (default name <source>-to-<destination>) has every parameter of the
connectors named, each explained in a comment (Required or Optional): the
required ones empty, to fill in before "conduit run", the optional ones
commented out at their default. A connector left out is the demo's.

An existing file is left alone unless --force is given; a symbolic link
where the file goes is never written through.`,
		Example: `  conduit pipelines init
  conduit pipelines init --source generator --destination file
  conduit pipelines init orders --source postgres --destination kafka --pipelines.path ./my-pipelines`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := config.Load(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv})
			if err != nil {
				return err
			}
			demo := source == "" && destination == ""
			name := initDemoName
			switch {
			case len(args) == 1:
				name = args[0]
			case !demo:
				name = fmt.Sprintf("%s-to-%s", initPluginName(source, initDefaultSource), initPluginName(destination, initDefaultDestination))
			}
			if err := checkInitName(name); err != nil {
				return err
			}
			file, err := renderInitPipeline(connector.NewRegistry(connector.Builtin()...), name, source, destination)
			if err != nil {
				return err
			}
			path := filepath.Join(cfg.Pipelines.Path, name+".yaml")
			if err := writeInitFiles([]initFile{{path, file}}, force, func(string) {}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(humanOutput(cmd.OutOrStdout()), "Your pipeline has been initialized and created at %q.\nTo run the pipeline, simply run `conduit run`.\n", path)
			return err
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "source connector: one of the built-in connectors (default generator)")
	cmd.Flags().StringVar(&destination, "destination", "", "destination connector: one of the built-in connectors (default log)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite the file if it exists")
	return cmd
}

// initPluginName is a plugin as a pipeline file names it: without
// "builtin:" or a version (Conduit's template writes "generator").
func initPluginName(name, def string) string {
	if name == "" {
		return def
	}
	name = strings.TrimPrefix(name, "builtin:")
	name, _, _ = strings.Cut(name, "@")
	return name
}

// checkInitName refuses a pipeline name that would not make one file in
// pipelines.path.
func checkInitName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("pipeline name %q: want a name without slashes or control characters; it names the file <pipelines.path>/<name>.yaml", name)
	}
	return nil
}

// initConnectorSpec finds a built-in connector by name and returns its
// parameters for the given side.
func initConnectorSpec(reg *connector.Registry, name string, source bool) (initConnector, error) {
	side, def := "destination", initDefaultDestination
	if source {
		side, def = "source", initDefaultSource
	}
	plugin := initPluginName(name, def)
	var known []string
	for _, spec := range reg.Specifications() {
		short := initPluginName(spec.Name, "")
		params := spec.DestinationParams
		p, err := reg.Lookup(short)
		if err != nil {
			continue
		}
		can := p.NewDestination != nil
		if source {
			params, can = spec.SourceParams, p.NewSource != nil
		}
		if !can {
			continue
		}
		known = append(known, short)
		if short == plugin {
			return initConnector{plugin: plugin, params: params}, nil
		}
	}
	return initConnector{}, fmt.Errorf("--%s %q: want a built-in connector that can be a %s: %s", side, name, side, strings.Join(known, ", "))
}

// initDemoSource is Conduit's demo source: structured records with an
// airline and a departure time, one a second.
func initDemoSource(spec initConnector) initConnector {
	demo := initConnector{plugin: spec.plugin, set: map[string]bool{}, params: commonsconfig.Parameters{
		"format.type":                       {Description: spec.params["format.type"].Description, Type: commonsconfig.ParameterTypeString, Default: "structured"},
		"format.options.scheduledDeparture": {Description: "Generate field 'scheduledDeparture' of type 'time'", Type: commonsconfig.ParameterTypeString, Default: "time"},
		"format.options.airline":            {Description: "Generate field 'airline' of type string", Type: commonsconfig.ParameterTypeString, Default: "string"},
		"rate":                              {Description: spec.params["rate"].Description, Type: commonsconfig.ParameterTypeFloat, Default: "1"},
	}}
	for n := range demo.params {
		demo.set[n] = true
	}
	return demo
}

// renderInitPipeline returns the pipeline file that init writes.
func renderInitPipeline(reg *connector.Registry, name, source, destination string) ([]byte, error) {
	src, err := initConnectorSpec(reg, source, true)
	if err != nil {
		return nil, err
	}
	dst, err := initConnectorSpec(reg, destination, false)
	if err != nil {
		return nil, err
	}
	demo := source == "" && destination == ""
	description := "This pipeline was initialized using the `conduit pipelines init` command.\n"
	// A connector left out is the demo's, as in Conduit.
	if source == "" {
		src = initDemoSource(src)
	} else if src.plugin == initDefaultSource {
		// format.options.* is a pattern, not a setting, and a structured
		// generator needs at least one field: the demo's fields make the
		// file run as written.
		demo := initDemoSource(src)
		params := maps.Clone(src.params)
		src.set = map[string]bool{}
		for _, n := range []string{"format.options.scheduledDeparture", "format.options.airline"} {
			params[n], src.set[n] = demo.params[n], true
		}
		src.params = params
	}
	if destination == "" {
		dst.params = nil
	}
	if demo {
		description += fmt.Sprintf("It is a demo pipeline that connects a source connector (%s) to a destination connector (%s).\n"+
			"Run `conduit run` and a new record is logged every second.", src.plugin, dst.plugin)
	} else {
		description += fmt.Sprintf("It is a pipeline that connects a source connector (%s) to a destination connector (%s).\n"+
			"Fill in the required settings before you run it with `conduit run`.", src.plugin, dst.plugin)
	}
	var b strings.Builder
	b.WriteString("version: \"2.2\"\npipelines:\n")
	fmt.Fprintf(&b, "  - id: %s\n", yamlQuoted(name))
	fmt.Fprintf(&b, "    description: %s\n", yamlQuoted(description))
	b.WriteString("    status: running\n")
	fmt.Fprintf(&b, "    name: %s\n", yamlQuoted(name))
	b.WriteString("    connectors:\n")
	for _, c := range []struct {
		kind string
		initConnector
	}{{"source", src}, {"destination", dst}} {
		fmt.Fprintf(&b, "      - id: %s\n", yamlQuoted(c.plugin+"-"+c.kind))
		fmt.Fprintf(&b, "        type: %s\n", c.kind)
		fmt.Fprintf(&b, "        plugin: %s\n", yamlQuoted(c.plugin))
		writeInitSettings(&b, c.initConnector)
	}
	return []byte(b.String()), nil
}

// writeInitSettings writes a connector's settings as Conduit's template
// does: each parameter's description, type and whether it is required as
// comments, then the parameter at its default. A parameter named by a
// pattern (format.options.*) is not a setting and is left out.
//
// Unlike Conduit's, an optional parameter is written commented out (with
// its default, which applies without it): some only apply beside others
// (the chaos connector's fail.partial to a destination, sync with a path)
// and are refused elsewhere, and an empty value is not always the same as
// none (an empty format.options.path names a payload field). So the file
// runs as soon as the required values are filled in.
func writeInitSettings(b *strings.Builder, c initConnector) {
	params := c.params
	var names []string
	for n := range params {
		if !strings.Contains(n, "*") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	const indent = "          "
	b.WriteString("        settings:\n")
	for _, n := range names {
		p := params[n]
		for _, l := range wrapWords(oneLine(p.Description), 80-len(indent)-2) {
			fmt.Fprintf(b, "%s# %s\n", indent, l)
		}
		fmt.Fprintf(b, "%s# Type: %s\n", indent, p.Type)
		required := "Optional"
		if slices.ContainsFunc(p.Validations, func(v commonsconfig.Validation) bool { return v.Type() == commonsconfig.ValidationTypeRequired }) {
			required = "Required"
		}
		fmt.Fprintf(b, "%s# %s\n", indent, required)
		comment := ""
		if required == "Optional" && !c.set[n] {
			comment = "# "
		}
		fmt.Fprintf(b, "%s%s%s: %s\n", indent, comment, yamlKey(n), yamlQuoted(p.Default))
	}
}

// yamlQuoted is s as a YAML scalar that always reads back as the string s.
func yamlQuoted(s string) string {
	if s == "" {
		return `""`
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		q, _ := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
		return string(q)
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// yamlKey is a setting's name as a YAML key: as it is when it is plain
// (letters, digits, '.', '-', '_'), quoted otherwise.
func yamlKey(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
	}) {
		return s
	}
	return yamlQuoted(s)
}

// wrapWords breaks s into lines of at most width bytes at spaces (a word
// longer than width gets a line of its own).
func wrapWords(s string, width int) []string {
	var lines []string
	var line string
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
