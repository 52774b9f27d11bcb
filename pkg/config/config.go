package config

import (
	_ "embed"
	"fmt"
	"os"
	"time"
)

// DefaultConfigFile is the documented default conduit.yml: every key set to
// its default, each explained in a comment. `conduit init` writes it, and the
// repository root holds a byte-identical copy (a test keeps them in sync and
// checks that it documents every key in the table).
//
//go:embed conduit.yml
var DefaultConfigFile []byte

// Config is the global configuration of the conduit process. Get one from
// Load (file, environment and flags applied, validated) or Default.
type Config struct {
	DB struct {
		// Type is the storage backend: DBTypeBadger, DBTypeInMemory or
		// DBTypePostgres.
		Type   string
		Badger struct {
			// Path is the directory of the Badger database.
			Path string
		}
		Postgres struct {
			// URL is the PostgreSQL connection string.
			URL string
		}
	}
	Log struct {
		// Level is debug, info, warn or error.
		Level string
		// Format is cli (for people) or json (for log shippers).
		Format string
	}
	API struct {
		// Enabled turns the API server on.
		Enabled bool
		HTTP    struct {
			// Address is the host:port the API listens on.
			Address string
			// MaxConnections caps the connections served at once; 0
			// derives it from the open file limit (see pkg/fdlimit).
			MaxConnections int
			CORS           struct {
				// AllowedOrigins are the web origins besides the API's
				// own whose pages may call it from a browser.
				AllowedOrigins []string
			}
		}
		// GRPC is Conduit's gRPC API address: a second listener serving
		// the same handler (every protocol), for Conduit's clients.
		GRPC struct {
			// Address is empty when there is no second listener.
			Address string
		}
		Auth struct {
			// Token, when set, is the bearer token every API call but
			// health must carry.
			Token string
		}
		// MaxWatchers caps the event watch streams open at once.
		MaxWatchers int
		// MaxWatchersPerClient caps them per client IP address.
		MaxWatchersPerClient int
		Readyz               struct {
			// FailOnDegraded makes /readyz answer 503 while a pipeline is
			// degraded.
			FailOnDegraded bool
		}
	}
	Dedup struct {
		// Enabled turns the acked-position dedup store on.
		Enabled bool
		// TTL is how long an unused dedup entry lives.
		TTL time.Duration
	}
	AuditLog struct {
		// MaxEventsPerPipeline bounds the audit events kept per pipeline.
		MaxEventsPerPipeline int
		// MaxAge bounds how long audit events are kept; 0 keeps them.
		MaxAge time.Duration
	}
	Connectors struct {
		// Path is the directory with standalone connector executables.
		Path string
		// StartTimeout bounds the time from starting a standalone
		// connector to its answer to the handshake.
		StartTimeout time.Duration
	}
	Processors struct {
		// Path is the directory with standalone (WASM) processors.
		Path string
		// MemoryLimit is the most linear memory one instance of a
		// standalone processor may use, a size such as 1GiB.
		MemoryLimit string
		// JavaScript bounds custom.javascript's scripts.
		JavaScript struct {
			// Timeout bounds one call of a script.
			Timeout time.Duration
			// MemoryLimit bounds the heap's growth during one call, a
			// size such as 256MiB.
			MemoryLimit string
			// RequirePath is the directory require() reads modules
			// from; empty refuses require().
			RequirePath string
		}
	}
	Pipelines struct {
		// Path is the directory (searched recursively) or single file that
		// holds the pipeline configuration files.
		Path string
		// Watch applies changes to the pipeline files while the process
		// runs.
		Watch bool
		// AllowDeleteAll lets pipeline files that define no pipeline any
		// more delete every pipeline they defined at once; off, such a
		// deletion is held until they define pipelines again.
		AllowDeleteAll bool
		// ExitOnDegraded makes the process exit non-zero when a pipeline
		// becomes degraded.
		ExitOnDegraded bool
		// GracefulStopTimeout is how long a graceful stop may take before it
		// is forced.
		GracefulStopTimeout time.Duration
		// CrashLoopAfter is the crash-loop guard: after that many process
		// deaths in a row during a pipeline's runs, the pipeline starts
		// degraded; 0: no guard.
		CrashLoopAfter int
		// Breakers configure the dependency breakers (DESIGN 5.3).
		Breakers struct {
			Enabled   bool
			Threshold int
			Window    time.Duration
			Stagger   time.Duration
		}
		// ErrorRecovery is the global restart policy; pipeline files may
		// override it per pipeline (see ErrorRecoveryOverride.Resolve).
		ErrorRecovery ErrorRecovery
	}
	Cluster struct {
		// Enabled shares the pipelines with the other conduit processes
		// on the same PostgreSQL database (DESIGN 12).
		Enabled bool
		// InstanceID names this process among them; "" takes the host
		// name and the process id (see InstanceID).
		InstanceID string
		// LeaseTTL is how long a pipeline's lease lasts without renewal.
		LeaseTTL time.Duration
	}
	// Notifications send chosen audit events to webhooks, Slack and
	// PagerDuty (pkg/notify, DESIGN 14).
	Notifications struct {
		// Targets are where they go (file only).
		Targets []NotificationTarget
		// GroupWindow gathers one kind's notifications to one target
		// into one message.
		GroupWindow time.Duration
		// MaxListed is how many pipelines a grouped message names.
		MaxListed int
		// RecoveringAfter is when a recovering pipeline is notified.
		RecoveringAfter time.Duration
		// RetryMaxDelay caps the backoff of a failing target.
		RetryMaxDelay time.Duration
	}
	SchemaRegistry struct {
		// Type is SchemaRegistryBuiltin or SchemaRegistryConfluent.
		Type      string
		Confluent struct {
			// ConnectionString is the registry's URL.
			ConnectionString string
			Auth             struct {
				// Type is none, basic or bearer.
				Type  string
				Basic struct {
					Username, Password string
				}
				Bearer struct {
					Token string
				}
			}
		}
	}
	Runtime struct {
		// GCPercent is the Go collector's GOGC (see pkg/gctuning).
		GCPercent int
		// GCHeadroom is off or a size (see gctuning.Percent).
		GCHeadroom string
		// MemoryLimit is auto, off or a size (see gctuning.ParseMemoryLimit).
		MemoryLimit string
	}
	// ConfigPath is the configuration file that was read, "" when none was
	// (defaults, environment and flags only).
	ConfigPath string
}

// Values of Config.SchemaRegistry.Type.
const (
	SchemaRegistryBuiltin   = "builtin"
	SchemaRegistryConfluent = "confluent"
)

// Values of Config.SchemaRegistry.Confluent.Auth.Type.
const (
	SchemaRegistryAuthNone   = "none"
	SchemaRegistryAuthBasic  = "basic"
	SchemaRegistryAuthBearer = "bearer"
)

// Values of Config.DB.Type.
const (
	DBTypeBadger   = "badger"
	DBTypeInMemory = "inmemory"
	DBTypePostgres = "postgres"
)

// Values of Config.Log.Format.
const (
	LogFormatCLI  = "cli"
	LogFormatJSON = "json"
)

// Default returns the configuration used when nothing is configured. It is
// built from the key table, so it cannot disagree with the documented
// defaults.
func Default() Config {
	var c Config
	for _, k := range keyTable {
		k.set(&c, k.def)
	}
	return c
}

// InstanceID is cluster.instance-id, or the host name and the process id
// when it is empty: unique among processes running at the same time,
// which is all the cluster needs.
func (c Config) InstanceID() string {
	if c.Cluster.InstanceID != "" {
		return c.Cluster.InstanceID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "conduit"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
