package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/conduitio/conduit-commons/config"
	kafka "github.com/conduitio/conduit-connector-kafka"
	s3connector "github.com/conduitio/conduit-connector-s3"
	"github.com/twmb/franz-go/pkg/kfake"
)

// initSettings renders a connector's settings as Conduit's `pipelines
// init` writes them: every parameter of the connector's specification, at
// its default (single-quoted; "" when it has none), with the values a user
// then fills in.
func initSettings(params config.Parameters, filled map[string]string) string {
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		v := `""`
		if d := params[name].Default; d != "" {
			v = "'" + d + "'"
		}
		if f, ok := filled[name]; ok {
			v = "'" + f + "'"
		}
		fmt.Fprintf(&b, "          # %s\n          %s: %s\n", params[name].Type, name, v)
	}
	return b.String()
}

// A pipeline file as `conduit pipelines init --source kafka --destination
// s3` writes it under Conduit - plugins named by their specification
// (kafka, s3), every setting of both connectors at its default - runs
// here once the required values are filled in: the messages of a topic
// arrive in S3 objects.
func TestPipelinesInitTemplateKafkaToS3(t *testing.T) {
	t.Parallel()
	servers := kafkaCluster(t, kfake.SeedTopics(1, "orders"))
	store := startS3(t, "archive")
	src := kafka.Connector.NewSpecification()
	dst := s3connector.Connector.NewSpecification()
	w := newWorkspace(t, fmt.Sprintf(`version: "2.2"
pipelines:
  - id: "kafka-to-s3"
    description: ""
    status: running
    name: "kafka-to-s3"
    connectors:
      - id: "%[1]s-source"
        type: source
        plugin: "%[1]s"
        settings:
%[2]s      - id: "%[3]s-destination"
        type: destination
        plugin: "%[3]s"
        settings:
%[4]s`, src.Name, initSettings(src.SourceParams, map[string]string{"servers": servers, "topics": "orders", "readFromBeginning": "true"}),
		dst.Name, initSettings(dst.DestinationParams, map[string]string{"aws.bucket": "archive", "aws.accessKeyId": s3Key,
			"aws.secretAccessKey": "secret", "aws.region": "us-east-1", "format": "json", "prefix": "orders"})))
	p := w.startWithEnv(s3Env(w.dir, store.url), "run")
	want := []string{"m1", "m2", "m3", "m4", "m5"}
	for _, m := range want {
		produce(t, servers, "orders", m)
	}
	var got []string
	eventually(t, pollInterval, func() bool {
		got = got[:0]
		for key, b := range store.objects(t, "archive", "orders/") {
			for _, l := range parseS3Lines(t, key, b) {
				if l.Metadata["opencdc.collection"] != "orders" || l.Metadata["conduit.source.connector.id"] != "kafka-to-s3:kafka-source" {
					t.Fatalf("object %s: metadata %v, want a record of topic orders read by kafka-to-s3:kafka-source", key, l.Metadata)
				}
				got = append(got, l.Payload)
			}
		}
		return len(got) >= len(want)
	}, func() string {
		return fmt.Sprintf("S3 holds messages %v, want %v; conduit output:\n%s", got, want, p.stderr.String())
	})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("S3 holds messages %v, want %v, each once", got, want)
	}
	stopProcess(t, p)
}
