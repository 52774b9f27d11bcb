package config

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
)

// Version 1 of the pipeline file format (Conduit's 1.0 and 1.1) keys
// pipelines, connectors and processors by id in maps where version 2 lists
// them with an id field:
//
//	version: "1.1"              version: "2.2"
//	pipelines:                  pipelines:
//	  p1:                         - id: p1
//	    connectors:                   connectors:
//	      src:                          - id: src
//	        type: source                  type: source
//	    processors:                   processors:
//	      p:                            - id: p
//	        type: field.set               plugin: field.set
//
// A version 1 file is read by turning its maps into those lists, in file
// order, and reading the result as version 2: the same fields, checks and
// errors (at the lines of the file), and the pipeline's Definition is
// shown in version 2. Processors run in the order they are written (under
// Conduit, the order of version 1 processors is not defined).

// v1VersionRE accepts the versions Conduit reads as version 1: 1, 1.0, 1.1
// and later 1.x minors (Conduit reads those as 1.1, with a warning).
var v1VersionRE = regexp.MustCompile(`^1(\.[0-9]+)?$`)

// v1Pipelines turns the pipelines map of a version 1 file into the list of
// version 2. The id fields it adds are marked as expanded already in env:
// ids are map keys in the file, and keys are never expanded.
func v1Pipelines(file string, pipelines *yaml.Node, env *envExpander) (*yaml.Node, *PipelineError) {
	if pipelines.Kind != yaml.MappingNode {
		return nil, &PipelineError{File: file, Line: pipelines.Line, Field: "pipelines",
			Err: fmt.Errorf("expected a map of pipelines by id (version 1 files; version 2 lists them: - id: ...), got %s", describe(pipelines))}
	}
	return v1List(pipelines, env), nil
}

// v1List turns a map of entries by id into a list of entries with an id.
func v1List(m *yaml.Node, env *envExpander) *yaml.Node {
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: m.Line, Column: m.Column}
	for _, kv := range pairs(m) {
		list.Content = append(list.Content, v1Entry(kv.key, kv.value, env))
	}
	return list
}

// v1Entry turns `key: {fields}` into `{id: key, fields}`, and the
// connectors and processors maps among the fields into lists. A value
// that is not a map is left for the version 2 reader to report.
func v1Entry(key, value *yaml.Node, env *envExpander) *yaml.Node {
	if value.Kind != yaml.MappingNode || key.Kind != yaml.ScalarNode {
		return value
	}
	id := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key.Value, Line: key.Line, Column: key.Column}
	env.written[id] = id.Value
	entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: key.Line, Column: key.Column,
		HeadComment: key.HeadComment,
		Content: append([]*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "id", Line: key.Line, Column: key.Column}, id,
		}, value.Content...)}
	for i := 2; i+1 < len(entry.Content); i += 2 {
		k, v := unalias(entry.Content[i]), unalias(entry.Content[i+1])
		if k.Kind == yaml.ScalarNode && (k.Value == "connectors" || k.Value == "processors") && v.Kind == yaml.MappingNode {
			entry.Content[i+1] = v1List(v, env)
		}
	}
	return entry
}
