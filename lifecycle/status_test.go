package lifecycle

import (
	"context"
	"errors"
	"testing"
)

// An instance of a cluster that takes a pipeline up says how it left its
// last instance; a pipeline that is not taken over keeps the process's
// words.
func TestTakeoverSaysHowThePipelineLeftItsLastInstance(t *testing.T) {
	for _, c := range []struct {
		t      Takeover
		reason StopReason
		want   string
	}{
		{Takeover{}, StopReasonShutdown, ""},
		{Takeover{From: "b"}, StopReasonShutdown, "instance b shut down and handed the pipeline over"},
		{Takeover{From: "a", Self: true}, StopReasonShutdown, ""},
		{Takeover{From: "b"}, StopReasonHandover, "instance b handed the pipeline over"},
		{Takeover{From: "a", Self: true}, StopReasonHandover, "this instance had stopped the pipeline when it could not renew its lease, and took it up again"},
		{Takeover{From: "b"}, "", "instance b stopped renewing the pipeline's lease (it was killed, paused or cut off from the database)"},
		{Takeover{From: "a", Self: true}, "", "this instance, or an earlier process with its id, stopped renewing the pipeline's lease (it was killed, paused or cut off from the database), and took it up again"},
	} {
		if got := c.t.how(c.reason); got != c.want {
			t.Errorf("%+v, %q: %q, want %q", c.t, c.reason, got, c.want)
		}
	}
}

// A caller waiting for a supervisor's reply is let go when the
// supervisor ends without handling its message, and still gets a reply
// given as it ended.
func TestAnswerEndsWithTheSupervisor(t *testing.T) {
	s := &Supervisor{done: make(chan struct{})}
	close(s.done)
	if _, err := answer(context.Background(), s, make(chan State, 1)); !errors.Is(err, ErrSupervisorDone) {
		t.Fatalf("answer of an ended supervisor: %v, want ErrSupervisorDone", err)
	}
	reply := make(chan State, 1)
	reply <- State{FailCount: 3}
	if st, err := answer(context.Background(), s, reply); err != nil || st.FailCount != 3 {
		t.Fatalf("answer given as the supervisor ended: %+v %v", st, err)
	}
}
