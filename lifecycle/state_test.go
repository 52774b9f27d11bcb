package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/store"
)

// goldenState is the state pinned by testdata/state.v2.golden.json: an
// episode of 40 attempts of which 25 were dropped from the middle, with
// errors that repeat (written once) and one that does not.
func goldenState() State {
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	refused := ErrorInfo{Code: 503, Class: "transient", Source: "json",
		Message: "dial tcp 127.0.0.1:5432: connect: connection refused", Component: "pg", ComponentKind: "source"}
	timeout := ErrorInfo{Class: "transient", Source: "default", Message: "read: i/o timeout", Component: "pg", ComponentKind: "source"}
	ep := &Episode{StartedAt: at}
	for n := 1; n <= 40; n++ {
		failed := at.Add(time.Duration(n-1) * 10 * time.Millisecond)
		e := refused
		if n == 3 {
			e = timeout
		}
		e.At = failed
		ep.add(Attempt{Number: n, FailedAt: failed, Error: e, Delay: 10 * time.Millisecond, NextAttemptAt: failed.Add(10 * time.Millisecond)})
	}
	last := ep.Attempts[len(ep.Attempts)-1]
	// As a clean shutdown leaves a recovering pipeline.
	return State{
		Status:        StatusStopped,
		StopReason:    StopReasonShutdown,
		ResumeStatus:  StatusRecovering,
		FailCount:     40,
		NextAttemptAt: last.NextAttemptAt,
		LastError:     &last.Error,
		Episode:       ep,
		ConfigHash:    "sha256:abc",
		UpdatedAt:     last.FailedAt,
	}
}

// TestStateFormatGolden pins the persisted state format: if this fails,
// existing databases can no longer be read.
func TestStateFormatGolden(t *testing.T) {
	st := goldenState()
	encoded, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.File(t, "state.v2.golden.json", append(encoded, '\n'))
	decoded, err := decodeState(want)
	if err != nil {
		t.Fatal(err)
	}
	st.Version = stateFormatVersion
	if !reflect.DeepEqual(decoded, st) {
		t.Fatalf("golden file decodes to\n%+v\nwant\n%+v", decoded, st)
	}
	// The last error, then the episode's attempts 1 (refused), 3 (timeout)
	// and 4 (refused again); the other twelve repeat the error before them.
	if got := strings.Count(string(want), `"message"`); got != 4 {
		t.Fatalf("golden file holds %d error messages, want 4 (the last error, and each change of error in the episode)", got)
	}
}

// TestStateFormatV1StillDecodes reads the state format 1 wrote (every
// attempt with its error, up to 500 of them).
func TestStateFormatV1StillDecodes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "state.v1.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(raw)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	errInfo := ErrorInfo{At: at, Code: 503, Class: "transient", Source: "json",
		Message: "dial tcp 127.0.0.1:5432: connect: connection refused", Component: "pg", ComponentKind: "source"}
	want := State{
		Version:       stateFormatVersion,
		Status:        StatusRecovering,
		FailCount:     2,
		NextAttemptAt: at.Add(2 * time.Second),
		LastError:     &errInfo,
		Episode: &Episode{StartedAt: at.Add(-time.Second), Attempts: []Attempt{
			{Number: 1, FailedAt: at.Add(-time.Second), Error: errInfo, Delay: time.Second, NextAttemptAt: at},
			{Number: 2, FailedAt: at, Error: errInfo, Delay: 2 * time.Second, NextAttemptAt: at.Add(2 * time.Second)},
		}, ErrorCounts: []ErrorCount{{Class: "transient", Code: 503, Count: 2}}},
		ConfigHash: "sha256:abc",
		UpdatedAt:  at,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("format 1 decodes to\n%+v\nwant\n%+v", got, want)
	}
}

// TestStateFormatV1LongEpisodeIsBounded reads a format 1 state with the
// 500 attempts it could hold: it comes out bounded like any new episode,
// and is small when written again.
func TestStateFormatV1LongEpisodeIsBounded(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString(`{"version":1,"status":"recovering","failCount":1700,"episode":{"startedAt":"2026-11-20T12:00:00Z","attempts":[`)
	for n := 1201; n <= 1700; n++ {
		if n > 1201 {
			b.WriteByte(',')
		}
		failed := at.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano)
		fmt.Fprintf(&b, `{"number":%d,"failedAt":%q,"error":{"at":%q,"code":503,"class":"transient","source":"json","message":"connection refused"},"delay":10000000}`,
			n, failed, failed)
	}
	b.WriteString(`],"droppedAttempts":1200},"updatedAt":"2026-11-20T12:00:00Z"}`)

	st, err := decodeState([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	ep := st.Episode
	if got := numbers(ep.Attempts); !reflect.DeepEqual(got, []int{1201, 1202, 1203, 1204, 1205,
		1691, 1692, 1693, 1694, 1695, 1696, 1697, 1698, 1699, 1700}) {
		t.Fatalf("kept attempts %v, want the first and the latest of those stored", got)
	}
	if ep.DroppedAttempts != 1685 || ep.TotalAttempts() != 1700 {
		t.Fatalf("dropped %d of %d, want 1685 of 1700", ep.DroppedAttempts, ep.TotalAttempts())
	}
	if want := []ErrorCount{{Class: "transient", Code: 503, Count: 500}}; !reflect.DeepEqual(ep.ErrorCounts, want) {
		t.Fatalf("error counts %+v, want %+v (the attempts stored)", ep.ErrorCounts, want)
	}
	raw, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 4<<10 {
		t.Fatalf("written again it takes %d bytes, want at most 4 KiB", len(raw))
	}
}

func numbers(attempts []Attempt) []int {
	var n []int
	for _, a := range attempts {
		n = append(n, a.Number)
	}
	return n
}

func TestStateStoreRoundTripAndCorruption(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	defer w.Close()
	s := NewStateStore(db, w)
	if _, ok, err := s.Load(ctx, "p"); ok || err != nil {
		t.Fatalf("Load of an unknown pipeline: ok=%v err=%v", ok, err)
	}
	want := State{Status: StatusDegraded, DegradedReason: ReasonFatal, UpdatedAt: time.Unix(0, 0).UTC()}
	if err := s.Save(ctx, "p", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Load(ctx, "p")
	want.Version = stateFormatVersion
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v %v %v, want %+v", got, ok, err, want)
	}
	for name, raw := range map[string]string{
		"not json":       "{{",
		"future version": `{"version":7,"status":"running"}`,
		"unknown status": `{"version":1,"status":"sleeping"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := db.Commit(ctx, []store.Op{{Key: stateKey("bad"), Value: []byte(raw)}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Load(ctx, "bad"); err == nil || !strings.Contains(err.Error(), "pipeline bad") {
				t.Fatalf("got %v, want an error naming the pipeline", err)
			}
		})
	}
}

func TestEpisodeKeepsFirstAndLatestAttempts(t *testing.T) {
	e := &Episode{}
	capacity := 0
	for i := 1; i <= 10_000; i++ {
		code := 503
		if i%10 == 0 {
			code = 504
		}
		e.add(Attempt{Number: i, Error: ErrorInfo{Class: "transient", Code: code, Message: "refused"}})
		capacity = max(capacity, cap(e.Attempts))
	}
	want := []int{1, 2, 3, 4, 5, 9991, 9992, 9993, 9994, 9995, 9996, 9997, 9998, 9999, 10000}
	if got := numbers(e.Attempts); !reflect.DeepEqual(got, want) {
		t.Fatalf("kept attempts %v, want %v", got, want)
	}
	if e.DroppedAttempts != 10_000-len(want) || e.TotalAttempts() != 10_000 {
		t.Fatalf("dropped %d of %d", e.DroppedAttempts, e.TotalAttempts())
	}
	if wantCounts := []ErrorCount{{Class: "transient", Code: 503, Count: 9000}, {Class: "transient", Code: 504, Count: 1000}}; !reflect.DeepEqual(e.ErrorCounts, wantCounts) {
		t.Fatalf("error counts %+v, want %+v", e.ErrorCounts, wantCounts)
	}
	if capacity > 2*(episodeKeepFirst+episodeKeepLast) {
		t.Fatalf("the attempts slice grew to a capacity of %d", capacity)
	}
}

// TestEpisodeSizeIsBoundedWhateverTheErrors is the worst case for the
// persisted size: every attempt a different, huge error.
func TestEpisodeSizeIsBoundedWhateverTheErrors(t *testing.T) {
	e := &Episode{StartedAt: time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)}
	huge := strings.Repeat("é", 20_000)
	for i := 1; i <= 1000; i++ {
		at := e.StartedAt.Add(time.Duration(i) * 1234567 * time.Nanosecond)
		e.add(Attempt{Number: i, FailedAt: at, Delay: time.Hour, NextAttemptAt: at.Add(time.Hour), Error: ErrorInfo{
			At: at, Code: i, Class: "transient", Source: "typed", Message: fmt.Sprint(i, huge),
			Component: "a-source-with-a-long-name", ComponentKind: "source"}})
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 12<<10 {
		t.Fatalf("episode takes %d bytes, want at most 12 KiB", len(raw))
	}
	t.Logf("episode takes %d bytes", len(raw))
	for _, a := range e.Attempts {
		if len(a.Error.Message) > maxAttemptMessage || !utf8.ValidString(a.Error.Message) {
			t.Fatalf("attempt %d kept a message of %d bytes (valid UTF-8: %v)", a.Number, len(a.Error.Message), utf8.ValidString(a.Error.Message))
		}
	}
	if len(e.ErrorCounts) != maxErrorCounts || e.OtherErrors != 1000-maxErrorCounts {
		t.Fatalf("%d error counts and %d others, want %d and %d", len(e.ErrorCounts), e.OtherErrors, maxErrorCounts, 1000-maxErrorCounts)
	}
}

// TestEpisodeJSONRoundTrip: leaving repeated errors out of the persisted
// form loses nothing, also when an error's time is not its attempt's.
func TestEpisodeJSONRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	e1 := ErrorInfo{At: at, Code: 503, Class: "transient", Source: "json", Message: "refused"}
	e2 := e1
	e2.At = at.Add(time.Second)
	e3 := e1
	e3.At = at.Add(3 * time.Second) // not its attempt's failure time
	e4 := e1
	e4.At, e4.Message = at.Add(4*time.Second), "reset"
	want := &Episode{StartedAt: at, EndedAt: at.Add(time.Minute), Outcome: "recovered (record)", Attempts: []Attempt{
		{Number: 1, FailedAt: at, Error: e1, Delay: time.Second, NextAttemptAt: at.Add(time.Second)},
		{Number: 2, FailedAt: at.Add(time.Second), Error: e2},
		{Number: 3, FailedAt: at.Add(2 * time.Second), Error: e3},
		{Number: 4, FailedAt: at.Add(4 * time.Second), Error: e4},
	}, DroppedAttempts: 7, ErrorCounts: []ErrorCount{{Class: "transient", Code: 503, Count: 11}}, OtherErrors: 1}
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"error"`); n != 3 {
		t.Fatalf("%s: %d errors written, want 3 (the second repeats the first)", raw, n)
	}
	var got Episode
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("round trip gives\n%+v\nwant\n%+v", got, *want)
	}
	if err := json.Unmarshal([]byte(`{"attempts":[{"number":1}]}`), &got); err == nil || !strings.Contains(err.Error(), "attempt 1") {
		t.Fatalf("a first attempt without an error: %v, want an error naming the attempt", err)
	}
}

// TestTightRestartLoopKeepsTheStateSmall drives a supervisor through
// 10,000 restarts of a pipeline that fails at once, 10ms apart: the
// persisted state must stay small at every write, and the episode in
// memory bounded.
func TestTightRestartLoopKeepsTheStateSmall(t *testing.T) {
	const cycles = 10_000
	p := defaultPolicy()
	p.MinDelay, p.MaxDelay, p.BackoffFactor = 10*time.Millisecond, 40*time.Millisecond, 2
	h := newHarnessWith(t, p, State{Status: StatusRunning}, func(c *Config) {
		c.NewRun = func(RunHooks) (Run, error) { return nil, transientErr() }
	})
	h.expect(auditlog.KindRunning)
	largest := 0
	for i := 1; i <= cycles; i++ {
		rec := h.expect(auditlog.KindRecovering)
		if rec.Attempt != i {
			t.Fatalf("recovering attempt %d, want %d", rec.Attempt, i)
		}
		raw, err := encodeState(h.states.last("p1"))
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(raw))
		if i == cycles {
			break // and leave it waiting for its next restart
		}
		h.advance(rec.Delay)
		h.expect(auditlog.KindRestarted)
	}
	if largest > 4<<10 {
		t.Fatalf("the persisted state grew to %d bytes, want at most 4 KiB", largest)
	}
	st := h.state()
	ep := st.Episode
	if st.FailCount != cycles || ep == nil || ep.TotalAttempts() != cycles {
		t.Fatalf("fail count %d, episode %+v: want %d attempts", st.FailCount, ep, cycles)
	}
	if len(ep.Attempts) != episodeKeepFirst+episodeKeepLast || ep.Attempts[0].Number != 1 || ep.Attempts[len(ep.Attempts)-1].Number != cycles {
		t.Fatalf("episode in memory keeps attempts %v, want the first %d and the latest %d", numbers(ep.Attempts), episodeKeepFirst, episodeKeepLast)
	}
	if want := []ErrorCount{{Class: "transient", Code: 503, Count: cycles}}; !reflect.DeepEqual(ep.ErrorCounts, want) {
		t.Fatalf("error counts %+v, want %+v", ep.ErrorCounts, want)
	}
	t.Logf("largest persisted state: %d bytes", largest)
}
