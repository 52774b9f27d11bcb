package processor

import (
	"github.com/conduitry/conduit/pkg/plugin"

	"context"

	"github.com/conduitry/conduit/pkg/record"
)

// filter is the filter processor: it drops every record it sees, so it is
// used with a condition.
type filter struct{}

func newFilter(cfg Config) (Processor, error) {
	s := plugin.NewSettings(cfg.Settings)
	sdkSchemaSettings(s)
	if err := s.Done(); err != nil {
		return nil, err
	}
	return filter{}, nil
}

// Process drops the record.
func (filter) Process(context.Context, *record.Record) error { return ErrFiltered }
