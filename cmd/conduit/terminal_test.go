package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	opencdcv1 "github.com/conduitio/conduit-commons/proto/opencdc/v1"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"gopkg.in/yaml.v3"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

func TestEscapeControls(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "plain text and layout stay", in: "ID\tSTATUS\norders  running\n", want: "ID\tSTATUS\norders  running\n"},
		{name: "other languages stay", in: "commande échouée: 注文 ✓", want: "commande échouée: 注文 ✓"},
		{name: "a title change and a screen wipe", in: "\x1b]0;pwned\x07\x1b[2Jgone", want: `\x1b]0;pwned\x07\x1b[2Jgone`},
		{name: "carriage return and backspace", in: "ok\rFAIL\b", want: `ok\x0dFAIL\x08`},
		{name: "DEL", in: "a\x7fb", want: `a\x7fb`},
		{name: "the one-character CSI of C1", in: "a\u009b2Jb", want: `a\u009b2Jb`},
		{name: "a right-to-left override", in: "txt.\u202eexe", want: `txt.\u202eexe`},
		{name: "bytes that are not UTF-8", in: "a\xffb", want: `a\xffb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := humanOutput(&b).Write([]byte(tc.in))
			if err != nil || n != len(tc.in) {
				t.Fatalf("Write: %d, %v", n, err)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

// hostileText holds every kind of character a terminal acts on: a title
// change and screen wipe (C0), DEL, the one-character CSI of C1 and a
// right-to-left override.
const hostileText = "txt.\u202eexe \u009b2J \x1b]0;pwned\x07 a\x7fb"

// assertNoTerminalControls fails when out holds a character a terminal
// acts on (newlines and tabs are layout).
func assertNoTerminalControls(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && terminalControl(r) {
			t.Errorf("%s holds the raw control U+%04X:\n%q", what, r, out)
			return
		}
	}
}

func TestEscapeJSONControls(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "plain JSON stays as it is", in: "{\n  \"a\": \"é 注文 ✓\"\n}\n", want: "{\n  \"a\": \"é 注文 ✓\"\n}\n"},
		{name: "a right-to-left override", in: "{\"id\":\"txt.\u202eexe\"}", want: `{"id":"txt.\u202eexe"}`},
		{name: "the one-character CSI of C1", in: "[\"a\u009b2Jb\"]", want: `["a\u009b2Jb"]`},
		{name: "DEL", in: "\"a\x7fb\"", want: `"a\u007fb"`},
		{name: "isolates and marks", in: "\"\u2066\u2069\u200f\u061c\"", want: `"\u2066\u2069\u200f\u061c"`},
		{name: "bytes that are not UTF-8", in: "\"a\xffb\"", want: `"a\ufffdb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(escapeJSONControls([]byte(tc.in))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Every JSON and YAML output of the CLI (-o json, -o yaml, --json of
// Conduit's verbs, events, inspect) escapes terminal controls in its own
// syntax and still reads back as the exact value.
func TestStructuredOutputEscapesTerminalControls(t *testing.T) {
	p := &conduitv1.Pipeline{
		Id:          "p\u202e1",
		Description: hostileText,
		LastError:   &conduitv1.PipelineError{Code: 400, Message: hostileText},
	}
	e := &conduitv1.PipelineEvent{Sequence: 1, PipelineId: "p\u202e1", Kind: "fault", Error: &conduitv1.PipelineError{Message: hostileText}}
	v1 := &apiv1.Pipeline{Id: "p\u202e1", State: &apiv1.Pipeline_State{Error: hostileText}}

	decodeJSON := func(t *testing.T, out string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		return m
	}
	decodeYAML := func(t *testing.T, out string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := yaml.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, out)
		}
		return m
	}

	t.Run("pipelines -o json", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeStructured(&b, outputJSON, p); err != nil {
			t.Fatal(err)
		}
		assertNoTerminalControls(t, "-o json", b.String())
		m := decodeJSON(t, b.String())
		if got := text(m, "last_error", "message"); got != hostileText {
			t.Errorf("message reads back as %q", got)
		}
		if got := text(m, "id"); got != "p\u202e1" || !strings.Contains(b.String(), `p\u202e1`) {
			t.Errorf("id reads back as %q:\n%s", got, b.String())
		}
	})
	t.Run("pipelines -o yaml", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeStructured(&b, outputYAML, p); err != nil {
			t.Fatal(err)
		}
		assertNoTerminalControls(t, "-o yaml", b.String())
		m := decodeYAML(t, b.String())
		if got := text(m, "last_error", "message"); got != hostileText {
			t.Errorf("message reads back as %q:\n%s", got, b.String())
		}
		if got := text(m, "id"); got != "p\u202e1" {
			t.Errorf("id reads back as %q:\n%s", got, b.String())
		}
	})
	t.Run("-o yaml keeps plain multi-line text a block", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeStructured(&b, outputYAML, &conduitv1.Pipeline{Id: "p", Definition: "a: 1\n\tb: 2\n"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "definition: |") {
			t.Errorf("a definition without controls is no longer a block:\n%s", b.String())
		}
	})
	t.Run("describe -o yaml", func(t *testing.T) {
		out, err := newDescribeOutput(p, []*conduitv1.PipelineEvent{e})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := writeStructured(&b, outputYAML, out); err != nil {
			t.Fatal(err)
		}
		assertNoTerminalControls(t, "describe -o yaml", b.String())
		m := decodeYAML(t, b.String())
		if got := text(m, "pipeline", "description"); got != hostileText {
			t.Errorf("description reads back as %q:\n%s", got, b.String())
		}
	})
	t.Run("ls --json (Conduit's shape)", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeV1JSON(&b, &apiv1.ListPipelinesResponse{Pipelines: []*apiv1.Pipeline{v1}}); err != nil {
			t.Fatal(err)
		}
		assertNoTerminalControls(t, "ls --json", b.String())
		m := decodeJSON(t, b.String())
		if got := m["pipelines"].([]any)[0].(map[string]any)["state"].(map[string]any)["error"]; got != hostileText {
			t.Errorf("error reads back as %q", got)
		}
	})
	t.Run("config --json", func(t *testing.T) {
		var b bytes.Buffer
		if err := writeIndentedJSON(&b, map[string]string{"k": hostileText}); err != nil {
			t.Fatal(err)
		}
		assertNoTerminalControls(t, "config --json", b.String())
		if got := decodeJSON(t, b.String())["k"]; got != hostileText {
			t.Errorf("value reads back as %q", got)
		}
	})
	for _, output := range []string{outputJSON, outputYAML} {
		t.Run("events -o "+output, func(t *testing.T) {
			var b bytes.Buffer
			if err := (eventPrinter{w: &b, output: output, view: testView()}).print(e); err != nil {
				t.Fatal(err)
			}
			assertNoTerminalControls(t, "events -o "+output, b.String())
			decode := decodeJSON
			if output == outputYAML {
				decode = decodeYAML
			}
			if got := text(decode(t, strings.TrimPrefix(b.String(), "---\n")), "error", "message"); got != hostileText {
				t.Errorf("message reads back as %q:\n%s", got, b.String())
			}
		})
	}
	t.Run("inspect", func(t *testing.T) {
		rec := &opencdcv1.Record{Position: []byte("1"), Payload: &opencdcv1.Change{After: &opencdcv1.Data{Data: &opencdcv1.Data_RawData{RawData: []byte(hostileText)}}}, Metadata: map[string]string{"k": hostileText}}
		msg := &apiv1.InspectConnectorResponse{Record: rec}
		for _, asJSON := range []bool{false, true} {
			line, err := inspectLine(msg, rec, asJSON)
			if err != nil {
				t.Fatal(err)
			}
			assertNoTerminalControls(t, "inspect", string(line))
			decodeJSON(t, string(line))
		}
	})
}

// A recovery rule is printed as written, but for terminal controls: YAML
// takes the bidirectional ones raw, so a rule holding one is re-encoded
// with that string double-quoted and escaped, and reads back the same.
func TestInertYAML(t *testing.T) {
	plain := "name: pg-auth # PostgreSQL's\nmatch:\n  message: 'password authentication failed'\naction: degrade\n"
	if got := inertYAML(plain); got != plain {
		t.Errorf("a rule without controls changed:\n%s", got)
	}
	hostile := "# see txt.\u202eexe\nname: pg-auth\nmatch:\n  message: password \u202efailed # why\n  code: 28P01\naction: degrade\n"
	got := inertYAML(hostile)
	assertNoTerminalControls(t, "rule", got)
	var want, back map[string]any
	if err := yaml.Unmarshal([]byte(hostile), &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(got), &back); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, got)
	}
	if text(back, "match", "message") != "password \u202efailed" || text(back, "match", "code") != "28P01" || back["action"] != "degrade" {
		t.Errorf("reads back as %v, want %v:\n%s", back, want, got)
	}
	if !strings.Contains(got, "# why") || !strings.Contains(got, `\u202e`) {
		t.Errorf("comments or the escape lost:\n%s", got)
	}
}

// text is the value at path in a decoded document.
func text(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		v = v.(map[string]any)[k]
	}
	return v
}
