package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// syntaxError is malformed YAML, with the line yaml.v3 reported (0 if none).
type syntaxError struct {
	line int
	msg  string
}

func (e *syntaxError) Error() string { return "invalid YAML: " + e.msg }

// yaml.v3 only reports syntax errors as text ("yaml: line 3: ..."), so the
// line is recovered from the message.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func toSyntaxError(err error) *syntaxError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &syntaxError{line: line, msg: m[2]}
	}
	return &syntaxError{msg: strings.TrimPrefix(msg, "yaml: ")}
}

// parseDocuments parses every YAML document in data and returns their root
// nodes. Empty documents (nothing, or only comments) are left out, so an
// empty file yields no roots and no error.
func parseDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var roots []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return roots, nil
		}
		if err != nil {
			return nil, toSyntaxError(err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if isNull(root) {
			continue
		}
		roots = append(roots, root)
	}
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
			return "the number " + n.Value
		default:
			return fmt.Sprintf("the string %q", n.Value)
		}
	default:
		return "an unsupported YAML node"
	}
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
