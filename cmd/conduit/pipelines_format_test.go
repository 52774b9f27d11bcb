package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// testNow is the fixed "now" of the formatting tests; times print in UTC.
var testNow = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func testView() view { return view{now: testNow, loc: time.UTC} }

func at(offset time.Duration) *timestamppb.Timestamp { return timestamppb.New(testNow.Add(offset)) }

const (
	running    = conduitv1.PipelineStatus_PIPELINE_STATUS_RUNNING
	recovering = conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING
	degraded   = conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED
	stopped    = conduitv1.PipelineStatus_PIPELINE_STATUS_STOPPED
	invalid    = conduitv1.PipelineStatus_PIPELINE_STATUS_INVALID
	transient  = conduitv1.ErrorClass_ERROR_CLASS_TRANSIENT
	fatal      = conduitv1.ErrorClass_ERROR_CLASS_FATAL
)

func recoveringPipeline() *conduitv1.Pipeline {
	err1 := &conduitv1.PipelineError{Code: 503, Class: transient, ClassifiedBy: "typed",
		Message: "connection refused", Component: "pg", ComponentKind: "source", Time: at(-3 * time.Second)}
	err2 := &conduitv1.PipelineError{Code: 503, Class: transient, ClassifiedBy: "typed",
		Message: "connection refused\nagain", Component: "pg", ComponentKind: "source", Time: at(-time.Second)}
	return &conduitv1.Pipeline{
		Id: "orders", Name: "Orders", Description: "orders to the warehouse",
		Status: recovering, FailCount: 2, NextAttemptAt: at(4 * time.Second), LastError: err2,
		Probation:  true,
		ConfigFile: "pipelines/orders.yml:3",
		UpdatedAt:  at(-time.Second),
		Episode: &conduitv1.RecoveryEpisode{
			StartedAt: at(-3 * time.Second), Duration: durationpb.New(3 * time.Second), DroppedAttempts: 1,
			Attempts: []*conduitv1.RecoveryAttempt{
				{Number: 1, FailedAt: at(-3 * time.Second), Error: err1, Delay: durationpb.New(time.Second), NextAttemptAt: at(-2 * time.Second)},
				{Number: 3, FailedAt: at(-time.Second), Error: err2, Delay: durationpb.New(5 * time.Second), NextAttemptAt: at(4 * time.Second)},
			},
		},
	}
}

func testPipelines() []*conduitv1.Pipeline {
	return []*conduitv1.Pipeline{
		{Id: "seq", Name: "seq", Status: running, UpdatedAt: at(-time.Hour), Origin: "api"},
		recoveringPipeline(),
		{Id: "picky", Status: degraded, DegradedReason: "fatal error", LastError: &conduitv1.PipelineError{
			Code: 422, Class: fatal, ClassifiedBy: "typed", Component: "dst", ComponentKind: "destination",
			Message: `chaos destination "dst": write: column price does not exist in table public.orders_archive_2023`,
		}},
		{Id: "idle", Status: stopped, ConfigFile: "pipelines/idle.yml:2", Origin: "file"},
		{Id: "broken", Status: invalid, ConfigFile: "pipelines/bad.yml:10", Origin: "file", ConfigErrors: []*conduitv1.ConfigError{
			{PipelineId: "broken", ConfigFile: "pipelines/bad.yml:10", Message: `pipelines/bad.yml:10: pipeline "broken": connectors[gen].settings.rate: "fast" is not a number`}}},
	}
}

func testEvents() []*conduitv1.PipelineEvent {
	return []*conduitv1.PipelineEvent{
		{Sequence: 1, Time: at(-time.Minute), PipelineId: "orders", Kind: "created", StatusAfter: running,
			Message: "pipeline created from its configuration file", Actor: "config"},
		{Sequence: 7, Time: at(-3 * time.Second), PipelineId: "orders", Kind: "recovering",
			StatusBefore: running, StatusAfter: recovering, Message: "pipeline recovering: restart scheduled", Actor: "system",
			Error:   &conduitv1.PipelineError{Code: 503, Class: transient, Message: "connection refused"},
			Attempt: 1, Delay: durationpb.New(1500 * time.Millisecond), NextAttemptAt: at(-1500 * time.Millisecond)},
		{Sequence: 12, Time: at(-500 * time.Millisecond), PipelineId: "orders", Kind: "stopped",
			StatusBefore: stopped, StatusAfter: stopped, Message: "pipeline stopped", Actor: "user"},
	}
}

func TestPipelineTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := testView().writePipelineTable(&b, testPipelines(), nil); err != nil {
		t.Fatal(err)
	}
	want := `ID      STATUS      FAILS  NEXT ATTEMPT  SOURCE                  LAST ERROR
seq     running     0      -             api                     -
orders  recovering  2      in 4s         pipelines/orders.yml:3  503/transient: connection refused again
picky   degraded    1      -             api                     422/fatal: chaos destination "dst": write: column price does not exi...
idle    stopped     0      -             pipelines/idle.yml:2    -
broken  invalid     0      -             pipelines/bad.yml:10    pipeline "broken": connectors[gen].settings.rate: "fast" ...
`
	if got := b.String(); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}

	b.Reset()
	if err := testView().writePipelineTable(&b, testPipelines()[:1], []*conduitv1.ConfigError{
		{PipelineId: "broken", ConfigFile: "pipelines/bad.yml:10", Message: `pipelines/bad.yml:10: pipeline "broken": connectors[gen].settings.rate: "fast" is not a number`},
		{ConfigFile: "pipelines/worse.yml:2", Message: "pipelines/worse.yml:2: yaml: did not find expected key"},
	}); err != nil {
		t.Fatal(err)
	}
	want = `ID   STATUS   FAILS  NEXT ATTEMPT  SOURCE  LAST ERROR
seq  running  0      -             api     -

CONFIGURATION ERRORS (2, not applied until fixed; a pipeline above that runs keeps running as it was)
broken  pipelines/bad.yml:10: pipeline "broken": connectors[gen].settings.rate: "fast" is not a number
-  pipelines/worse.yml:2: yaml: did not find expected key
`
	if got := b.String(); got != want {
		t.Fatalf("table with invalid pipelines:\n%s\nwant:\n%s", got, want)
	}

	b.Reset()
	if err := testView().writePipelineTable(&b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if b.String() != "no pipelines\n" {
		t.Fatalf("empty table: %q", b.String())
	}
}

// clusterPipelines are testPipelines as a cluster lists them: each with
// the instance that runs it, but picky, which no instance holds now.
func clusterPipelines() []*conduitv1.Pipeline {
	ps := testPipelines()
	ps[0].Instance, ps[1].Instance, ps[3].Instance = "conduit-a", "conduit-b", "conduit-a"
	return ps
}

func TestPipelineTableInAClusterShowsTheInstance(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := testView().writePipelineTable(&b, clusterPipelines(), nil); err != nil {
		t.Fatal(err)
	}
	want := `ID      STATUS      INSTANCE   FAILS  NEXT ATTEMPT  SOURCE                  LAST ERROR
seq     running     conduit-a  0      -             api                     -
orders  recovering  conduit-b  2      in 4s         pipelines/orders.yml:3  503/transient: connection refused again
picky   degraded    -          1      -             api                     422/fatal: chaos destination "dst": write: column price does not exi...
idle    stopped     conduit-a  0      -             pipelines/idle.yml:2    -
broken  invalid     -          0      -             pipelines/bad.yml:10    pipeline "broken": connectors[gen].settings.rate: "fast" ...
`
	if got := b.String(); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribeTextShowsTheInstanceInACluster(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, instance, want string
	}{
		{name: "cluster", instance: "conduit-b", want: "Status:            recovering\nInstance:          conduit-b\n"},
		{name: "standalone", instance: "", want: "Status:            recovering\nProbation:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := recoveringPipeline()
			p.Instance = tt.instance
			var b bytes.Buffer
			if err := testView().writeDescription(&b, p, nil); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) {
				t.Fatalf("describe lacks %q:\n%s", tt.want, b.String())
			}
		})
	}
}

func TestDescribeText(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := testView().writeDescription(&b, recoveringPipeline(), testEvents()); err != nil {
		t.Fatal(err)
	}
	want := `Pipeline:          orders
Name:              Orders
Description:       orders to the warehouse
Source:            pipelines/orders.yml:3
Status:            recovering
Probation:         yes (restarted, not yet proved healthy)
Fail count:        2
Next attempt:      2024-05-01 12:00:04 UTC (in 4s)
Updated:           2024-05-01 11:59:59 UTC (1s ago)

Last error:
  Code:            503
  Class:           transient (classified by typed)
  Component:       pg (source)
  Time:            2024-05-01 11:59:59 UTC (1s ago)
  Message:         connection refused again

Recovery episode:
  Started:         2024-05-01 11:59:57 UTC
  Ended:           not yet
  Total time:      3s
  Attempts:        3 (2 shown: the first and the latest)
    #    FAILED AT                CODE  CLASS      DELAY  MESSAGE
    1    2024-05-01 11:59:57.000  503   transient  1s     connection refused
    ...                                                   (1 attempts left out)
    3    2024-05-01 11:59:59.000  503   transient  5s     connection refused again

Recent events:
  2024-05-01 11:59:00.000  #1     created        -> running                pipeline created from its configuration file
  2024-05-01 11:59:57.000  #7     recovering     running -> recovering     attempt 1, delay 1.5s, next attempt 11:59:58.500  503/transient: connection refused
  2024-05-01 11:59:59.500  #12    stopped        stopped -> stopped        by user  pipeline stopped
`
	if got := b.String(); got != want {
		t.Fatalf("describe:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribeTextOfADegradedPipelineWithoutEvents(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := testView().writeDescription(&b, testPipelines()[2], nil); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"Status:            degraded\n",
		"Degraded reason:   fatal error\n",
		"Next attempt:      -\n",
		"  Code:            422\n",
		"  Class:           fatal (classified by typed)\n",
		"  Component:       dst (destination)\n",
		`  Message:         chaos destination "dst": write: column price does not exist in table public.orders_archive_2023` + "\n",
		"Recent events:\n  none\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("describe lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Recovery episode") {
		t.Errorf("an episode was shown for a pipeline without one:\n%s", got)
	}
}

func TestEventLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		event *conduitv1.PipelineEvent
		want  string
	}{
		{
			name:  "no status before",
			event: testEvents()[0],
			want:  "2024-05-01 11:59:00.000  #1     created        -> running                pipeline created from its configuration file",
		},
		{
			name:  "restart scheduled shows the error instead of the message",
			event: testEvents()[1],
			want:  "2024-05-01 11:59:57.000  #7     recovering     running -> recovering     attempt 1, delay 1.5s, next attempt 11:59:58.500  503/transient: connection refused",
		},
		{
			name: "a next attempt on another day shows its date",
			event: &conduitv1.PipelineEvent{Sequence: 8, Time: at(0), Kind: "recovering", StatusBefore: recovering,
				StatusAfter: recovering, Attempt: 4, Delay: durationpb.New(24 * time.Hour), NextAttemptAt: at(24 * time.Hour)},
			want: "2024-05-01 12:00:00.000  #8     recovering     recovering -> recovering  attempt 4, delay 24h0m0s, next attempt 2024-05-02 12:00:00.000",
		},
		{
			name: "a rule's decision names the rule and a strategy other than exponential",
			event: &conduitv1.PipelineEvent{Sequence: 10, Time: at(0), Kind: "recovering", StatusBefore: running,
				StatusAfter: recovering, Attempt: 2, Delay: durationpb.New(4 * time.Second), Strategy: "linear", NextAttemptAt: at(4 * time.Second),
				Error: &conduitv1.PipelineError{Code: 429, Class: transient, ClassifiedBy: "rule", Rule: "rate-limited", Message: "slow down"}},
			want: `2024-05-01 12:00:00.000  #10    recovering     running -> recovering     attempt 2, delay 4s (linear), rule "rate-limited", next attempt 12:00:04.000  429/transient: slow down`,
		},
		{
			name: "dedup-skipped with a count",
			event: &conduitv1.PipelineEvent{Sequence: 123456, Time: at(0), Kind: "dedup-skipped",
				StatusBefore: running, StatusAfter: running, Count: 42, Message: "skipped records already written"},
			want: "2024-05-01 12:00:00.000  #123456 dedup-skipped  running -> running        42 records  skipped records already written",
		},
		{
			name: "degraded with a reason and an error without code",
			event: &conduitv1.PipelineEvent{Sequence: 9, Time: at(0), Kind: "degraded", StatusBefore: recovering,
				StatusAfter: degraded, Attempt: 6, Reason: "retries exhausted",
				Error: &conduitv1.PipelineError{Class: transient, Message: "timeout\tafter 5s"}},
			want: "2024-05-01 12:00:00.000  #9     degraded       recovering -> degraded    attempt 6, reason retries exhausted  transient: timeout after 5s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testView().eventLine(tt.event); got != tt.want {
				t.Fatalf("\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		offset time.Duration
		want   string
	}{
		{"now", 200 * time.Millisecond, "now"},
		{"seconds ahead", 4*time.Second + 300*time.Millisecond, "in 4s"},
		{"seconds ago", -12 * time.Second, "12s ago"},
		{"minutes", 3*time.Minute + 12*time.Second, "in 3m12s"},
		{"hours", -(2*time.Hour + 5*time.Minute + 10*time.Second), "2h5m ago"},
		{"days", 50 * time.Hour, "in 2d2h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testView().relative(testNow.Add(tt.offset)); got != tt.want {
				t.Fatalf("relative(%s) = %q, want %q", tt.offset, got, tt.want)
			}
		})
	}
}

func TestListJSONIsTheAPIShapeWithProtoNames(t *testing.T) {
	t.Parallel()
	resp := &conduitv1.ListPipelinesResponse{Pipelines: testPipelines()}
	var b bytes.Buffer
	if err := writeStructured(&b, outputJSON, resp); err != nil {
		t.Fatal(err)
	}
	got := &conduitv1.ListPipelinesResponse{}
	if err := protojson.Unmarshal(b.Bytes(), got); err != nil {
		t.Fatalf("output does not parse back: %v\n%s", err, b.String())
	}
	if !proto.Equal(got, resp) {
		t.Fatalf("round trip changed the message:\n%s", b.String())
	}
	for _, want := range []string{
		`"fail_count": 2`,
		`"next_attempt_at": "2024-05-01T12:00:04Z"`,
		`"status": "PIPELINE_STATUS_RECOVERING"`,
		`"classified_by": "typed"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, b.String())
		}
	}
}

func TestYAMLHasTheSameFieldsAsJSON(t *testing.T) {
	t.Parallel()
	resp := &conduitv1.ListPipelinesResponse{Pipelines: testPipelines()}
	var j, y bytes.Buffer
	if err := writeStructured(&j, outputJSON, resp); err != nil {
		t.Fatal(err)
	}
	if err := writeStructured(&y, outputYAML, resp); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatalf("yaml does not parse: %v\n%s", err, y.String())
	}
	// yaml.v3 decodes integers as int; JSON as float64. Compare as JSON.
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	if !bytes.Equal(a, b) {
		t.Fatalf("yaml and json differ:\n%s\n%s", a, b)
	}
	for _, want := range []string{
		"pipelines:\n  - id: seq\n",
		"    fail_count: 2\n",
		`    next_attempt_at: "2024-05-01T12:00:04Z"` + "\n",
	} {
		if !strings.Contains(y.String(), want) {
			t.Errorf("yaml lacks %q:\n%s", want, y.String())
		}
	}
	// Key order follows the API, not the alphabet.
	if strings.Index(y.String(), "  - id: orders") > strings.Index(y.String(), "    name: Orders") {
		t.Errorf("keys reordered:\n%s", y.String())
	}
}

func TestStructuredListCarriesTheInstance(t *testing.T) {
	t.Parallel()
	resp := &conduitv1.ListPipelinesResponse{Pipelines: clusterPipelines()}
	for _, tt := range []struct {
		format, want string
	}{
		{outputJSON, `"instance": "conduit-b"`},
		{outputYAML, "    instance: conduit-b\n"},
	} {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeStructured(&b, tt.format, resp); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("%s lacks %q:\n%s", tt.format, tt.want, b.String())
			}
			// seq, orders and idle have one; the empty field of the
			// others is left out, as the API does.
			if n := strings.Count(b.String(), "instance"); n != 3 {
				t.Errorf("%d instances, want 3:\n%s", n, b.String())
			}
		})
	}
}

func TestDescribeJSONHasThePipelineAndTheEvents(t *testing.T) {
	t.Parallel()
	out, err := newDescribeOutput(recoveringPipeline(), testEvents())
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{outputJSON, outputYAML} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeStructured(&b, format, out); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Pipeline struct {
					ID        string `json:"id" yaml:"id"`
					FailCount int    `json:"fail_count" yaml:"fail_count"`
					LastError struct {
						Code int `json:"code" yaml:"code"`
					} `json:"last_error" yaml:"last_error"`
				} `json:"pipeline" yaml:"pipeline"`
				Events []struct {
					Sequence string `json:"sequence" yaml:"sequence"`
					Kind     string `json:"kind" yaml:"kind"`
					Time     string `json:"time" yaml:"time"`
				} `json:"events" yaml:"events"`
			}
			var err error
			if format == outputJSON {
				err = json.Unmarshal(b.Bytes(), &got)
			} else {
				err = yaml.Unmarshal(b.Bytes(), &got)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			if got.Pipeline.ID != "orders" || got.Pipeline.FailCount != 2 || got.Pipeline.LastError.Code != 503 {
				t.Fatalf("pipeline %+v", got.Pipeline)
			}
			if len(got.Events) != 3 || got.Events[0].Sequence != "1" || got.Events[2].Kind != "stopped" ||
				got.Events[1].Time != "2024-05-01T11:59:57Z" {
				t.Fatalf("events %+v", got.Events)
			}
		})
	}
}

func TestEventPrinterWritesOneJSONObjectPerLine(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := eventPrinter{w: &b, output: outputJSON, view: testView()}
	for _, e := range testEvents() {
		if err := p.print(e); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), b.String())
	}
	for i, l := range lines {
		e := &conduitv1.PipelineEvent{}
		if err := protojson.Unmarshal([]byte(l), e); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, l)
		}
		if !proto.Equal(e, testEvents()[i]) {
			t.Fatalf("line %d: %s", i+1, l)
		}
	}
	if !strings.Contains(lines[1], `"next_attempt_at":"2024-05-01T11:59:58.500Z"`) {
		t.Fatalf("no RFC 3339 time with the proto field name: %s", lines[1])
	}
}

func TestEventPrinterWritesYAMLDocuments(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := eventPrinter{w: &b, output: outputYAML, view: testView()}
	for _, e := range testEvents() {
		if err := p.print(e); err != nil {
			t.Fatal(err)
		}
	}
	dec := yaml.NewDecoder(&b)
	var kinds []string
	for {
		var doc struct {
			Kind string `yaml:"kind"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		kinds = append(kinds, doc.Kind)
	}
	if strings.Join(kinds, ",") != "created,recovering,stopped" {
		t.Fatalf("documents %v", kinds)
	}
}

func TestDescribeTextShowsThePolicyWithSourcesAndRules(t *testing.T) {
	t.Parallel()
	p := recoveringPipeline()
	p.LastError.ClassifiedBy, p.LastError.Rule = "rule", "rate-limits"
	p.Flaps = 1
	p.Policy = &conduitv1.RecoveryPolicy{
		Preset: "aggressive", Strategy: "exponential", MinDelay: durationpb.New(100 * time.Millisecond),
		MaxDelay: durationpb.New(10 * time.Second), BackoffFactor: 1.5, MaxRetries: 4, MaxRetriesWindow: durationpb.New(5 * time.Minute),
		MaxFlaps: -1, FlapWindow: durationpb.New(5 * time.Minute),
		Sources: map[string]string{"preset": "pipeline", "max-retries": "pipeline", "min-delay": "preset aggressive", "strategy": "default"},
		Rules: []*conduitv1.RecoveryRule{{
			Name: "rate-limits", Priority: 20, Action: "retry", Codes: []string{"429"}, DefinedAt: "pipelines/orders.yml:12",
			Policy: &conduitv1.RecoveryPolicy{Strategy: "fixed", MinDelay: durationpb.New(2 * time.Second), MaxDelay: durationpb.New(10 * time.Second),
				BackoffFactor: 1.5, MaxRetries: 10},
		}, {
			Name: "partner-feed", Priority: 5, Action: "retry", Pipelines: []string{"orders*"}, Global: true, DefinedAt: "conduit.yml:40",
			Policy: &conduitv1.RecoveryPolicy{Strategy: "schedule", Schedule: []*durationpb.Duration{durationpb.New(24 * time.Hour), durationpb.New(168 * time.Hour)}, MaxRetries: -1},
		}},
	}
	var b bytes.Buffer
	if err := testView().writeDescription(&b, p, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Class:           transient (classified by rule "rate-limits")`,
		"Preset:          aggressive (pipeline)",
		"Strategy:        exponential (default)",
		"Min delay:       100ms (preset aggressive)",
		"Max retries:     4 (pipeline)",
		"Max flaps:       never degrade, now 1 in a row",
		"    rate-limits  priority 20, retry, pipeline at pipelines/orders.yml:12\n      match: codes 429\n      then:  strategy fixed, 2s x1.5 up to 10s, max-retries 10",
		"    partner-feed  priority 5, retry, global at conduit.yml:40\n      match: pipelines orders*\n      then:  strategy schedule [24h0m0s, 168h0m0s]",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe does not contain %q:\n%s", want, b.String())
		}
	}
}

// A pipeline a dependency's open breaker holds restarts when the canary
// gets through, not at a time: list and describe say which breaker.
func TestAPipelineHeldByABreakerSaysWhich(t *testing.T) {
	t.Parallel()
	p := recoveringPipeline()
	p.HeldBy = "orders-db"
	var b bytes.Buffer
	if err := testView().writePipelineTable(&b, []*conduitv1.Pipeline{p}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "held by orders-db") || strings.Contains(b.String(), "in 4s") {
		t.Fatalf("table:\n%s", b.String())
	}
	b.Reset()
	if err := testView().writeDescription(&b, p, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Next attempt:      when the breaker of orders-db closes (its canary gets through)") {
		t.Fatalf("describe:\n%s", b.String())
	}
}

// A degraded pipeline's FAILS says what degraded it, not 0.
func TestFailsOfDegradedPipelines(t *testing.T) {
	t.Parallel()
	degraded := conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED
	for _, tc := range []struct {
		name string
		p    *conduitv1.Pipeline
		want string
	}{
		{"recovering", &conduitv1.Pipeline{Status: conduitv1.PipelineStatus_PIPELINE_STATUS_RECOVERING, FailCount: 2}, "2"},
		{"retries exhausted", &conduitv1.Pipeline{Status: degraded, FailCount: 5, DegradedReason: "retries exhausted"}, "5"},
		{"flapping", &conduitv1.Pipeline{Status: degraded, Flaps: 3, DegradedReason: "flapping"}, "3 flaps"},
		{"one fatal error", &conduitv1.Pipeline{Status: degraded, DegradedReason: "fatal error", LastError: &conduitv1.PipelineError{Code: 400}}, "1"},
		{"force-stopped", &conduitv1.Pipeline{Status: degraded, DegradedReason: "force stopped"}, "0"},
	} {
		if got := failsText(tc.p); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
