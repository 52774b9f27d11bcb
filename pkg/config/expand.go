package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// LookupEnv finds an environment variable, as os.LookupEnv does; tests
// pass their own.
type LookupEnv func(name string) (string, bool)

// Environment variables in pipeline files are expanded as Conduit expands
// them: in every value that is a string (plain, quoted or block scalars
// that YAML reads as text, whatever the field), never in keys, numbers,
// booleans or values with an explicit tag other than !!str; $VAR and
// ${VAR} both work (Go's os.ExpandEnv); an alias gets the value its
// anchor expanded to. A variable that is not set becomes "" as under
// Conduit, with a warning naming the file, line and variable; where that
// would turn a path written below a directory into one at the root of
// the file system (${OUT}/x.jsonl becoming /x.jsonl) the pipeline is an
// error instead. Inside a Go template action ({{ ... }}), a $name that is
// not set is the template's variable and is kept (under Conduit it becomes
// "" and breaks the template).

// envRef is one use of a variable in a value.
type envRef struct {
	name  string
	line  int
	field string
	// unset: the variable is not set (as opposed to set and empty).
	unset bool
	// rooting: the variable is followed by a path separator, so an empty
	// value would move what follows to the root of the file system.
	rooting bool
}

// envExpander expands the variables of one pipeline entry in place and
// remembers what was written, for the Definition and for errors.
type envExpander struct {
	lookup LookupEnv
	// written maps each expanded node to its value as written.
	written map[*yaml.Node]string
	refs    []envRef
	// values are the values of the current pipeline that expansion
	// changed.
	values []expandedValue
}

// expandedValue is a value of a pipeline that names variables: where it
// is, as written and as expanded.
type expandedValue struct {
	field             string
	written, expanded string
}

// minRedacted is the shortest expanded value that errors about other
// fields have replaced by its written form: shorter ones (a rate of 10)
// are no secret and would match unrelated text.
const minRedacted = 6

// redactExpanded returns err with the values of the environment that
// expansion put into the pipeline replaced by what the file says (a
// setting's error quotes its value: "hunter2" is not a number), so that
// errors, which go to the log and the API, show the file as written as
// the Definition does. The value of field itself is replaced whatever its
// length.
func redactExpanded(err error, field string, values []expandedValue) error {
	if err == nil || len(values) == 0 {
		return err
	}
	msg := err.Error()
	out := msg
	for _, v := range values {
		if v.expanded == "" || (v.field != field && len(v.expanded) < minRedacted) {
			continue
		}
		out = strings.ReplaceAll(out, strconv.Quote(v.expanded), strconv.Quote(v.written))
		out = strings.ReplaceAll(out, v.expanded, v.written)
	}
	if out == msg {
		return err
	}
	return &redactedError{msg: out, err: err}
}

// redactedError is an error whose text shows values as written.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// expandEnv expands the string values of the tree n (the entry of one
// pipeline), whose field path is path. Aliases are not followed: the
// node they name is expanded where it is written, once.
func (e *envExpander) expandEnv(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			field := path
			if k.Kind == yaml.ScalarNode {
				field = joinField(path, k.Value)
			}
			e.expandEnv(v, field)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			e.expandEnv(c, elemPath(path, peekID(unalias(c)), i))
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" || !strings.Contains(n.Value, "$") {
			return
		}
		if _, done := e.written[n]; done {
			return
		}
		written := n.Value
		n.Value = expandVars(written, func(name string, before []byte, after string) string {
			v, ok := e.lookup(name)
			ref := written[len(written)-len(after)-len(name)-1:]
			if !ok && strings.HasPrefix(ref, "$"+name) && inTemplateAction(written[:len(written)-len(ref)]) {
				// A variable of a Go template ({{ $n := .Key }}), kept.
				return "$" + name
			}
			if !ok || v == "" {
				e.refs = append(e.refs, envRef{name: name, line: n.Line, field: path, unset: !ok,
					rooting: startsPath(before, after)})
			}
			return v
		})
		e.written[n] = written
		if n.Value != written {
			e.values = append(e.values, expandedValue{field: path, written: written, expanded: n.Value})
		}
	}
}

// inTemplateAction reports whether text that follows before is inside a
// Go template action: before opens a "{{" that it does not close.
func inTemplateAction(before string) bool {
	open := strings.LastIndex(before, "{{")
	return open >= 0 && !strings.Contains(before[open:], "}}")
}

// startsPath reports whether a variable that what is expanded before it
// (before) and what is written after it (after) surround would, empty,
// move a path to the root of the file system: it starts the value (or a
// file:// URL) and a path separator follows.
func startsPath(before []byte, after string) bool {
	if len(before) > 0 && string(before) != "file://" {
		return false
	}
	return strings.HasPrefix(after, "/") || strings.HasPrefix(after, "\\")
}

// expandVars is os.Expand (which os.ExpandEnv, and so Conduit, uses) with
// what is expanded before each reference and what is written after it
// passed to mapping, so that the surroundings of a variable can be checked. The syntax is os.Expand's: ${name} and $name,
// where name is letters, digits and _, or one of the shell's special
// characters (so "$$" is the variable "$"); "${}" and an unclosed "${"
// are dropped; a "$" before anything else is kept.
func expandVars(s string, mapping func(name string, before []byte, after string) string) string {
	var buf []byte
	i := 0
	for j := 0; j < len(s); j++ {
		if s[j] == '$' && j+1 < len(s) {
			if buf == nil {
				buf = make([]byte, 0, 2*len(s))
			}
			buf = append(buf, s[i:j]...)
			name, w := shellName(s[j+1:])
			switch {
			case name == "" && w > 0:
				// Bad syntax, dropped as os.Expand drops it.
			case name == "":
				buf = append(buf, s[j])
			default:
				buf = append(buf, mapping(name, buf, s[j+1+w:])...)
			}
			j += w
			i = j + 1
		}
	}
	if buf == nil {
		return s
	}
	return string(buf) + s[i:]
}

// shellName is os.Expand's reading of the name after a "$": the name and
// how many bytes it took.
func shellName(s string) (string, int) {
	if s[0] == '{' {
		if len(s) > 2 && isShellSpecial(s[1]) && s[2] == '}' {
			return s[1:2], 3
		}
		for i := 1; i < len(s); i++ {
			if s[i] == '}' {
				if i == 1 {
					return "", 2 // "${}" is bad syntax
				}
				return s[1:i], i + 1
			}
		}
		return "", 1 // no closing brace
	}
	if isShellSpecial(s[0]) {
		return s[0:1], 1
	}
	var i int
	for i = 0; i < len(s) && isAlphaNum(s[i]); i++ {
	}
	return s[:i], i
}

func isShellSpecial(c uint8) bool {
	switch c {
	case '*', '#', '$', '@', '!', '?', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func isAlphaNum(c uint8) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// osLookupEnv is the process's environment.
func osLookupEnv(name string) (string, bool) { return os.LookupEnv(name) }

// maxEnvWarnings bounds the warnings of one pipeline: a value made of
// thousands of unset variables is one mistake, not thousands of log lines.
const maxEnvWarnings = 20

// refProblems turns the references of one pipeline into the errors that
// keep it from running (an empty variable that would root a path) and
// warnings (any other variable that is not set, once per line).
func refProblems(file string, refs []envRef) (errs []*fieldErr, warnings []Warning) {
	type lineVar struct {
		line int
		name string
	}
	warned := map[lineVar]bool{}
	more := 0
	for _, r := range refs {
		what := "is not set"
		if !r.unset {
			what = "is empty"
		}
		if r.rooting {
			errs = append(errs, &fieldErr{line: r.line, field: r.field, err: fmt.Errorf(
				"environment variable %s %s: the value starts with it and a path follows, which would then start at the root of the file system; set %s, or write the path without it",
				r.name, what, r.name)})
			continue
		}
		if !r.unset || warned[lineVar{r.line, r.name}] {
			continue // set to "" on purpose, or already said
		}
		warned[lineVar{r.line, r.name}] = true
		if len(warnings) == maxEnvWarnings {
			more++
			continue
		}
		source := file + ":" + strconv.Itoa(r.line)
		warnings = append(warnings, Warning{Source: source, Message: fmt.Sprintf(
			"%s: environment variable %s is not set; it was replaced by an empty value", r.field, r.name)})
	}
	if more > 0 {
		last := warnings[len(warnings)-1]
		warnings = append(warnings, Warning{Source: file, Message: fmt.Sprintf(
			"and %d more uses of environment variables that are not set, after %s", more, last.Source)})
	}
	return errs, warnings
}
