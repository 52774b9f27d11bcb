package processor

import (
	"fmt"
	"strings"

	"github.com/conduitry/conduit/pkg/plugin"
)

// Plugin is a processor implementation the registry can build.
//
// New only parses and validates cfg.Settings; it does no I/O, because the
// runtime also calls it to validate pipeline files when it loads them. A bad
// setting is reported as a *SettingError. New ignores cfg.Condition: the
// registry applies it, so that every plugin gets the same semantics.
type Plugin struct {
	// Name is the plugin's name without type prefix or version, e.g.
	// "field.set".
	Name string
	New  func(Config) (Processor, error)
}

// Builtin returns the built-in processors without a schema registry:
// avro.encode and avro.decode are refused (see BuiltinWith).
func Builtin() []Plugin { return BuiltinWith(ConduitOptions{}) }

// BuiltinWith returns the built-in processors: this package's
// custom.javascript, error, field.exclude, field.set and filter, and
// Conduit's others that run here (see Conduit), given what they need from
// the runtime.
func BuiltinWith(opts ConduitOptions) []Plugin {
	return append([]Plugin{
		{Name: "custom.javascript", New: newJavaScript(opts.JavaScript)},
		{Name: "error", New: newError},
		{Name: "field.exclude", New: newFieldExclude},
		{Name: "field.set", New: newFieldSet},
		{Name: "filter", New: newFilter},
	}, Conduit(opts)...)
}

// Registry turns a pipeline file's processor `plugin` into a processor. It
// is immutable once built and safe for concurrent use (the processors it
// builds are not: build one per goroutine).
type Registry struct {
	set *plugin.Set[Plugin]
	// standalone resolves standalone:<name> references; nil: they are an
	// error.
	standalone *Standalone
}

// NewRegistry returns a registry of the given plugins, usually Builtin().
// It panics on a plugin without a name or constructor, or on two plugins with
// the same name: those are wiring mistakes, not user input.
func NewRegistry(plugins ...Plugin) *Registry {
	return &Registry{set: plugin.NewSet("processor", ErrUnknownPlugin,
		func(p Plugin) string { return p.Name },
		func(p Plugin) string {
			if p.New == nil {
				return "has no constructor"
			}
			return ""
		}, plugins...)}
}

// WithStandalone returns a registry with r's plugins that also resolves
// standalone:<name> references, to the standalone processors s found.
// Without it, standalone references are an error.
func (r *Registry) WithStandalone(s *Standalone) *Registry {
	return &Registry{set: r.set, standalone: s}
}

// Lookup resolves a plugin reference of the form
// [builtin:|standalone:]name[@version] (see plugin.ParseRef), e.g.
// field.set, builtin:field.set or builtin:field.set@v0.1.0. Errors wrap
// ErrUnknownPlugin.
//
// A reference without a prefix resolves as Conduit resolves it: to the
// standalone processor of the name when processors.path has one, else to
// the built-in one. A standalone processor is named by its
// specification's name (or its file's, without .wasm); the version
// chooses among several of the name, the highest when absent or latest.
func (r *Registry) Lookup(ref string) (Plugin, error) {
	if r.standalone != nil {
		if parsed, err := plugin.ParseRef(ref); err == nil && (parsed.Type == plugin.TypeStandalone ||
			parsed.Unprefixed && r.standalone.has(parsed.Name)) {
			e, err := r.standalone.find(parsed.Name, parsed.Version)
			if err != nil {
				return Plugin{}, fmt.Errorf("%w %q: %w", ErrUnknownPlugin, ref, err)
			}
			return r.standalone.plugin(e), nil
		}
	}
	return r.set.Lookup(ref)
}

// New builds a processor from a plugin reference (see Lookup) and its
// config. It fails when the plugin is unknown (ErrUnknownPlugin), a setting
// is wrong (*SettingError) or the condition is (*ConditionError). With a
// condition, the processor only runs on the records for which the condition
// renders true; the others pass through unchanged.
func (r *Registry) New(plugin string, cfg Config) (Processor, error) {
	p, err := r.Lookup(plugin)
	if err != nil {
		return nil, err
	}
	proc, err := p.New(cfg)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Condition) == "" {
		return proc, nil
	}
	return withCondition(proc, cfg.Condition)
}
