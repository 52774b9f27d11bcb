package processor

import (
	"fmt"
	"slices"
	"strings"
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

// Builtin returns the built-in processors: error, field.exclude, field.set
// and filter.
func Builtin() []Plugin {
	return []Plugin{
		{Name: "error", New: newError},
		{Name: "field.exclude", New: newFieldExclude},
		{Name: "field.set", New: newFieldSet},
		{Name: "filter", New: newFilter},
	}
}

// Registry turns a pipeline file's processor `plugin` into a processor. It
// is immutable once built and safe for concurrent use (the processors it
// builds are not: build one per goroutine).
type Registry struct {
	plugins map[string]Plugin
	known   string // "builtin:a, builtin:b", for error messages
}

// NewRegistry returns a registry of the given plugins, usually Builtin().
// It panics on a plugin without a name or constructor, or on two plugins with
// the same name: those are wiring mistakes, not user input.
func NewRegistry(plugins ...Plugin) *Registry {
	r := &Registry{plugins: make(map[string]Plugin, len(plugins))}
	names := make([]string, 0, len(plugins))
	for _, p := range plugins {
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, ":@"):
			panic(fmt.Sprintf("processor: invalid plugin name %q", p.Name))
		case p.New == nil:
			panic(fmt.Sprintf("processor: plugin %q has no constructor", p.Name))
		}
		if _, dup := r.plugins[p.Name]; dup {
			panic(fmt.Sprintf("processor: plugin %q registered twice", p.Name))
		}
		r.plugins[p.Name] = p
		names = append(names, builtinPrefix+p.Name)
	}
	slices.Sort(names)
	r.known = strings.Join(names, ", ")
	return r
}

const (
	builtinPrefix    = "builtin:"
	standalonePrefix = "standalone:"
)

// Lookup resolves a plugin reference of the form
// [builtin:|standalone:]name[@version], e.g. field.set,
// builtin:field.set or builtin:field.set@v0.1.0. No prefix means builtin;
// the version is accepted and ignored (built-in plugins have exactly one
// version). Errors wrap ErrUnknownPlugin.
func (r *Registry) Lookup(ref string) (Plugin, error) {
	name := ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		if i == len(name)-1 {
			return Plugin{}, fmt.Errorf("%w %q: empty version after @ (write e.g. %s@latest, or leave the version out)",
				ErrUnknownPlugin, ref, name[:i])
		}
		name = name[:i]
	}
	switch {
	case strings.HasPrefix(name, builtinPrefix):
		name = name[len(builtinPrefix):]
	case strings.HasPrefix(name, standalonePrefix):
		return Plugin{}, fmt.Errorf("%w %q: standalone processors are not supported yet (built-in processors: %s)",
			ErrUnknownPlugin, ref, r.known)
	case strings.Contains(name, ":"):
		return Plugin{}, fmt.Errorf("%w %q: unknown plugin type %q (want builtin: or standalone:)",
			ErrUnknownPlugin, ref, name[:strings.IndexByte(name, ':')+1])
	}
	p, ok := r.plugins[name]
	if !ok || name == "" {
		return Plugin{}, fmt.Errorf("%w %q (known processors: %s)", ErrUnknownPlugin, ref, r.known)
	}
	return p, nil
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
