package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/sdk"
)

// fakeProcess records exits instead of exiting.
type fakeProcess struct {
	stderr bytes.Buffer
	exits  []int
}

func (f *fakeProcess) process() process {
	return process{exit: func(code int) { f.exits = append(f.exits, code) }, stderr: &f.stderr}
}

func cfg(settings map[string]string) sdk.Config {
	return sdk.Config{PipelineID: "p", ConnectorID: "c", Settings: settings}
}

// policyOf parses settings for role the way Configure does.
func policyOf(role string, m map[string]string) (policy, error) {
	s := sdk.NewSettings(m)
	p := parsePolicy(s, role)
	return p, s.Err()
}

func TestParsePolicy(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	tests := []struct {
		name    string
		role    string
		m       map[string]string
		want    policy
		wantErr string
	}{
		{name: "defaults", role: roleSource, m: nil,
			want: policy{code: 503, format: "typed", message: defaultMessage}},
		{name: "everything", role: roleSource, m: map[string]string{
			"fail.on": "Read", "fail.after": "50", "fail.count": "3", "fail.code": "422",
			"fail.format": "json", "fail.message": "boom", "fail.state": state,
		}, want: policy{on: "read", after: 50, count: 3, code: 422, format: "json", message: "boom", state: state}},
		{name: "crash", role: roleDestination, m: map[string]string{"fail.on": "write", "fail.crash": "true"},
			want: policy{on: "write", code: 503, format: "typed", message: defaultMessage, crash: true}},
		{name: "sdk settings are ignored", role: roleDestination, m: map[string]string{"sdk.batch.size": "10"},
			want: policy{code: 503, format: "typed", message: defaultMessage}},
		{name: "write on a source", role: roleSource, m: map[string]string{"fail.on": "write"},
			wantErr: `setting "fail.on": "write" is not an operation a source can fail (want open, read, ack)`},
		{name: "read on a destination", role: roleDestination, m: map[string]string{"fail.on": "read"},
			wantErr: `"read" is not an operation a destination can fail (want open, write)`},
		{name: "code out of range", role: roleSource, m: map[string]string{"fail.code": "600"},
			wantErr: `setting "fail.code": "600" must be between 100 and 599`},
		{name: "code with text", role: roleSource, m: map[string]string{"fail.format": "text", "fail.code": "400"},
			wantErr: `setting "fail.code": does not apply to fail.format text`},
		{name: "unknown format", role: roleSource, m: map[string]string{"fail.format": "xml"},
			wantErr: `"xml" is not an error format`},
		{name: "format with crash", role: roleSource, m: map[string]string{"fail.crash": "yes"},
			wantErr: `setting "fail.crash": "yes" is not a boolean`},
		{name: "code with crash", role: roleSource, m: map[string]string{"fail.crash": "true", "fail.code": "400"},
			wantErr: `setting "fail.code": does not apply to fail.crash`},
		{name: "count without state", role: roleSource, m: map[string]string{"fail.on": "read", "fail.count": "3"},
			wantErr: `setting "fail.count": needs fail.state`},
		{name: "open after without state", role: roleSource, m: map[string]string{"fail.on": "open", "fail.after": "2"},
			wantErr: `setting "fail.after": with fail.on open needs fail.state`},
		{name: "not chaos's every", role: roleSource, m: map[string]string{"fail.on": "read", "fail.every": "2"},
			wantErr: `setting "fail.every": unknown setting (known: fail.after, fail.code`},
		{name: "negative after", role: roleSource, m: map[string]string{"fail.after": "-1"},
			wantErr: `setting "fail.after": "-1" must be between 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policyOf(tt.role, tt.m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("policy\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// The three formats arrive at the runtime as the brief says: typed and json
// keep the code across the process (whatever the wrapping), text has none.
func TestFailureFormats(t *testing.T) {
	tests := []struct {
		name     string
		m        map[string]string
		wantText string
		wantWire string
		class    cerrors.Class
	}{
		{
			name:     "typed, code three %w deep",
			m:        map[string]string{"fail.on": "read", "fail.code": "422"},
			wantText: `flaky source "c": read: record 1: flaky: injected failure (failure 1)`,
			wantWire: `{"code":422,"message":"flaky source \"c\": read: record 1: flaky: injected failure (failure 1)"}`,
			class:    cerrors.ClassFatal,
		},
		{
			name:     "json",
			m:        map[string]string{"fail.on": "read", "fail.format": "json", "fail.message": "down"},
			wantText: `{"code":503,"message":"flaky source \"c\": read: record 1: down (failure 1)"}`,
			wantWire: `{"code":503,"message":"flaky source \"c\": read: record 1: down (failure 1)"}`,
			class:    cerrors.ClassTransient,
		},
		{
			name:     "text",
			m:        map[string]string{"fail.on": "read", "fail.format": "text"},
			wantText: `flaky source "c": read: record 1: flaky: injected failure (failure 1)`,
			wantWire: `{"message":"flaky source \"c\": read: record 1: flaky: injected failure (failure 1)"}`,
			class:    cerrors.ClassTransient,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fp fakeProcess
			src := newTestSource(t, &fp, tt.m)
			_, err := src.Read(context.Background(), 10)
			if err == nil {
				t.Fatal("read did not fail")
			}
			if err.Error() != tt.wantText {
				t.Errorf("text\n got %s\nwant %s", err, tt.wantText)
			}
			// What sdk.Serve sends and the runtime classifies.
			wire := string(cerrors.MarshalWire(err))
			if wire != tt.wantWire {
				t.Errorf("wire\n got %s\nwant %s", wire, tt.wantWire)
			}
			if c := cerrors.Classify(errors.New(wire)); c.Class != tt.class {
				t.Errorf("runtime class %s, want %s", c.Class, tt.class)
			}
		})
	}
}

// Typed errors really are three %w deep: each layer unwraps to the next,
// and errors.As finds the code at the bottom.
func TestTypedFailureIsWrappedThreeTimes(t *testing.T) {
	var fp fakeProcess
	src := newTestSource(t, &fp, map[string]string{"fail.on": "read"})
	_, err := src.Read(context.Background(), 1)
	depth := 0
	for e := err; e != nil; e = errors.Unwrap(e) {
		var coded *cerrors.Error
		if ok := errors.As(e, &coded); ok && e == error(coded) {
			break
		}
		depth++
	}
	if depth != 3 {
		t.Errorf("the code is %d wraps deep, want 3 (%v)", depth, err)
	}
}

// fail.state carries the failure count from one run (process) to the next:
// a pipeline with fail.count 2 fails twice, then runs on.
func TestStateAcrossRuns(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "sub", "state.json")
	m := map[string]string{"fail.on": "read", "fail.after": "2", "fail.count": "2", "fail.state": statePath}
	var fp fakeProcess
	for run, want := range []struct {
		reads   []int // records returned by each read before the failure
		failure bool
	}{
		{[]int{2}, true},
		{[]int{2}, true},
		{[]int{5, 5}, false},
		{[]int{5}, false},
	} {
		src := newTestSource(t, &fp, m)
		for _, n := range want.reads {
			recs, err := src.Read(context.Background(), 5)
			if err != nil || len(recs) != n {
				t.Fatalf("run %d: read %d records, %v; want %d", run+1, len(recs), err, n)
			}
		}
		_, err := src.Read(context.Background(), 5)
		if failed := err != nil; failed != want.failure {
			t.Fatalf("run %d: failed %v (%v), want %v", run+1, failed, err, want.failure)
		}
		if want.failure && !strings.Contains(err.Error(), "of 2)") {
			t.Errorf("run %d: %v does not count the failures", run+1, err)
		}
	}
	var st state
	b, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Failures != 2 || st.Owner != "p/c/source" {
		t.Errorf("state file %s: %+v, %v", b, st, err)
	}

	// Changed settings start the counts over.
	m2 := map[string]string{"fail.on": "read", "fail.after": "2", "fail.count": "3", "fail.state": statePath}
	src := newTestSource(t, &fp, m2)
	_, _ = src.Read(context.Background(), 5)
	if _, err := src.Read(context.Background(), 5); err == nil || !strings.Contains(err.Error(), "(failure 1 of 3)") {
		t.Errorf("after a settings change: %v, want failure 1 of 3", err)
	}
}

// fail.on open with fail.after counts successful opens across runs.
func TestOpenFailsAfterOpensAcrossRuns(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	m := map[string]string{"fail.on": "open", "fail.after": "1", "fail.count": "1", "fail.state": state}
	var fp fakeProcess
	for run, wantFail := range []bool{false, true, false} {
		src := newSource(fp.process(), testClock(nil))
		if err := src.Configure(context.Background(), cfg(m)); err != nil {
			t.Fatal(err)
		}
		err := src.Open(context.Background(), nil)
		if (err != nil) != wantFail {
			t.Fatalf("run %d: open %v, want failure %v", run+1, err, wantFail)
		}
		if wantFail && !strings.Contains(err.Error(), "open: attempt 2:") {
			t.Errorf("run %d: %v", run+1, err)
		}
	}
}

func TestStateFileProblems(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"owner":"p/x/source","policy":"","failures":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.json")
	if err := os.WriteFile(corrupt, []byte(`{"owner":`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"another connector's file", other, "counts for p/x/source, not p/c/source; give every connector its own file"},
		{"not a state file", corrupt, "is not a flaky state file"},
		{"a directory", dir, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fp fakeProcess
			src := newSource(fp.process(), testClock(nil))
			err := src.Configure(context.Background(), cfg(map[string]string{"fail.on": "read", "fail.state": tt.path}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal {
				t.Errorf("class %s, want fatal", c.Class)
			}
		})
	}
}

// fail.crash exits with status 3 after saying why on stderr, and counts
// the crash in the state file first, so that fail.count ends a crash loop.
func TestCrash(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	var fp fakeProcess
	dst := newDestination(fp.process())
	ctx := context.Background()
	err := dst.Configure(ctx, cfg(map[string]string{
		"fail.on": "write", "fail.after": "1", "fail.count": "1", "fail.crash": "true", "fail.state": state,
	}))
	if err := errors.Join(err, dst.Open(ctx)); err != nil {
		t.Fatal(err)
	}
	_, _ = dst.Write(ctx, testRecords(3))
	if len(fp.exits) != 1 || fp.exits[0] != 3 {
		t.Fatalf("exits %v, want [3]", fp.exits)
	}
	if !strings.Contains(fp.stderr.String(), `flaky destination "c": write: position 2: flaky: injected failure (failure 1 of 1): crashing on purpose`) {
		t.Errorf("stderr: %s", fp.stderr.String())
	}
	b, _ := os.ReadFile(state)
	if !strings.Contains(string(b), `"failures":1`) {
		t.Errorf("state %s does not count the crash", b)
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		m    map[string]string
		want string
	}{
		{nil, "never fails (no fail.on)"},
		{map[string]string{"fail.on": "read", "fail.after": "50"}, "fails read after 50 records in each run, on every run (format typed, code 503)"},
		{map[string]string{"fail.on": "open", "fail.count": "2", "fail.state": "s", "fail.format": "text"},
			"fails open after 0 successful opens, 2 times in all (format text, no code)"},
		{map[string]string{"fail.on": "ack", "fail.crash": "true"}, "fails ack after 0 records in each run, on every run (exits with status 3)"},
	}
	for _, tt := range tests {
		p, err := policyOf(roleSource, tt.m)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.describe(); got != tt.want {
			t.Errorf("describe(%v)\n got %s\nwant %s", tt.m, got, tt.want)
		}
	}
}
