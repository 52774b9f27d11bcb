package processor

import (
	"bytes"
	"context"
	"fmt"

	"github.com/conduitry/conduit/pkg/record"
)

// conditional runs a processor only on the records for which a condition
// renders "true" (Conduit's processor `condition`); the others pass through
// unchanged.
type conditional struct {
	cond *recordTemplate
	next Processor
}

// withCondition wraps p so that it only runs where condition holds. A
// condition that is constant is decided here: "true" needs no wrapper, and a
// constant that is not a boolean is a load-time error rather than an error
// on every record.
func withCondition(p Processor, condition string) (Processor, error) {
	t, err := parseTemplate("condition", "condition", condition)
	if err != nil {
		return nil, &ConditionError{Err: fmt.Errorf("invalid Go template: %w", err)}
	}
	if t.constant {
		ok, err := parseBool(t.buf.Bytes())
		switch {
		case err != nil:
			return nil, &ConditionError{Err: err}
		case ok:
			return p, nil
		}
	}
	c := &conditional{cond: t, next: p}
	if s, ok := p.(Splitter); ok {
		return &conditionalSplitter{conditional: c, split: s}, nil
	}
	return c, nil
}

// conditionalSplitter is conditional around a Splitter, and a Splitter
// itself, so that the engine still finds the ability.
type conditionalSplitter struct {
	*conditional
	split Splitter
}

// ProcessMulti runs the wrapped processor when the condition is true, as
// Process does; a record the condition skips stays one record.
func (c *conditionalSplitter) ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) ([]record.Record, error) {
	ok, err := c.holds(rec)
	if err != nil || !ok {
		return out, err
	}
	return c.split.ProcessMulti(ctx, rec, out)
}

// Process runs the wrapped processor when the condition is true. A condition
// that fails to render or renders something other than a boolean rejects the
// record (as in Conduit): silently skipping it, or processing it, could both
// be wrong.
func (c *conditional) Process(ctx context.Context, rec *record.Record) error {
	ok, err := c.holds(rec)
	if err != nil || !ok {
		return err
	}
	return c.next.Process(ctx, rec)
}

// holds renders the condition for rec.
func (c *conditional) holds(rec *record.Record) (bool, error) {
	b, err := c.cond.renderBytes(rec)
	if err != nil {
		return false, err
	}
	ok, err := parseBool(b)
	if err != nil {
		return false, fmt.Errorf("condition: %w", err)
	}
	return ok, nil
}

// Close closes the wrapped processor when it holds something (Closer).
func (c *conditional) Close(ctx context.Context) error {
	if cl, ok := c.next.(Closer); ok {
		return cl.Close(ctx)
	}
	return nil
}

// parseBool is strconv.ParseBool on the trimmed output, without turning the
// buffer into a string first (the switch on string(b) does not allocate).
func parseBool(b []byte) (bool, error) {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "1", "t", "T", "true", "TRUE", "True":
		return true, nil
	case "0", "f", "F", "false", "FALSE", "False":
		return false, nil
	}
	s := string(b)
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return false, fmt.Errorf("rendered %q, which is not a boolean (it must render true or false, e.g. {{ eq .Metadata.table \"users\" }})", s)
}
