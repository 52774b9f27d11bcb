package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	configv1 "github.com/conduitio/conduit-commons/proto/config/v1"
	opencdcv1 "github.com/conduitio/conduit-commons/proto/opencdc/v1"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"gopkg.in/yaml.v3"

	"github.com/conduitry/conduit/pkg/config"
)

func testConnector() *apiv1.Connector {
	return &apiv1.Connector{
		Id: "orders:pg", Type: apiv1.Connector_TYPE_SOURCE, Plugin: "builtin:postgres", PipelineId: "orders",
		Config:       &apiv1.Connector_Config{Name: "pg", Settings: map[string]string{"url": "postgres://u:*****@db/x", "tables": "orders"}},
		ProcessorIds: []string{"orders:pg:tag"},
		UpdatedAt:    at(0),
	}
}

func testProcessor() *apiv1.Processor {
	return &apiv1.Processor{
		Id: "orders:pg:tag", Plugin: "field.set", Condition: `{{ eq .Operation "create" }}`,
		Parent:    &apiv1.Processor_Parent{Type: apiv1.Processor_Parent_TYPE_CONNECTOR, Id: "orders:pg"},
		Config:    &apiv1.Processor_Config{Settings: map[string]string{"value": "seen", "field": ".Metadata.tag"}, Workers: 2},
		CreatedAt: at(0), UpdatedAt: at(0),
	}
}

func TestConnectorsTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeConnectorsTable(&b, []*apiv1.Connector{testConnector(),
		{Id: "orders:out", Type: apiv1.Connector_TYPE_DESTINATION, Plugin: "builtin:file", PipelineId: "orders"}}); err != nil {
		t.Fatal(err)
	}
	want := `ID          PLUGIN            TYPE         PIPELINE_ID  CREATED  LAST_UPDATED
orders:pg   builtin:postgres  source       orders       -        2024-05-01T12:00:00Z
orders:out  builtin:file      destination  orders       -        -
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeConnectorsTable(&b, nil); err != nil || b.String() != "no connectors\n" {
		t.Errorf("empty: %q %v", b.String(), err)
	}
}

func TestProcessorsTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeProcessorsTable(&b, []*apiv1.Processor{testProcessor()}); err != nil {
		t.Fatal(err)
	}
	want := `ID             PLUGIN     PARENT                 CONDITION                     CREATED               LAST_UPDATED
orders:pg:tag  field.set  connector (orders:pg)  {{ eq .Operation "create" }}  2024-05-01T12:00:00Z  2024-05-01T12:00:00Z
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestConnectorDescription(t *testing.T) {
	var b bytes.Buffer
	if err := writeConnector(&b, testConnector(), []*apiv1.Processor{testProcessor()}); err != nil {
		t.Fatal(err)
	}
	want := `ID: orders:pg
Type: source
Plugin: builtin:postgres
Pipeline ID: orders
Config:
  tables: orders
  url: postgres://u:*****@db/x
Created At: -
Updated At: 2024-05-01T12:00:00Z
Processors:
  - ID: orders:pg:tag
    Plugin: field.set
    Condition: {{ eq .Operation "create" }}
    Config:
      field: .Metadata.tag
      value: seen
    Workers: 2
    Created At: 2024-05-01T12:00:00Z
    Updated At: 2024-05-01T12:00:00Z
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestConnectorDescriptionJSON(t *testing.T) {
	out, err := newConnectorDescription(testConnector(), []*apiv1.Processor{testProcessor()})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeIndentedJSON(&b, out); err != nil {
		t.Fatal(err)
	}
	// Conduit's shape: protojson names (lowerCamelCase), enums by name.
	var got struct {
		Connector struct {
			ID           string   `json:"id"`
			Type         string   `json:"type"`
			PipelineID   string   `json:"pipelineId"`
			ProcessorIDs []string `json:"processorIds"`
		} `json:"connector"`
		Processors []struct {
			Parent struct {
				Type string `json:"type"`
			} `json:"parent"`
		} `json:"processors"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Connector.ID != "orders:pg" || got.Connector.Type != "TYPE_SOURCE" || got.Connector.PipelineID != "orders" ||
		len(got.Connector.ProcessorIDs) != 1 || len(got.Processors) != 1 || got.Processors[0].Parent.Type != "TYPE_CONNECTOR" {
		t.Errorf("got %s", b.String())
	}
	if !strings.HasPrefix(b.String(), "{\n  \"connector\": {\n    \"id\": \"orders:pg\",\n") {
		t.Errorf("not indented by two spaces:\n%s", b.String())
	}

	// No processors is an empty list, not null, as Conduit prints it.
	out, err = newConnectorDescription(testConnector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(out); !strings.Contains(string(raw), `"processors":[]`) {
		t.Errorf("no processors: %s", raw)
	}
}

// Values that come from a pipeline file or a plugin (ids, settings,
// summaries) cannot drive the terminal: the commands write through
// humanOutput, which escapes them, and no value breaks a row.
func TestConduitVerbsEscapeTerminalControls(t *testing.T) {
	c := testConnector()
	c.Id = "orders:\x1b[2Jpg"
	c.Config.Settings["tables"] = "a\x1b]0;owned\x07\nb"
	p := testProcessor()
	p.Condition = "x\u202ey"
	var b bytes.Buffer
	w := humanOutput(&b)
	if err := writeConnectorsTable(w, []*apiv1.Connector{c}); err != nil {
		t.Fatal(err)
	}
	if err := writeConnector(w, c, []*apiv1.Processor{p}); err != nil {
		t.Fatal(err)
	}
	if err := writePluginsTable(w, "connector", []pluginRow{{"evil\u009b31m", "line\nbreak"}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("output holds %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{`orders:\x1b[2Jpg`, `tables: a\x1b]0;owned\x07 b`, `x\u202ey`, `evil\u009b31m  line break`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPluginDescriptions(t *testing.T) {
	params := map[string]*configv1.Parameter{
		"sdk.batch.size": {Type: configv1.Parameter_TYPE_INT, Default: "0", Description: "SDK batch size."},
		"url":            {Type: configv1.Parameter_TYPE_STRING, Description: "Where.", Validations: []*configv1.Validation{{Type: configv1.Validation_TYPE_REQUIRED}}},
		"mode":           {Type: configv1.Parameter_TYPE_STRING, Default: "a", Validations: []*configv1.Validation{{Type: configv1.Validation_TYPE_INCLUSION, Value: "a,b"}}},
		"tables":         {Type: configv1.Parameter_TYPE_STRING, Validations: []*configv1.Validation{{Type: configv1.Validation_TYPE_REQUIRED}}},
		"delay":          {Type: configv1.Parameter_TYPE_DURATION, Default: "1s", Validations: []*configv1.Validation{{Type: configv1.Validation_TYPE_GREATER_THAN, Value: "0"}}},
	}
	var b bytes.Buffer
	if err := writeConnectorPlugin(&b, &apiv1.ConnectorPluginSpecifications{
		Name: "builtin:pg@v0.1.0", Summary: "PostgreSQL.", Author: "conduit", Version: "v0.1.0", SourceParams: params,
	}); err != nil {
		t.Fatal(err)
	}
	// Required first, then the others, then the SDK's, each by name;
	// empty fields (Description) are left out.
	want := `Name: builtin:pg@v0.1.0
Summary: PostgreSQL.
Author: conduit
Version: v0.1.0

Source Parameters:
NAME            TYPE      DEFAULT  VALIDATIONS     DESCRIPTION
tables          string    -        required        -
url             string    -        required        Where.
delay           duration  1s       greater-than 0  -
mode            string    a        inclusion a,b   -
sdk.batch.size  int       0        -               SDK batch size.
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeProcessorPlugin(&b, &apiv1.ProcessorPluginSpecifications{Name: "field.set@v0.1.0", Description: "Sets a\nfield."}); err != nil {
		t.Fatal(err)
	}
	if want := "Name: field.set@v0.1.0\nDescription: Sets a field.\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestFindPlugin(t *testing.T) {
	plugins := []string{"builtin:file@v0.1.0", "builtin:generator@v0.1.0", "standalone:file@v1.0.0", "standalone:kafka@v2.0.0"}
	name := func(s string) string { return s }
	for _, tc := range []struct {
		name, want, err string
	}{
		{name: "builtin:file@v0.1.0", want: "builtin:file@v0.1.0"},
		{name: "builtin:generator", want: "builtin:generator@v0.1.0"},
		{name: "generator", want: "builtin:generator@v0.1.0"},
		{name: "standalone:kafka", want: "standalone:kafka@v2.0.0"},
		{name: "file", err: `connector plugin "file" names 2 plugins (builtin:file@v0.1.0, standalone:file@v1.0.0): give the full name`},
		{name: "nope", err: `connector plugin "nope" not found (list them with: conduit connector-plugins ls)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findPlugin(plugins, name, "connector", tc.name)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestV1ClientExplain(t *testing.T) {
	c := dialV1("127.0.0.1:9", "")
	withToken := dialV1("127.0.0.1:9", "t")
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name   string
		client *v1Client
		err    error
		about  v1Subject
		want   string
	}{
		{"refused", c, connect.NewError(connect.CodeUnavailable, refused), v1Subject{},
			"cannot reach the conduit API at 127.0.0.1:9 (is it running? start it with: conduit run; or point at it with --api.grpc.address or --api.http.address)"},
		{"not found names the id", c, connect.NewError(connect.CodeNotFound, errors.New("no such thing")), v1Subject{"connector", "a:b"},
			`connector "a:b" not found`},
		{"no token", c, connect.NewError(connect.CodeUnauthenticated, errors.New("x")), v1Subject{},
			"the conduit API at 127.0.0.1:9 requires a token: set it with " + tokenHelp},
		{"wrong token", withToken, connect.NewError(connect.CodeUnauthenticated, errors.New("x")), v1Subject{},
			"the conduit API at 127.0.0.1:9 rejected the token: check the one set with " + tokenHelp},
		{"other", c, connect.NewError(connect.CodeInternal, errors.New("boom")), v1Subject{"processor", "p"},
			`processor "p": internal: boom`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.client.explain(tc.err, tc.about); got == nil || got.Error() != tc.want {
				t.Errorf("got %v, want %q", got, tc.want)
			}
		})
	}
}

// inspect prints a record as Conduit writes it (OpenCDC JSON), or with
// --json the API message.
func TestInspectLine(t *testing.T) {
	rec := &opencdcv1.Record{
		Position:  []byte("p1"),
		Operation: opencdcv1.Operation_OPERATION_CREATE,
		Metadata:  map[string]string{"k": "v"},
		Key:       &opencdcv1.Data{Data: &opencdcv1.Data_RawData{RawData: []byte("key")}},
	}
	line, err := inspectLine(&apiv1.InspectConnectorResponse{Record: rec}, rec, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"position":"cDE=","operation":"create","metadata":{"k":"v"},"key":"a2V5","payload":{"before":null,"after":null}}` + "\n"
	if string(line) != want {
		t.Errorf("got %s want %s", line, want)
	}
	line, err = inspectLine(&apiv1.InspectConnectorResponse{Record: rec}, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Record struct {
			Operation string `json:"operation"`
			Key       struct {
				RawData string `json:"rawData"`
			} `json:"key"`
		} `json:"record"`
	}
	if err := json.Unmarshal(line, &msg); err != nil || msg.Record.Operation != "OPERATION_CREATE" || msg.Record.Key.RawData != "a2V5" ||
		bytes.Count(line, []byte("\n")) != 1 {
		t.Errorf("--json line %q: %v", line, err)
	}
}

// `conduit config` prints Conduit's "key: value" lines with the source as
// a comment: the output is still YAML that reads back as the values.
func TestWriteSettings(t *testing.T) {
	settings := []config.Setting{
		{Key: "log.level", Value: "warn", Source: "conduit.yml:2"},
		{Key: "api.auth.token", Value: config.Masked, Source: "env CONDUIT_API_AUTH_TOKEN"},
		{Key: "api.grpc.address", Value: "", Source: "default"},
		{Key: "db.postgres.url", Value: "postgres://a@b/c?x=1 # not a comment", Source: "flag --db.postgres.url"},
		{Key: "pipelines.error-recovery.schedule", Value: "[1m, 1h]", Source: "default"},
		{Key: "api.enabled", Value: "true", Source: "default"},
	}
	var b bytes.Buffer
	if err := writeSettings(&b, settings); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "log.level: warn ") || !strings.HasSuffix(lines[0], " # conduit.yml:2") {
		t.Errorf("first line %q", lines[0])
	}
	for _, l := range lines {
		if strings.LastIndex(l, " # ") != strings.LastIndex(lines[0], " # ") {
			t.Errorf("the sources are not aligned:\n%s", b.String())
			break
		}
	}
	var back map[string]any
	if err := yaml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, b.String())
	}
	for _, s := range settings {
		got := fmt.Sprint(back[s.Key])
		if s.Key == "pipelines.error-recovery.schedule" {
			got = strings.ReplaceAll(fmt.Sprint(back[s.Key]), " ", ", ")
		}
		if want := s.Value; got != want && !(s.Key == "pipelines.error-recovery.schedule" && got == "[1m, 1h]") {
			t.Errorf("%s reads back as %q, want %q\n%s", s.Key, got, want, b.String())
		}
		if !strings.Contains(b.String(), "# "+s.Source+"\n") {
			t.Errorf("no source %q for %s", s.Source, s.Key)
		}
	}

	b.Reset()
	if err := writeSettingsJSON(&b, settings[:2]); err != nil {
		t.Fatal(err)
	}
	want := `{
  "api.auth.token": {
    "value": "*****",
    "source": "env CONDUIT_API_AUTH_TOKEN"
  },
  "log.level": {
    "value": "warn",
    "source": "conduit.yml:2"
  }
}
`
	if b.String() != want {
		t.Errorf("--json: got\n%s\nwant\n%s", b.String(), want)
	}
}
