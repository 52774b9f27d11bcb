package connector

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
}

// Builtin returns the built-in plugins: generator (source), file (source and
// destination) and log (destination).
func Builtin() []Plugin {
	return []Plugin{
		{Name: "file", NewSource: NewFileSource, NewDestination: NewFileDestination},
		{Name: "generator", NewSource: NewGeneratorSource},
		{Name: "log", NewDestination: NewLogDestination},
		NewChaosPlugin(nil), // nil: time.Now
	}
}

// Registry turns a pipeline file's `plugin` reference into a connector. It is
// immutable once built and safe for concurrent use.
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
			panic(fmt.Sprintf("connector: invalid plugin name %q", p.Name))
		case p.NewSource == nil && p.NewDestination == nil:
			panic(fmt.Sprintf("connector: plugin %q has no constructor", p.Name))
		}
		if _, dup := r.plugins[p.Name]; dup {
			panic(fmt.Sprintf("connector: plugin %q registered twice", p.Name))
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
// [builtin:|standalone:]name[@version]. No prefix means builtin; the version
// is accepted and ignored (built-in plugins have exactly one version).
// Errors wrap ErrUnknownPlugin.
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
		return Plugin{}, fmt.Errorf("%w %q: standalone connectors are not supported yet (built-in plugins: %s)",
			ErrUnknownPlugin, ref, r.known)
	case strings.Contains(name, ":"):
		return Plugin{}, fmt.Errorf("%w %q: unknown plugin type %q (want builtin: or standalone:)",
			ErrUnknownPlugin, ref, name[:strings.IndexByte(name, ':')+1])
	}
	p, ok := r.plugins[name]
	if !ok || name == "" {
		return Plugin{}, fmt.Errorf("%w %q (known plugins: %s)", ErrUnknownPlugin, ref, r.known)
	}
	return p, nil
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
