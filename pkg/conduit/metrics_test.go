package conduit

import (
	"fmt"
	"testing"

	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/store"
)

func TestWriteFailureReasons(t *testing.T) {
	for err, want := range map[error]metrics.WriteFailure{
		fmt.Errorf("commit: %w", store.ErrNoSpace):       metrics.WriteRefused,
		fmt.Errorf("commit: %w", store.ErrNoDescriptors): metrics.WriteRefused,
		fmt.Errorf("commit: %w", store.ErrFenced):        metrics.WriteFenced,
		fmt.Errorf("commit: %w", store.ErrDisowned):      metrics.WriteDisowned,
		fmt.Errorf("disk on fire"):                       metrics.WriteError,
	} {
		if got := writeFailure(err); got != want {
			t.Errorf("writeFailure(%v) = %s, want %s", err, got, want)
		}
	}
}
