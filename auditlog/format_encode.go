package auditlog

import "github.com/conduitry/conduit/pkg/jsonenc"

// appendRecord appends r as json.Marshal writes it. The store's one writer
// encodes every audit event it commits, beside the state it records, so in
// a fault storm this is on the path of every commit (see pkg/jsonenc); ok
// false leaves r to json.Marshal. TestRecordEncoderMatchesJSON holds it to
// json.Marshal's bytes, which testdata/event.golden.json pins.
func appendRecord(buf []byte, r *record) (_ []byte, ok bool) {
	e := jsonenc.New(buf)
	e.Raw(`{"version":`)
	e.Int(int64(r.Version))
	e.Raw(`,"sequence":`)
	e.Uint(r.Sequence)
	e.Raw(`,"time":`)
	e.Time(r.Time)
	e.Raw(`,"pipelineId":`)
	e.String(r.PipelineID)
	e.Raw(`,"kind":`)
	e.String(string(r.Kind))
	e.OptionalString(`,"statusBefore":`, r.StatusBefore)
	e.OptionalString(`,"statusAfter":`, r.StatusAfter)
	e.OptionalString(`,"message":`, r.Message)
	e.OptionalString(`,"actor":`, r.Actor)
	if re := r.Error; re != nil {
		// Every field of the error may be left out: its first one written
		// opens the object without a comma.
		e.Raw(`,"error":{`)
		mark := len(e.Buf)
		if re.Code != 0 {
			e.Raw(`"code":`)
			e.Int(int64(re.Code))
		}
		for _, f := range [...]struct{ key, value string }{
			{`"class":`, re.Class}, {`"source":`, re.Source}, {`"message":`, re.Message},
			{`"component":`, re.Component}, {`"componentKind":`, re.ComponentKind}, {`"rule":`, re.Rule},
		} {
			if f.value == "" {
				continue
			}
			if len(e.Buf) > mark {
				e.Raw(",")
			}
			e.Raw(f.key)
			e.String(f.value)
		}
		e.Raw("}")
	}
	e.OptionalInt(`,"attempt":`, int64(r.Attempt))
	e.OptionalInt(`,"delay":`, int64(r.Delay))
	e.OptionalTime(`,"nextAttemptAt":`, r.NextAttemptAt)
	e.OptionalString(`,"reason":`, r.Reason)
	e.OptionalInt(`,"count":`, r.Count)
	e.OptionalString(`,"action":`, r.Action)
	e.OptionalString(`,"strategy":`, r.Strategy)
	e.Raw("}")
	return e.Buf, e.OK
}
