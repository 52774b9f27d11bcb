package config

import (
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// Conduit's configuration keys (its `conduit run` flags and the keys of the
// conduit.yaml its `conduit init` writes) are accepted here so that a Conduit
// workspace, script or systemd unit runs unchanged. Most have the same name
// and meaning as ours and are plain keys of the key table; the rest are
// either another name for one of ours (keyAliases) or configure something
// this product does not have (conduitOnlyKeys): those are read, ignored and
// named in one warning.

// ConduitConfigFile is the name of Conduit's configuration file. A file with
// this name is read as Conduit reads it: keys conduit does not know are
// named in a warning instead of refused.
const ConduitConfigFile = "conduit.yaml"

// keyAliases maps Conduit's name of a key to ours.
var keyAliases = map[string]string{
	"db.postgres.connection-string": "db.postgres.url",
}

// conduitOnlyKeys are Conduit's keys that configure something this product
// does not have, with their kind (so their flags parse as Conduit's do).
var conduitOnlyKeys = map[string]Kind{
	"connectors.max-receive-record-size":       KindInt,
	"db.postgres.table":                        KindString,
	"db.sqlite.path":                           KindString,
	"db.sqlite.table":                          KindString,
	"dev.blockprofile":                         KindString,
	"dev.cpuprofile":                           KindString,
	"dev.memprofile":                           KindString,
	"preview.pipeline-arch-v2":                 KindBool,
	"preview.pipeline-arch-v2-disable-metrics": KindBool,
}

// DBTypeSQLite is Conduit's SQLite store, which this product does not have.
const DBTypeSQLite = "sqlite"

// LogLevelTrace is Conduit's most verbose log level; here it means debug.
const LogLevelTrace = "trace"

// canonicalKey returns our name of a key given by Conduit's name.
func canonicalKey(name string) string {
	if to, ok := keyAliases[name]; ok {
		return to
	}
	return name
}

// conduitSections holds the proper prefixes of Conduit's keys that are no
// prefix of ours ("dev", "db.sqlite", "preview").
var conduitSections = func() map[string]bool {
	m := map[string]bool{}
	for name := range conduitOnlyKeys {
		parts := strings.Split(name, ".")
		for i := 1; i < len(parts); i++ {
			if sec := strings.Join(parts[:i], "."); sections[sec] == nil {
				m[sec] = true
			}
		}
	}
	return m
}()

// registerConduitFlags adds the flags of Conduit's `conduit run` that are
// not keys of ours. They are hidden from the help: the documentation of the
// migration lists them (docs/operations.md, Coming from Conduit).
func registerConduitFlags(fs *pflag.FlagSet) {
	names := make([]string, 0, len(keyAliases)+len(conduitOnlyKeys))
	for name := range keyAliases {
		names = append(names, name)
	}
	for name := range conduitOnlyKeys {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		kind, usage := KindString, "Conduit's name of --"+keyAliases[name]
		if k, ok := conduitOnlyKeys[name]; ok {
			kind, usage = k, "Conduit's setting; accepted and ignored (this product has no such setting)"
		}
		f := fs.VarPF(&textValue{kind: kind}, name, "", usage)
		if kind == KindBool {
			f.NoOptDefVal = "true"
		}
		f.Hidden = true
	}
}

// ignoredWarning names the Conduit keys (or unknown keys of a conduit.yaml)
// that source set and that were ignored, in one line.
func ignoredWarning(source string, names []string) Warning {
	sort.Strings(names)
	return Warning{Source: source, Message: fmt.Sprintf(
		"ignored %d Conduit setting(s) this product does not have: %s", len(names), strings.Join(names, ", "))}
}

// isConduitFile reports whether path is named like Conduit's configuration
// file, whose unknown keys are warned about rather than refused.
func isConduitFile(path string) bool { return filepath.Base(path) == ConduitConfigFile }

// conduitScalar reports whether the node under a Conduit-only key is a
// value (not a map), as Conduit would accept it.
func conduitScalar(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode }

// allInterfacesHost reports whether address (host:port) has an empty host,
// Conduit's default (":8080"), which listens on every interface.
func allInterfacesHost(address string) (port string, ok bool) {
	host, port, err := net.SplitHostPort(address)
	return port, err == nil && host == ""
}
