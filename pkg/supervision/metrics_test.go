package supervision

import (
	"testing"
	"time"

	"github.com/conduitry/conduit/lifecycle"
)

func TestStatusSinceOfAPersistedState(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	began, updated := now.Add(-time.Hour), now.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		st   lifecycle.State
		want time.Time
	}{
		{"recovering: the episode's start, not the last restart's write",
			lifecycle.State{Status: lifecycle.StatusRecovering, UpdatedAt: updated, Episode: &lifecycle.Episode{StartedAt: began}}, began},
		{"recovering when conduit shut down: the episode's start, which goes on",
			lifecycle.State{Status: lifecycle.StatusStopped, StopReason: lifecycle.StopReasonShutdown, ResumeStatus: lifecycle.StatusRecovering,
				UpdatedAt: updated, Episode: &lifecycle.Episode{StartedAt: began}}, began},
		{"running when conduit shut down: now, when it runs again",
			lifecycle.State{Status: lifecycle.StatusStopped, StopReason: lifecycle.StopReasonShutdown, ResumeStatus: lifecycle.StatusRunning,
				UpdatedAt: updated}, now},
		{"stopped by a user: the last write", lifecycle.State{Status: lifecycle.StatusStopped, UpdatedAt: updated}, updated},
		{"recovering without an episode: the last write",
			lifecycle.State{Status: lifecycle.StatusRecovering, UpdatedAt: updated}, updated},
		{"degraded after an episode that ended: the last write",
			lifecycle.State{Status: lifecycle.StatusDegraded, UpdatedAt: updated, Episode: &lifecycle.Episode{StartedAt: began, EndedAt: updated}}, updated},
		{"never written: now", lifecycle.State{Status: lifecycle.StatusStopped}, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusSince(tc.st, now); !got.Equal(tc.want) {
				t.Errorf("statusSince = %v, want %v", got, tc.want)
			}
		})
	}
}
