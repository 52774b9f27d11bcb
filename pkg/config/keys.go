package config

import (
	"sort"
	"strings"
	"time"

	"github.com/conduitry/conduit/pkg/gctuning"
)

// The key table: the single place that defines a global configuration key.
//
// To add a key: add a field to Config, one newKey line below, and a
// documented entry to conduit.yml. Default, RegisterFlags, Load (file, env,
// flags) and Keys pick the key up from here; the tests fail until
// conduit.yml sets and documents it. Error-recovery keys live in
// errorRecoveryFields (errorrecovery.go) because pipeline files share them.

// key describes one global configuration key.
type key struct {
	name  string
	kind  Kind
	def   any
	doc   string
	get   func(*Config) any
	set   func(*Config, any)
	check func(any) error // nil when every value of the kind is valid
}

// value is the set of Go types a key may have; kindOf maps them to Kind.
type value interface {
	string | bool | int | float64 | time.Duration | []time.Duration | []string
}

// newKey ties a key to its Config field with the field's own type, so a
// table entry cannot set a bool field from a string.
func newKey[T value](name string, def T, doc string, field func(*Config) *T, check func(T) error) key {
	k := key{
		name: name,
		kind: kindOf(def),
		def:  def,
		doc:  doc,
		get:  func(c *Config) any { return *field(c) },
		set:  func(c *Config, v any) { *field(c) = v.(T) },
	}
	if check != nil {
		k.check = func(v any) error { return check(v.(T)) }
	}
	return k
}

var keyTable = buildKeyTable()

func buildKeyTable() []key {
	keys := []key{
		newKey("db.type", DBTypeBadger,
			"Storage backend for pipeline state, positions, dedup entries and the audit log: badger (on disk), postgres (db.postgres.url) or inmemory (lost on exit).",
			func(c *Config) *string { return &c.DB.Type }, oneOf(DBTypeBadger, DBTypePostgres, DBTypeInMemory)),
		newKey("db.badger.path", "conduit.db",
			"Directory of the Badger database; created when missing.",
			func(c *Config) *string { return &c.DB.Badger.Path }, notEmpty),
		newKey("db.postgres.url", "",
			"PostgreSQL connection string (postgres://user@host:5432/db) when db.type is postgres; conduit creates and migrates its tables there.",
			func(c *Config) *string { return &c.DB.Postgres.URL }, nil),
		newKey("log.level", "info",
			"Lowest level of log messages that are written: debug, info, warn or error.",
			func(c *Config) *string { return &c.Log.Level }, oneOf("debug", "info", "warn", "error")),
		newKey("log.format", LogFormatCLI,
			"Log output format: cli (for people) or json (one object per line, for log shippers).",
			func(c *Config) *string { return &c.Log.Format }, oneOf(LogFormatCLI, LogFormatJSON)),
		newKey("api.enabled", true,
			"Serve the API (Connect, gRPC, HTTP/JSON and /metrics).",
			func(c *Config) *bool { return &c.API.Enabled }, nil),
		newKey("api.http.address", "127.0.0.1:8080",
			"host:port the API listens on.",
			func(c *Config) *string { return &c.API.HTTP.Address }, hostPort),
		newKey("api.grpc.address", "",
			"A second host:port serving the same API, for Conduit's clients (its CLI's --api.grpc.address); empty: only api.http.address.",
			func(c *Config) *string { return &c.API.GRPC.Address }, optional(hostPort)),
		newKey("api.http.max-connections", 0,
			"Most API connections served at once; more wait until one closes. 0: a quarter of the open file limit (ulimit -n), 8 to 1024.",
			func(c *Config) *int { return &c.API.HTTP.MaxConnections }, nonNegativeInt),
		newKey("api.http.cors.allowed-origins", []string{},
			"Web origins (scheme://host[:port]) besides the API's own whose pages may call the API from a browser; every other cross-site browser request is refused.",
			func(c *Config) *[]string { return &c.API.HTTP.CORS.AllowedOrigins }, webOrigins),
		newKey("api.auth.token", "",
			"Bearer token every API call but health must carry; empty disables auth (allowed only on a loopback address).",
			func(c *Config) *string { return &c.API.Auth.Token }, nil),
		newKey("api.max-watchers", 256,
			"Most event watch streams open at once; more are refused with RESOURCE_EXHAUSTED.",
			func(c *Config) *int { return &c.API.MaxWatchers }, positiveInt),
		newKey("api.max-watchers-per-client", 32,
			"Most event watch streams open at once from one client IP address.",
			func(c *Config) *int { return &c.API.MaxWatchersPerClient }, positiveInt),
		newKey("api.readyz.fail-on-degraded", false,
			"/readyz answers 503 while a pipeline is degraded (it lists them either way).",
			func(c *Config) *bool { return &c.API.Readyz.FailOnDegraded }, nil),
		newKey("auditlog.max-events-per-pipeline", 10000,
			"Most audit events kept per pipeline; older ones are deleted.",
			func(c *Config) *int { return &c.AuditLog.MaxEventsPerPipeline }, positiveInt),
		newKey("auditlog.max-age", 30*24*time.Hour,
			"Audit events older than this are deleted; 0 keeps them (up to the count limit).",
			func(c *Config) *time.Duration { return &c.AuditLog.MaxAge }, nonNegativeDuration),
		newKey("dedup.enabled", true,
			"Skip, after a restart, records a destination already wrote but whose source acknowledgement never completed.",
			func(c *Config) *bool { return &c.Dedup.Enabled }, nil),
		newKey("dedup.ttl", 24*time.Hour,
			"How long a dedup entry nobody uses is kept before it expires.",
			func(c *Config) *time.Duration { return &c.Dedup.TTL }, positiveDuration),
		newKey("connectors.path", "./connectors",
			"Directory with standalone connector executables; a pipeline names one as standalone:<file name>, or by its Conduit specification name.",
			func(c *Config) *string { return &c.Connectors.Path }, notEmpty),
		newKey("connectors.start-timeout", 10*time.Second,
			"How long a standalone connector may take from its start to answering the handshake.",
			func(c *Config) *time.Duration { return &c.Connectors.StartTimeout }, positiveDuration),
		newKey("processors.path", "./processors",
			"Directory with standalone (WASM) processors built with Conduit's processor SDK; a pipeline names one as standalone:<name>, or <name>, by the name in its specification.",
			func(c *Config) *string { return &c.Processors.Path }, notEmpty),
		newKey("processors.memory-limit", "1GiB",
			"Most linear memory one instance of a standalone processor may use, up to 4GiB; a module that needs more fails its pipeline's run.",
			func(c *Config) *string { return &c.Processors.MemoryLimit }, wasmMemoryLimit),
		newKey("processors.javascript.timeout", 30*time.Second,
			"How long one call of a custom.javascript script (process() for a record, or the script's top level) may run before it is interrupted; the record is rejected with an error that says so.",
			func(c *Config) *time.Duration { return &c.Processors.JavaScript.Timeout }, positiveDuration),
		newKey("processors.javascript.memory-limit", "256MiB",
			"How much the process's live heap may grow while one call of a custom.javascript script runs before the call is interrupted; the record is rejected with an error that says so.",
			func(c *Config) *string { return &c.Processors.JavaScript.MemoryLimit }, javaScriptMemoryLimit),
		newKey("processors.javascript.require-path", "",
			"Directory custom.javascript scripts may load modules from with require(); empty: require() is refused.",
			func(c *Config) *string { return &c.Processors.JavaScript.RequirePath }, nil),
		newKey("pipelines.path", "./pipelines",
			"Directory (searched recursively for *.yml and *.yaml) or single file with pipeline configuration files.",
			func(c *Config) *string { return &c.Pipelines.Path }, notEmpty),
		newKey("pipelines.watch", true,
			"Apply changes to the pipeline files while conduit runs (within 2 seconds); false: only at startup and on SIGHUP.",
			func(c *Config) *bool { return &c.Pipelines.Watch }, nil),
		newKey("pipelines.allow-delete-all", false,
			"Let pipeline files that define no pipeline any more (an empty directory, a link to an empty or missing release) delete every pipeline they defined; false: that deletion is held and reported until the files define pipelines again.",
			func(c *Config) *bool { return &c.Pipelines.AllowDeleteAll }, nil),
		newKey("pipelines.exit-on-degraded", false,
			"Exit the process with a non-zero status when a pipeline becomes degraded.",
			func(c *Config) *bool { return &c.Pipelines.ExitOnDegraded }, nil),
		newKey("pipelines.graceful-stop-timeout", 30*time.Second,
			"How long a stop (by a user, the CLI or the API, an update, a deletion, a shutdown) may drain before it is forced; a forced run that has not ended as long again is abandoned.",
			func(c *Config) *time.Duration { return &c.Pipelines.GracefulStopTimeout }, positiveDuration),
		newKey("pipelines.crash-loop-after", 3,
			"How many times in a row conduit may die during a pipeline's runs, each before a record made it end to end, before the pipeline starts degraded instead of running (the crash-loop guard); 0 turns the guard off.",
			func(c *Config) *int { return &c.Pipelines.CrashLoopAfter }, nonNegativeInt),
		newKey("pipelines.breakers.enabled", true,
			"Hold the pipelines that fail on a shared dependency while it is down, with one canary retrying it.",
			func(c *Config) *bool { return &c.Pipelines.Breakers.Enabled }, nil),
		newKey("pipelines.breakers.threshold", 3,
			"How many pipelines must fail on one dependency within the window for its breaker to open.",
			func(c *Config) *int { return &c.Pipelines.Breakers.Threshold }, positiveInt),
		newKey("pipelines.breakers.window", time.Minute,
			"How recent the failures that open a breaker must be.",
			func(c *Config) *time.Duration { return &c.Pipelines.Breakers.Window }, positiveDuration),
		newKey("pipelines.breakers.stagger", 5*time.Second,
			"How far apart the restarts of the pipelines a closing breaker releases are spread.",
			func(c *Config) *time.Duration { return &c.Pipelines.Breakers.Stagger }, nonNegativeDuration),
		newKey("cluster.enabled", false,
			"Share the pipelines with the other conduit processes on the same PostgreSQL database (db.type postgres): each pipeline runs on one of them, and moves when that one dies.",
			func(c *Config) *bool { return &c.Cluster.Enabled }, nil),
		newKey("cluster.instance-id", "",
			"Name of this process among the instances of the cluster; empty: the host name and the process id.",
			func(c *Config) *string { return &c.Cluster.InstanceID }, instanceID),
		newKey("cluster.lease-ttl", 15*time.Second,
			"How long a pipeline's lease lasts without renewal: an instance that stops renewing loses its pipelines to the others after this.",
			func(c *Config) *time.Duration { return &c.Cluster.LeaseTTL }, leaseTTL),
		newKey("schema-registry.type", SchemaRegistryBuiltin,
			"Where avro.encode and avro.decode keep and find Avro schemas: builtin (conduit's own store) or confluent (schema-registry.confluent.connection-string).",
			func(c *Config) *string { return &c.SchemaRegistry.Type }, oneOf(SchemaRegistryBuiltin, SchemaRegistryConfluent)),
		newKey("schema-registry.confluent.connection-string", "",
			"URL of the Confluent schema registry, used when schema-registry.type is confluent.",
			func(c *Config) *string { return &c.SchemaRegistry.Confluent.ConnectionString }, nil),
		newKey("schema-registry.confluent.auth.type", SchemaRegistryAuthNone,
			"How conduit authenticates to the Confluent schema registry: none, basic or bearer.",
			func(c *Config) *string { return &c.SchemaRegistry.Confluent.Auth.Type },
			oneOf(SchemaRegistryAuthNone, SchemaRegistryAuthBasic, SchemaRegistryAuthBearer)),
		newKey("schema-registry.confluent.auth.basic.username", "",
			"User name for basic authentication to the Confluent schema registry.",
			func(c *Config) *string { return &c.SchemaRegistry.Confluent.Auth.Basic.Username }, nil),
		newKey("schema-registry.confluent.auth.basic.password", "",
			"Password for basic authentication to the Confluent schema registry.",
			func(c *Config) *string { return &c.SchemaRegistry.Confluent.Auth.Basic.Password }, nil),
		newKey("schema-registry.confluent.auth.bearer.token", "",
			"Bearer token for the Confluent schema registry.",
			func(c *Config) *string { return &c.SchemaRegistry.Confluent.Auth.Bearer.Token }, nil),
		newKey("notifications.group-window", 10*time.Second,
			"How long notifications of one kind to one target are gathered into one message: a storm of pipelines degrading together sends one message with the count and the first pipelines.",
			func(c *Config) *time.Duration { return &c.Notifications.GroupWindow }, positiveDuration),
		newKey("notifications.max-listed", 20,
			"Most pipelines a grouped message names (and, for pagerduty, most incidents it opens or resolves one by one); the rest are counted.",
			func(c *Config) *int { return &c.Notifications.MaxListed }, positiveInt),
		newKey("notifications.recovering-after", 15*time.Minute,
			"How long a pipeline may be recovering before a recovering-long notification is sent.",
			func(c *Config) *time.Duration { return &c.Notifications.RecoveringAfter }, positiveDuration),
		newKey("notifications.retry-max-delay", 5*time.Minute,
			"Longest wait between two attempts to deliver to a target that fails; the wait doubles from 1s up to this.",
			func(c *Config) *time.Duration { return &c.Notifications.RetryMaxDelay }, positiveDuration),
		newKey("runtime.gc-percent", 400,
			"Go garbage collector target (GOGC): heap growth between collections, in percent of the live heap. The GOGC environment variable wins.",
			func(c *Config) *int { return &c.Runtime.GCPercent }, positiveInt),
		newKey("runtime.gc-headroom", "auto",
			"Most the Go heap grows by between collections when gc-percent would let it grow by more: auto (48KiB per goroutine, at least 128MiB), off, or a size such as 256MiB. Ignored when the GOGC environment variable is set.",
			func(c *Config) *string { return &c.Runtime.GCHeadroom }, gcHeadroom),
		newKey("runtime.memory-limit", gctuning.LimitAuto,
			"Soft memory limit of the Go heap (GOMEMLIMIT): auto (90% of the container's cgroup limit, none without one), off, or a size such as 2GiB. The GOMEMLIMIT environment variable wins.",
			func(c *Config) *string { return &c.Runtime.MemoryLimit }, memoryLimit),
	}
	for _, f := range errorRecoveryFields {
		keys = append(keys, f.globalKey())
	}
	return keys
}

// keyIndex finds a key by its dotted name.
var keyIndex = func() map[string]*key {
	m := make(map[string]*key, len(keyTable))
	for i := range keyTable {
		m[keyTable[i].name] = &keyTable[i]
	}
	return m
}()

// sections holds every proper prefix of a key ("pipelines",
// "pipelines.error-recovery"): names that must hold a map of keys.
var sections = func() map[string][]string {
	m := map[string][]string{}
	for _, k := range keyTable {
		parts := strings.Split(k.name, ".")
		for i := 1; i < len(parts); i++ {
			sec := strings.Join(parts[:i], ".")
			child := strings.Join(parts[:i+1], ".")
			if !contains(m[sec], child) {
				m[sec] = append(m[sec], child)
			}
		}
	}
	return m
}()

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// knownNames lists every key and section, the candidates for "did you mean".
func knownNames() []string {
	names := make([]string, 0, len(keyTable)+len(sections))
	for _, k := range keyTable {
		names = append(names, k.name)
	}
	for s := range sections {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}

// ConfigPathFlag is the flag (without dashes) that names the configuration
// file; ConfigPathEnv is its environment variable.
const (
	ConfigPathFlag = "config.path"
	ConfigPathEnv  = "CONDUIT_CONFIG_PATH"
)

// EnvVar returns the environment variable that overrides a key:
// CONDUIT_ + the key upper-cased, with "." and "-" replaced by "_"
// (pipelines.error-recovery.min-delay -> CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY).
func EnvVar(key string) string {
	return EnvPrefix + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key))
}

// KeyInfo describes a global configuration key, for documentation and tools
// (help output, `conduit init`, a config dump).
type KeyInfo struct {
	// Name is the dotted key, e.g. "log.level". The flag has the same name.
	Name string
	// Kind is the type of the value.
	Kind Kind
	// Default is the default value as a user would write it (e.g. "1m").
	Default string
	// Doc is a one-line description.
	Doc string
	// Env is the environment variable, e.g. "CONDUIT_LOG_LEVEL".
	Env string
	// Flag is the flag as typed, e.g. "--log.level".
	Flag string
}

// Keys describes every global configuration key, in table order.
func Keys() []KeyInfo {
	out := make([]KeyInfo, len(keyTable))
	for i, k := range keyTable {
		out[i] = KeyInfo{
			Name:    k.name,
			Kind:    k.kind,
			Default: formatValue(k.def),
			Doc:     k.doc,
			Env:     EnvVar(k.name),
			Flag:    "--" + k.name,
		}
	}
	return out
}
