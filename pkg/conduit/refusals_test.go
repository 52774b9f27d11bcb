package conduit

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// While the store refused writes, a WARN was logged for every refused
// round, one every 250 ms while a disk stayed full.
func TestRefusalLogLogsASpellOnceAndThenRarely(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	now := time.Unix(1_800_000_000, 0)
	l := &refusalLog{log: zap.New(core), now: func() time.Time { return now }}
	refusal := errors.New("database conduit.db: no space left on device")

	l.committed() // nothing refused yet: nothing to say
	// Two minutes of refused rounds, every 250 ms, 3 writes each.
	for i := range 480 {
		l.refused(3, refusal)
		if i < 479 {
			now = now.Add(250 * time.Millisecond)
		}
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	// The first, then one per 30 s: at 30, 60 and 90 s (119.75 s is the last round).
	if len(warns) != 4 {
		t.Fatalf("%d WARN lines for 2 minutes of refusals, want 4: %v", len(warns), warns)
	}
	if got := warns[0].ContextMap()["writes"]; got != int64(3) {
		t.Errorf("first line: writes %v, want 3", got)
	}
	second := warns[1].ContextMap()
	// 30 s after the first: rounds 2 to 120 were not logged.
	if second["refusals_not_logged"] != int64(119) || second["their_writes"] != int64(357) || second["refusing_for"] != 30*time.Second {
		t.Errorf("second line: %v; want 119 refusals (357 writes) not logged, refusing for 30s", second)
	}

	now = now.Add(250 * time.Millisecond)
	l.committed()
	l.committed()
	infos := logs.FilterMessage("the store takes writes again").All()
	if len(infos) != 1 || infos[0].Level != zapcore.InfoLevel {
		t.Fatalf("lines when writes work again: %v, want one INFO", infos)
	}
	if ctx := infos[0].ContextMap(); ctx["refused_writes"] != int64(480*3) || ctx["refused_for"] != 120*time.Second {
		t.Errorf("recovery line: %v; want 1440 refused writes over 2m0s", ctx)
	}

	// A new spell is logged at once again.
	l.refused(1, refusal)
	if n := len(logs.FilterLevelExact(zapcore.WarnLevel).All()); n != 5 {
		t.Errorf("a new spell's first refusal was not logged: %d WARN lines, want 5", n)
	}
}
