package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/conduit"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
)

// validateInit checks a file of `pipelines init` as `conduit run` would,
// failing the test with every problem.
func validateInit(t *testing.T, name string, file []byte) {
	t.Helper()
	cfg := config.Default()
	cfg.Connectors.Path = t.TempDir()
	cfg.Processors.Path = t.TempDir()
	ids, problems := conduit.ValidateFiles(cfg, []config.FileContent{{Name: name, Data: file}})
	for _, p := range problems {
		t.Errorf("%s: %v\n%s", name, p.Err, file)
	}
	if len(ids) != 1 {
		t.Errorf("%s: valid pipelines %v, want one", name, ids)
	}
}

// The demo runs as written: a generator of airlines and departure times,
// one record a second, to the log.
func TestPipelinesInitDemo(t *testing.T) {
	file, err := renderInitPipeline(connector.NewRegistry(connector.Builtin()...), initDemoName, "", "")
	if err != nil {
		t.Fatal(err)
	}
	validateInit(t, "demo-pipeline.yaml", file)
	valid, errs := config.ParsePipelines(config.FileContent{Name: "demo-pipeline.yaml", Data: file})
	if len(errs) > 0 || len(valid) != 1 {
		t.Fatalf("%v %v", valid, errs)
	}
	p := valid[0]
	if p.ID != "demo-pipeline" || len(p.Connectors) != 2 {
		t.Fatalf("pipeline %+v", p)
	}
	src, dst := p.Connectors[0], p.Connectors[1]
	if src.ID != "generator-source" || src.Plugin != "generator" || src.Settings["rate"] != "1" ||
		src.Settings["format.options.airline"] != "string" || src.Settings["format.options.scheduledDeparture"] != "time" ||
		src.Settings["format.type"] != "structured" || len(src.Settings) != 4 {
		t.Errorf("source %+v", src)
	}
	if dst.ID != "log-destination" || dst.Plugin != "log" || len(dst.Settings) != 0 {
		t.Errorf("destination %+v", dst)
	}
}

// Every pair of built-in connectors makes a file that parses, with every
// required parameter written (empty, for the user to fill in) and
// explained; once the required values are filled in, a pipeline of
// conduit's own connectors validates as it is.
func TestPipelinesInitEveryBuiltinPair(t *testing.T) {
	reg := connector.NewRegistry(connector.Builtin()...)
	var sources, destinations []string
	for _, p := range connector.Builtin() {
		if p.NewSource != nil {
			sources = append(sources, p.Name)
		}
		if p.NewDestination != nil {
			destinations = append(destinations, p.Name)
		}
	}
	own := map[string]bool{"generator": true, "file": true, "log": true, "chaos": true}
	for _, s := range sources {
		for _, d := range destinations {
			t.Run(s+"-to-"+d, func(t *testing.T) {
				name := fmt.Sprintf("%s-to-%s", s, d)
				file, err := renderInitPipeline(reg, name, s, d)
				if err != nil {
					t.Fatal(err)
				}
				valid, errs := config.ParsePipelines(config.FileContent{Name: name + ".yaml", Data: file})
				if len(errs) > 0 || len(valid) != 1 {
					t.Fatalf("parse: %v\n%s", errs, file)
				}
				if c := valid[0].Connectors; c[0].ID != s+"-source" || c[0].Plugin != s || c[1].ID != d+"-destination" || c[1].Plugin != d {
					t.Errorf("connectors %+v", c)
				}
				// Each required parameter is there, empty, after its
				// "# Required" line.
				required := regexp.MustCompile(`(?m)^ +# Required\n +([^#: ]+): ""$`)
				if !own[s] && !own[d] && len(required.FindAllString(string(file), -1)) == 0 {
					t.Errorf("no required parameter in\n%s", file)
				}
				if !own[s] || !own[d] {
					return
				}
				out := filepath.Join(t.TempDir(), "out.jsonl")
				filled := required.ReplaceAllStringFunc(string(file), func(m string) string {
					return strings.TrimSuffix(m, `""`) + fmt.Sprintf("%q", out)
				})
				validateInit(t, name+".yaml", []byte(filled))
			})
		}
	}
}

func TestPipelinesInitRefusals(t *testing.T) {
	reg := connector.NewRegistry(connector.Builtin()...)
	for _, tc := range []struct {
		source, destination, want string
	}{
		{"log", "", `--source "log": want a built-in connector that can be a source: chaos, file, generator, kafka, postgres, s3`},
		{"", "generator", `--destination "generator": want a built-in connector that can be a destination: chaos, file, kafka, log, postgres, s3`},
		{"nope", "file", `--source "nope": want a built-in connector that can be a source`},
	} {
		if _, err := renderInitPipeline(reg, "x", tc.source, tc.destination); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("--source %q --destination %q: %v, want %q", tc.source, tc.destination, err, tc.want)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b", `a\b`, "a\x1bb"} {
		if err := checkInitName(name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if err := checkInitName("orders-to-s3"); err != nil {
		t.Error(err)
	}
	// builtin: and a version are accepted and left out of the file.
	file, err := renderInitPipeline(reg, "x", "builtin:file@v0.1.0", "builtin:log")
	if err != nil || !strings.Contains(string(file), "plugin: 'file'\n") || !strings.Contains(string(file), "plugin: 'log'\n") {
		t.Errorf("%v\n%s", err, file)
	}
}

func TestYAMLQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"":          `""`,
		"a":         `'a'`,
		"it's":      `'it''s'`,
		"a\nb":      `"a\nb"`,
		"{{ .x }}":  `'{{ .x }}'`,
		"#, : * & ": `'#, : * & '`,
	} {
		if got := yamlQuoted(in); got != want {
			t.Errorf("yamlQuoted(%q) = %s, want %s", in, got, want)
		}
	}
}
