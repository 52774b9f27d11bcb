package auditlog

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRecordEncoderMatchesJSON holds the hand-written event encoder to the
// bytes encoding/json writes for the same record, over records with each
// field set or not and strings and times encoding/json treats specially.
func TestRecordEncoderMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	strs := []string{"", "orders", "connection refused", "quote \" \\", "<b>&</b>", "nl\n\t", "é 日本", "\u2028", "bad \xff"}
	str := func() string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return strs[rng.IntN(len(strs))]
	}
	tm := func() time.Time {
		switch rng.IntN(50) {
		case 0:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		case 1, 2, 3, 4, 5:
			return time.Time{}
		case 6, 7, 8:
			return time.Date(2026, 11, 27, 10, 0, 0, 5, time.FixedZone("CET", 3600))
		}
		return time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9)).UTC()
	}
	fast := 0
	for i := range 5000 {
		r := record{Version: formatVersion, Sequence: rng.Uint64(), Time: tm(), PipelineID: str(), Kind: Kind(str()),
			StatusBefore: str(), StatusAfter: str(), Message: str(), Actor: str(), Reason: str(), Action: str(), Strategy: str()}
		if rng.IntN(2) == 0 {
			r.Attempt, r.Delay, r.NextAttemptAt = rng.IntN(5), time.Duration(rng.Int64N(1e12)), tm()
		}
		if rng.IntN(3) == 0 {
			r.Count = rng.Int64N(1000) - 10
		}
		if rng.IntN(2) == 0 {
			r.Error = &recordError{Class: str(), Source: str(), Message: str(), Component: str(), ComponentKind: str(), Rule: str()}
			if rng.IntN(2) == 0 {
				r.Error.Code = rng.IntN(600)
			}
		}
		want, wantErr := json.Marshal(r)
		got, ok := appendRecord(nil, &r)
		if !ok {
			if wantErr == nil && r.Time.Year() <= 9999 && r.NextAttemptAt.Year() <= 9999 {
				t.Fatalf("case %d: the encoder refused a record json.Marshal writes: %s", i, want)
			}
			continue
		}
		fast++
		if wantErr != nil || !bytes.Equal(got, want) {
			t.Fatalf("case %d: encoder and json.Marshal differ:\n got %s\nwant %s (%v)", i, got, want, wantErr)
		}
	}
	if fast < 4500 {
		t.Fatalf("the encoder took only %d of 5000 records", fast)
	}
}
