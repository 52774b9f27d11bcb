package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/config"
)

// Output formats of the pipelines commands: text for people, json and
// yaml for scripts.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", outputText, "output format: text, json or yaml")
}

func checkOutput(output string) error {
	switch output {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output %q: want text, json or yaml", output)
}

// Time layouts for people; json and yaml use RFC 3339 in UTC.
const (
	layoutTime  = "2006-01-02 15:04:05 MST"
	layoutEvent = "2006-01-02 15:04:05.000"
	layoutClock = "15:04:05.000"
)

// lastErrorWidth is how much of an error message the list table shows.
const lastErrorWidth = 60

// view renders API values for people: times in loc, relative ones from
// now. Tests fix both.
type view struct {
	now time.Time
	loc *time.Location
}

func newView() view { return view{now: time.Now(), loc: time.Local} }

// writePipelineTable writes one row per pipeline, then the invalid
// configurations, which are not applied until their file is fixed.
func (v view) writePipelineTable(w io.Writer, pipelines []*conduitv1.Pipeline, invalid []*conduitv1.ConfigError) error {
	if err := v.writeValidTable(w, pipelines); err != nil {
		return err
	}
	if len(invalid) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nCONFIGURATION ERRORS (%d, not applied until fixed; a pipeline above that runs keeps running as it was)\n", len(invalid))
	for _, ce := range invalid {
		id := ce.GetPipelineId()
		if id == "" {
			id = "-"
		}
		if _, err := fmt.Fprintf(w, "%s  %s\n", oneLine(id), oneLine(ce.GetMessage())); err != nil {
			return err
		}
	}
	return nil
}

func (v view) writeValidTable(w io.Writer, pipelines []*conduitv1.Pipeline) error {
	if len(pipelines) == 0 {
		_, err := fmt.Fprintln(w, "no pipelines")
		return err
	}
	// The INSTANCE column is there only in a cluster, so that a
	// standalone conduit's table stays as it was.
	cluster := slices.ContainsFunc(pipelines, func(p *conduitv1.Pipeline) bool { return p.GetInstance() != "" })
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	// row writes cells, with instance after STATUS in a cluster.
	row := func(instance string, cells ...string) {
		if cluster {
			cells = slices.Insert(cells, 2, instance)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("INSTANCE", "ID", "STATUS", "FAILS", "NEXT ATTEMPT", "SOURCE", "LAST ERROR")
	for _, p := range pipelines {
		next := "-"
		switch {
		case p.GetHeldBy() != "":
			next = "held by " + p.GetHeldBy()
		case p.GetNextAttemptAt() != nil:
			next = v.relative(p.GetNextAttemptAt().AsTime())
		}
		last := errorSummary(p.GetLastError(), lastErrorWidth)
		if p.GetStatus() == conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID && len(p.GetConfigErrors()) > 0 {
			// SOURCE says where already.
			ce := p.GetConfigErrors()[0]
			last = truncate(oneLine(strings.TrimPrefix(ce.GetMessage(), ce.GetConfigFile()+": ")), lastErrorWidth)
		}
		row(instanceText(p.GetInstance()),
			oneLine(p.GetId()), pipelineStatus(p), failsText(p), next, oneLine(source(p)), last)
	}
	return tw.Flush()
}

// writeDescription writes everything known about a pipeline and its
// recent events (oldest first).
func (v view) writeDescription(w io.Writer, p *conduitv1.Pipeline, events []*conduitv1.PipelineEvent) error {
	b := &bytes.Buffer{}
	field := func(indent int, key, value string) {
		fmt.Fprintf(b, "%s%-*s %s\n", strings.Repeat(" ", indent), 18-indent, key+":", oneLine(value))
	}

	field(0, "Pipeline", p.GetId())
	if p.GetName() != "" && p.GetName() != p.GetId() {
		field(0, "Name", p.GetName())
	}
	if p.GetDescription() != "" {
		field(0, "Description", p.GetDescription())
	}
	field(0, "Source", source(p))
	field(0, "Status", pipelineStatus(p))
	if p.GetInstance() != "" {
		field(0, "Instance", p.GetInstance())
	}
	if ces := p.GetConfigErrors(); len(ces) > 0 {
		title := "Configuration errors (a newer version of its file is not applied; this version runs on):"
		if p.GetStatus() == conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID {
			title = "Configuration errors (it does not run until they are fixed):"
		}
		fmt.Fprintln(b, title)
		for _, ce := range ces {
			fmt.Fprintf(b, "  %s\n", oneLine(ce.GetMessage()))
		}
	}
	if p.GetDegradedReason() != "" {
		field(0, "Degraded reason", p.GetDegradedReason())
	}
	if p.GetProbation() {
		field(0, "Probation", "yes (restarted, not yet proved healthy)")
	}
	field(0, "Fail count", fmt.Sprint(p.GetFailCount()))
	if p.GetHeldBy() != "" {
		field(0, "Next attempt", "when the breaker of "+p.GetHeldBy()+" closes (its canary gets through)")
	} else {
		field(0, "Next attempt", v.timeAndRelative(p.GetNextAttemptAt()))
	}
	field(0, "Updated", v.timeAndRelative(p.GetUpdatedAt()))
	if n := p.GetDeadLettered(); n > 0 {
		field(0, "Dead-lettered", fmt.Sprintf("%d records by its rules or quarantine since conduit started; the last %s by %s (events of kind dead-lettered)",
			n, v.timeAndRelative(p.GetLastDeadLetteredAt()), oneLine(p.GetLastDeadLetterRule())))
	}

	if e := p.GetLastError(); e != nil {
		fmt.Fprintln(b, "\nLast error:")
		field(2, "Code", codeText(e.GetCode()))
		class := className(e.GetClass())
		switch {
		case e.GetRule() != "":
			class += fmt.Sprintf(" (classified by rule %q)", e.GetRule())
		case e.GetClassifiedBy() != "":
			class += " (classified by " + e.GetClassifiedBy() + ")"
		}
		field(2, "Class", class)
		field(2, "Component", componentText(e))
		if e.GetTime() != nil {
			field(2, "Time", v.timeAndRelative(e.GetTime()))
		}
		field(2, "Message", e.GetMessage())
	}

	if ep := p.GetEpisode(); ep != nil {
		v.writeEpisode(b, ep, field)
	}
	if pol := p.GetPolicy(); pol != nil {
		writePolicy(b, pol, p.GetFlaps(), field)
	}

	fmt.Fprintln(b, "\nRecent events:")
	if len(events) == 0 {
		fmt.Fprintln(b, "  none")
	}
	for _, e := range events {
		fmt.Fprintf(b, "  %s\n", v.eventLine(e))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writePolicy shows the resolved recovery policy, each value with where
// it came from, and the rules in the order they are tried.
func writePolicy(b *bytes.Buffer, pol *conduitv1.RecoveryPolicy, flaps int32, field func(int, string, string)) {
	fmt.Fprintln(b, "\nRecovery policy:")
	src := func(key, value string) string {
		if s := pol.GetSources()[key]; s != "" {
			return fmt.Sprintf("%s (%s)", value, s)
		}
		return value
	}
	limit := func(n int32, none string) string {
		if n < 0 {
			return none
		}
		return fmt.Sprint(n)
	}
	field(2, "Preset", src("preset", pol.GetPreset()))
	field(2, "Strategy", src("strategy", pol.GetStrategy()))
	if len(pol.GetSchedule()) > 0 {
		parts := make([]string, len(pol.GetSchedule()))
		for i, d := range pol.GetSchedule() {
			parts[i] = durationText(d)
		}
		field(2, "Schedule", src("schedule", strings.Join(parts, ", ")))
	}
	field(2, "Min delay", src("min-delay", durationText(pol.GetMinDelay()))+belowFloor(pol.GetMinDelay()))
	field(2, "Max delay", src("max-delay", durationText(pol.GetMaxDelay())))
	field(2, "Backoff factor", src("backoff-factor", fmt.Sprint(pol.GetBackoffFactor())))
	field(2, "Jitter", src("jitter", fmt.Sprint(pol.GetJitter())))
	field(2, "Max retries", src("max-retries", limit(pol.GetMaxRetries(), "unlimited")))
	field(2, "Max duration", src("max-duration", durationOrNone(pol.GetMaxDuration())))
	field(2, "Probation", src("probation", durationText(pol.GetProbation())))
	field(2, "Healthy window", src("max-retries-window", durationText(pol.GetMaxRetriesWindow())))
	field(2, "Max flaps", src("max-flaps", limit(pol.GetMaxFlaps(), "never degrade"))+fmt.Sprintf(", now %d in a row", flaps))
	field(2, "Flap window", src("flap-window", durationText(pol.GetFlapWindow())))
	field(2, "Quarantine", src("quarantine-after", limit(pol.GetQuarantineAfter(), "off")))
	if len(pol.GetRules()) == 0 {
		return
	}
	fmt.Fprintln(b, "  Rules, in the order they are tried:")
	for _, r := range pol.GetRules() {
		scope := "pipeline"
		if r.GetGlobal() {
			scope = "global"
		}
		fmt.Fprintf(b, "    %s  priority %d, %s, %s at %s\n", r.GetName(), r.GetPriority(), r.GetAction(), scope, r.GetDefinedAt())
		fmt.Fprintf(b, "      match: %s\n", matchText(r))
		if rp := r.GetPolicy(); rp != nil {
			fmt.Fprintf(b, "      then:  %s\n", rulePolicyText(rp))
		}
	}
}

func durationOrNone(d *durationpb.Duration) string {
	if d == nil {
		return "no limit"
	}
	return durationText(d)
}

func matchText(r *conduitv1.RecoveryRule) string {
	var parts []string
	add := func(key string, values []string) {
		if len(values) > 0 {
			parts = append(parts, key+" "+strings.Join(values, ","))
		}
	}
	add("codes", r.GetCodes())
	if r.GetClass() != "" {
		parts = append(parts, "class "+r.GetClass())
	}
	if r.GetMessage() != "" {
		parts = append(parts, fmt.Sprintf("message %q", r.GetMessage()))
	}
	add("pipelines", r.GetPipelines())
	add("components", r.GetComponents())
	add("plugins", r.GetPlugins())
	return strings.Join(parts, "; ")
}

func rulePolicyText(p *conduitv1.RecoveryPolicy) string {
	s := "strategy " + p.GetStrategy()
	if p.GetStrategy() == "schedule" {
		parts := make([]string, len(p.GetSchedule()))
		for i, d := range p.GetSchedule() {
			parts[i] = durationText(d)
		}
		s += " [" + strings.Join(parts, ", ") + "]"
	} else {
		s += fmt.Sprintf(", %s x%v up to %s", durationText(p.GetMinDelay()), p.GetBackoffFactor(), durationText(p.GetMaxDelay()))
	}
	if p.GetMaxRetries() >= 0 {
		s += fmt.Sprintf(", max-retries %d", p.GetMaxRetries())
	}
	return s
}

func (v view) writeEpisode(b *bytes.Buffer, ep *conduitv1.RecoveryEpisode, field func(int, string, string)) {
	fmt.Fprintln(b, "\nRecovery episode:")
	field(2, "Started", v.timeText(ep.GetStartedAt()))
	if ep.GetEndedAt() != nil {
		field(2, "Ended", v.timeText(ep.GetEndedAt()))
	} else {
		field(2, "Ended", "not yet")
	}
	if ep.GetOutcome() != "" {
		field(2, "Outcome", ep.GetOutcome())
	}
	field(2, "Total time", durationText(ep.GetDuration()))
	attempts := fmt.Sprint(len(ep.GetAttempts()))
	if n := ep.GetDroppedAttempts(); n > 0 {
		attempts = fmt.Sprintf("%d (%d shown: the first and the latest)", int(n)+len(ep.GetAttempts()), len(ep.GetAttempts()))
	}
	field(2, "Attempts", attempts)
	if len(ep.GetAttempts()) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "    #\tFAILED AT\tCODE\tCLASS\tDELAY\tMESSAGE")
	for i, a := range ep.GetAttempts() {
		if i > 0 && a.GetNumber() > ep.GetAttempts()[i-1].GetNumber()+1 {
			fmt.Fprintf(tw, "    ...\t\t\t\t\t(%d attempts left out)\n", a.GetNumber()-ep.GetAttempts()[i-1].GetNumber()-1)
		}
		e := a.GetError()
		fmt.Fprintf(tw, "    %d\t%s\t%s\t%s\t%s\t%s\n", a.GetNumber(), v.eventTime(a.GetFailedAt()),
			codeText(e.GetCode()), className(e.GetClass()), durationText(a.GetDelay()), oneLine(e.GetMessage()))
	}
	_ = tw.Flush() // writes to a bytes.Buffer
}

// eventLine is one event on one line: time, sequence, kind, status
// change, then what the kind carries and the error or the message.
func (v view) eventLine(e *conduitv1.PipelineEvent) string {
	var details []string
	if e.GetAttempt() > 0 {
		details = append(details, fmt.Sprintf("attempt %d", e.GetAttempt()))
	}
	if e.GetDelay() != nil {
		delay := "delay " + durationText(e.GetDelay())
		if e.GetStrategy() != "" && e.GetStrategy() != "exponential" {
			delay += " (" + e.GetStrategy() + ")"
		}
		details = append(details, delay)
	}
	if rule := e.GetError().GetRule(); rule != "" {
		details = append(details, fmt.Sprintf("rule %q", rule))
	}
	if e.GetNextAttemptAt() != nil {
		next, at := e.GetNextAttemptAt().AsTime().In(v.loc), e.GetTime().AsTime().In(v.loc)
		layout := layoutClock
		if next.Format(time.DateOnly) != at.Format(time.DateOnly) {
			// Another day: the clock alone would say the wrong thing.
			layout = layoutEvent
		}
		details = append(details, "next attempt "+next.Format(layout))
	}
	if e.GetReason() != "" {
		details = append(details, "reason "+e.GetReason())
	}
	if e.GetCount() > 0 {
		details = append(details, count(int(e.GetCount()), "record"))
	}
	if e.GetActor() == "user" {
		details = append(details, "by user")
	}

	line := fmt.Sprintf("%s  #%-5d %-13s  %-24s", v.eventTime(e.GetTime()), e.GetSequence(), oneLine(e.GetKind()), transition(e))
	if len(details) > 0 {
		line += "  " + strings.Join(details, ", ")
	}
	if err := e.GetError(); err != nil {
		line += "  " + errorSummary(err, 0)
	} else if e.GetMessage() != "" {
		line += "  " + oneLine(e.GetMessage())
	}
	return strings.TrimRight(line, " ")
}

func transition(e *conduitv1.PipelineEvent) string {
	before, after := e.GetStatusBefore(), e.GetStatusAfter()
	unset := conduitv1.PipelineStatus_PIPELINE_STATUS_UNSPECIFIED
	switch {
	case before == unset && after == unset:
		return ""
	case before == unset:
		return "-> " + statusName(after)
	}
	return statusName(before) + " -> " + statusName(after)
}

func (v view) eventTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().In(v.loc).Format(layoutEvent)
}

func (v view) timeText(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().In(v.loc).Format(layoutTime)
}

// timeAndRelative is e.g. "2024-05-01 12:00:04 CEST (in 4s)".
func (v view) timeAndRelative(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", v.timeText(t), v.relative(t.AsTime()))
}

// relative is "in 4s", "3m12s ago" or "now".
func (v view) relative(t time.Time) string {
	d := t.Sub(v.now)
	switch {
	case d > -time.Second/2 && d < time.Second/2:
		return "now"
	case d > 0:
		return "in " + roughDuration(d)
	default:
		return roughDuration(-d) + " ago"
	}
}

// roughDuration is a duration to the second, or the biggest two units
// beyond an hour.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		d = d.Round(time.Hour)
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// durationText shows a delay precisely enough to see the backoff.
func durationText(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	dd := d.AsDuration()
	if dd >= time.Minute {
		return dd.Round(time.Second).String()
	}
	return dd.Round(time.Millisecond).String()
}

// source says where a pipeline is defined: file:line, or api.
func source(p *conduitv1.Pipeline) string {
	if p.GetOrigin() == "api" || p.GetConfigFile() == "" {
		return "api"
	}
	return p.GetConfigFile()
}

// instanceText is the instance that runs a pipeline in a cluster table;
// "-" when none holds it.
func instanceText(id string) string {
	if id == "" {
		return "-"
	}
	return oneLine(id)
}

// pipelineStatus is p's status as people say it, with the sub-state of a
// pipeline whose last run is still ending: "stopping" (a stop drains it),
// "stopping (forced)" (a force stop cancelled it).
func pipelineStatus(p *conduitv1.Pipeline) string {
	if !p.GetStopping() {
		return statusName(p.GetStatus())
	}
	if p.GetStatus() == conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED {
		return "stopping (forced)"
	}
	return "stopping"
}

// statusName is the status as people and the config files say it.
func statusName(s conduitv1.PipelineStatus) string {
	switch s {
	case conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING:
		return "running"
	case conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING:
		return "recovering"
	case conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED:
		return "degraded"
	case conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED:
		return "stopped"
	case conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID:
		return "invalid"
	case conduitv1.PipelineStatus_PIPELINE_STATUS_UNSPECIFIED:
		return "unknown"
	}
	return s.String()
}

// statusNames maps the names of statusName back, for --status.
var statusNames = map[string]conduitv1.PipelineStatus{
	"running":    conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING,
	"recovering": conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING,
	"degraded":   conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED,
	"stopped":    conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED,
	"invalid":    conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID,
}

func className(c conduitv1.ErrorClass) string {
	switch c {
	case conduitv1.ErrorClass_ERROR_CLASS_TRANSIENT:
		return "transient"
	case conduitv1.ErrorClass_ERROR_CLASS_FATAL:
		return "fatal"
	case conduitv1.ErrorClass_ERROR_CLASS_UNSPECIFIED:
		return "unclassified"
	}
	return c.String()
}

func codeText(code int32) string {
	if code == 0 {
		return "-"
	}
	return fmt.Sprint(code)
}

func componentText(e *conduitv1.PipelineError) string {
	switch {
	case e.GetComponent() == "":
		return "the pipeline itself"
	case e.GetComponentKind() == "":
		return e.GetComponent()
	}
	return fmt.Sprintf("%s (%s)", e.GetComponent(), e.GetComponentKind())
}

// errorSummary is "422/fatal: message", the message cut to width runes
// (0: not cut); "-" for no error.
func errorSummary(e *conduitv1.PipelineError, width int) string {
	if e == nil {
		return "-"
	}
	head := className(e.GetClass())
	if e.GetCode() != 0 {
		head = fmt.Sprintf("%d/%s", e.GetCode(), head)
	}
	return head + ": " + truncate(oneLine(e.GetMessage()), width)
}

// truncate cuts s to width runes, with "..." (0: not cut).
func truncate(s string, width int) string {
	if r := []rune(s); width > 0 && len(r) > width {
		return string(r[:width-3]) + "..."
	}
	return s
}

// failsText is the FAILS column: the transient failures of the current
// episode; for a degraded pipeline, the failures that degraded it - the
// episodes in a row of one that flapped, or the one fatal error (or
// dead-letter queue overflow) that ended it at once - rather than a 0 that
// reads as "nothing failed". The console's Fails column says the same.
func failsText(p *conduitv1.Pipeline) string {
	n := p.GetFailCount()
	switch {
	case n > 0 || p.GetStatus() != conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED:
		return fmt.Sprint(n)
	case p.GetDegradedReason() == "flapping" && p.GetFlaps() > 0:
		return fmt.Sprintf("%d flaps", p.GetFlaps())
	case p.GetLastError().GetCode() != 0 || p.GetLastError().GetMessage() != "":
		return "1"
	}
	return "0"
}

// oneLine keeps a value from breaking a table row or line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// protoJSON is the API's JSON shape (what curl gets: default values left
// out) with the proto field names.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true}

// compactJSON is m on one line.
func compactJSON(m proto.Message) (json.RawMessage, error) {
	raw, err := protoJSON.Marshal(m)
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

// describeOutput is what `describe -o json|yaml` prints.
type describeOutput struct {
	Pipeline json.RawMessage   `json:"pipeline"`
	Events   []json.RawMessage `json:"events"`
}

func newDescribeOutput(p *conduitv1.Pipeline, events []*conduitv1.PipelineEvent) (describeOutput, error) {
	out := describeOutput{Events: make([]json.RawMessage, 0, len(events))}
	var err error
	if out.Pipeline, err = compactJSON(p); err != nil {
		return out, err
	}
	for _, e := range events {
		raw, err := compactJSON(e)
		if err != nil {
			return out, err
		}
		out.Events = append(out.Events, raw)
	}
	return out, nil
}

// writeStructured writes v (a proto message or a value of JSON raw
// messages) as indented JSON or as YAML with the same fields in the same
// order.
func writeStructured(w io.Writer, output string, v any) error {
	var raw []byte
	var err error
	if m, ok := v.(proto.Message); ok {
		raw, err = compactJSON(m)
	} else {
		raw, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	if output == outputYAML {
		y, err := jsonToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = w.Write(escapeJSONControls(b.Bytes()))
	return err
}

// jsonToYAML converts a JSON document to block-style YAML, keeping the key
// order. JSON is YAML, so yaml.v3 parses it; clearing the flow and quote
// styles makes the encoder choose (and quote strings such as "12" that
// would read as another type). A string holding a terminal control is
// double-quoted: yaml.v3 escapes C0, DEL and C1 controls there itself but
// writes the bidirectional controls as they are, so those are escaped
// after encoding - only in double-quoted strings, where \u means the
// same character.
func jsonToYAML(raw []byte) ([]byte, error) {
	var doc yaml.Node
	// yaml.v3 refuses to read DEL and C1 controls, even in a JSON string;
	// escaped, they read back as themselves.
	if err := yaml.Unmarshal(escapeJSONControls(raw), &doc); err != nil {
		return nil, err
	}
	var plain func(n *yaml.Node)
	plain = func(n *yaml.Node) {
		n.Style = 0
		if n.Kind == yaml.ScalarNode && holdsTerminalControl(n.Value) {
			n.Style = yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			plain(c)
		}
	}
	plain(&doc)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return escapeJSONControls(b.Bytes()), nil
}

// inertYAML is YAML text as written (a recovery rule's), printed as it is
// unless it holds a terminal control: YAML reads the bidirectional
// controls raw anywhere (it refuses the others), so then the text is
// re-encoded with those strings double-quoted and the controls escaped, as
// jsonToYAML does; comments and the other scalars' styles are kept. Text
// that is not YAML is escaped as human output.
func inertYAML(text string) string {
	if !holdsTerminalControl(text) {
		return text
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return string(escapeControls([]byte(text)))
	}
	var quote func(n *yaml.Node)
	quote = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && holdsTerminalControl(n.Value) {
			n.Style = yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			quote(c)
		}
	}
	quote(&doc)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return string(escapeControls([]byte(text)))
	}
	if err := enc.Close(); err != nil {
		return string(escapeControls([]byte(text)))
	}
	return string(escapeJSONControls(b.Bytes()))
}

// count is n with its noun, singular for one: "1 record", "3 records".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// belowFloor notes a delay below the restart delay floor, which restarts
// wait instead.
func belowFloor(d *durationpb.Duration) string {
	if d == nil || d.AsDuration() >= config.RestartDelayFloor {
		return ""
	}
	return fmt.Sprintf(", below the restart delay floor: restarts wait at least %s", config.RestartDelayFloor)
}
