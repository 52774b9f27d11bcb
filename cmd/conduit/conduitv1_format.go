package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	configv1 "github.com/conduitio/conduit-commons/proto/config/v1"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The output of Conduit's CLI verbs. Tables and descriptions have
// Conduit's columns and fields (laid out as this CLI's other tables are);
// --json is exactly Conduit's: the API v1 message in protojson's
// lowerCamelCase names, indented by two spaces.

// layoutV1Time is how Conduit's CLI prints a time: UTC, to the second.
const layoutV1Time = "2006-01-02T15:04:05Z"

// v1Time is t as Conduit's CLI prints it; "-" for none.
func v1Time(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(layoutV1Time)
}

// v1JSON is m in Conduit's JSON names, on one line.
func v1JSON(m proto.Message) (json.RawMessage, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson's spacing is deliberately unstable; fix it.
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeV1JSON writes m as Conduit's CLI does with --json.
func writeV1JSON(w io.Writer, m proto.Message) error {
	raw, err := v1JSON(m)
	if err != nil {
		return err
	}
	return writeIndentedJSON(w, raw)
}

// writeIndentedJSON writes v (a value or raw JSON) indented by two spaces,
// with a final newline, and terminal controls in its strings escaped.
func writeIndentedJSON(w io.Writer, v any) error {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(escapeJSONControls(b.Bytes()))
	return err
}

// connectorDescription is what `connectors describe --json` prints, as
// Conduit's CLI does: the connector and its processors.
type connectorDescription struct {
	Connector  json.RawMessage   `json:"connector"`
	Processors []json.RawMessage `json:"processors"`
}

func newConnectorDescription(c *apiv1.Connector, processors []*apiv1.Processor) (connectorDescription, error) {
	out := connectorDescription{Processors: make([]json.RawMessage, 0, len(processors))}
	var err error
	if out.Connector, err = v1JSON(c); err != nil {
		return out, err
	}
	for _, p := range processors {
		raw, err := v1JSON(p)
		if err != nil {
			return out, err
		}
		out.Processors = append(out.Processors, raw)
	}
	return out, nil
}

// table writes rows of cells aligned in columns; each cell is made one
// line first, so that no value breaks a row.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cellText(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cellText is s on one line, "-" when empty, with the characters a
// terminal acts on escaped here rather than by humanOutput, so that the
// columns are aligned on what is shown.
func cellText(s string) string {
	if s = oneLine(s); s == "" {
		return "-"
	}
	return string(escapeControls([]byte(s)))
}

// connectorType is Conduit's name of a connector's type.
func connectorType(t apiv1.Connector_Type) string {
	switch t {
	case apiv1.Connector_TYPE_SOURCE:
		return "source"
	case apiv1.Connector_TYPE_DESTINATION:
		return "destination"
	case apiv1.Connector_TYPE_UNSPECIFIED:
		return "unspecified"
	}
	return "unknown"
}

// processorParent is Conduit's PARENT column: "connector (id)" or
// "pipeline (id)".
func processorParent(p *apiv1.Processor_Parent) string {
	if p == nil {
		return "-"
	}
	kind := "unknown"
	switch p.GetType() {
	case apiv1.Processor_Parent_TYPE_CONNECTOR:
		kind = "connector"
	case apiv1.Processor_Parent_TYPE_PIPELINE:
		kind = "pipeline"
	case apiv1.Processor_Parent_TYPE_UNSPECIFIED:
		kind = "unspecified"
	}
	return fmt.Sprintf("%s (%s)", kind, p.GetId())
}

func writeConnectorsTable(w io.Writer, connectors []*apiv1.Connector) error {
	if len(connectors) == 0 {
		_, err := fmt.Fprintln(w, "no connectors")
		return err
	}
	rows := make([][]string, 0, len(connectors))
	for _, c := range connectors {
		rows = append(rows, []string{c.GetId(), c.GetPlugin(), connectorType(c.GetType()), c.GetPipelineId(),
			v1Time(c.GetCreatedAt()), v1Time(c.GetUpdatedAt())})
	}
	return table(w, []string{"ID", "PLUGIN", "TYPE", "PIPELINE_ID", "CREATED", "LAST_UPDATED"}, rows)
}

func writeProcessorsTable(w io.Writer, processors []*apiv1.Processor) error {
	if len(processors) == 0 {
		_, err := fmt.Fprintln(w, "no processors")
		return err
	}
	rows := make([][]string, 0, len(processors))
	for _, p := range processors {
		rows = append(rows, []string{p.GetId(), p.GetPlugin(), processorParent(p.GetParent()), p.GetCondition(),
			v1Time(p.GetCreatedAt()), v1Time(p.GetUpdatedAt())})
	}
	return table(w, []string{"ID", "PLUGIN", "PARENT", "CONDITION", "CREATED", "LAST_UPDATED"}, rows)
}

// pluginRow is a row of a plugins table.
type pluginRow struct{ name, summary string }

func writePluginsTable(w io.Writer, kind string, plugins []pluginRow) error {
	if len(plugins) == 0 {
		_, err := fmt.Fprintf(w, "no %s plugins\n", kind)
		return err
	}
	rows := make([][]string, 0, len(plugins))
	for _, p := range plugins {
		rows = append(rows, []string{p.name, p.summary})
	}
	return table(w, []string{"NAME", "SUMMARY"}, rows)
}

// describer writes "Field: value" lines, indented by level, with values
// made one line.
type describer struct {
	b bytes.Buffer
}

func (d *describer) field(level int, name, value string) {
	fmt.Fprintf(&d.b, "%s%s: %s\n", strings.Repeat("  ", level), name, oneLine(value))
}

func (d *describer) heading(level int, name string) {
	fmt.Fprintf(&d.b, "%s%s:\n", strings.Repeat("  ", level), name)
}

// settings writes a settings map, sorted by key.
func (d *describer) settings(level int, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		d.field(level, k, m[k])
	}
}

func (d *describer) writeTo(w io.Writer) error {
	_, err := w.Write(d.b.Bytes())
	return err
}

// writeConnector writes a connector as Conduit's `connectors describe`
// does: its fields, its settings under Config, then its processors.
func writeConnector(w io.Writer, c *apiv1.Connector, processors []*apiv1.Processor) error {
	var d describer
	d.field(0, "ID", c.GetId())
	d.field(0, "Type", connectorType(c.GetType()))
	d.field(0, "Plugin", c.GetPlugin())
	d.field(0, "Pipeline ID", c.GetPipelineId())
	d.heading(0, "Config")
	d.settings(1, c.GetConfig().GetSettings())
	d.field(0, "Created At", v1Time(c.GetCreatedAt()))
	d.field(0, "Updated At", v1Time(c.GetUpdatedAt()))
	if len(processors) > 0 {
		d.heading(0, "Processors")
		for _, p := range processors {
			d.field(1, "- ID", p.GetId())
			d.processorBody(2, p)
		}
	}
	return d.writeTo(w)
}

// writeProcessor writes a processor as Conduit's `processors describe`
// does.
func writeProcessor(w io.Writer, p *apiv1.Processor) error {
	var d describer
	d.field(0, "ID", p.GetId())
	if p.GetParent() != nil {
		d.field(0, "Parent", processorParent(p.GetParent()))
	}
	d.processorBody(0, p)
	return d.writeTo(w)
}

func (d *describer) processorBody(level int, p *apiv1.Processor) {
	d.field(level, "Plugin", p.GetPlugin())
	if strings.TrimSpace(p.GetCondition()) != "" {
		d.field(level, "Condition", p.GetCondition())
	}
	if len(p.GetConfig().GetSettings()) > 0 {
		d.heading(level, "Config")
		d.settings(level+1, p.GetConfig().GetSettings())
	}
	d.field(level, "Workers", fmt.Sprint(p.GetConfig().GetWorkers()))
	d.field(level, "Created At", v1Time(p.GetCreatedAt()))
	d.field(level, "Updated At", v1Time(p.GetUpdatedAt()))
}

// pluginHeader writes the fields a connector and a processor plugin share,
// leaving out the empty ones as Conduit does.
func (d *describer) pluginHeader(name, summary, description, author, version string) {
	for _, f := range [][2]string{{"Name", name}, {"Summary", summary}, {"Description", description}, {"Author", author}, {"Version", version}} {
		if strings.TrimSpace(f[1]) != "" {
			d.field(0, f[0], f[1])
		}
	}
}

func writeConnectorPlugin(w io.Writer, p *apiv1.ConnectorPluginSpecifications) error {
	var d describer
	d.pluginHeader(p.GetName(), p.GetSummary(), p.GetDescription(), p.GetAuthor(), p.GetVersion())
	if err := d.writeTo(w); err != nil {
		return err
	}
	for _, s := range []struct {
		title  string
		params map[string]*configv1.Parameter
	}{{"Source Parameters", p.GetSourceParams()}, {"Destination Parameters", p.GetDestinationParams()}} {
		if len(s.params) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", s.title)
		if err := writeParams(w, s.params); err != nil {
			return err
		}
	}
	return nil
}

func writeProcessorPlugin(w io.Writer, p *apiv1.ProcessorPluginSpecifications) error {
	var d describer
	d.pluginHeader(p.GetName(), p.GetSummary(), p.GetDescription(), p.GetAuthor(), p.GetVersion())
	if err := d.writeTo(w); err != nil {
		return err
	}
	if len(p.GetParameters()) == 0 {
		return nil
	}
	fmt.Fprint(w, "\nParameters:\n")
	return writeParams(w, p.GetParameters())
}

// writeParams writes a plugin's parameters as Conduit orders them: the
// required ones, the others, then the SDK's (sdk.*), each by name. The
// description is last so that long ones do not push the other columns
// apart.
func writeParams(w io.Writer, params map[string]*configv1.Parameter) error {
	group := func(name string, p *configv1.Parameter) int {
		switch {
		case strings.HasPrefix(name, "sdk."):
			return 2
		case slices.ContainsFunc(p.GetValidations(), func(v *configv1.Validation) bool {
			return v.GetType() == configv1.Validation_TYPE_REQUIRED
		}):
			return 0
		}
		return 1
	}
	names := slices.SortedFunc(maps.Keys(params), func(a, b string) int {
		if ga, gb := group(a, params[a]), group(b, params[b]); ga != gb {
			return ga - gb
		}
		return strings.Compare(a, b)
	})
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		p := params[n]
		rows = append(rows, []string{n, paramType(p.GetType()), p.GetDefault(), validationsText(p.GetValidations()), p.GetDescription()})
	}
	return table(w, []string{"NAME", "TYPE", "DEFAULT", "VALIDATIONS", "DESCRIPTION"}, rows)
}

// paramType is a parameter's type as Conduit's CLI prints it: "string",
// "duration".
func paramType(t configv1.Parameter_Type) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "TYPE_"))
}

// validationsText lists a parameter's validations: "required",
// "greater-than 0", "inclusion a,b".
func validationsText(vs []*configv1.Validation) string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		name := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(v.GetType().String(), "TYPE_")), "_", "-")
		if v.GetValue() != "" {
			name += " " + v.GetValue()
		}
		out = append(out, name)
	}
	return strings.Join(out, "; ")
}
