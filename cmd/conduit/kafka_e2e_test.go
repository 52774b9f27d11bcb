package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// kafkaCluster starts an in-process Kafka (franz-go's kfake, which speaks
// Kafka's wire protocol) on 127.0.0.1 and returns its bootstrap address.
func kafkaCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	return servers(startKafka(t, opts...))
}

func startKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func servers(c *kfake.Cluster) string { return strings.Join(c.ListenAddrs(), ",") }

// answerWrongPasswords makes c answer a PLAIN login with a wrong password
// as Kafka does, with the error code SASL_AUTHENTICATION_FAILED; kfake
// itself only closes the connection.
func answerWrongPasswords(c *kfake.Cluster, passwords map[string]string) {
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		auth := req.(*kmsg.SASLAuthenticateRequest)
		// PLAIN: authorization id, user and password, NUL-separated.
		parts := strings.Split(string(auth.SASLAuthBytes), "\x00")
		if pw, ok := passwords[parts[min(1, len(parts)-1)]]; ok && len(parts) == 3 && parts[2] == pw {
			return nil, nil, false
		}
		resp := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: Invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

// produce sends one message to topic with a client of its own.
func produce(t *testing.T, servers, topic, value string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(servers, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// conduitRecord is a record in Conduit's OpenCDC JSON form, as the file
// destination writes it and as Conduit's Kafka destination sends it.
type conduitRecord struct {
	Position  []byte            `json:"position"`
	Operation string            `json:"operation"`
	Metadata  map[string]string `json:"metadata"`
	Key       json.RawMessage   `json:"key"`
	Payload   struct {
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"payload"`
}

func parseRecords(t *testing.T, path string) []conduitRecord {
	t.Helper()
	var out []conduitRecord
	for i, l := range strings.Split(strings.TrimSpace(processorsTestFile(t, path)), "\n") {
		var r conduitRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s line %d: %v: %s", path, i+1, err, l)
		}
		out = append(out, r)
	}
	return out
}

// rawBytes is a raw payload or key as the file destination writes it:
// Conduit's JSON of raw data, a base64 string.
func rawBytes(t *testing.T, what string, m json.RawMessage) []byte {
	t.Helper()
	var b []byte
	if err := json.Unmarshal(m, &b); err != nil {
		t.Fatalf("%s: %s is not raw data (base64): %v", what, m, err)
	}
	return b
}

// A generator's records go to Kafka through builtin:kafka and come back
// through Conduit's Kafka source (named unprefixed, `kafka`, as Conduit's
// templates name it) into a file: every record arrives once, and each
// Kafka message is the record in Conduit's OpenCDC JSON, as Conduit's
// Kafka destination writes it; a restart neither loses nor repeats one.
func TestKafkaRoundTrip(t *testing.T) {
	t.Parallel()
	const n = 200
	servers := kafkaCluster(t, kfake.SeedTopics(1, "orders"))
	w := newWorkspace(t, fmt.Sprintf(`version: "2.2"
pipelines:
  - id: to-kafka
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
          recordCount: %[2]d
          rate: 2000
      - id: out
        type: destination
        plugin: builtin:kafka
        settings:
          servers: %[1]s
          topic: orders
  - id: from-kafka
    connectors:
      - id: in
        type: source
        plugin: kafka
        settings:
          servers: %[1]s
          topics: orders
          readFromBeginning: true
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
`, servers, n))
	p := w.start("run")
	out := filepath.Join(w.dir, "out.jsonl")
	waitForRecords(t, p, out, n)

	seen := map[string]int{}
	for i, r := range parseRecords(t, out)[:n] {
		what := fmt.Sprintf("out.jsonl line %d", i+1)
		if r.Operation != "create" || r.Metadata["opencdc.collection"] != "orders" ||
			r.Metadata["conduit.source.connector.id"] != "from-kafka:in" || len(r.Position) == 0 {
			t.Fatalf("%s: operation %q, position %q, metadata %v; want a create from topic orders read by from-kafka:in",
				what, r.Operation, r.Position, r.Metadata)
		}
		// The message's value is the generator's record as Conduit's
		// Kafka destination writes it: OpenCDC JSON.
		var sent conduitRecord
		value := rawBytes(t, what+" payload.after", r.Payload.After)
		if err := json.Unmarshal(value, &sent); err != nil {
			t.Fatalf("%s: the Kafka message is not a record in OpenCDC JSON: %v: %s", what, err, value)
		}
		var after struct {
			ID   *int    `json:"id"`
			Name *string `json:"name"`
		}
		if err := json.Unmarshal(sent.Payload.After, &after); err != nil || after.ID == nil || after.Name == nil {
			t.Fatalf("%s: sent payload.after %s, want the generator's structured id and name (%v)", what, sent.Payload.After, err)
		}
		if sent.Operation != "create" || sent.Metadata["conduit.source.connector.id"] != "to-kafka:gen" || sent.Metadata["opencdc.createdAt"] == "" {
			t.Fatalf("%s: sent record operation %q, metadata %v; want the generator's create with Conduit's metadata", what, sent.Operation, sent.Metadata)
		}
		seen[string(sent.Position)]++
	}
	for i := 1; i <= n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("generator record %d arrived %d times, want once", i, c)
		}
	}

	// After a restart the source continues where its consumer group was:
	// what is sent meanwhile arrives, nothing read before arrives again.
	stopProcess(t, p)
	p = w.start("run")
	for i := range 5 {
		produce(t, servers, "orders", fmt.Sprintf("late-%d", i))
	}
	waitForRecords(t, p, out, n+5)
	var late []string
	for _, r := range parseRecords(t, out)[n:] {
		late = append(late, string(rawBytes(t, "a line after the restart", r.Payload.After)))
	}
	if want := []string{"late-0", "late-1", "late-2", "late-3", "late-4"}; !slices.Equal(late, want) {
		t.Errorf("after the restart the file got %q, want %q", late, want)
	}
	stopProcess(t, p)
}

// kafkaPipeline is a generator writing into Kafka, or (source true) Kafka
// read into a file, with extra settings for the Kafka connector.
func kafkaPipeline(id, servers string, source bool, extra string) string {
	kafka := fmt.Sprintf(`      - id: kafka
        type: %s
        plugin: builtin:kafka
        settings:
          servers: %s
%s`, map[bool]string{true: "source", false: "destination"}[source], servers, indent(extra, 10))
	other := `      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.options.id: int
          rate: 100`
	if source {
		other = `      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./` + id + `.jsonl`
	}
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
%s
%s
    error-recovery:
      min-delay: 100ms
      max-delay: 500ms
`, id, kafka, other)
}

// A broker that cannot be reached is a transient fault: the pipeline goes
// recovering, classified by the default (the connector's error has no
// code), and comes back once a broker listens there.
func TestKafkaUnreachableBrokerIsTransient(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	w := newWorkspace(t, kafkaPipeline("no-broker", addr, true, "topics: orders\nreadFromBeginning: true"))
	p := w.start("run")
	e := waitForEvent(t, p, "no-broker", "recovering", 1)
	if e.Class != "transient" || !strings.Contains(e.Error, "builtin:kafka") || !strings.Contains(e.Error, "dial") {
		t.Errorf("recovering %+v, want a transient error naming builtin:kafka that says it could not dial", e)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	portNum, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, kafkaCluster(t, kfake.Ports(portNum), kfake.SeedTopics(1, "orders")), "orders", "back")
	waitForEvent(t, p, "no-broker", "recovered", 1)
	waitForRecords(t, p, filepath.Join(w.dir, "no-broker.jsonl"), 1)
	stopProcess(t, p)
}

// The known-permanent errors of Conduit's Kafka connector are fatal through
// the built-in rules: a refused SASL login, a login without an ACL for the
// topic, and a topic that does not exist on a cluster that does not create
// topics. A setting the connector's
// Configure refuses is fatal without any rule, and one its specification
// refuses is an error naming the setting when the file is loaded.
func TestKafkaPermanentErrorsAreFatal(t *testing.T) {
	t.Parallel()
	open := kafkaCluster(t, kfake.SeedTopics(1, "orders"))
	saslCluster := startKafka(t, kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "conduit", "right"), kfake.User("PLAIN", "nobody", "pw"))
	answerWrongPasswords(saslCluster, map[string]string{"conduit": "right", "nobody": "pw"})
	sasl := servers(saslCluster)
	w := newWorkspace(t, "")
	w.write("pipelines/bad-login.yml", kafkaPipeline("bad-login", sasl, true,
		"topics: orders\nsaslMechanism: PLAIN\nsaslUsername: conduit\nsaslPassword: wrong"))
	w.write("pipelines/no-acl.yml", kafkaPipeline("no-acl", sasl, false,
		"topic: orders\nsaslMechanism: PLAIN\nsaslUsername: nobody\nsaslPassword: pw"))
	w.write("pipelines/no-topic.yml", kafkaPipeline("no-topic", open, false, "topic: missing"))
	w.write("pipelines/bad-template.yml", kafkaPipeline("bad-template", open, false, `topic: "{{ .Metadata"`))
	w.write("pipelines/bad-acks.yml", kafkaPipeline("bad-acks", open, false, "acks: two"))
	w.write("pipelines/good-login.yml", kafkaPipeline("good-login", sasl, true,
		"topics: orders\nreadFromBeginning: true\nsaslMechanism: PLAIN\nsaslUsername: conduit\nsaslPassword: right"))
	p := w.start("run")
	for id, c := range map[string]struct{ rule, message string }{
		"bad-login": {"kafka-authentication", "SASL_AUTHENTICATION_FAILED"},
		"no-topic":  {"kafka-unknown-topic", "UNKNOWN_TOPIC_OR_PARTITION"},
		"no-acl":    {"kafka-authorization", "TOPIC_AUTHORIZATION_FAILED"},
	} {
		e := waitForEvent(t, p, id, "degraded", 1)
		t.Logf("%s: degraded by %s: %s", id, e.Rule, e.Error)
		if e.Reason != "rule" || e.Rule != c.rule || e.Class != "fatal" || !strings.Contains(e.Error, c.message) {
			t.Errorf("%s: degraded %+v, want built-in rule %s for an error saying %q", id, e, c.rule, c.message)
		}
	}
	if e := waitForEvent(t, p, "bad-template", "degraded", 1); e.Class != "fatal" || !strings.Contains(e.Error, "topic") {
		t.Errorf("bad-template: degraded %+v, want a fatal error about the topic", e)
	}
	// The right login on the same cluster reads what is sent there.
	produce(t, sasl, "orders", "hello", kgo.SASL(plain.Auth{User: "conduit", Pass: "right"}.AsMechanism()))
	waitForRecords(t, p, filepath.Join(w.dir, "good-login.jsonl"), 1)
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "bad-acks.yml") && strings.Contains(p.stderr.String(), "connectors[kafka].settings.acks")
	}, func() string { return "no error naming bad-acks.yml and the acks setting:\n" + p.stderr.String() })
	stopProcess(t, p)
}
