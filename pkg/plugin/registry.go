package plugin

import (
	"fmt"
	"slices"
	"strings"
)

// Set is a fixed set of built-in plugins of one kind (connectors or
// processors), looked up by reference. It is immutable once built and safe
// for concurrent use; the connector and processor registries wrap one.
type Set[P any] struct {
	kind    string // "connector", "processor": for messages
	unknown error  // wrapped by every lookup error
	plugins map[string]P
	known   string // "builtin:a, builtin:b"
}

// NewSet builds a set. name returns a plugin's name; valid reports what is
// wrong with a plugin ("" when nothing). It panics on an invalid plugin or
// a duplicate name: those are wiring mistakes, not user input.
func NewSet[P any](kind string, unknown error, name func(P) string, valid func(P) string, plugins ...P) *Set[P] {
	s := &Set[P]{kind: kind, unknown: unknown, plugins: make(map[string]P, len(plugins))}
	names := make([]string, 0, len(plugins))
	for _, p := range plugins {
		n := name(p)
		switch {
		case n == "" || strings.ContainsAny(n, ":@"):
			panic(fmt.Sprintf("%s: invalid plugin name %q", kind, n))
		case valid(p) != "":
			panic(fmt.Sprintf("%s: plugin %q: %s", kind, n, valid(p)))
		}
		if _, dup := s.plugins[n]; dup {
			panic(fmt.Sprintf("%s: plugin %q registered twice", kind, n))
		}
		s.plugins[n] = p
		names = append(names, TypeBuiltin+":"+n)
	}
	slices.Sort(names)
	s.known = strings.Join(names, ", ")
	return s
}

// Known lists the plugins, for messages.
func (s *Set[P]) Known() string { return s.known }

// Lookup resolves a reference of the form [builtin:|standalone:]name[@version]
// (see ParseRef). No prefix means builtin; the version is accepted and
// ignored (built-in plugins have exactly one version). Errors wrap the
// set's unknown-plugin error and list the known plugins.
func (s *Set[P]) Lookup(ref string) (P, error) {
	var zero P
	parsed, err := ParseRef(ref)
	if err != nil {
		return zero, fmt.Errorf("%w: %w (known %ss: %s)", s.unknown, err, s.kind, s.known)
	}
	if parsed.Type == TypeStandalone {
		return zero, fmt.Errorf("%w %q: standalone %ss are not supported yet (built-in %ss: %s)",
			s.unknown, ref, s.kind, s.kind, s.known)
	}
	p, ok := s.plugins[parsed.Name]
	if !ok {
		return zero, fmt.Errorf("%w %q (known %ss: %s)", s.unknown, ref, s.kind, s.known)
	}
	return p, nil
}
