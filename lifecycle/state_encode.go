package lifecycle

import (
	"slices"

	"github.com/conduitry/conduit/pkg/jsonenc"
)

// appendState appends the persisted form of s - the exact bytes
// json.Marshal writes for it - to buf. The store's one writer encodes every
// state it commits, so in a fault storm across ten thousand pipelines
// reflection-driven encoding is a large share of what the whole store can
// commit per second; this encoder writes the same bytes several times
// faster (see pkg/jsonenc). ok is false for a state it does not encode exactly (a time
// outside what RFC 3339 can say, an invalid status): encodeState then
// uses json.Marshal, which also reports the error. TestStateEncoderMatchesJSON
// holds it to json.Marshal's output.
func appendState(buf []byte, s State) (_ []byte, ok bool) {
	if !s.Status.Valid() || (s.ResumeStatus != "" && !s.ResumeStatus.Valid()) {
		return buf, false
	}
	e := stateEncoder{jsonenc.New(buf)}
	e.Raw(`{"version":`)
	e.Int(int64(s.Version))
	e.Raw(`,"status":`)
	e.String(s.Status.String())
	e.Raw(`,"failCount":`)
	e.Int(int64(s.FailCount))
	e.OptionalTime(`,"nextAttemptAt":`, s.NextAttemptAt)
	if s.Probation {
		e.Raw(`,"probation":true`)
	}
	if s.LastError != nil {
		e.Raw(`,"lastError":`)
		e.errorInfo(s.LastError)
	}
	e.OptionalString(`,"degradedReason":`, string(s.DegradedReason))
	if s.Episode != nil {
		e.Raw(`,"episode":`)
		e.episode(s.Episode)
	}
	e.OptionalString(`,"stopReason":`, string(s.StopReason))
	e.OptionalString(`,"resumeStatus":`, string(s.ResumeStatus))
	e.OptionalString(`,"configHash":`, s.ConfigHash)
	e.Raw(`,"updatedAt":`)
	e.Time(s.UpdatedAt)
	e.OptionalTime(`,"createdAt":`, s.CreatedAt)
	e.OptionalTime(`,"lastRecoveredAt":`, s.LastRecoveredAt)
	e.OptionalInt(`,"lastEpisodeAttempts":`, int64(s.LastEpisodeAttempts))
	e.OptionalInt(`,"flaps":`, int64(s.Flaps))
	if p := s.Poison; p != nil {
		e.Raw(`,"poison":{"position":`)
		e.Bytes(p.Position)
		e.Raw(`,"error":`)
		e.errorInfo(&p.Error)
		e.Raw(`,"runs":`)
		e.Int(int64(p.Runs))
		if p.Quarantined {
			e.Raw(`,"quarantined":true`)
		}
		e.Raw(`}`)
	}
	e.OptionalString(`,"heldBy":`, s.HeldBy)
	e.OptionalInt(`,"crashes":`, int64(s.Crashes))
	if s.Run {
		e.Raw(`,"run":true`)
	}
	e.Raw(`}`)
	return e.Buf, e.OK
}

// stateEncoder writes the parts of a State.
type stateEncoder struct{ *jsonenc.Encoder }

func (e *stateEncoder) errorInfo(info *ErrorInfo) {
	e.Raw(`{"at":`)
	e.Time(info.At)
	e.OptionalInt(`,"code":`, int64(info.Code))
	e.Raw(`,"class":`)
	e.String(string(info.Class))
	e.Raw(`,"source":`)
	e.String(string(info.Source))
	e.Raw(`,"message":`)
	e.String(info.Message)
	e.OptionalString(`,"component":`, info.Component)
	e.OptionalString(`,"componentKind":`, string(info.ComponentKind))
	e.OptionalString(`,"rule":`, info.Rule)
	if len(info.Record) > 0 {
		e.Raw(`,"record":`)
		e.Bytes(info.Record)
	}
	e.OptionalString(`,"dependency":`, info.Dependency)
	e.Raw(`}`)
}

// episode writes ep as Episode.MarshalJSON does: an attempt that repeats
// the error of the one before it, at its own failure time, without it.
func (e *stateEncoder) episode(ep *Episode) {
	e.Raw(`{"startedAt":`)
	e.Time(ep.StartedAt)
	e.OptionalTime(`,"endedAt":`, ep.EndedAt)
	e.OptionalString(`,"outcome":`, ep.Outcome)
	e.Raw(`,"attempts":`)
	if ep.Attempts == nil {
		e.Raw("null")
	} else {
		e.Raw("[")
		for i := range ep.Attempts {
			a := &ep.Attempts[i]
			if i > 0 {
				e.Raw(",")
			}
			e.Raw(`{"number":`)
			e.Int(int64(a.Number))
			e.Raw(`,"failedAt":`)
			e.Time(a.FailedAt)
			if i == 0 || !a.Error.At.Equal(a.FailedAt) || !sameError(ep.Attempts[i-1].Error, a.Error) {
				e.Raw(`,"error":`)
				e.errorInfo(&a.Error)
			}
			e.OptionalInt(`,"delay":`, int64(a.Delay))
			e.OptionalTime(`,"nextAttemptAt":`, a.NextAttemptAt)
			e.OptionalString(`,"strategy":`, a.Strategy)
			e.Raw("}")
		}
		e.Raw("]")
	}
	e.OptionalInt(`,"droppedAttempts":`, int64(ep.DroppedAttempts))
	if len(ep.ErrorCounts) > 0 {
		e.Raw(`,"errorCounts":[`)
		for i, c := range ep.ErrorCounts {
			if i > 0 {
				e.Raw(",")
			}
			e.Raw(`{"class":`)
			e.String(string(c.Class))
			e.OptionalInt(`,"code":`, int64(c.Code))
			e.Raw(`,"count":`)
			e.Int(int64(c.Count))
			e.Raw("}")
		}
		e.Raw("]")
	}
	e.OptionalInt(`,"otherErrors":`, int64(ep.OtherErrors))
	if len(ep.RuleCounts) > 0 {
		e.Raw(`,"ruleCounts":{`)
		names := make([]string, 0, len(ep.RuleCounts))
		for name := range ep.RuleCounts {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				e.Raw(",")
			}
			e.String(name)
			e.Raw(":")
			e.Int(int64(ep.RuleCounts[name]))
		}
		e.Raw("}")
	}
	e.Raw("}")
}
