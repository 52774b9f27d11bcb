package connector

import (
	"fmt"
	"strings"
	"time"
)

// Standalone connectors are executables in connectors.path that a pipeline
// names as standalone:<file name> (or, for a connector of Conduit's SDK,
// by its specification's name: see standalone_lookup.go). Every run of a pipeline starts a fresh
// process per connector and talks to it with the plugin protocol of
// proto/conduitry/connector/v1 (Connect over a unix socket in a directory only this
// process's user can open). The process lives from Open to Teardown.
//
// What can go wrong, and what the supervisor is told:
//
//	the executable is missing, not executable,   fatal: starting it again fails
//	exits before the handshake, does not answer  the same way, a human must act
//	within connectors.start-timeout, speaks
//	another protocol version or cannot play the
//	role; no executable has the Conduit name
//	asked for (one that does not answer `specs`
//	within SpecProbeTimeout is killed and named)
//	a call fails with the plugin's error JSON     as the JSON's code says (a
//	                                              plain-text error is transient)
//	the plugin sends a message above              fatal, code 413: it would send
//	MaxMessageBytes                               the same one again
//	the process dies (crash, killed, OOM)         transient: the pipeline restarts
//	                                              with a new process

// Defaults for StandaloneConfig fields left zero.
const (
	DefaultStandaloneStartTimeout    = 10 * time.Second
	DefaultStandaloneStopTimeout     = 5 * time.Second
	DefaultStandaloneTeardownTimeout = 5 * time.Second
	// DefaultStandaloneMaxMessageBytes bounds every message a plugin sends
	// back. The engine asks a source for at most 1024 records a call (its
	// batch size, and the fewest the host asks for), so 64 MiB leaves 64
	// KiB per record at the largest batch, far above common records; a
	// source holds at most three such messages (two read ahead, one being
	// decoded). pkg/sdk splits a larger batch into several messages, so only
	// a single record above the bound fails, at the plugin. It equals
	// sdk.MaxMessageBytes.
	DefaultStandaloneMaxMessageBytes = 64 << 20
)

// StandaloneConfig configures a StandaloneHost.
type StandaloneConfig struct {
	// Dir is connectors.path as the user wrote it: the directory with the
	// executables. A relative path is relative to the working directory.
	// Messages quote it as written.
	Dir string
	// StartTimeout (connectors.start-timeout) bounds the time from starting
	// the executable to its answer to the handshake.
	StartTimeout time.Duration
	// StopTimeout is how long the process may take to exit after SIGTERM
	// before it is killed.
	StopTimeout time.Duration
	// TeardownTimeout bounds the plugin's own Teardown call.
	TeardownTimeout time.Duration
	// MaxMessageBytes bounds each message a plugin sends back (after
	// decompression, were any accepted). A larger one fails the call with a
	// fatal error (code 413) naming the connector.
	MaxMessageBytes int
}

// StandaloneHost runs standalone connectors. It holds configuration and a
// cache of the connectors directory; each connector it builds owns its
// process. Safe for concurrent use.
type StandaloneHost struct {
	cfg StandaloneConfig
	// specs caches which executables are Conduit connectors of which name.
	specs specCache
}

// NewStandaloneHost returns a host with cfg's zero durations set to their
// defaults.
func NewStandaloneHost(cfg StandaloneConfig) *StandaloneHost {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStandaloneStartTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStandaloneStopTimeout
	}
	if cfg.TeardownTimeout <= 0 {
		cfg.TeardownTimeout = DefaultStandaloneTeardownTimeout
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultStandaloneMaxMessageBytes
	}
	return &StandaloneHost{cfg: cfg}
}

// Plugin returns the plugin of the executable name in the host's directory.
// It only checks that name is a plain file name; it does not look at the
// file, because the registry's constructors do no I/O. A missing or broken
// executable is reported by Open, so that the pipeline is degraded with a
// message saying why. Whether the connector can be a source or a
// destination is also learnt at Open, from the plugin's handshake.
func (h *StandaloneHost) Plugin(name string) (Plugin, error) { return h.pluginVersion(name, "") }

// pluginVersion is Plugin for a reference with a version, which chooses
// among the Conduit connectors of the name (see findByConduitName).
func (h *StandaloneHost) pluginVersion(name, version string) (Plugin, error) {
	if err := checkStandaloneName(name); err != nil {
		return Plugin{}, err
	}
	process := func(role connectorRole, cfg Config) *pluginProcess {
		p := newPluginProcess(h, name, role, cfg)
		p.version = version
		return p
	}
	return Plugin{
		Name: name,
		NewSource: func(cfg Config) (Source, error) {
			return &standaloneSource{p: process(roleSource, cfg)}, nil
		},
		NewDestination: func(cfg Config) (Destination, error) {
			return &standaloneDestination{p: process(roleDestination, cfg)}, nil
		},
	}, nil
}

// checkStandaloneName refuses names that would leave connectors.path.
func checkStandaloneName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`+"\x00") || strings.Contains(name, "..") || name == "." {
		return fmt.Errorf("standalone connector name %q must be the name of a file in connectors.path "+
			`(no path separators, no "..")`, name)
	}
	return nil
}
