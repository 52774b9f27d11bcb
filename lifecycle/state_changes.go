package lifecycle

import "time"

// What the supervisor's transitions do to a pipeline's state besides its
// status (the state machine's, fsm.go): one method per transition, so
// that a handler does not reset fields by hand and each transition's
// effect on the state is tested on its own (state_changes_test.go). A
// fault's and a managed rule's changes are worked out with their
// decisions (faultOutcome, ruleApplicationOf).

// startedByUser: a person started the pipeline. Whatever came before no
// longer counts: not the fail count, not flapping, not the record it
// failed on, not why it was degraded.
func (st *State) startedByUser() {
	st.FailCount = 0
	st.Flaps, st.LastRecoveredAt, st.LastEpisodeAttempts = 0, time.Time{}, 0
	st.Poison = nil
	st.NextAttemptAt = time.Time{}
	st.DegradedReason = ""
	st.Crashes = 0
}

// crashLooped: the crash-loop guard degraded the pipeline when a process
// took it up (crashloop.go).
func (st *State) crashLooped(now time.Time) {
	st.DegradedReason = ReasonCrashLoop
	st.NextAttemptAt = time.Time{}
	st.StopReason, st.ResumeStatus = "", ""
	st.Probation, st.HeldBy = false, ""
	st.endEpisode(now, "degraded ("+string(ReasonCrashLoop)+")")
}

// stopped: the pipeline stopped (asked by a user, or its source ended);
// a pending restart is off and the episode ends.
func (st *State) stopped(now time.Time) {
	st.NextAttemptAt = time.Time{}
	st.endEpisode(now, "stopped")
}

// forceStopped: a user force-stopped the pipeline, which degrades it.
func (st *State) forceStopped(now time.Time) {
	st.DegradedReason = ReasonForceStop
	st.NextAttemptAt = time.Time{}
	st.endEpisode(now, "degraded ("+string(ReasonForceStop)+")")
}

// recovered: the pipeline proved itself after a restart (reason). The
// fail count resets; when and after how many attempts are remembered for
// flap detection (a failure within flap-window continues this episode's
// backoff); the record it failed on is behind it. It returns the fail
// count the episode ended with.
func (st *State) recovered(now time.Time, reason RecoveredReason) (attempts int) {
	attempts = st.FailCount
	st.FailCount = 0
	st.LastRecoveredAt, st.LastEpisodeAttempts = now, attempts
	st.Poison = nil
	st.endEpisode(now, "recovered ("+string(reason)+")")
	return attempts
}

// endEpisode ends the open recovery episode, if any, with outcome.
func (st *State) endEpisode(now time.Time, outcome string) {
	if e := st.Episode; e != nil && e.EndedAt.IsZero() {
		e.EndedAt, e.Outcome = now, outcome
	}
}
