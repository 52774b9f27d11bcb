package lifecycle

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
)

// TestStateEncoderMatchesJSON holds the hand-written state encoder to the
// bytes encoding/json writes for the same state, over states with every
// field set or not, strings that need escaping, times in other zones and
// out of RFC 3339's range: a difference would change the persisted format
// that testdata/state.v2.golden.json pins.
func TestStateEncoderMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for i := range 5000 {
		s := randomState(rng)
		want, wantErr := json.Marshal(s)
		got, ok := appendState(nil, s)
		if ok {
			fast++
			if wantErr != nil {
				t.Fatalf("case %d: the encoder wrote %s where json.Marshal fails: %v", i, got, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d: encoder and json.Marshal differ:\n got %s\nwant %s", i, got, want)
			}
		}
		// encodeState itself, fast or not, always agrees with json.Marshal.
		s.Version = stateFormatVersion
		want, wantErr = json.Marshal(s)
		enc, err := encodeState(s)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(enc, want) {
			t.Fatalf("case %d: encodeState = %s, %v; json.Marshal = %s, %v", i, enc, err, want, wantErr)
		}
	}
	// Most generated states are ordinary; the fallback must stay the
	// exception or the test checks little of the encoder.
	if fast < 4000 {
		t.Fatalf("the encoder took only %d of 5000 states", fast)
	}
}

// TestStateEncoderGolden checks the encoder on the state the golden file
// pins (TestStateGolden compares encodeState's bytes with the file).
func TestStateEncoderGolden(t *testing.T) {
	s := goldenState()
	s.Version = stateFormatVersion
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendState(nil, s)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("encoder (ok=%v) wrote\n%s\njson.Marshal wrote\n%s", ok, got, want)
	}
}

var encoderStrings = []string{
	"", "orders", "connection refused", "quote \" and \\ backslash", "<script>&amp;</script>",
	"tab\tnewline\ncarriage\r", "bell\x07 nul\x00 esc\x1b", "unicode é ü 日本", "line\u2028separator\u2029",
	"invalid \xff\xfe utf8", "back\bform\f", "transient",
}

func randomString(rng *rand.Rand) string { return encoderStrings[rng.IntN(len(encoderStrings))] }

func randomTime(rng *rand.Rand) time.Time {
	// Times RFC 3339 cannot say are rare, as they are in real states, so
	// that most states take the encoder's path.
	switch r := rng.IntN(400); {
	case r == 0:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // beyond RFC 3339
	case r == 1:
		return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	case r == 2:
		return time.Date(2026, 11, 27, 10, 0, 0, 0, time.FixedZone("odd", 3600+30)) // offset with seconds
	case r < 40:
		return time.Time{}
	case r < 60:
		return time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	case r < 80:
		return time.Date(2026, 11, 27, 10, 0, 0, 0, time.FixedZone("west", -(9*3600+30*60)))
	case r < 100:
		return time.Date(2026, 11, 27, 10, 0, 0, 0, time.Local)
	}
	return time.Unix(1_700_000_000+rng.Int64N(100_000_000), rng.Int64N(1e9)).UTC()
}

func maybe(rng *rand.Rand) bool { return rng.IntN(2) == 0 }

func randomErrorInfo(rng *rand.Rand) ErrorInfo {
	info := ErrorInfo{At: randomTime(rng), Class: cerrors.Class(randomString(rng)), Source: cerrors.Source(randomString(rng)), Message: randomString(rng)}
	if maybe(rng) {
		info.Code = rng.IntN(700) - 50
	}
	if maybe(rng) {
		info.Component = randomString(rng)
		info.ComponentKind = []cerrors.ComponentKind{"", cerrors.ComponentSource, cerrors.ComponentDestination, "odd<kind>"}[rng.IntN(4)]
	}
	if maybe(rng) {
		info.Rule = randomString(rng)
	}
	switch rng.IntN(3) {
	case 0:
		info.Record = []byte{}
	case 1:
		info.Record = []byte("pos\x00\xff-" + randomString(rng))
	}
	if maybe(rng) {
		info.Dependency = randomString(rng)
	}
	return info
}

func randomEpisode(rng *rand.Rand) *Episode {
	ep := &Episode{StartedAt: randomTime(rng), EndedAt: randomTime(rng), Outcome: randomString(rng)}
	if rng.IntN(4) > 0 {
		ep.Attempts = []Attempt{}
		for n := range rng.IntN(20) {
			a := Attempt{Number: n + 1, FailedAt: randomTime(rng), Error: randomErrorInfo(rng)}
			if n > 0 && rng.IntN(3) > 0 {
				// A repeat of the error before, as in a restart loop.
				a.Error = ep.Attempts[n-1].Error
				if maybe(rng) {
					a.Error.At = a.FailedAt
				}
			}
			if maybe(rng) {
				a.Delay = time.Duration(rng.Int64N(int64(time.Hour)))
				a.NextAttemptAt = randomTime(rng)
				a.Strategy = randomString(rng)
			}
			ep.Attempts = append(ep.Attempts, a)
		}
	}
	if maybe(rng) {
		ep.DroppedAttempts = rng.IntN(1000)
	}
	switch rng.IntN(3) {
	case 0:
		ep.ErrorCounts = []ErrorCount{}
	case 1:
		for range 1 + rng.IntN(4) {
			ep.ErrorCounts = append(ep.ErrorCounts, ErrorCount{Class: cerrors.Class(randomString(rng)), Code: rng.IntN(3) * 100, Count: rng.IntN(50)})
		}
	}
	if maybe(rng) {
		ep.OtherErrors = rng.IntN(9)
	}
	switch rng.IntN(3) {
	case 0:
		ep.RuleCounts = map[string]int{}
	case 1:
		ep.RuleCounts = map[string]int{}
		for range 1 + rng.IntN(5) {
			ep.RuleCounts[randomString(rng)] = rng.IntN(10)
		}
	}
	return ep
}

func randomState(rng *rand.Rand) State {
	statuses := []Status{StatusRunning, StatusRecovering, StatusDegraded, StatusStopped}
	s := State{
		Version:   rng.IntN(3),
		Status:    statuses[rng.IntN(len(statuses))],
		FailCount: rng.IntN(30),
		UpdatedAt: randomTime(rng),
	}
	if rng.IntN(200) == 0 {
		s.Status = "Status(9)" // invalid: json.Marshal fails
	}
	if maybe(rng) {
		s.NextAttemptAt = randomTime(rng)
	}
	s.Probation = maybe(rng)
	if maybe(rng) {
		info := randomErrorInfo(rng)
		s.LastError = &info
	}
	if maybe(rng) {
		s.DegradedReason = []DegradeReason{ReasonFatal, ReasonRule, ReasonDeadLetterWindow, "odd & reason"}[rng.IntN(4)]
	}
	if maybe(rng) {
		s.Episode = randomEpisode(rng)
	}
	if maybe(rng) {
		s.StopReason = []StopReason{StopReasonShutdown, StopReasonHandover, "<odd>"}[rng.IntN(3)]
	}
	if maybe(rng) {
		s.ResumeStatus = statuses[rng.IntN(len(statuses))]
	}
	if maybe(rng) {
		s.ConfigHash = randomString(rng)
	}
	if maybe(rng) {
		s.CreatedAt = randomTime(rng)
	}
	if maybe(rng) {
		s.LastRecoveredAt = randomTime(rng)
		s.LastEpisodeAttempts = rng.IntN(5)
		s.Flaps = rng.IntN(3)
	}
	if maybe(rng) {
		s.Poison = &PoisonRecord{Error: randomErrorInfo(rng), Runs: rng.IntN(4), Quarantined: maybe(rng)}
		if maybe(rng) {
			s.Poison.Position = []byte("p-" + randomString(rng))
		}
	}
	if maybe(rng) {
		s.HeldBy = randomString(rng)
	}
	if maybe(rng) {
		s.Crashes, s.Run = rng.IntN(4), maybe(rng)
	}
	// Never persisted.
	s.Stopping = maybe(rng)
	return s
}

// BenchmarkEncodeState compares the encoder with encoding/json on the state
// of a pipeline in a restart loop: recovering, with the attempts an episode
// keeps, each a repeat of a connection error.
func BenchmarkEncodeState(b *testing.B) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	info := ErrorInfo{At: at, Code: 503, Class: "transient", Source: "typed", Message: "dial tcp 127.0.0.1:5432: connect: connection refused",
		Component: "pg", ComponentKind: cerrors.ComponentSource, Dependency: "postgres://127.0.0.1:5432"}
	ep := &Episode{StartedAt: at, Attempts: []Attempt{}, DroppedAttempts: 40, RuleCounts: map[string]int{"postgres-down": 55}}
	for n := range episodeKeepFirst + episodeKeepLast {
		failed := at.Add(time.Duration(n) * time.Second)
		a := Attempt{Number: n + 1, FailedAt: failed, Error: info, Delay: time.Second, NextAttemptAt: failed.Add(time.Second), Strategy: "exponential"}
		a.Error.At = failed
		ep.Attempts = append(ep.Attempts, a)
		ep.count(a.Error, 1)
	}
	s := State{Status: StatusRecovering, FailCount: 55, NextAttemptAt: at.Add(time.Minute), LastError: &info, Episode: ep,
		ConfigHash: "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f0", UpdatedAt: at, CreatedAt: at.Add(-time.Hour)}
	b.Run("encoder", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeState(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
