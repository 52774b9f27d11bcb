package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/sdk"
	"github.com/conduitry/conduit/pkg/sdk/sdktest"
)

func testClock(c *clocktest.Clock) clock {
	if c == nil {
		c = clocktest.NewAt(time.Unix(1_700_000_000, 0))
	}
	return clock{now: c.Now, after: c.After}
}

func newTestSource(t *testing.T, fp *fakeProcess, m map[string]string) *source {
	t.Helper()
	src := newSource(fp.process(), testClock(nil))
	if err := src.Configure(context.Background(), cfg(m)); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return src
}

func testRecords(n int) []sdk.Record {
	recs := make([]sdk.Record, n)
	for i := range recs {
		pos := sdk.Position(strconv.Itoa(i + 1))
		recs[i] = sdk.Record{Position: pos, Operation: sdk.OperationCreate, Key: sdk.RawData(pos),
			Payload: sdk.Change{After: sdk.StructuredData{"id": int64(i + 1)}}}
	}
	return recs
}

func positions(recs []sdk.Record) string {
	var b strings.Builder
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.Write(r.Position)
	}
	return b.String()
}

func TestSourceRecords(t *testing.T) {
	var fp fakeProcess
	src := newSource(fp.process(), testClock(nil))
	ctx := context.Background()
	if err := src.Configure(ctx, cfg(nil)); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(ctx, sdk.Position("7")); err != nil {
		t.Fatal(err)
	}
	recs, err := src.Read(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := positions(recs); got != "8 9 10" {
		t.Errorf("positions %s, want 8 9 10 (resuming after 7)", got)
	}
	r := recs[0]
	after := r.Payload.After.(sdk.StructuredData)
	if r.Operation != sdk.OperationCreate || string(r.Key.Bytes()) != "8" || after["id"] != int64(8) || after["name"] != "flaky-8" ||
		r.Metadata[sdk.MetadataCreatedAt] == "" || r.Metadata[sdk.MetadataReadAt] == "" || len(r.Metadata) != 2 {
		t.Errorf("record %+v", r)
	}
	if !strings.Contains(fp.stderr.String(), `flaky source "c": opening after position 7; never fails`) {
		t.Errorf("open log: %s", fp.stderr.String())
	}
	if err := src.Open(ctx, sdk.Position("x")); err == nil || cerrors.Classify(err).Class != cerrors.ClassFatal {
		t.Errorf("bad position: %v, want a fatal error", err)
	}
}

func TestSourceSettings(t *testing.T) {
	tests := []struct {
		name, want string
		m          map[string]string
	}{
		{"unknown", `setting "path": unknown setting`, map[string]string{"path": "x"}},
		{"bad rate", `setting "rate": "fast" is not a number`, map[string]string{"rate": "fast"}},
		{"negative recordCount", `setting "recordCount": "-2" must be between -1`, map[string]string{"recordCount": "-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fp fakeProcess
			err := newSource(fp.process(), testClock(nil)).Configure(context.Background(), cfg(tt.m))
			if err == nil || !strings.Contains(err.Error(), tt.want) || cerrors.Classify(err).Class != cerrors.ClassFatal {
				t.Errorf("got %v, want a fatal error containing %q", err, tt.want)
			}
		})
	}
}

// rate paces the records by the clock; recordCount stops them.
func TestSourceRateAndRecordCount(t *testing.T) {
	var fp fakeProcess
	clk := clocktest.NewAt(time.Unix(0, 0))
	src := newSource(fp.process(), testClock(clk))
	ctx := context.Background()
	if err := src.Configure(ctx, cfg(map[string]string{"rate": "10", "recordCount": "4"})); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	var got []string
	for len(got) < 4 {
		recs, err := src.Read(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, positions(recs))
	}
	// One record is due at once, then one every 100ms.
	if strings.Join(got, ",") != "1,2,3,4" || clk.Now().Sub(start) != 300*time.Millisecond {
		t.Errorf("reads %v after %s, want 1,2,3,4 after 300ms", got, clk.Now().Sub(start))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Read(cctx, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("after recordCount: %v, want to wait until cancelled", err)
	}
}

// A read returns the records before the failure point; the next one fails.
// An ack that crosses the point fails as a whole.
func TestSourceFailurePoint(t *testing.T) {
	t.Run("read", func(t *testing.T) {
		var fp fakeProcess
		src := newTestSource(t, &fp, map[string]string{"fail.on": "read", "fail.after": "3"})
		recs, err := src.Read(context.Background(), 2)
		if err != nil || positions(recs) != "1 2" {
			t.Fatalf("%s, %v", positions(recs), err)
		}
		recs, err = src.Read(context.Background(), 5)
		if err != nil || positions(recs) != "3" {
			t.Fatalf("%s, %v; want only record 3", positions(recs), err)
		}
		if _, err = src.Read(context.Background(), 5); err == nil || !strings.Contains(err.Error(), "read: record 4:") {
			t.Fatalf("%v, want the failure at record 4", err)
		}
	})
	t.Run("ack", func(t *testing.T) {
		var fp fakeProcess
		src := newTestSource(t, &fp, map[string]string{"fail.on": "ack", "fail.after": "2", "fail.code": "500"})
		ps := []sdk.Position{sdk.Position("1"), sdk.Position("2"), sdk.Position("3")}
		if err := src.Ack(context.Background(), ps[:1]); err != nil {
			t.Fatal(err)
		}
		err := src.Ack(context.Background(), ps[1:])
		if err == nil || !strings.Contains(err.Error(), "ack: position 3:") {
			t.Fatalf("%v, want the failure at position 3", err)
		}
		if c := cerrors.Classify(err); c.Code != 500 || c.Class != cerrors.ClassTransient {
			t.Errorf("classified %+v", c)
		}
	})
	t.Run("open", func(t *testing.T) {
		var fp fakeProcess
		src := newSource(fp.process(), testClock(nil))
		if err := src.Configure(context.Background(), cfg(map[string]string{"fail.on": "open", "fail.code": "401"})); err != nil {
			t.Fatal(err)
		}
		err := src.Open(context.Background(), nil)
		if c := cerrors.Classify(err); c.Code != 401 || c.Class != cerrors.ClassFatal {
			t.Errorf("%v classified %+v", err, c)
		}
	})
}

func newTestDestination(t *testing.T, fp *fakeProcess, m map[string]string) *destination {
	t.Helper()
	dst := newDestination(fp.process())
	if err := dst.Configure(context.Background(), cfg(m)); err != nil {
		t.Fatal(err)
	}
	if err := dst.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dst.Teardown(context.Background()) })
	return dst
}

func TestDestinationWritesJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "records.jsonl")
	var fp fakeProcess
	dst := newTestDestination(t, &fp, map[string]string{"path": path})
	n, err := dst.Write(context.Background(), testRecords(2))
	if n != 2 || err != nil {
		t.Fatalf("wrote %d, %v", n, err)
	}
	if err := dst.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"position":"MQ==","operation":"create","metadata":null,"key":"MQ==","payload":{"before":null,"after":{"id":1}}}` + "\n" +
		`{"position":"Mg==","operation":"create","metadata":null,"key":"Mg==","payload":{"before":null,"after":{"id":2}}}` + "\n"
	if string(b) != want {
		t.Errorf("file\n%s\nwant\n%s", b, want)
	}
}

// A write that reaches the failure point writes and reports the records
// before it: a partial write.
func TestDestinationPartialWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	var fp fakeProcess
	dst := newTestDestination(t, &fp, map[string]string{"path": path, "fail.on": "write", "fail.after": "3", "fail.code": "422"})
	if n, err := dst.Write(context.Background(), testRecords(2)); n != 2 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	n, err := dst.Write(context.Background(), testRecords(3)) // positions 1-3 again; the 2nd fails
	if n != 1 || err == nil || !strings.Contains(err.Error(), "write: position 2:") {
		t.Fatalf("second write: %d, %v; want 1 and a failure at position 2", n, err)
	}
	if c := cerrors.Classify(err); c.Code != 422 || c.Class != cerrors.ClassFatal {
		t.Errorf("classified %+v", c)
	}
	b, _ := os.ReadFile(path)
	if lines := strings.Count(string(b), "\n"); lines != 3 {
		t.Errorf("%d lines in the file, want 3:\n%s", lines, b)
	}
}

// A process of the destination killed in the middle of a write leaves a
// partial line: the next Open removes it (its records come again), so the
// file holds whole lines only. A file whose end is someone else's text
// is not touched, and the destination refuses it.
func TestDestinationOpenCutsATornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	var fp fakeProcess
	dst := newTestDestination(t, &fp, map[string]string{"path": path})
	if n, err := dst.Write(context.Background(), testRecords(2)); n != 2 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if err := dst.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(slices.Clone(whole), `{"position":"Mw==","operation":"cre`...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	dst = newTestDestination(t, &fp, map[string]string{"path": path})
	recs := testRecords(3)
	if n, err := dst.Write(context.Background(), recs[2:]); n != 1 || err != nil {
		t.Fatalf("write after the torn line: %d, %v", n, err)
	}
	if err := dst.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	third := `{"position":"Mw==","operation":"create","metadata":null,"key":"Mw==","payload":{"before":null,"after":{"id":3}}}` + "\n"
	if string(got) != string(whole)+third {
		t.Errorf("file after the repair:\n%s\nwant\n%s%s", got, whole, third)
	}
	if !strings.Contains(fp.stderr.String(), "removed a partial last line of 35 bytes") {
		t.Errorf("stderr does not tell of the repair:\n%s", fp.stderr.String())
	}

	foreign := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(foreign, []byte("a line\nno final line break"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst = newDestination(fp.process())
	if err := dst.Configure(context.Background(), cfg(map[string]string{"path": foreign})); err != nil {
		t.Fatal(err)
	}
	err = dst.Open(context.Background())
	if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal || !strings.Contains(err.Error(), "refusing to append") {
		t.Errorf("open of a file ending with foreign text: %v (%+v), want fatal", err, c)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "a line\nno final line break" {
		t.Errorf("the foreign file was changed: %q", b)
	}
}

// A record that cannot be encoded fails with 422 after the ones before it.
func TestDestinationUnencodableRecord(t *testing.T) {
	var fp fakeProcess
	dst := newTestDestination(t, &fp, nil)
	recs := testRecords(3)
	recs[1].Payload.After = sdk.StructuredData{"c": make(chan int)}
	n, err := dst.Write(context.Background(), recs)
	if n != 1 || cerrors.Classify(err).Code != sdk.CodeUnprocessable {
		t.Errorf("wrote %d, %v; want 1 and a 422", n, err)
	}
}

func TestDestinationOpenFailure(t *testing.T) {
	var fp fakeProcess
	dst := newDestination(fp.process())
	if err := dst.Configure(context.Background(), cfg(map[string]string{"fail.on": "open", "fail.format": "text"})); err != nil {
		t.Fatal(err)
	}
	err := dst.Open(context.Background())
	if err == nil || err.Error() != `flaky destination "c": open: attempt 1: flaky: injected failure (failure 1)` {
		t.Errorf("open: %v", err)
	}
	if c := cerrors.Classify(err); c.Class != cerrors.ClassTransient || c.Code != 0 {
		t.Errorf("classified %+v, want transient without code", c)
	}
}

// The SDK's acceptance suite: the contract the runtime relies on.
func TestSourceAcceptance(t *testing.T) {
	sdktest.Source(t, sdktest.SourceConfig{
		New:          func() sdk.Source { return newSource((&fakeProcess{}).process(), testClock(nil)) },
		Settings:     map[string]string{},
		BadSettings:  map[string]string{"rate": "fast"},
		FailSettings: map[string]string{"fail.on": "read", "fail.after": "3", "fail.code": "503"},
	})
}

func TestDestinationAcceptance(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	sdktest.Destination(t, sdktest.DestinationConfig{
		New:          func() sdk.Destination { return newDestination((&fakeProcess{}).process()) },
		Settings:     map[string]string{"path": out},
		BadSettings:  map[string]string{"path": "x", "fail.on": "sometimes"},
		FailSettings: map[string]string{"fail.on": "write", "fail.after": "2", "fail.code": "507"},
		ReadBack: func(tb testing.TB) []sdk.Record {
			b, err := os.ReadFile(out)
			if err != nil {
				tb.Fatal(err)
			}
			// The next check starts from an empty file.
			if err := os.Remove(out); err != nil {
				tb.Fatal(err)
			}
			var recs []sdk.Record
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				r, err := record.ParseJSON([]byte(line))
				if err != nil {
					tb.Fatalf("line %q: %v", line, err)
				}
				recs = append(recs, r)
			}
			return recs
		},
	})
}
