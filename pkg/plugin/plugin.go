// Package plugin holds what connectors and processors share as plugins: the
// reference syntax of a pipeline file's `plugin` field, and the reader that
// parses a plugin's `settings` and reports the first bad or unknown one.
package plugin

import (
	"errors"
	"fmt"
	"strings"
)

// Plugin types of a reference.
const (
	TypeBuiltin    = "builtin"
	TypeStandalone = "standalone"
)

// ErrBadRef is wrapped by ParseRef's errors.
var ErrBadRef = errors.New("invalid plugin reference")

// Ref is a parsed plugin reference, Conduit's [builtin:|standalone:]name[@version].
type Ref struct {
	// Type is TypeBuiltin (also when the reference has no prefix) or
	// TypeStandalone.
	Type string
	// Unprefixed: the reference has no type prefix. Conduit then looks
	// for a standalone plugin of the name first and falls back to the
	// built-in one; registries that have standalone plugins do the same.
	Unprefixed bool
	Name       string
	// Version is what follows @, "" when absent.
	Version string
}

func (r Ref) String() string {
	s := r.Type + ":" + r.Name
	if r.Version != "" {
		s += "@" + r.Version
	}
	return s
}

// ParseRef parses a reference such as generator, builtin:file,
// builtin:log@v0.1.0 or standalone:postgres@latest.
func ParseRef(ref string) (Ref, error) {
	var r Ref
	name := ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		if i == len(name)-1 {
			return Ref{}, fmt.Errorf("%w %q: empty version after @ (write e.g. %s@latest, or leave the version out)",
				ErrBadRef, ref, name[:i])
		}
		name, r.Version = name[:i], name[i+1:]
	}
	r.Type, r.Unprefixed = TypeBuiltin, true
	if i := strings.IndexByte(name, ':'); i >= 0 {
		r.Unprefixed = false
		switch typ := name[:i]; typ {
		case TypeBuiltin, TypeStandalone:
			r.Type, name = typ, name[i+1:]
		default:
			return Ref{}, fmt.Errorf("%w %q: unknown plugin type %q (want builtin: or standalone:)", ErrBadRef, ref, typ+":")
		}
	}
	if name == "" {
		return Ref{}, fmt.Errorf("%w %q: no plugin name", ErrBadRef, ref)
	}
	r.Name = name
	return r, nil
}

// SettingError says which setting of a plugin is wrong. Callers above add
// the pipeline, the connector or processor, and the file.
type SettingError struct {
	Setting string
	Err     error
}

// Error names the setting and says what is wrong with it.
func (e *SettingError) Error() string {
	return fmt.Sprintf("setting %q: %v", e.Setting, e.Err)
}

// Unwrap returns the underlying problem.
func (e *SettingError) Unwrap() error { return e.Err }
