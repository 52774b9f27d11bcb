package conduit

import (
	"errors"

	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/store"
)

// writeFailure is the metrics' reason for a failed write of the store.
func writeFailure(err error) metrics.WriteFailure {
	switch {
	case errors.Is(err, store.ErrDisowned):
		return metrics.WriteDisowned
	case errors.Is(err, store.ErrFenced):
		return metrics.WriteFenced
	case errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrNoDescriptors):
		return metrics.WriteRefused
	default:
		return metrics.WriteError
	}
}
