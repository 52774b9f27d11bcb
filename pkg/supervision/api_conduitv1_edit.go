package supervision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/catalog"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

var _ api.PipelineEditor = conduitV1{}

// EditPipeline implements api.PipelineEditor: the file the pipeline was
// applied with is changed and applied again, as a user would with
// `conduit pipelines apply`.
func (a conduitV1) EditPipeline(ctx context.Context, id string, e api.PipelineEdit) error {
	ps := a.ps
	stored, files, err := ps.loadAPIPipelines(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(stored, func(sp catalog.Pipeline) bool { return sp.ID == id })
	if i < 0 {
		if m := ps.get(id); m != nil {
			return &api.DefinedInFileError{ID: id, File: m.origin.Load().String()}
		}
		return api.ErrPipelineNotFound
	}
	sp := stored[i]
	data := files[sp.FileHash]
	if data == nil {
		return fmt.Errorf("the file pipeline %s was applied with (%s) is not kept: %w", id, apiFileName(sp.Name), api.ErrNotEditable)
	}
	changed, err := editPipelineFile(data, id, e)
	if err != nil {
		return err
	}
	plan, err := apiChanges{ps}.Apply(ctx, []config.FileContent{{Name: sp.Name, Data: changed}}, false, false)
	if err != nil {
		return err
	}
	var problems []string
	for _, p := range plan.Problems {
		problems = append(problems, p.Error())
	}
	for _, c := range plan.Changes {
		if c.Action == reconciler.Invalid {
			for _, p := range c.Problems {
				problems = append(problems, p.Error())
			}
		}
	}
	if len(problems) > 0 {
		return &api.EditError{Err: errors.New(strings.Join(problems, "; "))}
	}
	return nil
}

// editPipelineFile makes e to the pipeline id of a version 2 pipeline
// file and returns the file. Comments and the other pipelines stay as
// they are.
func editPipelineFile(data []byte, id string, e api.PipelineEdit) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the applied file no longer parses: %w", api.ErrNotEditable)
	}
	root := doc.Content[0]
	if v := mapValue(root, "version"); v == nil || !strings.HasPrefix(v.Value, "2") {
		return nil, fmt.Errorf("its file is not a version 2 pipeline file; apply a changed file instead: %w", api.ErrNotEditable)
	}
	entry := seqEntry(mapValue(root, "pipelines"), id)
	if entry == nil {
		return nil, fmt.Errorf("pipeline %s is not in the file it was applied with: %w", id, api.ErrNotEditable)
	}
	if err := applyEdit(entry, e); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), enc.Close()
}

func applyEdit(entry *yaml.Node, e api.PipelineEdit) error {
	switch e.Op {
	case api.EditUpdatePipeline:
		if e.Name != "" {
			setScalar(entry, "name", e.Name)
		}
		setScalar(entry, "description", e.Description)
		return nil
	case api.EditCreateConnector:
		connectors := ensureSeq(entry, "connectors")
		if seqEntry(connectors, e.Connector) != nil {
			return &api.EditError{Err: fmt.Errorf("the pipeline already has a connector %q", e.Connector)}
		}
		c := &yaml.Node{Kind: yaml.MappingNode}
		setScalar(c, "id", e.Connector)
		setScalar(c, "type", map[bool]string{true: config.TypeSource, false: config.TypeDestination}[e.Source])
		setScalar(c, "plugin", e.Plugin)
		if e.Name != "" && e.Name != e.Connector {
			setScalar(c, "name", e.Name)
		}
		setSettings(c, nil, e.Settings)
		connectors.Content = append(connectors.Content, c)
		return nil
	}
	parent := entry
	if e.Connector != "" {
		parent = seqEntry(mapValue(entry, "connectors"), e.Connector)
		if parent == nil {
			return &api.EditError{Err: fmt.Errorf("the pipeline has no connector %q", e.Connector)}
		}
	}
	switch e.Op {
	case api.EditUpdateConnector:
		if e.Plugin != "" {
			setScalar(parent, "plugin", e.Plugin)
		}
		if e.Name != "" {
			setScalar(parent, "name", e.Name)
		}
		setSettings(parent, mapValue(parent, "settings"), e.Settings)
	case api.EditDeleteConnector:
		removeEntry(mapValue(entry, "connectors"), e.Connector)
	case api.EditCreateProcessor:
		procs := ensureSeq(parent, "processors")
		p := &yaml.Node{Kind: yaml.MappingNode}
		setScalar(p, "id", e.Processor)
		setScalar(p, "plugin", e.Plugin)
		if e.Condition != "" {
			setScalar(p, "condition", e.Condition)
		}
		if e.Workers > 1 {
			setScalar(p, "workers", strconv.Itoa(e.Workers))
		}
		setSettings(p, nil, e.Settings)
		procs.Content = append(procs.Content, p)
	case api.EditUpdateProcessor:
		p := seqEntry(mapValue(parent, "processors"), e.Processor)
		if p == nil {
			return &api.EditError{Err: fmt.Errorf("no processor %q", e.Processor)}
		}
		if e.Plugin != "" {
			setScalar(p, "plugin", e.Plugin)
		}
		if e.Workers > 0 {
			setScalar(p, "workers", strconv.Itoa(e.Workers))
		}
		setSettings(p, mapValue(p, "settings"), e.Settings)
	case api.EditDeleteProcessor:
		removeEntry(mapValue(parent, "processors"), e.Processor)
	default:
		return fmt.Errorf("unknown change %d", e.Op)
	}
	return nil
}

// mapValue is the value of key in the mapping m, nil when absent.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func setValue(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
}

// setScalar sets key to the string value, quoted so that it stays text.
func setScalar(m *yaml.Node, key, value string) {
	setValue(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

func ensureSeq(m *yaml.Node, key string) *yaml.Node {
	if s := mapValue(m, key); s != nil && s.Kind == yaml.SequenceNode {
		return s
	}
	s := &yaml.Node{Kind: yaml.SequenceNode}
	setValue(m, key, s)
	return s
}

// seqEntry is the mapping with the given id in the sequence s.
func seqEntry(s *yaml.Node, id string) *yaml.Node {
	if s == nil || s.Kind != yaml.SequenceNode {
		return nil
	}
	for _, e := range s.Content {
		if v := mapValue(e, "id"); v != nil && v.Value == id {
			return e
		}
	}
	return nil
}

func removeEntry(s *yaml.Node, id string) {
	if s == nil {
		return
	}
	s.Content = slices.DeleteFunc(s.Content, func(e *yaml.Node) bool {
		v := mapValue(e, "id")
		return v != nil && v.Value == id
	})
}

// setSettings replaces the settings of m with settings, as Conduit's
// update replaces a connector's configuration. A value sent back as the
// API shows it, with its credential masked, keeps the value the file has.
func setSettings(m, old *yaml.Node, settings map[string]string) {
	kept := map[string]*yaml.Node{}
	if old != nil && old.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(old.Content); i += 2 {
			kept[old.Content[i].Value] = old.Content[i+1]
		}
	}
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: settings[k]}
		if old := kept[k]; old != nil && old.Kind == yaml.ScalarNode && old.Value != settings[k] &&
			config.MaskSetting(k, old.Value) == settings[k] {
			v = old // sent back as the API showed it, masked
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	if len(n.Content) == 0 && old == nil {
		return
	}
	setValue(m, "settings", n)
}
