package processor

import (
	"github.com/conduitry/conduit/pkg/plugin"

	"context"
	"errors"
	"fmt"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// errorProcessor is the error processor: it rejects every record it sees,
// with a rendered message and optionally a cerrors code.
type errorProcessor struct {
	message *recordTemplate
	code    int
}

const defaultErrorMessage = "error processor triggered"

func newError(cfg Config) (Processor, error) {
	s := plugin.NewSettings(cfg.Settings)
	var p errorProcessor
	t, err := parseTemplate("message", `setting "message"`, s.String("message", defaultErrorMessage))
	if err != nil {
		s.Fail("message", fmt.Errorf("invalid Go template: %w", err))
	}
	p.message = t
	p.code, _ = s.IntRange("code", 100, 599)
	sdkSchemaSettings(s)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Process returns the rendered message as an error.
func (p *errorProcessor) Process(_ context.Context, rec *record.Record) error {
	msg, err := p.message.renderString(rec)
	if err != nil {
		return err
	}
	if msg == "" {
		// An empty error would read as no explanation at all in the DLQ
		// and the audit log.
		msg = defaultErrorMessage
	}
	err = errors.New(msg)
	if p.code != 0 {
		return cerrors.WithCode(err, p.code)
	}
	return err
}
