package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits on what one YAML file (conduit.yml or a pipeline file) may cost to
// load. YAML aliases let a few hundred bytes stand for billions of values,
// and a value may even contain itself; the limits make such a file an error
// found in one pass over what was actually written, before anything walks
// the expanded tree.
const (
	// maxFileBytes is the largest file that is read. Real configuration
	// files are kilobytes; the limit keeps a mistaken path (a log file, a
	// device) from filling memory.
	maxFileBytes = 4 << 20
	// maxAliasValues is how many values aliases may add to a file, counted
	// as if every alias were replaced by a copy of what it refers to.
	maxAliasValues = 100_000
	// maxNesting is how deeply values may be nested, aliases expanded.
	maxNesting = 100
	// maxSettingsBytes bounds the dotted names that nested settings are
	// flattened into, summed over a pipeline file.
	maxSettingsBytes = 4 << 20
)

// readYAMLFile reads a configuration file of at most maxFileBytes. Only
// regular files (or links to them) are read: opening a FIFO blocks forever
// and a device never ends.
func readYAMLFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fileKind(st.Mode()))
	}
	if st.Size() > maxFileBytes {
		return nil, fileTooLarge(st.Size())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may grow between Stat and the read.
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fileTooLarge(int64(len(data)))
	}
	return data, nil
}

func fileTooLarge(size int64) error {
	return fmt.Errorf("file is too large (%d bytes or more; a configuration file may have at most %d bytes)", size, maxFileBytes)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}

// docError is a problem with a YAML file as a whole: malformed YAML, or
// aliases that expand too far. line is 1-based, 0 when unknown.
type docError struct {
	line int
	err  error
}

func (e *docError) Error() string { return e.err.Error() }
func (e *docError) Unwrap() error { return e.err }

// syntaxError is malformed YAML as yaml.v3 describes it.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return "invalid YAML: " + e.msg }

// yaml.v3 only reports syntax errors as text ("yaml: line 3: ..."), so the
// line is recovered from the message.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func splitYAMLError(err error) (line int, problem string) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, strings.TrimPrefix(msg, "yaml: ")
}

// parserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For these the line in yaml.v3's message is 0-based.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
}

// toSyntaxError turns a yaml.v3 parse error of data into a *docError at
// the line of the problem.
//
// yaml.v3's own line is not reliable: it is the line where the enclosing
// construct (a map, a list, a quoted string) starts, unless that is the
// first line of the file, in which case it is the line of the problem,
// unless that is the first line too, in which case there is none; and it
// is 0-based for parser problems but 1-based for scanner problems. So the
// data is parsed twice more: behind one blank line, which moves every
// construct off the first line and so gives the line of the enclosing
// construct; and from that line on, which puts the construct on the first
// line and so gives the line of the problem. Both must fail with the same
// problem to be trusted.
func toSyntaxError(data []byte, err error) *docError {
	first, problem := splitYAMLError(err)
	line := constructLine(data, problem)
	switch {
	case first == 0 && unknownAnchorRE.MatchString(problem):
		// Reported without a line: the first use of the name is the one.
		name := unknownAnchorRE.FindStringSubmatch(problem)[1]
		if i := bytes.Index(data, []byte("*"+name)); i >= 0 {
			line = bytes.Count(data[:i], []byte("\n")) + 1
		}
	case line > 0:
		line = problemLine(data, line, problem)
	case first > 0 && parserProblems[problem]:
		line = first + 1
	default:
		line = first
	}
	// A problem found at the end of the data (an unclosed [) belongs to
	// the last line that has something on it.
	if last := lastContentLine(data); line > last {
		line = last
	}
	return &docError{line: line, err: &syntaxError{msg: problem}}
}

var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// reparse parses data and, when it fails with problem, returns the 1-based
// line yaml.v3 gives for it (fixed for the 0-based parser problems), 0 for
// none, and whether it failed that way at all.
func reparse(data []byte, problem string) (int, bool) {
	_, err := decodeAll(data)
	if err == nil {
		return 0, false
	}
	line, p := splitYAMLError(err)
	if p != problem {
		return 0, false
	}
	if line > 0 && parserProblems[problem] {
		line++
	}
	return line, true
}

// constructLine is the 1-based line where the construct around problem
// starts (or of the problem when it has none), 0 when not found.
func constructLine(data []byte, problem string) int {
	bom := []byte("\xef\xbb\xbf")
	shifted := make([]byte, 0, len(data)+1)
	if bytes.HasPrefix(data, bom) { // a byte order mark must stay first
		shifted = append(append(append(shifted, bom...), '\n'), data[len(bom):]...)
	} else {
		shifted = append(append(shifted, '\n'), data...)
	}
	line, ok := reparse(shifted, problem)
	if !ok || line < 2 {
		return 0
	}
	return line - 1
}

// problemLine is the 1-based line of problem in data, given the line
// where its construct starts; that line when nothing better is found.
func problemLine(data []byte, construct int, problem string) int {
	start := 0
	for l := 1; l < construct; l++ {
		i := bytes.IndexByte(data[start:], '\n')
		if i < 0 {
			return construct
		}
		start += i + 1
	}
	rel, ok := reparse(data[start:], problem)
	if !ok || rel == 0 {
		return construct
	}
	return construct + rel - 1
}

// lastContentLine is the 1-based number of the last line of data that has
// anything but white space or a comment on it (0 for none).
func lastContentLine(data []byte) int {
	last := 0
	for i, l := range bytes.Split(data, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 && l[0] != '#' {
			last = i + 1
		}
	}
	return last
}

func decodeAll(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &doc)
	}
}

// parseDocuments parses every YAML document in data and returns their root
// nodes. Empty documents (nothing, or only comments) are left out, so an
// empty file yields no roots and no error. A file whose aliases expand too
// far (see checkExpansion) is an error. Every error is a *docError.
func parseDocuments(data []byte) ([]*yaml.Node, error) {
	docs, err := decodeAll(data)
	if err != nil {
		return nil, toSyntaxError(data, err)
	}
	x := newExpansion()
	var roots []*yaml.Node
	for _, doc := range docs {
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if _, _, err := x.measure(root, 1); err != nil {
			return nil, err
		}
		if isNull(root) {
			continue
		}
		roots = append(roots, root)
	}
	return roots, nil
}

// expansion measures YAML trees as if every alias were replaced by a copy
// of the value it refers to, without making the copies: each node is
// measured once and remembered. It finds values that contain themselves,
// nesting deeper than maxNesting and aliases that add more than
// maxAliasValues values to a file.
type expansion struct {
	size   map[*yaml.Node]int // expanded number of values, capped at sizeCap
	height map[*yaml.Node]int // expanded levels, 1 for a scalar
	open   map[*yaml.Node]bool
	added  int // values added by aliases so far, in document order
}

// sizeCap keeps sizes far from overflowing; anything near it is far over
// maxAliasValues anyway.
const sizeCap = 1 << 40

func newExpansion() *expansion {
	return &expansion{size: map[*yaml.Node]int{}, height: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
}

// measure returns the expanded size and height of n, found at depth (1
// for a document root). Every node is first reached where it is written
// (an alias only refers to a value that was written before it), so the
// aliases are met, and counted, in the order they appear in the file.
func (x *expansion) measure(n *yaml.Node, depth int) (size, height int, err error) {
	if n.Kind == yaml.AliasNode {
		t := n.Alias
		if t == nil {
			return 1, 1, nil
		}
		if x.open[t] {
			return 0, 0, &docError{line: n.Line, err: fmt.Errorf(
				"alias *%s is inside the value it refers to (anchor &%s at line %d); a value cannot contain itself", n.Value, n.Value, t.Line)}
		}
		size, height, err = x.measure(t, depth)
		if err != nil {
			return 0, 0, err
		}
		x.added = min(x.added+size-1, sizeCap)
		if x.added > maxAliasValues {
			return 0, 0, &docError{line: n.Line, err: fmt.Errorf(
				"aliases expand to more than %d values (alias *%s repeats %d values of anchor &%s at line %d); write fewer aliases",
				maxAliasValues, n.Value, size, n.Value, t.Line)}
		}
		return size, height, nil
	}
	if s, ok := x.size[n]; ok {
		height = x.height[n]
		if depth+height-1 > maxNesting {
			return 0, 0, tooDeep(n.Line)
		}
		return s, height, nil
	}
	if depth > maxNesting {
		return 0, 0, tooDeep(n.Line)
	}
	x.open[n] = true
	size, height = 1, 0
	for _, c := range n.Content {
		cs, ch, err := x.measure(c, depth+1)
		if err != nil {
			return 0, 0, err
		}
		size = min(size+cs, sizeCap)
		height = max(height, ch)
	}
	delete(x.open, n)
	height++
	x.size[n], x.height[n] = size, height
	return size, height, nil
}

func tooDeep(line int) error {
	return &docError{line: line, err: fmt.Errorf("values are nested more than %d levels deep (aliases expanded)", maxNesting)}
}

// unalias follows YAML aliases (*name) to the node they point at, so anchors
// work everywhere a value is read.
func unalias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = unalias(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	n = unalias(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "no value"
		case "!!bool":
			return "the bool " + n.Value
		case "!!int", "!!float":
			return "the number " + excerpt(n.Value)
		default:
			return fmt.Sprintf("the string %q", excerpt(n.Value))
		}
	default:
		return "an unsupported YAML node"
	}
}

// maxQuoted is the most of a value an error quotes: enough to find it in
// the file, not enough to copy a file that is not a pipeline file (a
// symlink to /etc/passwd) into the log and the API's error list.
const maxQuoted = 40

// excerpt is s cut to maxQuoted characters, saying how long it was.
func excerpt(s string) string {
	r := []rune(s)
	if len(r) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s... (%d characters)", string(r[:maxQuoted]), len(r))
}

// mapPair is one key/value entry of a YAML mapping.
type mapPair struct {
	key   *yaml.Node
	value *yaml.Node
}

// pairs lists the entries of a mapping node in document order, with aliases
// resolved.
func pairs(m *yaml.Node) []mapPair {
	out := make([]mapPair, 0, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		out = append(out, mapPair{key: unalias(m.Content[i]), value: unalias(m.Content[i+1])})
	}
	return out
}

// lookup returns the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for _, p := range pairs(m) {
		if p.key.Kind == yaml.ScalarNode && p.key.Value == key {
			return p.value
		}
	}
	return nil
}
