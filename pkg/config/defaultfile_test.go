package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The repository root's conduit.yml is what users see first; it must be the
// file `conduit init` writes.
func TestDefaultConfigFileMatchesRepositoryRoot(t *testing.T) {
	root, err := os.ReadFile(filepath.Join("..", "..", "conduit.yml"))
	if err != nil {
		t.Fatalf("reading the repository root conduit.yml: %v", err)
	}
	if !bytes.Equal(root, DefaultConfigFile) {
		t.Error("conduit.yml at the repository root differs from pkg/config/conduit.yml; copy pkg/config/conduit.yml over it")
	}
}

func TestDefaultConfigFileLoadsToDefault(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conduit.yml", string(DefaultConfigFile))
	got, _, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ConfigPath = path
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loading DefaultConfigFile:\n got %+v\nwant %+v", got, want)
	}
}

// Every key of the table must be set in the default file and documented in
// the comment right above it, with its default, env var and flag, so the
// documentation cannot go stale when a key is added or a default changes.
func TestDefaultConfigFileDocumentsEveryKey(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(DefaultConfigFile, &doc); err != nil {
		t.Fatal(err)
	}
	comments := map[string]string{} // dotted key -> head comment
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			name := k.Value
			if prefix != "" {
				name = prefix + "." + name
			}
			if v.Kind == yaml.MappingNode {
				walk(v, name)
				continue
			}
			comments[name] = k.HeadComment
		}
	}
	walk(doc.Content[0], "")

	var inFile, inTable []string
	for name := range comments {
		inFile = append(inFile, name)
	}
	for _, k := range Keys() {
		inTable = append(inTable, k.Name)
	}
	sort.Strings(inFile)
	sort.Strings(inTable)
	if strings.Join(inFile, " ") != strings.Join(inTable, " ") {
		t.Errorf("keys in conduit.yml:\n%v\nkeys in the table:\n%v", inFile, inTable)
	}

	for _, k := range Keys() {
		t.Run(k.Name, func(t *testing.T) {
			c, ok := comments[k.Name]
			if !ok {
				t.Fatal("not set in conduit.yml")
			}
			def := k.Default
			if def == "" {
				def = `""` // an empty default is written as YAML writes it
			}
			for _, want := range []string{
				"Default: " + def + ".",
				"Env: " + k.Env + ".",
				"Flag: " + k.Flag + ".",
			} {
				if !strings.Contains(c, want) {
					t.Errorf("comment above %s does not contain %q:\n%s", k.Name, want, c)
				}
			}
			// A line of explanation besides the Default/Env/Flag line.
			if strings.Count(c, "\n") < 1 {
				t.Errorf("comment above %s explains nothing:\n%s", k.Name, c)
			}
		})
	}
}
