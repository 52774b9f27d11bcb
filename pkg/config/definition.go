package config

import (
	"bytes"
	"errors"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxDefinitionNodes bounds a pipeline's Definition: aliases are written
// out in full there, and a few lines of anchors can stand for millions of
// nodes.
const maxDefinitionNodes = 50_000

// Masked stands in a Definition for a value that looks like a credential.
const Masked = "*****"

// secretWords make a key's value a credential when its name contains one.
var secretWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "credential",
	"apikey", "api-key", "api_key", "api.key",
	"privatekey", "private-key", "private_key", "private.key",
	"accesskey", "access-key", "access_key", "access.key",
}

var (
	// urlPassword is the password of a URL's user information
	// (postgres://user:password@host).
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@`)
	// dsnPassword is the password of a key=value connection string
	// (host=db password=secret).
	dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('[^']*'|\S+)`)
)

var errDefinitionTooLarge = errors.New("too large to show")

// definitionOf writes the pipeline n as a pipeline file of its own:
// comments kept, aliases written out, and the values of credentials
// (keys named like password or token, passwords in URLs and connection
// strings) replaced by Masked, so that it can be shown to whoever may
// read the API. Values are shown as written (written maps the nodes whose
// environment variables were expanded to their text in the file): the
// environment, where people keep credentials, stays out of it.
func definitionOf(n *yaml.Node, written map[*yaml.Node]string) (string, error) {
	budget := maxDefinitionNodes
	entry, err := copyNode(n, written, &budget)
	if err != nil {
		return "", err
	}
	maskCredentials(entry)
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{
		Kind: yaml.MappingNode, Tag: "!!map",
		Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "version"},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "2.2", Style: yaml.DoubleQuotedStyle},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "pipelines"},
			{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{entry}},
		},
	}}}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// copyNode copies n with its aliases replaced by copies of what they
// name, and the values in written as written, spending one of budget per
// node.
func copyNode(n *yaml.Node, written map[*yaml.Node]string, budget *int) (*yaml.Node, error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if *budget--; *budget < 0 {
		return nil, errDefinitionTooLarge
	}
	c := &yaml.Node{
		Kind: n.Kind, Style: n.Style, Tag: n.Tag, Value: n.Value,
		HeadComment: n.HeadComment, LineComment: n.LineComment, FootComment: n.FootComment,
	}
	if w, ok := written[n]; ok {
		c.Value = w
	}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			var err error
			if c.Content[i], err = copyNode(child, written, budget); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// maskCredentials replaces credentials in the tree n (a copy: aliases
// are written out, so nothing is shared).
func maskCredentials(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && v.Kind == yaml.ScalarNode && v.Value != "" && isSecretKey(k.Value) {
				v.Value, v.Style, v.Tag = Masked, yaml.DoubleQuotedStyle, "!!str"
				continue
			}
			maskCredentials(k)
			maskCredentials(v)
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			maskCredentials(c)
		}
	case yaml.ScalarNode:
		masked := urlPassword.ReplaceAllString(n.Value, "${1}"+Masked+"@")
		masked = dsnPassword.ReplaceAllString(masked, "${1}"+Masked)
		n.Value = masked
	}
}

func isSecretKey(name string) bool {
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
