package lifecycle

import (
	"testing"
	"time"
)

// Each transition's change of the state besides the status: what it
// resets, what it keeps, and how it ends the open episode.
func TestStateChanges(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Minute)
	failed := &ErrorInfo{At: earlier, Code: 503, Message: "unavailable"}
	degraded := func() State {
		return State{Status: StatusDegraded, FailCount: 4, NextAttemptAt: now.Add(time.Minute), LastError: failed,
			DegradedReason: ReasonFlapping, Episode: &Episode{StartedAt: earlier}, LastRecoveredAt: earlier, LastEpisodeAttempts: 3,
			Flaps: 2, Poison: &PoisonRecord{Position: []byte("7"), Runs: 2}}
	}

	st := degraded()
	st.startedByUser()
	if st.FailCount != 0 || st.Flaps != 0 || !st.LastRecoveredAt.IsZero() || st.LastEpisodeAttempts != 0 || st.Poison != nil ||
		!st.NextAttemptAt.IsZero() || st.DegradedReason != "" {
		t.Errorf("started by a user: %+v", st)
	}
	if st.LastError != failed || st.Episode.EndedAt != (time.Time{}) {
		t.Errorf("a start forgot the last error or ended the episode: %+v", st)
	}

	st = degraded()
	st.stopped(now)
	if !st.NextAttemptAt.IsZero() || !st.Episode.EndedAt.Equal(now) || st.Episode.Outcome != "stopped" {
		t.Errorf("stopped: %+v, episode %+v", st, st.Episode)
	}
	if st.FailCount != 4 || st.DegradedReason != ReasonFlapping || st.Poison == nil {
		t.Errorf("a stop reset what the next start resets: %+v", st)
	}

	st = degraded()
	st.forceStopped(now)
	if st.DegradedReason != ReasonForceStop || !st.NextAttemptAt.IsZero() || st.Episode.Outcome != "degraded (force stop)" {
		t.Errorf("force-stopped: %+v, episode %+v", st, st.Episode)
	}

	st = degraded()
	if attempts := st.recovered(now, RecoveredByRecord); attempts != 4 {
		t.Errorf("recovered after %d attempts, want 4", attempts)
	}
	if st.FailCount != 0 || !st.LastRecoveredAt.Equal(now) || st.LastEpisodeAttempts != 4 || st.Poison != nil ||
		st.Episode.Outcome != "recovered (record)" || st.Flaps != 2 {
		t.Errorf("recovered: %+v, episode %+v", st, st.Episode)
	}

	// An episode that ended already keeps its end.
	st = degraded()
	st.Episode.EndedAt, st.Episode.Outcome = earlier, "degraded (flapping)"
	st.stopped(now)
	if !st.Episode.EndedAt.Equal(earlier) || st.Episode.Outcome != "degraded (flapping)" {
		t.Errorf("a stop changed an episode that had ended: %+v", st.Episode)
	}
}
