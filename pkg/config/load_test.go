package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// env turns a map into a LookupEnv.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// flags registers the config flags and parses args, as cobra would.
func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	return fs
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantKeyError checks that err is a *KeyError with the given location and
// that its message contains the location prefix and every part of want.
func wantKeyError(t *testing.T, err error, source string, line int, key string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load succeeded, want an error for %s", key)
	}
	var ke *KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("error %q is %T, want *KeyError", err, err)
	}
	if ke.Source != source || ke.Line != line || ke.Key != key {
		t.Errorf("KeyError{Source: %q, Line: %d, Key: %q}, want {%q, %d, %q}; message: %s",
			ke.Source, ke.Line, ke.Key, source, line, key, err)
	}
	prefix := source
	if line > 0 {
		prefix += ":" + itoa(line)
	}
	if key != "" {
		prefix += ": " + key
	}
	if !strings.HasPrefix(err.Error(), prefix+": ") {
		t.Errorf("message %q does not start with %q", err, prefix+": ")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not contain %q", err, w)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDefault(t *testing.T) {
	// Spelled out independently of the key table, so a wrong table default
	// fails here.
	c := Default()
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"db.type", c.DB.Type, "badger"},
		{"db.badger.path", c.DB.Badger.Path, "conduit.db"},
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "cli"},
		{"api.enabled", c.API.Enabled, true},
		{"api.http.address", c.API.HTTP.Address, "127.0.0.1:8080"},
		{"api.grpc.address", c.API.GRPC.Address, ""},
		{"api.auth.token", c.API.Auth.Token, ""},
		{"api.http.max-connections", c.API.HTTP.MaxConnections, 0},
		{"api.max-watchers", c.API.MaxWatchers, 256},
		{"api.max-watchers-per-client", c.API.MaxWatchersPerClient, 32},
		{"auditlog.max-events-per-pipeline", c.AuditLog.MaxEventsPerPipeline, 10000},
		{"dedup.enabled", c.Dedup.Enabled, true},
		{"dedup.ttl", c.Dedup.TTL, 24 * time.Hour},
		{"auditlog.max-age", c.AuditLog.MaxAge, 720 * time.Hour},
		{"connectors.path", c.Connectors.Path, "./connectors"},
		{"connectors.start-timeout", c.Connectors.StartTimeout, 10 * time.Second},
		{"processors.path", c.Processors.Path, "./processors"},
		{"processors.memory-limit", c.Processors.MemoryLimit, "1GiB"},
		{"processors.javascript.timeout", c.Processors.JavaScript.Timeout, 30 * time.Second},
		{"processors.javascript.memory-limit", c.Processors.JavaScript.MemoryLimit, "256MiB"},
		{"processors.javascript.require-path", c.Processors.JavaScript.RequirePath, ""},
		{"pipelines.path", c.Pipelines.Path, "./pipelines"},
		{"pipelines.watch", c.Pipelines.Watch, true},
		{"pipelines.allow-delete-all", c.Pipelines.AllowDeleteAll, false},
		{"api.readyz.fail-on-degraded", c.API.Readyz.FailOnDegraded, false},
		{"db.postgres.url", c.DB.Postgres.URL, ""},
		{"pipelines.breakers.enabled", c.Pipelines.Breakers.Enabled, true},
		{"pipelines.breakers.threshold", c.Pipelines.Breakers.Threshold, 3},
		{"pipelines.breakers.window", c.Pipelines.Breakers.Window, time.Minute},
		{"pipelines.breakers.stagger", c.Pipelines.Breakers.Stagger, 5 * time.Second},
		{"pipelines.exit-on-degraded", c.Pipelines.ExitOnDegraded, false},
		{"pipelines.graceful-stop-timeout", c.Pipelines.GracefulStopTimeout, 30 * time.Second},
		{"pipelines.crash-loop-after", c.Pipelines.CrashLoopAfter, 3},
		{"min-delay", c.Pipelines.ErrorRecovery.MinDelay, time.Second},
		{"max-delay", c.Pipelines.ErrorRecovery.MaxDelay, time.Minute},
		{"backoff-factor", c.Pipelines.ErrorRecovery.BackoffFactor, 2.0},
		{"max-retries", c.Pipelines.ErrorRecovery.MaxRetries, -1},
		{"max-retries-window", c.Pipelines.ErrorRecovery.MaxRetriesWindow, 5 * time.Minute},
		{"probation", c.Pipelines.ErrorRecovery.Probation, 30 * time.Second},
		{"jitter", c.Pipelines.ErrorRecovery.Jitter, 0.0},
		{"max-duration", c.Pipelines.ErrorRecovery.MaxDuration, time.Duration(0)},
		{"preset", c.Pipelines.ErrorRecovery.Preset, "conduit"},
		{"strategy", c.Pipelines.ErrorRecovery.Strategy, "exponential"},
		{"schedule", len(c.Pipelines.ErrorRecovery.Schedule), 0},
		{"max-flaps", c.Pipelines.ErrorRecovery.MaxFlaps, -1},
		{"flap-window", c.Pipelines.ErrorRecovery.FlapWindow, 5 * time.Minute},
		{"quarantine-after", c.Pipelines.ErrorRecovery.QuarantineAfter, 0},
		{"cluster.enabled", c.Cluster.Enabled, false},
		{"cluster.instance-id", c.Cluster.InstanceID, ""},
		{"cluster.lease-ttl", c.Cluster.LeaseTTL, 15 * time.Second},
		{"schema-registry.type", c.SchemaRegistry.Type, "builtin"},
		{"schema-registry.confluent.connection-string", c.SchemaRegistry.Confluent.ConnectionString, ""},
		{"schema-registry.confluent.auth.type", c.SchemaRegistry.Confluent.Auth.Type, "none"},
		{"schema-registry.confluent.auth.basic.username", c.SchemaRegistry.Confluent.Auth.Basic.Username, ""},
		{"schema-registry.confluent.auth.basic.password", c.SchemaRegistry.Confluent.Auth.Basic.Password, ""},
		{"schema-registry.confluent.auth.bearer.token", c.SchemaRegistry.Confluent.Auth.Bearer.Token, ""},
		{"notifications.group-window", c.Notifications.GroupWindow, 10 * time.Second},
		{"notifications.max-listed", c.Notifications.MaxListed, 20},
		{"notifications.recovering-after", c.Notifications.RecoveringAfter, 15 * time.Minute},
		{"notifications.retry-max-delay", c.Notifications.RetryMaxDelay, 5 * time.Minute},
		{"runtime.gc-percent", c.Runtime.GCPercent, 400},
		{"runtime.gc-headroom", c.Runtime.GCHeadroom, "auto"},
		{"runtime.memory-limit", c.Runtime.MemoryLimit, "auto"},
		{"api.http.cors.allowed-origins", len(c.API.HTTP.CORS.AllowedOrigins), 0},
		{"ConfigPath", c.ConfigPath, ""},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if len(Keys()) != 65 {
		t.Errorf("Keys() has %d keys, TestDefault checks 65; add the new key here", len(Keys()))
	}
}

func TestLoadNothingConfiguredIsDefault(t *testing.T) {
	got, _, err := Load(LoadOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Errorf("Load() = %+v, want Default() %+v", got, Default())
	}
}

func TestLoadPrecedence(t *testing.T) {
	const file = `
log:
  level: warn
  format: json
db:
  type: inmemory
pipelines:
  error-recovery:
    min-delay: 2s
    max-delay: 2m
    jitter: 0.1
`
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{
			name: "default when nothing set",
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "info")
				eq(t, "min-delay", c.Pipelines.ErrorRecovery.MinDelay, time.Second)
			},
		},
		{
			name: "file over default",
			file: file,
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "warn")
				eq(t, "db.type", c.DB.Type, "inmemory")
				eq(t, "min-delay", c.Pipelines.ErrorRecovery.MinDelay, 2*time.Second)
				eq(t, "jitter", c.Pipelines.ErrorRecovery.Jitter, 0.1)
				eq(t, "untouched max-retries", c.Pipelines.ErrorRecovery.MaxRetries, -1)
			},
		},
		{
			name: "env over file",
			file: file,
			env: map[string]string{
				"CONDUIT_LOG_LEVEL":                            "debug",
				"CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY":   "3s",
				"CONDUIT_API_ENABLED":                          "false",
				"CONDUIT_PIPELINES_ERROR_RECOVERY_MAX_RETRIES": "7",
			},
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "debug")
				eq(t, "log.format from file", c.Log.Format, "json")
				eq(t, "min-delay", c.Pipelines.ErrorRecovery.MinDelay, 3*time.Second)
				eq(t, "api.enabled", c.API.Enabled, false)
				eq(t, "max-retries", c.Pipelines.ErrorRecovery.MaxRetries, 7)
			},
		},
		{
			name: "flag over env over file",
			file: file,
			env: map[string]string{
				"CONDUIT_LOG_LEVEL":                          "debug",
				"CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY": "3s",
				"CONDUIT_DB_BADGER_PATH":                     "/env/db",
			},
			args: []string{"--log.level=error", "--pipelines.error-recovery.min-delay", "4s", "--api.enabled=false", "--pipelines.exit-on-degraded"},
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "error")
				eq(t, "min-delay", c.Pipelines.ErrorRecovery.MinDelay, 4*time.Second)
				eq(t, "db.badger.path from env", c.DB.Badger.Path, "/env/db")
				eq(t, "db.type from file", c.DB.Type, "inmemory")
				eq(t, "api.enabled", c.API.Enabled, false)
				eq(t, "exit-on-degraded (bare bool flag)", c.Pipelines.ExitOnDegraded, true)
			},
		},
		{
			name: "flag at its default value still overrides",
			file: file,
			env:  map[string]string{"CONDUIT_LOG_LEVEL": "debug"},
			args: []string{"--log.level=info"},
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "info")
			},
		},
		{
			name: "empty env var is ignored",
			file: file,
			env:  map[string]string{"CONDUIT_LOG_LEVEL": ""},
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "warn")
			},
		},
		{
			name: "dotted keys in the file",
			file: "log.level: debug\npipelines:\n  error-recovery.max-retries: 3\n",
			check: func(t *testing.T, c Config) {
				eq(t, "log.level", c.Log.Level, "debug")
				eq(t, "max-retries", c.Pipelines.ErrorRecovery.MaxRetries, 3)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				writeFile(t, dir, "conduit.yml", tc.file)
			}
			c, _, err := Load(LoadOptions{Flags: flags(t, tc.args...), LookupEnv: env(tc.env), WorkDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestLoadConfigFileLookup(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string // relative to WorkDir
		env      map[string]string
		args     []string
		wantPath string // relative to WorkDir; "" = no file
		wantLvl  string
		wantErr  []string // message parts; also checked via KeyError
	}{
		{name: "no file: defaults", wantLvl: "info"},
		{
			name:     "conduit.yml",
			files:    map[string]string{"conduit.yml": "log: {level: warn}"},
			wantPath: "conduit.yml", wantLvl: "warn",
		},
		{
			name:     "conduit.yaml when there is no conduit.yml",
			files:    map[string]string{"conduit.yaml": "log: {level: error}"},
			wantPath: "conduit.yaml", wantLvl: "error",
		},
		{
			name:     "conduit.yml wins over conduit.yaml",
			files:    map[string]string{"conduit.yml": "log: {level: warn}", "conduit.yaml": "log: {level: error}"},
			wantPath: "conduit.yml", wantLvl: "warn",
		},
		{
			name:     "--config.path wins over conduit.yml",
			files:    map[string]string{"conduit.yml": "log: {level: warn}", "etc/custom.yml": "log: {level: debug}"},
			args:     []string{"--config.path", "etc/custom.yml"},
			wantPath: "etc/custom.yml", wantLvl: "debug",
		},
		{
			name:     "CONDUIT_CONFIG_PATH",
			files:    map[string]string{"conduit.yml": "log: {level: warn}", "env.yml": "log: {level: error}"},
			env:      map[string]string{"CONDUIT_CONFIG_PATH": "env.yml"},
			wantPath: "env.yml", wantLvl: "error",
		},
		{
			name:     "--config.path wins over CONDUIT_CONFIG_PATH",
			files:    map[string]string{"flag.yml": "log: {level: debug}", "env.yml": "log: {level: error}"},
			env:      map[string]string{"CONDUIT_CONFIG_PATH": "env.yml"},
			args:     []string{"--config.path=flag.yml"},
			wantPath: "flag.yml", wantLvl: "debug",
		},
		{
			name:    "--config.path to a missing file is an error",
			files:   map[string]string{"conduit.yml": "log: {level: warn}"},
			args:    []string{"--config.path=missing.yml"},
			wantErr: []string{"flag --config.path: config.path: ", "missing.yml", "does not exist"},
		},
		{
			name:    "CONDUIT_CONFIG_PATH to a missing file is an error",
			env:     map[string]string{"CONDUIT_CONFIG_PATH": "nope.yml"},
			wantErr: []string{"env CONDUIT_CONFIG_PATH: config.path: ", "nope.yml", "does not exist"},
		},
		{
			name:    "--config.path to a directory is an error",
			files:   map[string]string{"dir/x": ""},
			args:    []string{"--config.path=dir"},
			wantErr: []string{"flag --config.path: config.path: ", "is a directory"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, dir, name, content)
			}
			c, _, err := Load(LoadOptions{Flags: flags(t, tc.args...), LookupEnv: env(tc.env), WorkDir: dir})
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Load succeeded with ConfigPath %q, want error", c.ConfigPath)
				}
				var ke *KeyError
				if !errors.As(err, &ke) || ke.Key != ConfigPathFlag {
					t.Errorf("error %q: want *KeyError for %s", err, ConfigPathFlag)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantPath := ""
			if tc.wantPath != "" {
				wantPath = filepath.Join(dir, tc.wantPath)
			}
			eq(t, "ConfigPath", c.ConfigPath, wantPath)
			eq(t, "log.level", c.Log.Level, tc.wantLvl)
		})
	}
}

func TestLoadEmptyFileIsValid(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{name: "empty", content: ""},
		{name: "only comments", content: "# nothing here\n\n   # indented comment\n"},
		{name: "explicit null document", content: "~\n"},
		{name: "empty section", content: "db:\n  # type: inmemory\nlog:\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "conduit.yml", tc.content)
			c, _, err := Load(LoadOptions{WorkDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			want.ConfigPath = path
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got %+v, want defaults", c)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		line    int
		key     string
		want    []string
	}{
		{
			name:    "unknown top-level key with suggestion",
			content: "lgo:\n  level: debug\n",
			line:    1, key: "lgo",
			want: []string{`unknown key; did you mean "log"?`},
		},
		{
			name:    "misspelt nested key",
			content: "pipelines:\n  error-recovery:\n    min-delay: 1s\n    jiter: 0.5\n",
			line:    4, key: "pipelines.error-recovery.jiter",
			want: []string{`did you mean "pipelines.error-recovery.jitter"?`},
		},
		{
			name:    "right key in the wrong section",
			content: "pipelines:\n  min-delay: 1s\n",
			line:    2, key: "pipelines.min-delay",
			want: []string{`did you mean "pipelines.error-recovery.min-delay"?`},
		},
		{
			name:    "unknown key without a close match lists the known ones",
			content: "db:\n  mysql: {}\n",
			line:    2, key: "db.mysql",
			want: []string{"unknown key; known: ", "db.type"},
		},
		{
			name:    "confluent schema registry without its URL",
			content: "schema-registry:\n  type: confluent\n",
			line:    2, key: "schema-registry.type",
			want: []string{"is confluent, and schema-registry.confluent.connection-string is empty", "CONDUIT_SCHEMA_REGISTRY_CONFLUENT_CONNECTION_STRING"},
		},
		{
			name:    "confluent schema registry URL that is not http",
			content: "schema-registry:\n  type: confluent\n  confluent:\n    connection-string: 127.0.0.1:8085\n",
			line:    4, key: "schema-registry.confluent.connection-string",
			want: []string{"is not an http:// or https:// URL"},
		},
		{
			name:    "basic auth to the schema registry without a user",
			content: "schema-registry:\n  type: confluent\n  confluent:\n    connection-string: http://127.0.0.1:8085\n    auth:\n      type: basic\n",
			line:    6, key: "schema-registry.confluent.auth.type",
			want: []string{"is basic, and schema-registry.confluent.auth.basic.username is empty"},
		},
		{
			name:    "unknown schema registry type",
			content: "schema-registry:\n  type: karapace\n",
			line:    2, key: "schema-registry.type",
			want: []string{"builtin", "confluent"},
		},
		{
			name:    "string where a bool is expected",
			content: "api:\n  enabled: \"yes\"\n",
			line:    2, key: "api.enabled",
			want: []string{`expected true or false, got the string "yes"`},
		},
		{
			name:    "YAML 1.1 yes is not a bool",
			content: "pipelines:\n  exit-on-degraded: yes\n",
			line:    2, key: "pipelines.exit-on-degraded",
			want: []string{"expected true or false"},
		},
		{
			name:    "string where an int is expected",
			content: "pipelines:\n  error-recovery:\n    max-retries: many\n",
			line:    3, key: "pipelines.error-recovery.max-retries",
			want: []string{`expected an integer, got the string "many"`},
		},
		{
			name:    "float where an int is expected",
			content: "pipelines:\n  error-recovery:\n    max-retries: 2.5\n",
			line:    3, key: "pipelines.error-recovery.max-retries",
			want: []string{"expected an integer, got the number 2.5"},
		},
		{
			name:    "map where a scalar is expected",
			content: "log:\n  level:\n    value: debug\n",
			line:    3, key: "log.level",
			want: []string{"got a map"},
		},
		{
			name:    "list where a scalar is expected",
			content: "log:\n  level: [debug]\n",
			line:    2, key: "log.level",
			want: []string{"got a list"},
		},
		{
			name:    "scalar where a section is expected",
			content: "db: badger\n",
			line:    1, key: "db",
			want: []string{"expected a map of keys (db.type, db.badger, db.postgres)", `got the string "badger"`},
		},
		{
			name:    "empty value",
			content: "log:\n  level:\n  format: json\n",
			line:    2, key: "log.level",
			want: []string{"no value", "remove the key to use the default"},
		},
		{
			name:    "bad duration",
			content: "pipelines:\n  error-recovery:\n    min-delay: soon\n",
			line:    3, key: "pipelines.error-recovery.min-delay",
			want: []string{`invalid duration "soon"`},
		},
		{
			name:    "duration without unit",
			content: "pipelines:\n  graceful-stop-timeout: 30\n",
			line:    2, key: "pipelines.graceful-stop-timeout",
			want: []string{`invalid duration "30"`, "30s"},
		},
		{
			name:    "bool where a duration is expected",
			content: "pipelines:\n  error-recovery:\n    max-duration: true\n",
			line:    3, key: "pipelines.error-recovery.max-duration",
			want: []string{"expected a duration", "got the bool true"},
		},
		{
			name:    "processors memory limit without a unit",
			content: "processors:\n  memory-limit: 512\n",
			line:    2, key: "processors.memory-limit",
			want: []string{"must be at least 1MiB", "write the unit"},
		},
		{
			name:    "processors memory limit beyond WebAssembly's",
			content: "processors:\n  memory-limit: 8GiB\n",
			line:    2, key: "processors.memory-limit",
			want: []string{"must be at most 4GiB"},
		},
		{
			name:    "javascript memory limit without a unit",
			content: "processors:\n  javascript:\n    memory-limit: 512\n",
			line:    3, key: "processors.javascript.memory-limit",
			want: []string{"must be at least 1MiB", "write the unit"},
		},
		{
			name:    "javascript timeout zero",
			content: "processors:\n  javascript:\n    timeout: 0s\n",
			line:    3, key: "processors.javascript.timeout",
			want: []string{"greater than 0"},
		},
		{
			name:    "negative delay",
			content: "pipelines:\n  error-recovery:\n    min-delay: -1s\n",
			line:    3, key: "pipelines.error-recovery.min-delay",
			want: []string{"must not be negative, got -1s"},
		},
		{
			name:    "negative max-duration",
			content: "pipelines:\n  error-recovery:\n    max-duration: -5m\n",
			line:    3, key: "pipelines.error-recovery.max-duration",
			want: []string{"must not be negative, got -5m"},
		},
		{
			name:    "jitter above 1",
			content: "# comment\n\npipelines:\n  error-recovery:\n    jitter: 1.5\n",
			line:    5, key: "pipelines.error-recovery.jitter",
			want: []string{"must be between 0 and 1, got 1.5"},
		},
		{
			name:    "jitter below 0",
			content: "pipelines:\n  error-recovery:\n    jitter: -0.1\n",
			line:    3, key: "pipelines.error-recovery.jitter",
			want: []string{"must be between 0 and 1, got -0.1"},
		},
		{
			name:    "backoff factor below 1",
			content: "pipelines:\n  error-recovery:\n    backoff-factor: 0.5\n",
			line:    3, key: "pipelines.error-recovery.backoff-factor",
			want: []string{"must be at least 1, got 0.5"},
		},
		{
			name:    "max-retries below -1",
			content: "pipelines:\n  error-recovery:\n    max-retries: -2\n",
			line:    3, key: "pipelines.error-recovery.max-retries",
			want: []string{"must be -1 (retry forever) or at least 0, got -2"},
		},
		{
			name:    "max-retries-window zero",
			content: "pipelines:\n  error-recovery:\n    max-retries-window: 0s\n",
			line:    3, key: "pipelines.error-recovery.max-retries-window",
			want: []string{"must be greater than 0, got 0s"},
		},
		{
			name:    "graceful-stop-timeout zero",
			content: "pipelines:\n  graceful-stop-timeout: 0s\n",
			line:    2, key: "pipelines.graceful-stop-timeout",
			want: []string{"must be greater than 0"},
		},
		{
			name:    "min-delay greater than max-delay, both in the file",
			content: "pipelines:\n  error-recovery:\n    min-delay: 2m\n    max-delay: 1m\n",
			line:    3, key: "pipelines.error-recovery.min-delay",
			want: []string{"2m must not be greater than max-delay 1m", "conduit.yml:4"},
		},
		{
			name:    "max-delay below the default min-delay",
			content: "pipelines:\n  error-recovery:\n    max-delay: 500ms\n",
			line:    3, key: "pipelines.error-recovery.max-delay",
			want: []string{"500ms must not be less than min-delay 1s", "(min-delay is set by default)"},
		},
		{
			name:    "invalid enum with suggestion",
			content: "db:\n  type: badgr\n",
			line:    2, key: "db.type",
			want: []string{`must be one of badger, postgres, inmemory, got "badgr"`, `did you mean "badger"?`},
		},
		{
			name:    "cluster without postgres",
			content: "cluster:\n  enabled: true\n",
			line:    2, key: "cluster.enabled",
			want: []string{"needs db.type postgres", "db.type is badger"},
		},
		{
			name:    "lease ttl too short",
			content: "cluster:\n  lease-ttl: 500ms\n",
			line:    2, key: "cluster.lease-ttl",
			want: []string{"must be at least 1s and at most 24h, got 500ms"},
		},
		{
			name:    "lease ttl too long",
			content: "cluster:\n  lease-ttl: 100000h\n",
			line:    2, key: "cluster.lease-ttl",
			want: []string{"must be at least 1s and at most 24h, got 100000h"},
		},
		{
			name:    "instance id with a space",
			content: "cluster:\n  instance-id: \"a b\"\n",
			line:    2, key: "cluster.instance-id",
			want: []string{"must not contain white space"},
		},
		{
			name:    "invalid log level",
			content: "log:\n  level: verbose\n",
			line:    2, key: "log.level",
			want: []string{`must be one of debug, info, warn, error, got "verbose"`},
		},
		{
			name:    "invalid log format",
			content: "log:\n  format: text\n",
			line:    2, key: "log.format",
			want: []string{`must be one of cli, json, got "text"`},
		},
		{
			name:    "address without port",
			content: "api:\n  http:\n    address: localhost\n",
			line:    3, key: "api.http.address",
			want: []string{"must be host:port", "missing port in address"},
		},
		{
			name:    "address with a bad port",
			content: "api:\n  http:\n    address: \"127.0.0.1:99999\"\n",
			line:    3, key: "api.http.address",
			want: []string{"port between 0 and 65535"},
		},
		{
			name:    "empty path",
			content: "pipelines:\n  path: \"\"\n",
			line:    2, key: "pipelines.path",
			want: []string{"must not be empty"},
		},
		{
			name:    "key set twice",
			content: "log:\n  level: debug\nlog.level: warn\n",
			line:    3, key: "log.level",
			want: []string{"set twice (first at line 2)"},
		},
		{
			// The misindented line, not where its block starts.
			name:    "malformed YAML",
			content: "log:\n  level: debug\n format: json\n",
			line:    3, key: "",
			want: []string{"invalid YAML"},
		},
		{
			name:    "top level is a list",
			content: "- log\n",
			line:    1, key: "",
			want: []string{"expected a map of keys at the top level, got a list"},
		},
		{
			name:    "two documents",
			content: "log: {level: debug}\n---\nlog: {level: warn}\n",
			line:    3, key: "",
			want: []string{"more than one YAML document"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "conduit.yml", tc.content)
			_, _, err := Load(LoadOptions{WorkDir: dir})
			wantKeyError(t, err, path, tc.line, tc.key, tc.want...)
		})
	}
}

func TestLoadEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		key  string
		want []string
	}{
		{
			name: "invalid enum",
			env:  map[string]string{"CONDUIT_LOG_LEVEL": "verbose"},
			key:  "log.level",
			want: []string{`must be one of debug, info, warn, error, got "verbose"`},
		},
		{
			name: "bad bool",
			env:  map[string]string{"CONDUIT_API_ENABLED": "yes please"},
			key:  "api.enabled",
			want: []string{`expected true or false, got "yes please"`},
		},
		{
			name: "bad duration",
			env:  map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_MAX_DELAY": "5"},
			key:  "pipelines.error-recovery.max-delay",
			want: []string{`invalid duration "5"`},
		},
		{
			name: "bad int",
			env:  map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_MAX_RETRIES": "3.5"},
			key:  "pipelines.error-recovery.max-retries",
			want: []string{`expected an integer, got "3.5"`},
		},
		{
			name: "jitter out of range",
			env:  map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_JITTER": "2"},
			key:  "pipelines.error-recovery.jitter",
			want: []string{"must be between 0 and 1, got 2"},
		},
		{
			name: "NaN is not a jitter",
			env:  map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_JITTER": "NaN"},
			key:  "pipelines.error-recovery.jitter",
			want: []string{"must be between 0 and 1"},
		},
		{
			name: "invalid address",
			env:  map[string]string{"CONDUIT_API_HTTP_ADDRESS": "8080"},
			key:  "api.http.address",
			want: []string{"must be host:port"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(LoadOptions{LookupEnv: env(tc.env), WorkDir: t.TempDir()})
			wantKeyError(t, err, "env "+EnvVar(tc.key), 0, tc.key, tc.want...)
		})
	}
}

func TestLoadFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		key  string
		want []string
	}{
		{
			name: "invalid enum",
			args: []string{"--log.level=verbose"},
			key:  "log.level",
			want: []string{`got "verbose"`},
		},
		{
			name: "bad duration",
			args: []string{"--pipelines.error-recovery.min-delay", "1 second"},
			key:  "pipelines.error-recovery.min-delay",
			want: []string{`invalid duration "1 second"`},
		},
		{
			name: "bad bool",
			args: []string{"--api.enabled=maybe"},
			key:  "api.enabled",
			want: []string{`expected true or false, got "maybe"`},
		},
		{
			name: "backoff factor",
			args: []string{"--pipelines.error-recovery.backoff-factor=0"},
			key:  "pipelines.error-recovery.backoff-factor",
			want: []string{"must be at least 1, got 0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(LoadOptions{Flags: flags(t, tc.args...), WorkDir: t.TempDir()})
			wantKeyError(t, err, "flag --"+tc.key, 0, tc.key, tc.want...)
		})
	}
}

// The min > max error must point at the value the user wrote, wherever it
// came from.
func TestLoadCrossFieldBlame(t *testing.T) {
	const minKey, maxKey = "pipelines.error-recovery.min-delay", "pipelines.error-recovery.max-delay"
	tests := []struct {
		name   string
		file   string
		env    map[string]string
		args   []string
		source string // "FILE" is replaced by the file's path
		line   int
		key    string
		want   []string
	}{
		{
			name:   "file max-delay against default min-delay",
			file:   "pipelines:\n  error-recovery:\n    max-delay: 100ms\n",
			source: "FILE", line: 3, key: maxKey,
			want: []string{"100ms must not be less than min-delay 1s"},
		},
		{
			name:   "file min-delay against default max-delay",
			file:   "pipelines:\n  error-recovery:\n\n    min-delay: 2m\n",
			source: "FILE", line: 4, key: minKey,
			want: []string{"2m must not be greater than max-delay 1m (max-delay is set by default)"},
		},
		{
			name:   "env min-delay against file max-delay",
			file:   "pipelines:\n  error-recovery:\n    max-delay: 10s\n",
			env:    map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY": "20s"},
			source: "env CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY", key: minKey,
			want: []string{"20s must not be greater than max-delay 10s (max-delay is set by FILE:3)"},
		},
		{
			name:   "flag max-delay against env min-delay",
			env:    map[string]string{"CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY": "20s"},
			args:   []string{"--pipelines.error-recovery.max-delay=10s"},
			source: "flag --" + maxKey, key: maxKey,
			want: []string{"(min-delay is set by env CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, err := loadCase(t, tc.file, tc.args, tc.env)
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.ReplaceAll(w, "FILE", path)
			}
			wantKeyError(t, err, strings.ReplaceAll(tc.source, "FILE", path), tc.line, tc.key, want...)
		})
	}
}

func TestLoadRelativeWorkDirMessage(t *testing.T) {
	// With no WorkDir the file is found relative to the process's working
	// directory and messages start with the bare file name, as in
	// "conduit.yml:14: ...".
	dir := t.TempDir()
	writeFile(t, dir, "conduit.yml", "log:\n  level: loud\n")
	t.Chdir(dir)
	_, _, err := Load(LoadOptions{})
	wantKeyError(t, err, "conduit.yml", 2, "log.level", `got "loud"`)
}

func TestLoadUnreadableDefaultFile(t *testing.T) {
	// A conduit.yml that exists but cannot be read must not silently fall
	// back to defaults.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "conduit.yml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(LoadOptions{WorkDir: dir})
	if err == nil {
		t.Fatal("Load succeeded, want an error for a conduit.yml directory")
	}
	if !strings.Contains(err.Error(), "conduit.yml") {
		t.Errorf("message %q does not name the file", err)
	}
}

func TestRegisterFlags(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs)
	if fs.Lookup(ConfigPathFlag) == nil {
		t.Errorf("--%s not registered", ConfigPathFlag)
	}
	for _, k := range Keys() {
		t.Run(k.Name, func(t *testing.T) {
			f := fs.Lookup(k.Name)
			if f == nil {
				t.Fatalf("flag %s not registered", k.Flag)
			}
			eq(t, "DefValue", f.DefValue, k.Default)
			eq(t, "Type", f.Value.Type(), k.Kind.String())
			if !strings.Contains(f.Usage, k.Env) {
				t.Errorf("usage %q does not name %s", f.Usage, k.Env)
			}
			if k.Kind == KindBool {
				eq(t, "NoOptDefVal", f.NoOptDefVal, "true")
			}
		})
	}
	if err := fs.Parse([]string{"--no-such-key=1"}); err == nil {
		t.Error("unknown flag accepted")
	}
}

func TestEnvVar(t *testing.T) {
	tests := []struct {
		name, key, want string
	}{
		{name: "dots", key: "db.badger.path", want: "CONDUIT_DB_BADGER_PATH"},
		{name: "dashes", key: "pipelines.error-recovery.min-delay", want: "CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY"},
		{name: "config path", key: ConfigPathFlag, want: ConfigPathEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eq(t, "EnvVar", EnvVar(tc.key), tc.want)
		})
	}
}

func TestKeyErrorUnwrap(t *testing.T) {
	err := &KeyError{Source: "conduit.yml", Line: 1, Key: "k", Err: fs.ErrPermission}
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("errors.Is does not see through KeyError")
	}
	eq(t, "Error", err.Error(), "conduit.yml:1: k: "+fs.ErrPermission.Error())
}

// loadCase loads a configuration made of file (written as conduit.yml in a
// new directory when not empty), flags args and environment vars; path is
// the file's path.
func loadCase(t *testing.T, file string, args []string, vars map[string]string) (path string, err error) {
	t.Helper()
	dir := t.TempDir()
	if file != "" {
		path = writeFile(t, dir, "conduit.yml", file)
	}
	_, _, err = Load(LoadOptions{Flags: flags(t, args...), LookupEnv: env(vars), WorkDir: dir})
	return path, err
}

// Delays below the restart delay floor load, with a warning naming the
// file, the key or rule and the floor.
func TestDelaysBelowTheFloorWarn(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conduit.yml", `pipelines:
  error-recovery:
    min-delay: 0s
    rules:
      - name: hot
        match: {codes: ["503"]}
        strategy: schedule
        schedule: [1s, 10ms]
`)
	c, warnings, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipelines.ErrorRecovery.MinDelay != 0 {
		t.Fatalf("min-delay %v, want 0s as written (the floor applies when a delay is used)", c.Pipelines.ErrorRecovery.MinDelay)
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.String())
	}
	want := []string{
		path + ": pipelines.error-recovery: min-delay 0s below the restart delay floor: restarts wait at least 100ms (no policy or rule restarts a pipeline in a hot loop)",
		path + `:5: recovery rule "hot": schedule[1] 10ms below the restart delay floor: restarts wait at least 100ms (no policy or rule restarts a pipeline in a hot loop)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The defaults warn of nothing.
	if _, warnings, _ := Load(LoadOptions{WorkDir: t.TempDir()}); len(warnings) != 0 {
		t.Fatalf("defaults warn: %v", warnings)
	}
}
