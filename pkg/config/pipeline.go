package config

import (
	"errors"
	"fmt"
	"strings"
)

// Pipeline statuses a pipeline file may ask for at startup.
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
)

// Connector types.
const (
	TypeSource      = "source"
	TypeDestination = "destination"
)

// Defaults of the dead-letter queue, as in Conduit: log the record and, with
// a window of 1 and a threshold of 0, stop at the first nack.
const (
	DefaultDLQPlugin              = "builtin:log"
	DefaultDLQWindowSize          = 1
	DefaultDLQWindowNackThreshold = 0
)

// DefaultDLQSettings returns the settings of the default DLQ plugin (a new
// map each time, so callers may change it).
func DefaultDLQSettings() map[string]string {
	return map[string]string{"level": "warn", "message": "record delivery failed"}
}

// Pipeline is one pipeline from a pipeline file, structurally valid and with
// defaults filled in (status, name, workers, DLQ).
type Pipeline struct {
	ID string
	// Status is StatusRunning or StatusStopped: what the pipeline should be
	// at startup.
	Status      string
	Name        string // defaults to ID
	Description string
	// Connectors in file order; at least one has Type == TypeSource and at
	// least one has TypeDestination.
	Connectors []Connector
	// Processors run on every record between the source and the
	// destinations, in order.
	Processors []Processor
	DLQ        DLQ
	// ErrorRecovery overrides the global restart policy for this pipeline;
	// see ResolveErrorRecovery.
	ErrorRecovery ErrorRecoveryOverride
	// Notifications narrows which notification targets of conduit.yml hear
	// of this pipeline, and of which events; zero: every target whose own
	// filters take it.
	Notifications PipelineNotifications
	// File and Line locate the pipeline (its `- id:` entry).
	File string
	Line int
	// Definition is the pipeline as a pipeline file of its own, as
	// written (comments kept, aliases written out), with the values of
	// credentials masked; empty when it is too large to show. It is not
	// part of what the pipeline runs.
	Definition string `json:"-"`
	// Warnings are what in the pipeline's entry was probably not meant
	// (an environment variable that is not set); it runs nonetheless.
	// Not part of what the pipeline runs.
	Warnings []Warning `json:"-"`

	// lines maps field paths ("connectors[src].settings.rate") to the line
	// of their key, for FieldError.
	lines map[string]int
	// expanded are the values that name environment variables, which
	// FieldError shows as written.
	expanded []expandedValue
}

// Connector is a source or destination of a pipeline.
type Connector struct {
	ID     string
	Type   string // TypeSource or TypeDestination
	Plugin string // e.g. "builtin:generator"; existence is checked by the caller
	Name   string // defaults to ID
	// Dependency names the external system the connector depends on (a
	// database many pipelines write to): pipelines failing on the same
	// dependency share its breaker.
	Dependency string
	// Settings are the plugin's settings as text: values exactly as written
	// in YAML (10, 1.50, true), nested maps flattened with dots
	// (format: {type: raw} is format.type).
	Settings map[string]string
	// Processors run only on this connector's records.
	Processors []Processor
	// Path names the connector in errors, e.g. "connectors[src]".
	Path string
	// Line is the line of the connector's entry; SettingLines holds the line
	// of each setting.
	Line         int
	SettingLines map[string]int
}

// Processor is a processor of a pipeline or of a connector.
type Processor struct {
	ID     string
	Plugin string // the processor plugin, e.g. "field.set"
	// Condition is a Go template; records for which it is false skip the
	// processor (Conduit semantics, evaluated by the engine).
	Condition string
	// Workers is the number of parallel workers, at least 1 (default 1).
	Workers  int
	Settings map[string]string
	// Path names the processor in errors, e.g. "processors[p1]" or
	// "connectors[src].processors[p1]".
	Path         string
	Line         int
	SettingLines map[string]int
}

// DLQ is a pipeline's dead-letter queue, where nacked records go.
type DLQ struct {
	Plugin   string
	Settings map[string]string
	// WindowSize is how many recent records are watched for nacks (0: no
	// window, every nacked record goes to the DLQ without limit).
	WindowSize int
	// WindowNackThreshold is how many nacks the window tolerates; one more
	// stops the pipeline. Less than WindowSize when WindowSize > 0.
	WindowNackThreshold int
	// Line is the line of the dead-letter-queue block, or of the pipeline
	// when the block is absent.
	Line         int
	SettingLines map[string]int
}

// Source returns the pipeline's first source connector (LoadPipelines
// guarantees there is one; the zero Connector is returned otherwise).
func (p Pipeline) Source() Connector {
	for _, c := range p.Connectors {
		if c.Type == TypeSource {
			return c
		}
	}
	return Connector{}
}

// Sources returns the pipeline's source connectors in file order: each
// keeps its own position, and its records go to every destination.
func (p Pipeline) Sources() []Connector {
	var out []Connector
	for _, c := range p.Connectors {
		if c.Type == TypeSource {
			out = append(out, c)
		}
	}
	return out
}

// Destinations returns the pipeline's destination connectors in file order.
func (p Pipeline) Destinations() []Connector {
	var out []Connector
	for _, c := range p.Connectors {
		if c.Type == TypeDestination {
			out = append(out, c)
		}
	}
	return out
}

// FieldError returns a *PipelineError for field (a path relative to the
// pipeline, e.g. "connectors[src].plugin" or
// "connectors[src].settings.rate"), located at the field's line. When the
// field itself was not written in the file (a missing required setting),
// the line of the closest written parent is used (the settings block, the
// connector, finally the pipeline).
//
// Values the file takes from environment variables are shown as written
// (${PG_PASSWORD}), not as expanded.
func (p Pipeline) FieldError(field string, err error) *PipelineError {
	return &PipelineError{File: p.File, Line: p.lineOf(field), PipelineID: p.ID, Field: field, Err: redactExpanded(err, field, p.expanded)}
}

// ConnectorError is FieldError for a field of Connectors[i], e.g.
// ConnectorError(0, "plugin", err). An empty field points at the connector.
func (p Pipeline) ConnectorError(i int, field string, err error) *PipelineError {
	return p.FieldError(joinField(p.Connectors[i].Path, field), err)
}

// SettingError is FieldError for setting of Connectors[i], e.g.
// SettingError(0, "rate", err) ->
// `pipelines/a.yml:9: pipeline "p": connectors[src].settings.rate: ...`.
func (p Pipeline) SettingError(connectorIndex int, setting string, err error) *PipelineError {
	return p.ConnectorError(connectorIndex, "settings."+setting, err)
}

// ProcessorError is FieldError for a field of a processor of this pipeline
// (pipeline-level or connector-level), e.g. ProcessorError(pr, "plugin",
// err) or ProcessorError(pr, "settings.field", err).
func (p Pipeline) ProcessorError(pr Processor, field string, err error) *PipelineError {
	return p.FieldError(joinField(pr.Path, field), err)
}

// ResolveErrorRecovery resolves the pipeline's error-recovery override
// against the global policy (see ErrorRecoveryOverride.Resolve); a failure
// is a *PipelineError at the line of the pipeline's offending field.
func (p Pipeline) ResolveErrorRecovery(global ErrorRecovery) (ErrorRecovery, error) {
	r, err := p.ErrorRecovery.Resolve(global)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return ErrorRecovery{}, p.FieldError("error-recovery."+fe.Field, fe.Err)
		}
		return ErrorRecovery{}, p.FieldError("error-recovery", err)
	}
	// A rule's keys apply over the pipeline's policy, so a rule that is
	// fine on its own can clash with it. The global rules are checked
	// where they are compiled, once per distinct policy (lifecycle).
	for i, rule := range r.Rules {
		if _, err := r.ForRule(rule); err != nil {
			var fe *FieldError
			field := ""
			if errors.As(err, &fe) {
				field, err = fe.Field, fe.Err
			}
			return ErrorRecovery{}, &PipelineError{File: rule.File, Line: rule.Line, PipelineID: p.ID,
				Field: joinField(fmt.Sprintf("error-recovery.rules[%d]", i), field), Err: err}
		}
	}
	return r, nil
}

func joinField(parent, field string) string {
	switch {
	case parent == "":
		return field
	case field == "":
		return parent
	}
	return parent + "." + field
}

// lineOf finds the line of field, or of its closest recorded parent.
func (p Pipeline) lineOf(field string) int {
	for f := field; f != ""; f = parentField(f) {
		if l, ok := p.lines[f]; ok {
			return l
		}
	}
	return p.Line
}

// parentField strips the last segment of a field path; a segment ends at a
// "." or starts at a "[" (connectors[src].settings.a.b -> ...settings.a).
func parentField(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}
