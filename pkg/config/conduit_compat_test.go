package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// conduitInitDir is the directory Conduit v0.14.0's `conduit init` ran in to
// write testdata/conduit-v0.14.0-init.yaml (its paths start with it).
const conduitInitDir = "/tmp/conduit-workspace"

// writeConduitInit writes Conduit's init output as if it ran in dir.
func writeConduitInit(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "conduit-v0.14.0-init.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, ConduitConfigFile, strings.ReplaceAll(string(data), conduitInitDir, dir))
}

func warningsText(ws []Warning) string {
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = w.String()
	}
	return strings.Join(lines, "\n")
}

// The conduit.yaml of Conduit's `conduit init` loads: keys that mean the
// same are read, the six that configure what this product lacks are named
// in one warning, and Conduit's all-interface addresses listen on loopback
// since no token is set.
func TestConduitInitConfigLoads(t *testing.T) {
	dir := t.TempDir()
	writeConduitInit(t, dir)
	cfg, warnings, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	path := filepath.Join(dir, ConduitConfigFile)
	if cfg.ConfigPath != path {
		t.Errorf("ConfigPath %q, want %q", cfg.ConfigPath, path)
	}
	got := map[string]any{
		"db.type": cfg.DB.Type, "db.badger.path": cfg.DB.Badger.Path, "api.enabled": cfg.API.Enabled,
		"api.http.address": cfg.API.HTTP.Address, "api.grpc.address": cfg.API.GRPC.Address,
		"log.level": cfg.Log.Level, "log.format": cfg.Log.Format,
		"connectors.path": cfg.Connectors.Path, "processors.path": cfg.Processors.Path, "pipelines.path": cfg.Pipelines.Path,
		"pipelines.exit-on-degraded": cfg.Pipelines.ExitOnDegraded,
		"min-delay":                  cfg.Pipelines.ErrorRecovery.MinDelay, "max-delay": cfg.Pipelines.ErrorRecovery.MaxDelay,
		"backoff-factor": cfg.Pipelines.ErrorRecovery.BackoffFactor, "max-retries": cfg.Pipelines.ErrorRecovery.MaxRetries,
		"max-retries-window":   cfg.Pipelines.ErrorRecovery.MaxRetriesWindow,
		"schema-registry.type": cfg.SchemaRegistry.Type, "auth.type": cfg.SchemaRegistry.Confluent.Auth.Type,
	}
	want := map[string]any{
		"db.type": "badger", "db.badger.path": filepath.Join(dir, "conduit.db"), "api.enabled": true,
		"api.http.address": "127.0.0.1:8080", "api.grpc.address": "127.0.0.1:8084",
		"log.level": "info", "log.format": "cli",
		"connectors.path": filepath.Join(dir, "connectors"), "processors.path": filepath.Join(dir, "processors"),
		"pipelines.path": filepath.Join(dir, "pipelines"), "pipelines.exit-on-degraded": false,
		"min-delay": time.Second, "max-delay": 10 * time.Minute, "backoff-factor": 2.0, "max-retries": -1,
		"max-retries-window": 5 * time.Minute, "schema-registry.type": "builtin", "auth.type": "none",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	text := warningsText(warnings)
	for _, w := range []string{
		path + ": ignored 6 Conduit setting(s) this product does not have: connectors.max-receive-record-size, db.postgres.table, db.sqlite.path, db.sqlite.table, preview.pipeline-arch-v2, preview.pipeline-arch-v2-disable-metrics",
		path + ":23: api.http.address :8080 would listen on every interface, and api.auth.token is empty: listening on 127.0.0.1:8080 instead",
		path + ":26: api.grpc.address :8084 would listen on every interface",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("warnings lack %q:\n%s", w, text)
		}
	}
	if len(warnings) != 3 {
		t.Errorf("%d warnings, want 3 (one for the ignored keys, one per address):\n%s", len(warnings), text)
	}
}

// With a token, Conduit's ":8080" means every interface, as it does there.
func TestConduitInitConfigWithTokenKeepsAddresses(t *testing.T) {
	dir := t.TempDir()
	writeConduitInit(t, dir)
	cfg, warnings, err := Load(LoadOptions{WorkDir: dir, LookupEnv: env(map[string]string{"CONDUIT_API_AUTH_TOKEN": "0123456789abcdef0123"})})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.API.HTTP.Address != ":8080" || cfg.API.GRPC.Address != ":8084" {
		t.Errorf("addresses %q, %q, want :8080, :8084", cfg.API.HTTP.Address, cfg.API.GRPC.Address)
	}
	if strings.Contains(warningsText(warnings), "listening on") {
		t.Errorf("address warning with a token:\n%s", warningsText(warnings))
	}
}

// The same all-interface address in our own conduit.yml is refused as
// before: only Conduit's file gets the loopback fallback.
func TestAllInterfacesAddressInConduitYmlStillRefused(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conduit.yml", "api:\n  http:\n    address: :8080\n")
	_, _, err := Load(LoadOptions{WorkDir: dir})
	wantKeyError(t, err, path, 3, "api.http.address", "not a loopback address")
}

// Every flag of Conduit v0.14.0's `conduit run --help` is accepted; those
// with our meaning set the key, the others are named in one warning.
func TestConduitRunFlags(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeFile(t, dir, "elsewhere.yaml", "log:\n  format: json\n")
	pipeline := writeFile(t, dir, "one.yaml", "version: \"2.2\"\n")
	fs := flags(t,
		"--api.enabled=false", "--api.grpc.address", "127.0.0.1:9084", "--api.http.address", "127.0.0.1:9080",
		"--config.path", cfgFile,
		"--connectors.max-receive-record-size", "1024", "--connectors.path", "/opt/c",
		"--db.badger.path", "/var/db", "--db.postgres.connection-string", "postgres://u@127.0.0.1:5432/d",
		"--db.postgres.table", "kv", "--db.sqlite.path", "/var/x.db", "--db.sqlite.table", "kv", "--db.type", "postgres",
		"--dev.blockprofile", "b", "--dev.cpuprofile", "c", "--dev.memprofile", "m",
		"--log.level", "warn",
		"--pipelines.error-recovery.backoff-factor", "3", "--pipelines.error-recovery.max-delay", "2m",
		"--pipelines.error-recovery.max-retries", "5", "--pipelines.error-recovery.max-retries-window", "1m",
		"--pipelines.error-recovery.min-delay", "2s", "--pipelines.exit-on-degraded",
		"--pipelines.path", pipeline,
		"--preview.pipeline-arch-v2", "--preview.pipeline-arch-v2-disable-metrics",
		"--processors.path", "/opt/p",
		"--schema-registry.type", "confluent", "--schema-registry.confluent.connection-string", "http://127.0.0.1:8081",
		"--schema-registry.confluent.auth.type", "basic", "--schema-registry.confluent.auth.basic.username", "u",
		"--schema-registry.confluent.auth.basic.password", "p", "--schema-registry.confluent.auth.bearer.token", "t",
	)
	cfg, warnings, err := Load(LoadOptions{Flags: fs, WorkDir: dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	er := cfg.Pipelines.ErrorRecovery
	sr := cfg.SchemaRegistry.Confluent
	got := []any{cfg.ConfigPath, cfg.Log.Format, cfg.API.Enabled, cfg.API.GRPC.Address, cfg.API.HTTP.Address,
		cfg.Connectors.Path, cfg.DB.Badger.Path, cfg.DB.Postgres.URL, cfg.DB.Type, cfg.Log.Level,
		er.BackoffFactor, er.MaxDelay, er.MaxRetries, er.MaxRetriesWindow, er.MinDelay, cfg.Pipelines.ExitOnDegraded,
		cfg.Pipelines.Path, cfg.Processors.Path, cfg.SchemaRegistry.Type, sr.ConnectionString, sr.Auth.Type,
		sr.Auth.Basic.Username, sr.Auth.Basic.Password, sr.Auth.Bearer.Token}
	want := []any{cfgFile, "json", false, "127.0.0.1:9084", "127.0.0.1:9080",
		"/opt/c", "/var/db", "postgres://u@127.0.0.1:5432/d", "postgres", "warn",
		3.0, 2 * time.Minute, 5, time.Minute, 2 * time.Second, true,
		pipeline, "/opt/p", "confluent", "http://127.0.0.1:8081", "basic", "u", "p", "t"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d = %v, want %v", i, got[i], want[i])
		}
	}
	text := warningsText(warnings)
	const ignored = "flags: ignored 9 Conduit setting(s) this product does not have: --connectors.max-receive-record-size, --db.postgres.table, --db.sqlite.path, --db.sqlite.table, --dev.blockprofile, --dev.cpuprofile, --dev.memprofile, --preview.pipeline-arch-v2, --preview.pipeline-arch-v2-disable-metrics"
	if len(warnings) != 1 || text != ignored {
		t.Errorf("warnings:\n%s\nwant exactly:\n%s", text, ignored)
	}
}

// Conduit's name of the PostgreSQL connection string is the same key in the
// file, the environment and flags; ours wins where both are given, and a
// file that sets both is refused like any key set twice.
func TestPostgresConnectionStringAlias(t *testing.T) {
	dir := t.TempDir()
	const url = "postgres://u@127.0.0.1:5432/d"
	writeFile(t, dir, "conduit.yml", "db:\n  type: postgres\n  postgres:\n    connection-string: "+url+"\n")
	cfg, _, err := Load(LoadOptions{WorkDir: dir})
	if err != nil || cfg.DB.Postgres.URL != url {
		t.Fatalf("file: url %q, err %v; want %q", cfg.DB.Postgres.URL, err, url)
	}
	cfg, warnings, err := Load(LoadOptions{WorkDir: t.TempDir(),
		LookupEnv: env(map[string]string{"CONDUIT_DB_TYPE": "postgres", "CONDUIT_DB_POSTGRES_CONNECTION_STRING": url}),
		Environ:   func() []string { return []string{"CONDUIT_DB_POSTGRES_CONNECTION_STRING=" + url} }})
	if err != nil || cfg.DB.Postgres.URL != url {
		t.Fatalf("env: url %q, err %v; want %q", cfg.DB.Postgres.URL, err, url)
	}
	if len(warnings) != 0 {
		t.Errorf("env alias warned as unknown: %s", warningsText(warnings))
	}
	cfg, _, err = Load(LoadOptions{WorkDir: t.TempDir(), Flags: flags(t, "--db.type", "postgres",
		"--db.postgres.connection-string", "postgres://conduit@127.0.0.1/x", "--db.postgres.url", url)})
	if err != nil || cfg.DB.Postgres.URL != url {
		t.Fatalf("flags: url %q, err %v; want ours, %q", cfg.DB.Postgres.URL, err, url)
	}
	both := writeFile(t, dir, "both.yml", "db:\n  postgres:\n    url: "+url+"\n    connection-string: "+url+"\n")
	_, _, err = Load(LoadOptions{Flags: flags(t, "--config.path", both)})
	wantKeyError(t, err, both, 4, "db.postgres.url", "set twice (first at line 3)")
}

// db.type sqlite (Conduit's SQLite store) is refused, naming what to use.
func TestDBTypeSQLiteRefused(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, ConduitConfigFile, "db:\n  type: sqlite\n")
	_, _, err := Load(LoadOptions{WorkDir: dir})
	wantKeyError(t, err, path, 2, "db.type", "this product does not have", "use badger")
}

// log.level trace (Conduit's) is debug here, with a warning.
func TestLogLevelTraceIsDebug(t *testing.T) {
	cfg, warnings, err := Load(LoadOptions{LookupEnv: env(map[string]string{"CONDUIT_LOG_LEVEL": "trace"}), WorkDir: t.TempDir()})
	if err != nil || cfg.Log.Level != "debug" {
		t.Fatalf("level %q, err %v; want debug", cfg.Log.Level, err)
	}
	if text := warningsText(warnings); !strings.Contains(text, "env CONDUIT_LOG_LEVEL: log.level trace is Conduit's") {
		t.Errorf("warnings: %s", text)
	}
}

// conduit.yml is read when conduit.yaml is beside it, and the warning says
// that conduit.yaml is not.
func TestConduitYmlTakesPrecedenceOverConduitYaml(t *testing.T) {
	dir := t.TempDir()
	yml := writeFile(t, dir, "conduit.yml", "log:\n  level: warn\n")
	yaml := writeFile(t, dir, ConduitConfigFile, "log:\n  level: debug\n")
	cfg, warnings, err := Load(LoadOptions{WorkDir: dir})
	if err != nil || cfg.ConfigPath != yml || cfg.Log.Level != "warn" {
		t.Fatalf("read %q (level %q, err %v), want %q", cfg.ConfigPath, cfg.Log.Level, err, yml)
	}
	want := yaml + ": not read: " + yml + " beside it takes precedence"
	if text := warningsText(warnings); !strings.HasPrefix(text, want) {
		t.Errorf("warnings %q, want %q", text, want)
	}
}

// In a conduit.yaml, keys nobody knows are named in the warning (Conduit
// ignores them too); in conduit.yml they are still refused, while Conduit's
// own keys are named in a warning in both.
func TestUnknownKeysConduitYamlWarnsConduitYmlRefuses(t *testing.T) {
	const content = "preview:\n  pipeline-arch-v2: true\nfuture:\n  thing: 1\nlog:\n  colour: red\n"
	dir := t.TempDir()
	path := writeFile(t, dir, ConduitConfigFile, content)
	_, warnings, err := Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := path + ": ignored 3 Conduit setting(s) this product does not have: future, log.colour, preview.pipeline-arch-v2"
	if text := warningsText(warnings); text != want {
		t.Errorf("warnings %q, want %q", text, want)
	}

	dir = t.TempDir()
	path = writeFile(t, dir, "conduit.yml", "preview:\n  pipeline-arch-v2: true\n")
	_, warnings, err = Load(LoadOptions{WorkDir: dir})
	if err != nil {
		t.Fatalf("Conduit's key in conduit.yml: %v", err)
	}
	if text, want := warningsText(warnings), path+": ignored 1 Conduit setting(s) this product does not have: preview.pipeline-arch-v2"; text != want {
		t.Errorf("warnings %q, want %q", text, want)
	}
	path = writeFile(t, dir, "conduit.yml", content)
	_, _, err = Load(LoadOptions{WorkDir: dir})
	wantKeyError(t, err, path, 3, "future", "unknown key")
}

// CONDUIT_ variables of Conduit's settings that this product lacks are
// named as such, not as misspellings.
func TestConduitOnlyEnvVarsWarn(t *testing.T) {
	_, warnings, err := Load(LoadOptions{WorkDir: t.TempDir(),
		Environ: func() []string { return []string{"CONDUIT_DB_SQLITE_PATH=/x"} }})
	if err != nil {
		t.Fatal(err)
	}
	want := "env CONDUIT_DB_SQLITE_PATH: Conduit's db.sqlite.path, a setting this product does not have; ignored"
	if text := warningsText(warnings); text != want {
		t.Errorf("warnings %q, want %q", text, want)
	}
}
