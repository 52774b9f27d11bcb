package connector

import (
	"context"
	"errors"
	"fmt"

	"github.com/conduitio/conduit-connector-protocol/pconnector"

	"github.com/conduitry/conduit/pkg/plugin"
)

// Plugin is a connector implementation the registry can build. A nil
// constructor means the plugin cannot play that role.
//
// Constructors only parse and validate cfg.Settings; they do no I/O, because
// the runtime also calls them to validate pipeline files when it loads them.
// A bad setting is reported as a *SettingError.
type Plugin struct {
	// Name is the plugin's name without type prefix or version, e.g. "file".
	Name           string
	NewSource      func(Config) (Source, error)
	NewDestination func(Config) (Destination, error)
	// Specification describes the plugin and its settings, as Conduit's
	// connectors do; nil takes the built-in description of the name (see
	// Specifications).
	Specification func() pconnector.Specification
}

// Builtin returns the built-in plugins: generator (source), file (source and
// destination), log (destination), chaos, and Conduit's PostgreSQL, Kafka
// and S3 connectors (source and destination each).
func Builtin() []Plugin {
	return []Plugin{
		{Name: "file", NewSource: NewFileSource, NewDestination: NewFileDestination},
		{Name: "generator", NewSource: NewGeneratorSource},
		{Name: "log", NewDestination: NewLogDestination},
		NewChaosPlugin(nil), // nil: time.Now
		postgresPlugin(),
		kafkaPlugin(),
		s3Plugin(),
	}
}

// Registry turns a pipeline file's `plugin` reference into a connector. It is
// immutable once built and safe for concurrent use.
type Registry struct {
	set *plugin.Set[Plugin]
	// standalone runs standalone:<name> references; nil: they are an error.
	standalone *StandaloneHost
}

// NewRegistry returns a registry of the given plugins, usually Builtin().
// It panics on a plugin without a name or constructor, or on two plugins with
// the same name: those are wiring mistakes, not user input.
func NewRegistry(plugins ...Plugin) *Registry {
	return &Registry{set: plugin.NewSet("connector", ErrUnknownPlugin,
		func(p Plugin) string { return p.Name },
		func(p Plugin) string {
			if p.NewSource == nil && p.NewDestination == nil {
				return "has no constructor"
			}
			return ""
		}, plugins...)}
}

// WithStandalone returns a registry with r's plugins that also resolves
// standalone:<name> references, to the executables h runs. Without it,
// standalone references are an error.
func (r *Registry) WithStandalone(h *StandaloneHost) *Registry {
	return &Registry{set: r.set, standalone: h}
}

// Lookup resolves a plugin reference of the form
// [builtin:|standalone:]name[@version] (see plugin.ParseRef). The version of
// a standalone reference is accepted and ignored, like a built-in one's.
// Errors wrap ErrUnknownPlugin.
//
// A reference without a prefix resolves as Conduit resolves it: to the
// standalone connector of the name when connectors.path has one (an
// executable of that file name, or a Conduit connector whose
// specification has that name), else to the built-in one. Finding out may
// run the executables of connectors.path once (see findByConduitName).
func (r *Registry) Lookup(ref string) (Plugin, error) {
	if r.standalone != nil {
		if parsed, err := plugin.ParseRef(ref); err == nil && (parsed.Type == plugin.TypeStandalone ||
			parsed.Unprefixed && r.standalone.has(context.Background(), parsed.Name)) {
			p, err := r.standalone.pluginVersion(parsed.Name, parsed.Version)
			if err != nil {
				return Plugin{}, fmt.Errorf("%w %q: %w", ErrUnknownPlugin, ref, err)
			}
			return p, nil
		}
	}
	return r.set.Lookup(ref)
}

// NewSource builds a source from a plugin reference (see Lookup) and its
// config. It fails when the plugin is unknown, cannot be a source, or a
// setting is wrong (*SettingError).
func (r *Registry) NewSource(plugin string, cfg Config) (Source, error) {
	p, err := r.Lookup(plugin)
	if err != nil {
		return nil, err
	}
	if p.NewSource == nil {
		return nil, fmt.Errorf("plugin %s cannot be a source (it is a destination)", plugin)
	}
	return p.NewSource(cfg)
}

// NewDestination builds a destination from a plugin reference (see Lookup)
// and its config. It fails when the plugin is unknown, cannot be a
// destination, or a setting is wrong (*SettingError).
func (r *Registry) NewDestination(plugin string, cfg Config) (Destination, error) {
	p, err := r.Lookup(plugin)
	if err != nil {
		return nil, err
	}
	if p.NewDestination == nil {
		return nil, fmt.Errorf("plugin %s cannot be a destination (it is a source)", plugin)
	}
	return p.NewDestination(cfg)
}

// errReadBeforeOpen is returned by sources whose Read is called without a
// successful Open: an engine bug, reported instead of a nil dereference.
var errReadBeforeOpen = errors.New("read called before a successful open")
