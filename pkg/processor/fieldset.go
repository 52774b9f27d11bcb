package processor

import (
	"github.com/conduitry/conduit/pkg/plugin"

	"context"
	"fmt"

	"github.com/conduitry/conduit/pkg/record"
)

// fieldSet is the field.set processor: it renders a template and stores the
// text in a field.
type fieldSet struct {
	field Reference
	value *recordTemplate
}

func newFieldSet(cfg Config) (Processor, error) {
	s := plugin.NewSettings(cfg.Settings)
	var p fieldSet
	if v := s.Required("field", "the field to set, e.g. .Payload.After.name or .Metadata.key"); v != "" {
		ref, err := ParseReference(v)
		switch {
		case err != nil:
			s.Fail("field", err)
		case ref.part == partPosition:
			s.Failf("field", "cannot set .Position: it belongs to the source and is read-only")
		case ref.part == partMetadata && ref.path == nil, ref.part == partPayload:
			// field.set stores text, which these parts cannot hold; said
			// now rather than on every record.
			s.Failf("field", "cannot set %s to text; name a part of it, e.g. %s", ref.raw, example(ref.part))
		}
		p.field = ref
	}
	if v := s.Required("value", "a Go template, e.g. {{ .Payload.After.name }}"); v != "" {
		t, err := parseTemplate("value", `setting "value"`, v)
		if err != nil {
			s.Fail("value", fmt.Errorf("invalid Go template: %w", err))
		} else if t.constant && p.field.part == partOperation {
			if _, err := record.ParseOperation(t.text); err != nil {
				s.Fail("value", fmt.Errorf("cannot set .Operation: %w", err))
			}
		}
		p.value = t
	}
	sdkSchemaSettings(s)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return &p, nil
}

func example(p part) string {
	if p == partMetadata {
		return ".Metadata.key"
	}
	return ".Payload.After or .Payload.After.name"
}

// Process sets the field to the rendered value.
func (p *fieldSet) Process(_ context.Context, rec *record.Record) error {
	v, err := p.value.renderString(rec)
	if err != nil {
		return err
	}
	return p.field.Set(rec, v)
}
