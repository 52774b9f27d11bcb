package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestDefinitionIsThePipelineAsAFileWithCredentialsMasked(t *testing.T) {
	file := `version: "2.2"
pipelines:
  - id: other
    connectors:
      - id: s
        type: source
        plugin: builtin:postgres
        settings: &pg
          url: postgres://app:s3cret@127.0.0.1:5432/orders
      - {id: d, type: destination, plugin: builtin:log}
  # Orders into the warehouse.
  - id: orders
    connectors:
      - id: src
        type: source
        plugin: builtin:postgres
        settings: *pg
      - id: dst
        type: destination
        plugin: builtin:file
        settings:
          path: /tmp/orders.jsonl # one line per record
          api-key: abc123
          dsn: host=db password=hunter2 user=app
          sasl.password: topsecret
          token: ""
`
	valid, errs := ParsePipelines(FileContent{Name: "orders.yml", Data: []byte(file)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	def := valid[1].Definition
	for _, secret := range []string{"s3cret", "abc123", "hunter2", "topsecret"} {
		if strings.Contains(def, secret) {
			t.Errorf("the definition shows the credential %q:\n%s", secret, def)
		}
	}
	for _, want := range []string{
		`version: "2.2"`, "# Orders into the warehouse.", "id: orders",
		"url: postgres://app:*****@127.0.0.1:5432/orders", // the alias, written out
		"path: /tmp/orders.jsonl # one line per record",
		`api-key: "*****"`, "host=db password=***** user=app", `sasl.password: "*****"`,
		`token: ""`, // nothing to hide
	} {
		if !strings.Contains(def, want) {
			t.Errorf("the definition lacks %q:\n%s", want, def)
		}
	}
	if strings.Contains(def, "other") || strings.Contains(def, "&pg") {
		t.Errorf("the definition holds more than its pipeline:\n%s", def)
	}

	// It is a pipeline file: read again, it gives the same pipeline but
	// for the masked values.
	again, errs := ParsePipelines(FileContent{Name: "again.yml", Data: []byte(def)})
	if len(errs) > 0 || len(again) != 1 {
		t.Fatalf("the definition does not read as a pipeline file: %v\n%s", errs, def)
	}
	if got := again[0].Connectors[1].Settings["path"]; got != "/tmp/orders.jsonl" || again[0].ID != "orders" {
		t.Errorf("read again: id %q, path %q", again[0].ID, got)
	}
}

func TestDefinitionOfAnAliasBombIsLeftOut(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [v, v, v, v, v, v, v, v, v, v]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	// 10^9 nodes once the aliases are written out.
	if def, err := definitionOf(doc.Content[0], nil); !errors.Is(err, errDefinitionTooLarge) {
		t.Fatalf("definitionOf = %d bytes, %v; want errDefinitionTooLarge", len(def), err)
	}
}
