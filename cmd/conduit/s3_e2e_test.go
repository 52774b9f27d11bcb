package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3's access keys in these tests: s3Key may do anything, s3ReadOnlyKey
// only read. Any other key is unknown to the store.
const (
	s3Key         = "AKIDCONDUIT"
	s3ReadOnlyKey = "AKIDREADONLY"
)

// fakeS3 is an S3-compatible store in this process (gofakes3, in memory)
// served on 127.0.0.1, with S3's answers to an unknown access key and to
// a write with read-only credentials, which gofakes3 does not check.
type fakeS3 struct {
	backend *s3mem.Backend
	handler http.Handler
	url     string
}

var s3Credential = regexp.MustCompile(`Credential=([^/]+)/`)

func startS3(t *testing.T, buckets ...string) *fakeS3 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveS3(t, l, buckets...)
}

// serveS3 serves a new store on l.
func serveS3(t *testing.T, l net.Listener, buckets ...string) *fakeS3 {
	t.Helper()
	s := &fakeS3{backend: s3mem.New(), url: "http://" + l.Addr().String()}
	for _, b := range buckets {
		if err := s.backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
		// S3 lists the objects of a bucket without versioning among its
		// object versions, which the connector's CDC reads; gofakes3 lists
		// them only with versioning on.
		if err := s.backend.SetVersioningConfiguration(b, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled}); err != nil {
			t.Fatal(err)
		}
	}
	store := gofakes3.New(s.backend).Server()
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := ""
		if m := s3Credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			key = m[1]
		}
		switch {
		case key != s3Key && key != s3ReadOnlyKey:
			s3Error(w, http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
		case key == s3ReadOnlyKey && r.Method != http.MethodGet && r.Method != http.MethodHead:
			s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
		default:
			store.ServeHTTP(w, r)
		}
	})
	srv := &http.Server{Handler: s.handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// s3Error answers as S3 does: a status and an XML body naming the code.
func s3Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>1</RequestId></Error>`, code, message)
}

// put stores an object as S3's PutObject would, with the content type
// and modification time S3 gives every object (the connector counts on
// both).
func (s *fakeS3) put(t *testing.T, bucket, key, body string) {
	t.Helper()
	meta := map[string]string{"Content-Type": "text/plain", "Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	if _, err := s.backend.PutObject(bucket, key, meta, strings.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
}

// objects returns the contents of the objects in bucket under prefix, by
// key.
func (s *fakeS3) objects(t *testing.T, bucket, prefix string) map[string][]byte {
	t.Helper()
	list, err := s.backend.ListBucket(bucket, &gofakes3.Prefix{Prefix: prefix, HasPrefix: true}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, c := range list.Contents {
		obj, err := s.backend.GetObject(bucket, c.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj.Contents)
		_ = obj.Contents.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[c.Key] = b
	}
	return out
}

// s3Env is the environment conduit needs to reach the store: the AWS
// SDK's endpoint variable (Conduit's S3 connector has no endpoint
// setting), and no shared AWS files of the machine's.
func s3Env(dir, url string) []string {
	return []string{
		"AWS_ENDPOINT_URL_S3=" + url,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// s3Settings are the settings of an S3 connector for bucket with key.
func s3Settings(bucket, key string) string {
	return fmt.Sprintf("aws.bucket: %s\naws.accessKeyId: %s\naws.secretAccessKey: secret\naws.region: us-east-1", bucket, key)
}

// s3Pipeline is a generator writing into S3, or (source true) S3 read
// into a file, with the S3 connector's settings.
func s3Pipeline(id string, source bool, settings string) string {
	s3 := fmt.Sprintf(`      - id: s3
        type: %s
        plugin: builtin:s3
        settings:
%s`, map[bool]string{true: "source", false: "destination"}[source], indent(settings, 10))
	other := `      - id: gen
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
          format.options.name: string
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
`, id, s3, other)
}

// s3Line is a record as Conduit's S3 destination writes it in its json
// format: one line per record, its fields as strings.
type s3Line struct {
	Operation string            `json:"Operation"`
	Position  string            `json:"Position"`
	Payload   string            `json:"Payload"`
	Key       string            `json:"Key"`
	Metadata  map[string]string `json:"Metadata"`
}

func parseS3Lines(t *testing.T, what string, b []byte) []s3Line {
	t.Helper()
	var out []s3Line
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l s3Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v: %s", what, err, sc.Text())
		}
		out = append(out, l)
	}
	return out
}

// A generator's records go into S3 through builtin:s3 (objects of JSON
// lines, as Conduit's S3 destination writes them), and Conduit's S3
// source, named unprefixed as Conduit's templates name it, reads the
// objects back into a file: every record arrives once.
func TestS3RoundTrip(t *testing.T) {
	t.Parallel()
	const n = 50
	s3 := startS3(t, "records")
	w := newWorkspace(t, strings.Replace(s3Pipeline("to-s3", false, s3Settings("records", s3Key)+"\nprefix: orders\nformat: json"),
		"rate: 100", fmt.Sprintf("rate: 1000\n          recordCount: %d", n), 1))
	p := w.startWithEnv(s3Env(w.dir, s3.url), "run")

	written := map[string]int{}
	var objects map[string][]byte
	eventually(t, pollInterval, func() bool {
		objects = s3.objects(t, "records", "orders/")
		count := 0
		for _, b := range objects {
			count += bytes.Count(b, []byte("\n"))
		}
		return count >= n
	}, func() string {
		return fmt.Sprintf("fewer than %d records in %d objects; conduit output:\n%s", n, len(objects), p.stderr.String())
	})
	for key, b := range objects {
		for _, l := range parseS3Lines(t, key, b) {
			var after struct {
				ID   *int    `json:"id"`
				Name *string `json:"name"`
			}
			if err := json.Unmarshal([]byte(l.Payload), &after); err != nil || after.ID == nil || after.Name == nil {
				t.Fatalf("object %s: payload %q, want the generator's structured id and name (%v)", key, l.Payload, err)
			}
			if l.Operation != "create" || l.Metadata["conduit.source.connector.id"] != "to-s3:gen" || l.Metadata["opencdc.createdAt"] == "" {
				t.Fatalf("object %s: operation %q, metadata %v; want the generator's create with Conduit's metadata", key, l.Operation, l.Metadata)
			}
			written[l.Position]++
		}
	}

	// The source, added once everything is written: its snapshot lists
	// the objects.
	w.write("pipelines/from-s3.yml", strings.Replace(s3Pipeline("from-s3", true, s3Settings("records", s3ReadOnlyKey)+"\nprefix: orders/"),
		"plugin: builtin:s3", "plugin: s3", 1))
	out := filepath.Join(w.dir, "from-s3.jsonl")
	waitForRecords(t, p, out, len(objects))
	read := map[string]int{}
	for i, r := range parseRecords(t, out) {
		what := fmt.Sprintf("from-s3.jsonl line %d", i+1)
		key := string(rawBytes(t, what+" key", r.Key))
		if r.Operation != "snapshot" || r.Metadata["conduit.source.connector.id"] != "from-s3:s3" || objects[key] == nil {
			t.Fatalf("%s: operation %q, key %q, metadata %v; want a snapshot of one of the objects read by from-s3:s3", what, r.Operation, key, r.Metadata)
		}
		body := rawBytes(t, what+" payload.after", r.Payload.After)
		if !bytes.Equal(body, objects[key]) {
			t.Fatalf("%s: payload is not the object %s:\n%s\nwant\n%s", what, key, body, objects[key])
		}
		for _, l := range parseS3Lines(t, what, body) {
			read[l.Position]++
		}
	}
	for i := 1; i <= n; i++ {
		pos := strconv.Itoa(i)
		if written[pos] != 1 || read[pos] != 1 {
			t.Errorf("generator record %d: written %d times, read back %d times; want once each", i, written[pos], read[pos])
		}
	}
	stopProcess(t, p)
}

// A store that cannot be reached is a transient fault: the source goes
// recovering and comes back by itself once the store answers there.
func TestS3UnreachableStoreIsTransient(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	w := newWorkspace(t, s3Pipeline("no-store", true, s3Settings("records", s3Key)))
	p := w.startWithEnv(s3Env(w.dir, "http://"+addr), "run")
	e := waitForEvent(t, p, "no-store", "recovering", 1)
	if e.Class != "transient" || !strings.Contains(e.Error, "builtin:s3") || !strings.Contains(e.Error, "connection refused") {
		t.Errorf("recovering %+v, want a transient error naming builtin:s3 and the refused connection", e)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s3 := serveS3(t, l, "records")
	s3.put(t, "records", "back.txt", "back")
	waitForEvent(t, p, "no-store", "recovered", 1)
	waitForRecords(t, p, filepath.Join(w.dir, "no-store.jsonl"), 1)
	stopProcess(t, p)
}

// The known-permanent errors of Conduit's S3 connector are fatal through
// the built-in rules: a bucket that does not exist, an access key the
// store does not know, credentials that may not write. S3 answers the
// source's first request (HeadBucket) without a body, so there the error
// says only 404 or 403. A setting its
// specification refuses is an error naming it when the file is loaded.
func TestS3PermanentErrorsAreFatal(t *testing.T) {
	t.Parallel()
	s3 := startS3(t, "records", "odd")
	// An object without the content type S3 always gives: the connector
	// dereferences the missing header and panics.
	if _, err := s3.backend.PutObject("odd", "odd.txt", nil, strings.NewReader("odd"), 3, nil); err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t, "")
	w.write("pipelines/odd.yml", s3Pipeline("odd", true, s3Settings("odd", s3Key)))
	w.write("pipelines/no-bucket.yml", s3Pipeline("no-bucket", false, s3Settings("missing", s3Key)+"\nformat: json"))
	w.write("pipelines/no-bucket-src.yml", s3Pipeline("no-bucket-src", true, s3Settings("missing", s3Key)))
	w.write("pipelines/bad-key.yml", s3Pipeline("bad-key", false, s3Settings("records", "AKIDUNKNOWN")+"\nformat: json"))
	w.write("pipelines/bad-key-src.yml", s3Pipeline("bad-key-src", true, s3Settings("records", "AKIDUNKNOWN")))
	w.write("pipelines/read-only.yml", s3Pipeline("read-only", false, s3Settings("records", s3ReadOnlyKey)+"\nformat: json"))
	w.write("pipelines/bad-format.yml", s3Pipeline("bad-format", false, s3Settings("records", s3Key)+"\nformat: csv"))
	p := w.startWithEnv(s3Env(w.dir, s3.url), "run")
	for id, c := range map[string]struct{ rule, message string }{
		"no-bucket":     {"s3-no-such-bucket", "NoSuchBucket"},
		"no-bucket-src": {"s3-bucket-not-found", "HeadBucket"},
		"bad-key":       {"s3-credentials", "InvalidAccessKeyId"},
		"bad-key-src":   {"s3-bucket-forbidden", "StatusCode: 403"},
		"read-only":     {"s3-access-denied", "AccessDenied"},
	} {
		e := waitForEvent(t, p, id, "degraded", 1)
		t.Logf("%s: degraded by %s: %s", id, e.Rule, e.Error)
		if e.Reason != "rule" || e.Rule != c.rule || e.Class != "fatal" || !strings.Contains(e.Error, c.message) {
			t.Errorf("%s: degraded %+v, want built-in rule %s for an error saying %q", id, e, c.rule, c.message)
		}
	}
	// A connector's panic fails its pipeline, not the process.
	if e := waitForEvent(t, p, "odd", "recovering", 1); e.Class != "transient" || !strings.Contains(e.Error, "connector panicked") ||
		!strings.Contains(e.Error, "SnapshotIterator") {
		t.Errorf("odd: recovering %+v, want a transient error saying the connector panicked, and where", e)
	}
	eventually(t, pollInterval, func() bool {
		return strings.Contains(p.stderr.String(), "bad-format.yml") && strings.Contains(p.stderr.String(), "connectors[s3].settings.format")
	}, func() string { return "no error naming bad-format.yml and the format setting:\n" + p.stderr.String() })
	stopProcess(t, p)
}
