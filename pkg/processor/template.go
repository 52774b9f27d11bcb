package processor

import (
	"bytes"
	"fmt"
	"text/template"
	"text/template/parse"
	"unsafe"

	"github.com/Masterminds/sprig/v3"

	"github.com/conduitry/conduit/pkg/record"
)

// recordTemplate is a Go text/template rendered against one record at a
// time. It is parsed once, when the processor is built, and renders into a
// buffer it reuses, so it is not safe for concurrent use: each processor
// owns its own, and the engine calls a processor from one goroutine.
type recordTemplate struct {
	// label names the template in per-record errors: `setting "value"` or
	// `condition`.
	label string
	tmpl  *template.Template
	// constant is set when the template has no actions: its text is the
	// result for every record, known (and checkable) at load time.
	constant bool
	text     string
	buf      bytes.Buffer
	view     templateRecord
}

// parseTemplate parses text as a template named name (Go's errors then say
// `template: value:1:3: ...`, which names the setting). Templates have
// Sprig's functions (upper, hasPrefix, default, ...), the same set as
// Conduit's templates (sprig.FuncMap); they are looked up when the
// template is parsed, which happens once, when the processor is built.
func parseTemplate(name, label, text string) (*recordTemplate, error) {
	funcs := sprig.FuncMap()
	funcs[orEmptyFunc] = orEmpty
	// missingkey=zero makes a missing metadata key render as "" instead of
	// "<no value>"; a missing key is normal, not an error, in a record.
	t, err := template.New(name).Option("missingkey=zero").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			// A defined template may be called with any dot.
			emptyForMissing(tt.Root, tt.Name() == name)
		}
	}
	rt := &recordTemplate{label: label, tmpl: t}
	if isConstant(t) {
		// Render once against an empty record: this applies the {{- -}}
		// trimming rules exactly as Execute would.
		if err := t.Execute(&rt.buf, &templateRecord{}); err != nil {
			return nil, err
		}
		rt.constant, rt.text = true, rt.buf.String()
	}
	return rt, nil
}

// orEmptyFunc is the name of orEmpty in templates. It is not documented:
// it exists only to be inserted by emptyForMissing.
const orEmptyFunc = "_orEmpty"

// orEmpty turns "no value" into "": see emptyForMissing.
func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// emptyForMissing makes every action that prints a value print "" for a
// missing one. text/template prints "<no value>" for a missing key of a
// map[string]any (structured data) even with missingkey=zero, because the
// zero value of any is nil; "<no value>" stored in a field by accident is
// worse than an empty string. It appends `| _orEmpty` to printing actions,
// the same tree rewrite html/template does to add its escapers. The extra
// call costs about a microsecond, so actions that cannot print "no value"
// are left alone (see mayBeMissing). root says whether dot is still the
// record (it is not inside with and range).
func emptyForMissing(n parse.Node, root bool) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			emptyForMissing(c, root)
		}
	case *parse.ActionNode:
		// Actions that declare variables print nothing.
		if len(x.Pipe.Decl) == 0 && mayBeMissing(x.Pipe, root) {
			x.Pipe.Cmds = append(x.Pipe.Cmds, &parse.CommandNode{
				NodeType: parse.NodeCommand,
				Pos:      x.Pos,
				Args:     []parse.Node{parse.NewIdentifier(orEmptyFunc).SetTree(nil).SetPos(x.Pos)},
			})
		}
	case *parse.IfNode:
		emptyForMissing(x.List, root)
		emptyForMissing(x.ElseList, root)
	case *parse.RangeNode:
		emptyForMissing(x.List, false)
		emptyForMissing(x.ElseList, root)
	case *parse.WithNode:
		emptyForMissing(x.List, false)
		emptyForMissing(x.ElseList, root)
	}
}

// mayBeMissing reports whether the pipeline's value may be a nil interface,
// judging by its last command: builtins that return a concrete value,
// literals, and the record's fields that are never nil are safe.
func mayBeMissing(pipe *parse.PipeNode, root bool) bool {
	if len(pipe.Cmds) == 0 {
		return false
	}
	cmd := pipe.Cmds[len(pipe.Cmds)-1]
	switch a := cmd.Args[0].(type) {
	case *parse.IdentifierNode:
		switch a.Ident {
		case "print", "printf", "println", "len", "eq", "ne", "lt", "le", "gt", "ge",
			"not", "html", "js", "urlquery":
			return false
		}
		if neverNil[a.Ident] {
			return false
		}
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
		return false
	case *parse.FieldNode:
		if root && len(cmd.Args) == 1 {
			switch a.Ident[0] {
			case "Metadata", "Operation", "Position":
				return false
			}
		}
	}
	return true
}

// neverNil are the Sprig functions most used in conditions and values
// that return a string or a bool, never "no value".
var neverNil = map[string]bool{
	"upper": true, "lower": true, "title": true, "trim": true, "trimAll": true,
	"trimPrefix": true, "trimSuffix": true, "trunc": true, "replace": true,
	"repeat": true, "substr": true, "quote": true, "squote": true, "cat": true,
	"toString": true, "hasPrefix": true, "hasSuffix": true, "contains": true,
	"empty": true, "b64enc": true, "b64dec": true, "sha256sum": true, "regexMatch": true,
	"toJson": true, "join": true, "snakecase": true, "camelcase": true, "kebabcase": true,
}

// isConstant reports whether t renders the same text for every record: its
// tree holds text only (comments are dropped by the parser).
func isConstant(t *template.Template) bool {
	if t.Tree == nil || t.Root == nil {
		return false
	}
	for _, n := range t.Root.Nodes {
		if n.Type() != parse.NodeText {
			return false
		}
	}
	return true
}

// renderBytes renders the template for rec. The result is valid until the
// next call.
func (t *recordTemplate) renderBytes(rec *record.Record) ([]byte, error) {
	if t.constant {
		return t.buf.Bytes(), nil
	}
	t.view.fill(rec)
	t.buf.Reset()
	err := t.tmpl.Execute(&t.buf, &t.view)
	// The view aliases the record's bytes; drop it now so that nothing
	// outlives this call (and the record can be collected).
	t.view = templateRecord{}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.label, err)
	}
	return t.buf.Bytes(), nil
}

// renderString renders the template for rec as a new string.
func (t *recordTemplate) renderString(rec *record.Record) (string, error) {
	if t.constant {
		return t.text, nil
	}
	b, err := t.renderBytes(rec)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// templateRecord is what a template sees as its dot. It has the record's
// field names, so templates written for Conduit work unchanged
// ({{ .Payload.After.name }}, {{ .Metadata.table }}, {{ .Operation }}), with
// two deliberate differences that make templates easier to write:
//
//   - raw data, the position and the operation are strings, so {{ .Key }}
//     prints the key's text (not a list of byte values), and
//     {{ eq .Key "42" }} and {{ eq .Operation "delete" }} work; they keep a
//     String method, so {{ .Operation.String }} works as in Conduit;
//   - absent data (a nil key or payload) is an empty object, so
//     {{ .Payload.Before.id }} on a create record renders as a missing field
//     instead of failing with "nil pointer evaluating".
type templateRecord struct {
	Position  rawData
	Operation opName
	Metadata  record.Metadata
	Key       any
	Payload   templateChange
}

type templateChange struct {
	Before any
	After  any
}

// rawData is raw bytes seen as text by templates.
type rawData string

func (d rawData) String() string { return string(d) }

// opName is an operation seen as its name by templates.
type opName string

func (o opName) String() string { return string(o) }

func (v *templateRecord) fill(rec *record.Record) {
	v.Position = aliasText(rec.Position)
	v.Operation = opName(rec.Operation.String())
	v.Metadata = rec.Metadata
	v.Key = templateData(rec.Key)
	v.Payload.Before = templateData(rec.Payload.Before)
	v.Payload.After = templateData(rec.Payload.After)
}

func templateData(d record.Data) any {
	switch x := d.(type) {
	case nil:
		return record.StructuredData(nil)
	case record.RawData:
		return aliasText(x)
	default:
		return d
	}
}

// aliasText returns b as a string without copying it: raw payloads can be
// large and a template usually reads none of them. This is safe because the
// string lives only in the view, which is cleared when Execute returns;
// templates cannot modify data, and everything they output is copied into
// the buffer, so no alias escapes.
func aliasText(b []byte) rawData {
	return rawData(unsafe.String(unsafe.SliceData(b), len(b)))
}
