package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// LoadPipelines reads every *.yml and *.yaml file under dir (recursively,
// in path order; dir may also be a single file) and returns the valid
// pipelines plus one *PipelineError per problem:
//
//   - a file that cannot be read or is not valid YAML: one error, its
//     pipelines are skipped, other files still load;
//   - a document with a bad or missing version, or unknown top-level
//     fields: one error, its pipelines are skipped;
//   - an invalid pipeline: one error per problem in it (each field that is
//     wrong, each connector and processor), the pipeline is left out and
//     the valid ones are still returned, so one broken pipeline does not
//     stop the others;
//   - a pipeline id used before (in this or an earlier file): one error
//     naming both places (a *DuplicateIDError carrying the entry set
//     aside when it is valid); the first definition wins, even when the
//     first one is itself invalid, so fixing it later cannot silently swap
//     which pipeline runs. The reconciler overrides this order for a
//     pipeline that runs: the definition it runs from wins.
//
// A missing dir is one error. Directories and files whose names start with
// "." are skipped (editor and VCS files, Kubernetes ConfigMap "..data"
// links that would load every file twice).
//
// Environment variables in values are expanded as Conduit expands them
// (see expandEnv); a variable that is not set is a warning in the
// pipeline's Warnings.
func LoadPipelines(dir string) ([]Pipeline, []error) {
	return loadPipelines(dir, osLookupEnv)
}

func loadPipelines(dir string, lookup LookupEnv) ([]Pipeline, []error) {
	files, errs := pipelineFiles(dir)
	var (
		valid []Pipeline
		ids   = pipelineIDs{lookup: lookup, first: map[string]string{}}
	)
	for _, file := range files {
		data, err := readYAMLFile(file)
		if err != nil {
			errs = append(errs, &PipelineError{File: file, Err: err})
			continue
		}
		v, e := ids.parse(file, data)
		valid, errs = append(valid, v...), append(errs, e...)
	}
	return valid, errs
}

// FileContent is the content of a pipeline file that was not read from
// pipelines.path (sent through the API); Name stands for it in errors.
type FileContent struct {
	Name string
	Data []byte
}

// ParsePipelines reads the pipelines of files as LoadPipelines reads the
// files of a directory, ids unique across them. Content larger than a
// pipeline file may be is refused. Environment variables are those of
// this process.
func ParsePipelines(files ...FileContent) (valid []Pipeline, errs []error) {
	return parsePipelines(osLookupEnv, files...)
}

func parsePipelines(lookup LookupEnv, files ...FileContent) (valid []Pipeline, errs []error) {
	ids := pipelineIDs{lookup: lookup, first: map[string]string{}}
	for _, f := range files {
		if len(f.Data) > maxFileBytes {
			errs = append(errs, &PipelineError{File: f.Name, Err: fileTooLarge(int64(len(f.Data)))})
			continue
		}
		v, e := ids.parse(f.Name, f.Data)
		valid, errs = append(valid, v...), append(errs, e...)
	}
	return valid, errs
}

// pipelineIDs maps each pipeline id to the "file:line" of its first
// definition, across the files read together, whose environment
// variables lookup finds.
type pipelineIDs struct {
	lookup LookupEnv
	first  map[string]string
}

func (ids pipelineIDs) parse(file string, data []byte) (valid []Pipeline, errs []error) {
	first := ids.first
	for _, r := range parsePipelineFile(file, data, ids.lookup) {
		id := r.p.ID
		prev, dup := first[id]
		if id != "" && !dup {
			first[id] = fmt.Sprintf("%s:%d", r.p.File, r.p.Line)
		}
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
			for _, e := range r.more {
				errs = append(errs, e)
			}
		case dup:
			errs = append(errs, r.p.FieldError("id", &DuplicateIDError{First: prev, Pipeline: r.p}))
		default:
			valid = append(valid, r.p)
		}
	}
	return valid, errs
}

// DuplicateIDError is a valid pipeline entry whose id an earlier entry (in
// path order) already defined; LoadPipelines leaves it out. Pipeline is
// the entry that was set aside, so a caller that knows which definition a
// running pipeline comes from can keep that one instead (the reconciler:
// the definition that runs wins over a newcomer).
type DuplicateIDError struct {
	// First is the "file:line" of the definition that is used.
	First    string
	Pipeline Pipeline
}

// Error implements error.
func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("duplicate pipeline id, already defined at %s (that definition is used)", e.First)
}

// maxDependencyName bounds a connector's dependency name.
const maxDependencyName = 200

// notExistError is a missing pipelines directory; errors.Is(err,
// fs.ErrNotExist) works without repeating the OS text in the message.
type notExistError struct{ msg string }

func (e *notExistError) Error() string        { return e.msg }
func (e *notExistError) Is(target error) bool { return target == fs.ErrNotExist }

func pipelineFiles(dir string) ([]string, []error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, []error{&PipelineError{File: dir, Err: &notExistError{msg: "pipelines directory does not exist (see pipelines.path)"}}}
	case err != nil:
		return nil, []error{&PipelineError{File: dir, Err: err}}
	case !st.IsDir():
		return []string{dir}, nil // a single file named explicitly
	}
	// A walk does not enter a root that is a symbolic link (a release
	// directory behind `pipelines -> pipelines.rel1`): walk what it points
	// to, and name the files under dir as configured, so that a pipeline
	// keeps its file's name when a deploy points the link elsewhere.
	root := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		root = real
	}
	var (
		files []string
		errs  []error
	)
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		isRoot := path == root
		if rel, rerr := filepath.Rel(root, path); rerr == nil && !isRoot {
			path = filepath.Join(dir, rel)
		}
		if err != nil {
			// An unreadable subdirectory loses only its own files.
			errs = append(errs, &PipelineError{File: path, Err: err})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !isRoot && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yml", ".yaml":
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, errs
}

// parsed is one pipeline entry of a file: a valid pipeline (err == nil) or a
// problem. Problems keep the pipeline's ID and location when known, so the
// id can be claimed for duplicate detection.
type parsed struct {
	p   Pipeline
	err *PipelineError
	// more are the pipeline's other problems, after err.
	more []*PipelineError
}

func parsePipelineFile(file string, data []byte, lookup LookupEnv) []parsed {
	roots, err := parseDocuments(data)
	if err != nil {
		var de *docError
		if errors.As(err, &de) {
			return []parsed{{err: &PipelineError{File: file, Line: de.line, Err: de.err}}}
		}
		return []parsed{{err: &PipelineError{File: file, Err: err}}}
	}
	var (
		out    []parsed
		budget = &settingsBudget{left: maxSettingsBytes}
		// One for the file: an alias may name a value of an earlier
		// pipeline.
		env = &envExpander{lookup: lookup, written: map[*yaml.Node]string{}}
	)
	for _, root := range roots {
		out = append(out, parseDocument(file, root, budget, env)...)
	}
	return out
}

// versionRE accepts what Conduit's v2 parser accepts: 2, 2.0, 2.1, 2.2 and
// later 2.x minors, written as a number or a string.
var versionRE = regexp.MustCompile(`^2(\.[0-9]+)?$`)

func parseDocument(file string, root *yaml.Node, budget *settingsBudget, env *envExpander) []parsed {
	fileErr := func(line int, field string, err error) []parsed {
		return []parsed{{err: &PipelineError{File: file, Line: line, Field: field, Err: err}}}
	}
	// A file that is not a pipeline file at all (a symlink to /etc/passwd,
	// a file of another program) is named, never quoted: what it holds is
	// none of the log's or the API's business.
	if root.Kind != yaml.MappingNode {
		return fileErr(root.Line, "", fmt.Errorf("not a pipeline file: expected a map with version and pipelines at the top level, got %s", nodeKind(root)))
	}
	if lookup(root, "version") == nil && lookup(root, "pipelines") == nil {
		return fileErr(root.Line, "", errors.New("not a pipeline file: no version and no pipelines at the top level"))
	}
	var version, pipelines *yaml.Node
	seen := map[string]int{}
	for _, kv := range pairs(root) {
		if kv.key.Kind != yaml.ScalarNode {
			return fileErr(kv.key.Line, "", fmt.Errorf("expected a field name, got %s", describe(kv.key)))
		}
		name := kv.key.Value
		if first, dup := seen[name]; dup {
			return fileErr(kv.key.Line, name, fmt.Errorf("set twice (first at line %d)", first))
		}
		seen[name] = kv.key.Line
		switch name {
		case "version":
			version = kv.value
		case "pipelines":
			pipelines = kv.value
		default:
			return fileErr(kv.key.Line, name, unknownNameError("field", name, []string{"version", "pipelines"}))
		}
	}
	if version == nil {
		return fileErr(root.Line, "version", errors.New(`missing; pipeline files start with version: "2.2"`))
	}
	if err := checkVersion(version); err != nil {
		return fileErr(version.Line, "version", err)
	}
	if isNull(pipelines) {
		return nil
	}
	if v1VersionRE.MatchString(version.Value) {
		var pe *PipelineError
		if pipelines, pe = v1Pipelines(file, pipelines, env); pe != nil {
			return []parsed{{err: pe}}
		}
	}
	if pipelines.Kind != yaml.SequenceNode {
		return fileErr(pipelines.Line, "pipelines", fmt.Errorf("expected a list of pipelines (- id: ...), got %s", describe(pipelines)))
	}
	out := make([]parsed, 0, len(pipelines.Content))
	for i, n := range pipelines.Content {
		out = append(out, parsePipeline(file, i, unalias(n), budget, env))
	}
	return out
}

// nodeKind is describe without the value.
func nodeKind(n *yaml.Node) string {
	switch unalias(n).Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

func checkVersion(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return fmt.Errorf(`expected a version such as "2.2", got %s`, describe(n))
	}
	if versionRE.MatchString(n.Value) {
		return nil
	}
	if v1VersionRE.MatchString(n.Value) {
		return nil
	}
	return fmt.Errorf("unsupported version %q; supported: 2.x (2.0, 2.1, 2.2) and 1.x (1.0, 1.1)", n.Value)
}

// fieldErr is a problem at a field of a pipeline, before it becomes a
// *PipelineError (which also needs the file and pipeline id).
type fieldErr struct {
	line  int
	field string
	err   error
}

func errAt(line int, field string, format string, args ...any) *fieldErr {
	return &fieldErr{line: line, field: field, err: fmt.Errorf(format, args...)}
}

// pipelineParser builds one Pipeline from its YAML node. A field that is
// wrong is reported and the next one read, so that one pass over a file
// names every problem; a pipeline with any is skipped as a whole.
type pipelineParser struct {
	p       *Pipeline
	procIDs map[string]int // processor id -> line; unique across the pipeline
	budget  *settingsBudget
	// errs are the problems found so far, in file order.
	errs []*fieldErr
}

// reportedAt reports whether a problem at field was reported.
func (pp *pipelineParser) reportedAt(field string) bool {
	for _, fe := range pp.errs {
		if fe.field == field {
			return true
		}
	}
	return false
}

// report keeps a problem and goes on.
func (pp *pipelineParser) report(fe *fieldErr) {
	if fe != nil {
		pp.errs = append(pp.errs, fe)
	}
}

// settingsBudget is what is left, in bytes, for the flattened setting
// names of one file. Nested settings become dotted names, and an alias
// used as a key at every level repeats a long name in each of them, so
// the names can be far larger than the file.
type settingsBudget struct{ left int }

func parsePipeline(file string, idx int, n *yaml.Node, budget *settingsBudget, env *envExpander) parsed {
	p := Pipeline{
		File:   file,
		Line:   n.Line,
		Status: StatusRunning,
		DLQ:    DLQ{WindowSize: DefaultDLQWindowSize, WindowNackThreshold: DefaultDLQWindowNackThreshold, Line: n.Line},
		lines:  map[string]int{},
	}
	env.refs, env.values = env.refs[:0], nil
	env.expandEnv(n, "")
	// Read the id first so every error, even one above the id line, can
	// name the pipeline.
	if id := lookup(n, "id"); id != nil && id.Kind == yaml.ScalarNode && !isNull(id) {
		p.ID = id.Value
	}
	pp := &pipelineParser{p: &p, procIDs: map[string]int{}, budget: budget}
	pp.report(pp.parse(n))
	envErrs, warnings := refProblems(file, env.refs)
	for _, fe := range envErrs {
		pp.report(fe)
	}
	p.Warnings = warnings
	p.expanded = env.values
	if len(pp.errs) > 0 {
		var out parsed
		out.p = p
		for _, fe := range pp.errs {
			pe := &PipelineError{File: file, Line: fe.line, PipelineID: p.ID, Field: fe.field, Err: redactExpanded(fe.err, fe.field, env.values)}
			if p.ID == "" {
				pe.Field = joinField("pipelines["+strconv.Itoa(idx)+"]", fe.field)
			}
			if out.err == nil {
				out.err = pe
			} else {
				out.more = append(out.more, pe)
			}
		}
		return out
	}
	// A definition that cannot be written is left out: it is for reading,
	// and the pipeline is valid.
	p.Definition, _ = definitionOf(n, env.written)
	return parsed{p: p}
}

func (pp *pipelineParser) parse(n *yaml.Node) *fieldErr {
	p := pp.p
	if n.Kind != yaml.MappingNode {
		return errAt(n.Line, "", "expected a map (a pipeline), got %s", describe(n))
	}
	fe := pp.fields(n, "", "pipeline", map[string]handler{
		"id": func(v *yaml.Node, f string) *fieldErr {
			if fe := str(v, f, &p.ID); fe != nil {
				return fe
			}
			return check(v, f, checkPipelineID(p.ID))
		},
		"status": func(v *yaml.Node, f string) *fieldErr {
			if fe := str(v, f, &p.Status); fe != nil {
				return fe
			}
			if p.Status == "" {
				p.Status = StatusRunning
			}
			return check(v, f, oneOf(StatusRunning, StatusStopped)(p.Status))
		},
		"name":        func(v *yaml.Node, f string) *fieldErr { return str(v, f, &p.Name) },
		"description": func(v *yaml.Node, f string) *fieldErr { return str(v, f, &p.Description) },
		"connectors": func(v *yaml.Node, f string) (fe *fieldErr) {
			p.Connectors, fe = pp.connectors(v, f)
			return fe
		},
		"processors": func(v *yaml.Node, f string) (fe *fieldErr) {
			p.Processors, fe = pp.processors(v, f)
			return fe
		},
		"dead-letter-queue": pp.dlq,
		"error-recovery":    pp.errorRecovery,
		"notifications": func(v *yaml.Node, f string) (fe *fieldErr) {
			p.Notifications, fe = parsePipelineNotifications(v, f)
			return fe
		},
	})
	if fe != nil {
		return fe
	}
	if p.ID == "" && !pp.reportedAt("id") {
		return errAt(n.Line, "id", "required")
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if p.DLQ.Plugin == "" {
		p.DLQ.Plugin = DefaultDLQPlugin
	}
	if p.DLQ.Settings == nil {
		p.DLQ.Settings, p.DLQ.SettingLines = map[string]string{}, map[string]int{}
		if isLogPlugin(p.DLQ.Plugin) {
			p.DLQ.Settings = DefaultDLQSettings()
		}
	}
	if len(pp.errs) > 0 {
		// What the connectors add up to is known only when each was read.
		return nil
	}
	return pp.checkConnectors()
}

func (pp *pipelineParser) checkConnectors() *fieldErr {
	p := pp.p
	line := p.Line
	if l, ok := p.lines["connectors"]; ok {
		line = l
	}
	var sources, destinations []Connector
	for _, c := range p.Connectors {
		switch c.Type {
		case TypeSource:
			sources = append(sources, c)
		case TypeDestination:
			destinations = append(destinations, c)
		}
	}
	switch {
	case len(sources) == 0:
		return errAt(line, "connectors", "no source connector; a pipeline needs at least one connector with type: source")
	case len(destinations) == 0:
		return errAt(line, "connectors", "no destination connector; a pipeline needs at least one connector with type: destination")
	}
	return nil
}

// handler parses the value of one field; f is the field's path.
type handler func(v *yaml.Node, f string) *fieldErr

// fields walks mapping n, whose path is path, dispatching each key to its
// handler. Unknown and repeated keys are errors: an ignored typo is a
// setting the user believes is in effect. Each problem is reported and
// the next key read; the result is always nil.
func (pp *pipelineParser) fields(n *yaml.Node, path, what string, handlers map[string]handler) *fieldErr {
	seen := map[string]int{}
	for _, kv := range pairs(n) {
		if fe := pp.field(kv, path, what, handlers, seen); fe != nil {
			pp.report(fe)
		}
	}
	return nil
}

// field reads one key of a mapping for fields.
func (pp *pipelineParser) field(kv mapPair, path, what string, handlers map[string]handler, seen map[string]int) *fieldErr {
	if kv.key.Kind != yaml.ScalarNode {
		return errAt(kv.key.Line, path, "expected a field name, got %s", describe(kv.key))
	}
	name := kv.key.Value
	field := joinField(path, name)
	h, ok := handlers[name]
	if !ok {
		known := make([]string, 0, len(handlers))
		for k := range handlers {
			known = append(known, k)
		}
		return &fieldErr{line: kv.key.Line, field: field, err: unknownNameError(what+" field", name, known)}
	}
	if first, dup := seen[name]; dup {
		return errAt(kv.key.Line, field, "set twice (first at line %d)", first)
	}
	seen[name] = kv.key.Line
	pp.p.lines[field] = kv.key.Line
	return h(kv.value, field)
}

// str reads a text field. Numbers and bools are accepted as their text
// (id: 42 is the id "42"), as Conduit does; null is "".
func str(v *yaml.Node, field string, dst *string) *fieldErr {
	if isNull(v) {
		*dst = ""
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return errAt(v.Line, field, "expected a string, got %s", describe(v))
	}
	*dst = v.Value
	return nil
}

func integer(v *yaml.Node, field string, dst *int, valid func(int) error) *fieldErr {
	x, err := parseNode(KindInt, v)
	if err != nil {
		return &fieldErr{line: v.Line, field: field, err: err}
	}
	if err := valid(x.(int)); err != nil {
		return &fieldErr{line: v.Line, field: field, err: err}
	}
	*dst = x.(int)
	return nil
}

func check(v *yaml.Node, field string, err error) *fieldErr {
	if err != nil {
		return &fieldErr{line: v.Line, field: field, err: err}
	}
	return nil
}

// elemPath names a list element by its id when it has one (users search
// their file for the id), else by its 0-based index.
func elemPath(list, id string, i int) string {
	// An id that cannot be printed as it is (an escape sequence) is
	// refused; its element is named by index meanwhile.
	if id != "" && strings.IndexFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return list + "[" + id + "]"
	}
	return list + "[" + strconv.Itoa(i) + "]"
}

func peekID(n *yaml.Node) string {
	if id := lookup(n, "id"); id != nil && id.Kind == yaml.ScalarNode && !isNull(id) {
		return id.Value
	}
	return ""
}

func (pp *pipelineParser) connectors(v *yaml.Node, path string) ([]Connector, *fieldErr) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, errAt(v.Line, path, "expected a list of connectors (- id: ...), got %s", describe(v))
	}
	var (
		out []Connector
		ids = map[string]int{}
	)
	for i, n := range v.Content {
		n = unalias(n)
		if n.Kind != yaml.MappingNode {
			return nil, errAt(n.Line, elemPath(path, "", i), "expected a map (a connector), got %s", describe(n))
		}
		c := Connector{Path: elemPath(path, peekID(n), i), Line: n.Line, Settings: map[string]string{}, SettingLines: map[string]int{}}
		pp.p.lines[c.Path] = n.Line
		reported := len(pp.errs)
		fe := pp.fields(n, c.Path, "connector", map[string]handler{
			"id": func(v *yaml.Node, f string) *fieldErr {
				if fe := str(v, f, &c.ID); fe != nil {
					return fe
				}
				return check(v, f, checkConnectorID(c.ID))
			},
			"type": func(v *yaml.Node, f string) *fieldErr {
				if fe := str(v, f, &c.Type); fe != nil || c.Type == "" {
					return fe
				}
				return check(v, f, oneOf(TypeSource, TypeDestination)(c.Type))
			},
			"plugin": func(v *yaml.Node, f string) *fieldErr { return str(v, f, &c.Plugin) },
			"name":   func(v *yaml.Node, f string) *fieldErr { return str(v, f, &c.Name) },
			"dependency": func(v *yaml.Node, f string) *fieldErr {
				if fe := str(v, f, &c.Dependency); fe != nil {
					return fe
				}
				if len(c.Dependency) > maxDependencyName {
					return errAt(v.Line, f, "%d characters, at most %d", len(c.Dependency), maxDependencyName)
				}
				return nil
			},
			"settings": func(v *yaml.Node, f string) *fieldErr {
				return pp.settings(v, f, c.Settings, c.SettingLines)
			},
			"processors": func(v *yaml.Node, f string) (fe *fieldErr) {
				c.Processors, fe = pp.processors(v, f)
				return fe
			},
		})
		if fe != nil {
			return nil, fe
		}
		if len(pp.errs) > reported {
			continue // its problems are reported; what it lacks may follow from them
		}
		if fe := pp.checkConnector(c, n, ids); fe != nil {
			pp.report(fe)
			continue
		}
		ids[c.ID] = n.Line
		if c.Name == "" {
			c.Name = c.ID
		}
		out = append(out, c)
	}
	return out, nil
}

// checkConnector checks what a connector needs once its fields are read:
// the required ones, and an id of its own.
func (pp *pipelineParser) checkConnector(c Connector, n *yaml.Node, ids map[string]int) *fieldErr {
	switch {
	case c.ID == "":
		return errAt(n.Line, c.Path+".id", "required")
	case c.Type == "":
		return errAt(n.Line, c.Path+".type", "required (source or destination)")
	case c.Plugin == "":
		return errAt(n.Line, c.Path+".plugin", "required (e.g. builtin:generator)")
	}
	if first, dup := ids[c.ID]; dup {
		return errAt(pp.p.lineOf(c.Path+".id"), c.Path+".id", "duplicate connector id %q (first at line %d)", c.ID, first)
	}
	return nil
}

func (pp *pipelineParser) processors(v *yaml.Node, path string) ([]Processor, *fieldErr) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, errAt(v.Line, path, "expected a list of processors (- id: ...), got %s", describe(v))
	}
	var out []Processor
	for i, n := range v.Content {
		n = unalias(n)
		if n.Kind != yaml.MappingNode {
			return nil, errAt(n.Line, elemPath(path, "", i), "expected a map (a processor), got %s", describe(n))
		}
		pr := Processor{Path: elemPath(path, peekID(n), i), Line: n.Line, Settings: map[string]string{}, SettingLines: map[string]int{}}
		pp.p.lines[pr.Path] = n.Line
		var oldType string // the pre-2.2 name of plugin
		reported := len(pp.errs)
		fe := pp.fields(n, pr.Path, "processor", map[string]handler{
			"id": func(v *yaml.Node, f string) *fieldErr {
				if fe := str(v, f, &pr.ID); fe != nil {
					return fe
				}
				return check(v, f, checkProcessorID(pr.ID))
			},
			"plugin":    func(v *yaml.Node, f string) *fieldErr { return str(v, f, &pr.Plugin) },
			"type":      func(v *yaml.Node, f string) *fieldErr { return str(v, f, &oldType) },
			"condition": func(v *yaml.Node, f string) *fieldErr { return str(v, f, &pr.Condition) },
			"workers": func(v *yaml.Node, f string) *fieldErr {
				return integer(v, f, &pr.Workers, positiveInt)
			},
			"settings": func(v *yaml.Node, f string) *fieldErr {
				return pp.settings(v, f, pr.Settings, pr.SettingLines)
			},
		})
		if fe != nil {
			return nil, fe
		}
		if len(pp.errs) > reported {
			continue
		}
		if oldType != "" {
			if pr.Plugin != "" {
				return nil, errAt(pp.p.lineOf(pr.Path+".type"), pr.Path+".type", "both plugin and type are set; type is the pre-2.2 name of plugin, keep only plugin")
			}
			pr.Plugin = oldType
		}
		switch {
		case pr.ID == "":
			return nil, errAt(n.Line, pr.Path+".id", "required")
		case pr.Plugin == "":
			return nil, errAt(n.Line, pr.Path+".plugin", "required (e.g. field.set)")
		}
		if first, dup := pp.procIDs[pr.ID]; dup {
			return nil, errAt(pp.p.lineOf(pr.Path+".id"), pr.Path+".id", "duplicate processor id %q (first at line %d; processor ids are unique within a pipeline)", pr.ID, first)
		}
		pp.procIDs[pr.ID] = n.Line
		if pr.Workers == 0 {
			pr.Workers = 1
		}
		out = append(out, pr)
	}
	return out, nil
}

// settings reads a settings map into out. Values are kept as written (rate:
// 10.50 is "10.50", not "10.5"), because connectors parse their settings
// themselves and the text is what the user meant. Nested maps are flattened
// with dots, as Conduit does.
func (pp *pipelineParser) settings(v *yaml.Node, field string, out map[string]string, lines map[string]int) *fieldErr {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return errAt(v.Line, field, "expected a map of settings, got %s", describe(v))
	}
	return pp.flatten(v, field, "", out, lines)
}

func (pp *pipelineParser) flatten(m *yaml.Node, field, prefix string, out map[string]string, lines map[string]int) *fieldErr {
	for _, kv := range pairs(m) {
		if kv.key.Kind != yaml.ScalarNode || isNull(kv.key) {
			return errAt(kv.key.Line, field, "expected a setting name, got %s", describe(kv.key))
		}
		// Charged before the names are built, so that an oversized name
		// is never allocated.
		nameLen := len(kv.key.Value)
		if prefix != "" {
			nameLen += len(prefix) + 1
		}
		if pp.budget.left -= nameLen + len(field) + 1 + nameLen; pp.budget.left < 0 {
			return errAt(kv.key.Line, field, "settings flatten into more than %d bytes of dotted names in this file; nest or repeat fewer settings", maxSettingsBytes)
		}
		name := kv.key.Value
		if prefix != "" {
			name = prefix + "." + name
		}
		sfield := field + "." + name
		if _, ok := pp.p.lines[sfield]; !ok {
			pp.p.lines[sfield] = kv.key.Line
		}
		switch kv.value.Kind {
		case yaml.MappingNode:
			if fe := pp.flatten(kv.value, field, name, out, lines); fe != nil {
				return fe
			}
		case yaml.ScalarNode:
			if first, dup := lines[name]; dup {
				return errAt(kv.key.Line, sfield, "set twice (first at line %d)", first)
			}
			out[name] = kv.value.Value
			if isNull(kv.value) {
				out[name] = ""
			}
			lines[name] = kv.key.Line
		default:
			return errAt(kv.value.Line, sfield, "expected a text value, got %s; settings are text, write a list as a comma-separated string", describe(kv.value))
		}
	}
	return nil
}

func isLogPlugin(plugin string) bool {
	return plugin == DefaultDLQPlugin || plugin == "log"
}

func (pp *pipelineParser) dlq(v *yaml.Node, path string) *fieldErr {
	d := &pp.p.DLQ
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return errAt(v.Line, path, "expected a map (plugin, settings, window-size, window-nack-threshold), got %s", describe(v))
	}
	d.Line = pp.p.lines[path]
	fe := pp.fields(v, path, "dead-letter-queue", map[string]handler{
		"plugin": func(v *yaml.Node, f string) *fieldErr { return str(v, f, &d.Plugin) },
		"settings": func(v *yaml.Node, f string) *fieldErr {
			// Written settings replace the default ones, even when empty.
			d.Settings, d.SettingLines = map[string]string{}, map[string]int{}
			return pp.settings(v, f, d.Settings, d.SettingLines)
		},
		"window-size": func(v *yaml.Node, f string) *fieldErr {
			return integer(v, f, &d.WindowSize, nonNegativeInt)
		},
		"window-nack-threshold": func(v *yaml.Node, f string) *fieldErr {
			return integer(v, f, &d.WindowNackThreshold, nonNegativeInt)
		},
	})
	if fe != nil {
		return fe
	}
	if d.WindowSize > 0 && d.WindowNackThreshold >= d.WindowSize {
		field := path + ".window-nack-threshold"
		line, ok := pp.p.lines[field]
		if !ok {
			field = path + ".window-size"
			line = pp.p.lines[field]
		}
		return errAt(line, field, "window-nack-threshold (%d) must be less than window-size (%d); with window-size 0 every nacked record goes to the DLQ without limit",
			d.WindowNackThreshold, d.WindowSize)
	}
	return nil
}

func (pp *pipelineParser) errorRecovery(v *yaml.Node, path string) *fieldErr {
	o := &pp.p.ErrorRecovery
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return errAt(v.Line, path, "expected a map (%s, rules), got %s", strings.Join(errorRecoveryFieldNames(), ", "), describe(v))
	}
	handlers := make(map[string]handler, len(errorRecoveryFields)+1)
	for _, f := range errorRecoveryFields {
		handlers[f.name] = func(v *yaml.Node, field string) *fieldErr {
			return setERField(o, f.name, v, field)
		}
	}
	handlers["rules"] = func(v *yaml.Node, field string) *fieldErr {
		rules, fe := parseRules(v, field, pp.p.File)
		o.Rules = rules
		return fe
	}
	if fe := pp.fields(v, path, "error-recovery", handlers); fe != nil {
		return fe
	}
	// Only a clash inside the block is known here; one against the global
	// config is found by Pipeline.ResolveErrorRecovery.
	if o.MinDelay != nil && o.MaxDelay != nil && *o.MinDelay > *o.MaxDelay {
		field := path + ".min-delay"
		return &fieldErr{line: pp.p.lines[field], field: field, err: delayOrderError(*o.MinDelay, *o.MaxDelay, "")}
	}
	return nil
}
