package conduitplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/conduitio/conduit-commons/config"
	"go.uber.org/zap"
)

// Options describe one connector of one pipeline.
type Options struct {
	PipelineID  string
	ConnectorID string
	// Plugin is the reference the pipeline file wrote (builtin:postgres,
	// standalone:kafka), for messages.
	Plugin string
	// Settings are the connector's settings as the pipeline file has them.
	Settings map[string]string
	// Logger already carries pipeline_id and connector_id; nil: no logs.
	Logger *zap.Logger
	// Params are the connector's parameters from its specification (for
	// its role); nil when unknown.
	Params config.Parameters
	// SourceDefaults are settings a source gets when the file does not
	// set them; only keys of Params apply.
	SourceDefaults map[string]string
	// State is where the runtime keeps the connector's settings between
	// runs, to tell which lifecycle event a run sends; nil: none is sent.
	State State
	// Remote says the plugin runs in its own process behind gRPC, where
	// the context of its Open call ends when the call returns.
	Remote bool
}

// State is the connector's durable memory (connector.State).
type State interface {
	Load(ctx context.Context) ([]byte, error)
	Save(ctx context.Context, value []byte) error
}

func (o Options) logger() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

// savedState is what the adapter keeps in State.
type savedState struct {
	Settings map[string]string `json:"settings"`
}

// loadSaved reads the settings the connector last ran with; ok is false
// when there are none: it never ran, a deletion forgot them, or they are
// unreadable (written by this adapter only, so damaged), which is the
// history of a connector that never ran.
func loadSaved(ctx context.Context, st State) (saved savedState, ok bool, err error) {
	raw, err := st.Load(ctx)
	if err != nil {
		return savedState{}, false, fmt.Errorf("loading the connector's state: %w", err)
	}
	if len(raw) == 0 || json.Unmarshal(raw, &saved) != nil {
		return savedState{}, false, nil
	}
	return saved, true, nil
}

// lifecycleEvent sends LifecycleOnCreated on the connector's first run and
// LifecycleOnUpdated when its settings changed since the last run, as
// Conduit does, and then remembers the settings.
func lifecycleEvent(ctx context.Context, o Options,
	created func(context.Context, config.Config) error,
	updated func(ctx context.Context, before, after config.Config) error,
) error {
	if o.State == nil {
		return nil
	}
	saved, ok, err := loadSaved(ctx, o.State)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		if err := created(ctx, o.Settings); err != nil {
			return fmt.Errorf("lifecycle event created: %w", err)
		}
	case !maps.Equal(saved.Settings, o.Settings):
		if err := updated(ctx, saved.Settings, o.Settings); err != nil {
			return fmt.Errorf("lifecycle event updated: %w", err)
		}
	default:
		return nil
	}
	value, err := json.Marshal(savedState{Settings: o.Settings})
	if err != nil {
		return err
	}
	if err := o.State.Save(ctx, value); err != nil {
		return fmt.Errorf("saving the connector's state: %w", err)
	}
	return nil
}

// remoteBatchSettings are the SDK's source batching settings, which a
// remote source does not get. The SDK (v0.14) starts the goroutine that
// fills a source's batches with a context that its Open call cancels when
// it sees the call's own context end first - and gRPC ends it as the call
// returns. That race, lost in 2 starts of 8 on a busy 2-core machine,
// leaves the plugin either failing its first read with "context canceled"
// or, worse, silently sending nothing while the pipeline reads as
// running. Unbatched, the plugin sends a message per record and Read
// still fills the engine's batches from the messages already received.
var remoteBatchSettings = []string{"sdk.batch.size", "sdk.batch.delay"}

// sourceSettings are the settings a source plugin is configured with: the
// file's, plus SourceDefaults where the file does not set them, without
// remoteBatchSettings for a remote plugin.
func (o Options) sourceSettings() config.Config {
	out := make(config.Config, len(o.Settings)+len(o.SourceDefaults))
	maps.Copy(out, o.Settings)
	for k, v := range o.SourceDefaults {
		if _, set := out[k]; set {
			continue
		}
		if _, known := o.Params[k]; known {
			out[k] = v
		}
	}
	if o.Remote {
		for _, k := range remoteBatchSettings {
			if v, ok := out[k]; ok {
				delete(out, k)
				o.logger().Warn("setting not passed to the standalone connector: batching in its SDK can stop the source when it starts; the runtime batches what it sends",
					zap.String("setting", k), zap.String("value", v))
			}
		}
	}
	return out
}

// deletedEvent sends LifecycleOnDeleted with the settings the connector
// last ran with, as Conduit does when a pipeline is deleted, and forgets
// them, so that a pipeline created again under the same id gets its
// created event. A connector that never ran created nothing: it gets no
// event.
func deletedEvent(ctx context.Context, o Options, deleted func(context.Context, config.Config) error) error {
	if o.State == nil {
		return nil
	}
	saved, ok, err := loadSaved(ctx, o.State)
	if err != nil || !ok {
		return err
	}
	if err := deleted(ctx, saved.Settings); err != nil {
		return fmt.Errorf("lifecycle event deleted: %w", err)
	}
	if err := o.State.Save(ctx, nil); err != nil {
		return fmt.Errorf("forgetting the connector's state: %w", err)
	}
	return nil
}
