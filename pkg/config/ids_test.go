package config

import (
	"strings"
	"testing"
)

// Ids are restricted as Conduit restricts them; the error names the
// file, the line and the field.
func TestIDsAreRestricted(t *testing.T) {
	const file = `version: "2.2"
pipelines:
  - id: %PIPELINE%
    connectors:
      - id: %CONNECTOR%
        type: source
        plugin: builtin:generator
      - id: dst
        type: destination
        plugin: builtin:log
    processors:
      - id: %PROCESSOR%
        plugin: field.set
`
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name                  string
		pipeline, conn, proc  string
		wantLine              string // "" : valid
		wantField, wantReason string
	}{
		{name: "valid", pipeline: "orders-v1_eu:2.x", conn: "src", proc: "set"},
		{name: "the longest pipeline id", pipeline: long(128), conn: "src", proc: "set"},
		{name: "a processor id with a space, as Conduit allows", pipeline: "p", conn: "src", proc: `"set field"`},
		{name: "a slash", pipeline: "a/b", conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: `"a/b" holds '/'`},
		{name: "dot dot", pipeline: `".."`, conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "cannot be addressed"},
		{name: "dot", pipeline: `"."`, conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "cannot be addressed"},
		{name: "too long", pipeline: long(129), conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "129 characters long; a pipeline id has at most 128"},
		{name: "300 characters", pipeline: long(300), conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "at most 128"},
		{name: "an escape sequence", pipeline: `"\e[31mred"`, conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "U+001B"},
		{name: "a space", pipeline: `"a b"`, conn: "src", proc: "set", wantLine: "p.yml:3", wantField: "id", wantReason: "' '"},
		{name: "a connector id with a slash", pipeline: "p", conn: "a/b", proc: "set", wantLine: "p.yml:5", wantField: "connectors[a/b].id", wantReason: "a connector id cannot"},
		{name: "a connector id too long", pipeline: "p", conn: long(257), proc: "set", wantLine: "p.yml:5", wantField: ".id", wantReason: "at most 256"},
		{name: "a processor id with an escape sequence", pipeline: "p", conn: "src", proc: `"\e]0;x\a"`, wantLine: "p.yml:12", wantField: ".id", wantReason: "a processor id cannot"},
		{name: "a processor id with a slash", pipeline: "p", conn: "src", proc: "x/y", wantLine: "p.yml:12", wantField: ".id", wantReason: "'/'"},
		{name: "a processor id dot dot", pipeline: "p", conn: "src", proc: `".."`, wantLine: "p.yml:12", wantField: ".id", wantReason: "cannot be addressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.NewReplacer("%PIPELINE%", tc.pipeline, "%CONNECTOR%", tc.conn, "%PROCESSOR%", tc.proc).Replace(file)
			got, errs := parsePipelines(mapEnv(nil), FileContent{Name: "p.yml", Data: []byte(data)})
			if tc.wantLine == "" {
				if len(errs) > 0 || len(got) != 1 {
					t.Fatalf("%d pipelines, errors %v", len(got), errs)
				}
				return
			}
			if len(got) != 0 || len(errs) == 0 {
				t.Fatalf("%d pipelines, errors %v: the id was accepted", len(got), errs)
			}
			msg := errs[0].Error()
			for _, want := range []string{tc.wantLine + ":", tc.wantField + ": ", tc.wantReason} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q: %s", want, msg)
				}
			}
			if strings.ContainsAny(msg, "\x1b\a") {
				t.Errorf("the error prints a control character raw: %q", msg)
			}
		})
	}
}
