package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// Settings says, for every key, the value Load gives it and where it came
// from: the file and line, the variable, the flag or the default;
// credentials are masked.
func TestSettingsSources(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conduit.yml", `log:
  level: warn
db:
  postgres:
    url: postgres://conduit:hunter2@127.0.0.1/conduit
api:
  auth:
    token: settings-test-token-0123456789
pipelines:
  error-recovery:
    min-delay: 2s
    rules:
      - name: flaky-db
        match:
          codes: [503]
        action: retry
`)
	settings, cfg, _, err := Settings(LoadOptions{
		WorkDir:   dir,
		LookupEnv: env(map[string]string{"CONDUIT_DB_TYPE": "inmemory", "CONDUIT_LOG_FORMAT": "json"}),
		Flags:     flags(t, "--log.format", "cli", "--pipelines.error-recovery.max-delay=3m"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Level != "warn" || cfg.ConfigPath != path {
		t.Errorf("config %+v", cfg.Log)
	}
	got := map[string]Setting{}
	var order []string
	for _, s := range settings {
		got[s.Key] = s
		order = append(order, s.Key)
	}
	for _, want := range []Setting{
		{ConfigPathFlag, path, "default (found in the working directory)"},
		{"log.level", "warn", path + ":2"},
		{"db.type", "inmemory", "env CONDUIT_DB_TYPE"},
		{"log.format", "cli", "flag --log.format"}, // flag over env
		{"db.postgres.url", "postgres://conduit:" + Masked + "@127.0.0.1/conduit", path + ":5"},
		{"api.auth.token", Masked, path + ":8"},
		{"pipelines.error-recovery.min-delay", "2s", path + ":11"},
		{"pipelines.error-recovery.max-delay", "3m", "flag --pipelines.error-recovery.max-delay"},
		{"api.http.address", "127.0.0.1:8080", "default"},
		{"pipelines.error-recovery.rules", "[flaky-db]", path + ":13"},
	} {
		if got[want.Key] != want {
			t.Errorf("%s: %+v, want %+v", want.Key, got[want.Key], want)
		}
	}
	// Every key once, config.path first, in the key table's order.
	if len(settings) != len(keyTable)+2 || order[0] != ConfigPathFlag || order[1] != keyTable[0].name {
		t.Errorf("%d settings, order %v", len(settings), order[:2])
	}
	for _, s := range settings {
		if strings.Contains(s.Value, "hunter2") || strings.Contains(s.Value, "settings-test-token") {
			t.Errorf("%s shows a credential: %q", s.Key, s.Value)
		}
	}
}

func TestSettingsConfigPathSource(t *testing.T) {
	dir := t.TempDir()
	other := writeFile(t, dir, "other.yml", "log:\n  level: error\n")
	for _, tc := range []struct {
		name string
		opts LoadOptions
		want Setting
	}{
		{"none", LoadOptions{WorkDir: dir}, Setting{ConfigPathFlag, "", "default (no file found)"}},
		{"flag", LoadOptions{WorkDir: dir, Flags: flags(t, "--config.path", other)}, Setting{ConfigPathFlag, other, "flag --config.path"}},
		{"env", LoadOptions{WorkDir: dir, LookupEnv: env(map[string]string{ConfigPathEnv: other})}, Setting{ConfigPathFlag, other, "env " + ConfigPathEnv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings, _, _, err := Settings(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if settings[0] != tc.want {
				t.Errorf("%+v, want %+v", settings[0], tc.want)
			}
		})
	}
}

// What Load refuses, Settings refuses with the same error.
func TestSettingsRefusesWhatLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "conduit.yml", "db:\n  type: postgres\n")
	_, _, loadErr := Load(LoadOptions{WorkDir: dir})
	_, _, _, err := Settings(LoadOptions{WorkDir: dir})
	if err == nil || loadErr == nil || err.Error() != loadErr.Error() {
		t.Errorf("Settings: %v; Load: %v", err, loadErr)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "conduit.yml")) {
		t.Errorf("the error does not name the file: %v", err)
	}
}
