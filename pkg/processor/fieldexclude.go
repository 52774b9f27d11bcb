package processor

import (
	"github.com/conduitry/conduit/pkg/plugin"

	"context"
	"strings"

	"github.com/conduitry/conduit/pkg/record"
)

// fieldExclude is the field.exclude processor: it deletes fields.
type fieldExclude struct {
	fields []Reference
}

func newFieldExclude(cfg Config) (Processor, error) {
	s := plugin.NewSettings(cfg.Settings)
	var p fieldExclude
	if v := s.Required("fields", "a comma-separated list of fields, e.g. .Metadata.secret,.Payload.After.password"); v != "" {
		for i, f := range splitList(v) {
			if f == "" {
				s.Failf("fields", "entry %d of %q is empty (remove the extra comma)", i+1, v)
				break
			}
			ref, err := ParseReference(f)
			if err != nil {
				s.Fail("fields", err)
				break
			}
			if ref.part == partPosition || ref.part == partOperation {
				s.Failf("fields", "cannot exclude %s: every record has one", ref.raw)
				break
			}
			p.fields = append(p.fields, ref)
		}
	}
	sdkSchemaSettings(s)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return &p, nil
}

// splitList splits a comma-separated list of references, trimming spaces.
// Commas inside ["..."] belong to the field name, so `.Metadata["a,b"]` is
// one entry.
func splitList(s string) []string {
	var out []string
	start, inBracket := 0, false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case inBracket && (c == '"' || c == '`'):
			quote = c
		case c == '[':
			inBracket = true
		case c == ']':
			inBracket = false
		case c == ',' && !inBracket:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// Process deletes every configured field; the first failure rejects the
// record.
func (p *fieldExclude) Process(_ context.Context, rec *record.Record) error {
	for _, f := range p.fields {
		if err := f.Delete(rec); err != nil {
			return err
		}
	}
	return nil
}
