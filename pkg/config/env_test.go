package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestLoadWarnsAboutUnknownEnvVars(t *testing.T) {
	environ := []string{
		"HOME=/root",
		"CONDUIT_LOG_LEVEL=debug",
		"CONDUIT_LOG_LEVLE=debug",
		"CONDUIT_API_TOKEN=secret",
		"CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELY=1s",
		"CONDUIT_SOMETHING_ELSE=",
		"CONDUIT_PATH=/x",
		"CONDUIT_LOG_LEVLE=twice",
		"CONDUIT_CONFIG_PATH=",
		"CONDUIT_PLUGIN_SOCKET=/tmp/s",
		"CONDUIT_CRASH_RECORDS=10",
		"conduit_log_level=lower case is not ours",
	}
	cfg, warnings, err := Load(LoadOptions{
		LookupEnv: env(map[string]string{"CONDUIT_LOG_LEVEL": "debug"}),
		Environ:   func() []string { return environ },
		WorkDir:   t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "log.level, known variables still apply", cfg.Log.Level, "debug")
	var got []string
	for _, w := range warnings {
		got = append(got, w.String())
	}
	want := []string{
		"env CONDUIT_API_TOKEN: unknown conduit environment variable, ignored; did you mean CONDUIT_API_AUTH_TOKEN?",
		"env CONDUIT_LOG_LEVLE: unknown conduit environment variable, ignored; did you mean CONDUIT_LOG_LEVEL?",
		"env CONDUIT_PATH: unknown conduit environment variable, ignored",
		"env CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELY: unknown conduit environment variable, ignored; did you mean CONDUIT_PIPELINES_ERROR_RECOVERY_MIN_DELAY?",
		"env CONDUIT_SOMETHING_ELSE: unknown conduit environment variable, ignored",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range warnings {
		if strings.Contains(w.String(), "secret") {
			t.Errorf("warning %q shows a variable's value", w)
		}
	}
}

// A variable that makes Load fail is often misspelled; the warning comes
// with the error.
func TestLoadWarnsEvenWhenItFails(t *testing.T) {
	_, warnings, err := Load(LoadOptions{
		LookupEnv: env(map[string]string{"CONDUIT_API_HTTP_ADDRESS": "0.0.0.0:8080"}),
		Environ:   func() []string { return []string{"CONDUIT_API_AUTH_TOKN=0123456789abcdef"} },
		WorkDir:   t.TempDir(),
	})
	if err == nil {
		t.Fatal("Load succeeded without a token on 0.0.0.0")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), "did you mean CONDUIT_API_AUTH_TOKEN?") {
		t.Errorf("warnings = %v, want one for CONDUIT_API_AUTH_TOKN", warnings)
	}
}

// Every CONDUIT_ variable named anywhere else in the repository (code,
// tests, scripts, docs) is one conduit reads, so none of them is warned
// about; a new one must be added to the key table or to otherEnvVars. A
// line that says "misspelled on purpose" is left out.
func TestEnvVarsNamedInTheRepositoryAreKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	varRE := regexp.MustCompile(`\bCONDUIT_[A-Z0-9_]*[A-Z0-9]\b`)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return fs.SkipDir
			}
			return nil
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		// This package defines the known names, and its docs and tests
		// misspell some on purpose.
		if filepath.Dir(abs) == self {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 1<<20 || !info.Mode().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "misspelled on purpose") {
				continue
			}
			for _, name := range varRE.FindAllString(line, -1) {
				if _, ok := seen[name]; !ok {
					seen[name] = path
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < len(keyTable) {
		t.Fatalf("found only %d CONDUIT_ variables in the repository; is the walk broken?", len(seen))
	}
	for name, path := range seen {
		if w := unknownEnv([]string{name + "=x"}); len(w) != 0 {
			t.Errorf("%s (named in %s) would be warned about: %s", name, path, w[0])
		}
	}
}
