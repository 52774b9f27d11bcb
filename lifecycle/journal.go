package lifecycle

// Recording: the state is saved with the event that records it.

import (
	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
)

// save marks the state for persisting. With an EventRecorder it goes with
// the next event, which records the transition, in the same commit;
// otherwise it is handed to the state store at once. Either way it is
// written behind the supervisor's back: a crash before the write lands
// resumes from the state before, the same as crashing a moment earlier.
func (s *Supervisor) save() {
	s.unsaved = true
	if _, ok := s.cfg.States.(EventRecorder); !ok {
		s.saveUnsaved()
	}
}

// saveUnsaved hands a state no event carried to the state store.
func (s *Supervisor) saveUnsaved() {
	if !s.unsaved {
		return
	}
	s.unsaved = false
	if err := s.cfg.States.SaveLater(s.cfg.PipelineID, s.state); err != nil {
		// The state in memory is still the truth; the next transition
		// tries again. Losing it only matters after a crash.
		s.log.Error("could not persist pipeline state", zap.Error(err))
	}
}

// emit records e, the step's (it is not kept).
func (s *Supervisor) emit(e *auditlog.Event) {
	e.PipelineID = s.cfg.PipelineID
	if rec, ok := s.cfg.States.(EventRecorder); ok {
		var st *State
		if s.unsaved {
			c := s.state.Clone()
			st, s.unsaved = &c, false
		}
		if err := rec.RecordLater(s.cfg.PipelineID, st, e); err != nil {
			s.log.Error("could not record pipeline event", zap.String("event", string(e.Kind)), zap.Error(err))
		}
	}
	// Observed before it is logged: whoever reads the log line and then
	// asks for the pipeline's status (a probe, the metrics) finds it.
	if s.cfg.Observer != nil {
		s.cfg.Observer.PipelineEvent(*e)
	}
	logEvent(s.log, e)
}
