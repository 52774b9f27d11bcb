package conduitplugin

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"

	"github.com/conduitry/conduit/pkg/record"
)

// A compiled-in source that panics in Read fails its run with an error
// that says so and where, instead of ending the process (the test binary,
// here).
func TestInProcessSourcePanicIsItsError(t *testing.T) {
	impl := &countingSource{}
	var reads atomic.Int32
	impl.beforeRead = func() {
		if reads.Add(1) == 3 {
			_ = missing().next // a nil pointer: a runtime panic, as a connector's bug makes
		}
	}
	src := newCountingSource(impl, map[string]string{"limit": "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	batch := make([]record.Record, 1)
	for err == nil {
		_, err = src.Read(ctx, batch)
	}
	if err == nil || !strings.Contains(err.Error(), "connector panicked") || !strings.Contains(err.Error(), "nil pointer dereference") ||
		!strings.Contains(err.Error(), "recover_test.go") {
		t.Fatalf("the run's error after a panicking read = %v, want one saying the connector panicked, why and where", err)
	}
	_ = src.Teardown(context.Background())
}

// missing is a lookup that found nothing.
func missing() *countingSource { return nil }

// panickingDestination is memoryDestination whose Write panics.
type panickingDestination struct {
	*memoryDestination
}

func (panickingDestination) Write(context.Context, []opencdc.Record) (int, error) {
	panic("out of cheese")
}

// A compiled-in destination that panics in Write returns the panic as the
// write's error.
func TestInProcessDestinationPanicIsItsError(t *testing.T) {
	params := config.Parameters{}
	plug := InProcessSDKDestination(panickingDestination{&memoryDestination{}}, pconnector.PluginConfig{ConnectorID: "p:dst"}, params)
	dst := NewDestination(plug, Options{PipelineID: "p", ConnectorID: "dst", Plugin: "builtin:panicking", Params: params})
	ctx := context.Background()
	if err := dst.Open(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := dst.Write(ctx, batchOf(1, 2))
	if err == nil || !strings.Contains(err.Error(), "connector panicked: out of cheese") || !strings.Contains(err.Error(), "panickingDestination") {
		t.Fatalf("Write of a panicking destination = %v, want its panic and where", err)
	}
	_ = dst.Teardown(ctx)
}
