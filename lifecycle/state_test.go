package lifecycle

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/store"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestStateFormatGolden pins the persisted state format: if this fails,
// existing databases can no longer be read.
func TestStateFormatGolden(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	errInfo := ErrorInfo{At: at, Code: 503, Class: "transient", Source: "json",
		Message: "dial tcp 127.0.0.1:5432: connect: connection refused", Component: "pg", ComponentKind: "source"}
	st := State{
		Status:        StatusRecovering,
		FailCount:     2,
		NextAttemptAt: at.Add(2 * time.Second),
		LastError:     &errInfo,
		Episode: &Episode{StartedAt: at.Add(-time.Second), Attempts: []Attempt{
			{Number: 1, FailedAt: at.Add(-time.Second), Error: errInfo, Delay: time.Second, NextAttemptAt: at},
			{Number: 2, FailedAt: at, Error: errInfo, Delay: 2 * time.Second, NextAttemptAt: at.Add(2 * time.Second)},
		}},
		ConfigHash: "sha256:abc",
		UpdatedAt:  at,
	}
	encoded, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "state.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, append(encoded, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(encoded)+"\n" != string(want) {
		t.Fatalf("state encoding changed:\n got %s\nwant %s", encoded, want)
	}
	decoded, err := decodeState(want)
	if err != nil {
		t.Fatal(err)
	}
	st.Version = stateFormatVersion
	if !reflect.DeepEqual(decoded, st) {
		t.Fatalf("golden file decodes to\n%+v\nwant\n%+v", decoded, st)
	}
}

func TestStateStoreRoundTripAndCorruption(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	w := store.NewGroupWriter(db)
	defer w.Close()
	s := NewStateStore(db, w, nil)
	defer s.Close()
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
			if err := db.Set(ctx, stateKey("bad"), []byte(raw)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Load(ctx, "bad"); err == nil || !strings.Contains(err.Error(), "pipeline bad") {
				t.Fatalf("got %v, want an error naming the pipeline", err)
			}
		})
	}
}

func TestEpisodeKeepsABoundedNumberOfAttempts(t *testing.T) {
	e := &Episode{}
	for i := 1; i <= maxEpisodeAttempts+10; i++ {
		e.add(Attempt{Number: i})
	}
	if len(e.Attempts) != maxEpisodeAttempts || e.DroppedAttempts != 10 || e.Attempts[0].Number != 11 {
		t.Fatalf("kept %d attempts, dropped %d, first %d", len(e.Attempts), e.DroppedAttempts, e.Attempts[0].Number)
	}
}
