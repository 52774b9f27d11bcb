package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// envPipeline is a pipeline file whose source settings are settings (one
// "key: value" per line, indented by the caller's 10 spaces) and whose
// destination path is path.
func envPipeline(settings, path string) string {
	return `version: "2.2"
pipelines:
  - id: p
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
` + settings + `
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ` + path + "\n"
}

func mapEnv(vars map[string]string) LookupEnv {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestEnvironmentVariablesExpandAsConduitExpandsThem(t *testing.T) {
	env := mapEnv(map[string]string{
		"RATE": "10", "OUT": "/data", "A": "a", "B": "b", "EMPTY": "",
		"DOLLAR": "$B", // an expanded value is not expanded again
		"PW":     "hunter2",
	})
	tests := []struct {
		name     string
		settings string
		path     string
		// want are source settings that must have these values.
		want     map[string]string
		wantPath string
		// warnings must each be found in one warning, in order.
		warnings []string
		// wantErr, when set, must be in the pipeline's error.
		wantErr []string
	}{
		{
			name:     "a number from a variable",
			settings: "          rate: ${RATE}",
			path:     "${OUT}/x.jsonl",
			want:     map[string]string{"rate": "10"},
			wantPath: "/data/x.jsonl",
		},
		{
			name:     "both forms, quoted and plain, inside text",
			settings: "          a: pre-${A}-$B.post\n          b: \"${A}${B}\"\n          c: '$A'\n          d: |\n            line $A\n",
			path:     "./out.jsonl",
			want:     map[string]string{"a": "pre-a-b.post", "b": "ab", "c": "a", "d": "line a\n"},
			wantPath: "./out.jsonl",
		},
		{
			name:     "keys, numbers and dollars that name nothing are left alone",
			settings: "          ${A}: 1\n          n: 12\n          cost: 5 $\n          brace: \"${}x\"",
			path:     "./out.jsonl",
			want:     map[string]string{"${A}": "1", "n": "12", "cost": "5 $", "brace": "x"},
			wantPath: "./out.jsonl",
		},
		{
			name:     "an expanded value is not expanded again, through an alias either",
			settings: "          a: &v ${DOLLAR}\n          b: *v",
			path:     "./out.jsonl",
			want:     map[string]string{"a": "$B", "b": "$B"},
			wantPath: "./out.jsonl",
		},
		{
			name:     "an unset variable is empty, with a warning naming file, line, field and variable",
			settings: "          rate: 5\n          prefix: ${NOPE}x\n          again: $NOPE $NOPE",
			path:     "./out.jsonl",
			want:     map[string]string{"prefix": "x", "again": " "},
			wantPath: "./out.jsonl",
			warnings: []string{
				"p.yml:10: connectors[src].settings.prefix: environment variable NOPE is not set",
				"p.yml:11: connectors[src].settings.again: environment variable NOPE is not set",
			},
		},
		{
			name:     "$$ is the variable $, as under Conduit",
			settings: "          password: pa$$word",
			path:     "./out.jsonl",
			want:     map[string]string{"password": "paword"},
			wantPath: "./out.jsonl",
			warnings: []string{"p.yml:9: connectors[src].settings.password: environment variable $ is not set"},
		},
		{
			name:     "template variables that are not set are kept; set variables and ${} expand there too",
			settings: "          value: '{{ $n := .Key }}{{ $n }}-{{ $A }}-{{ \"${B}\" }}-{{ $.Key }}'\n          plain: $n{{ .Key }}",
			path:     "./out.jsonl",
			want:     map[string]string{"value": `{{ $n := .Key }}{{ $n }}-{{ a }}-{{ "b" }}-{{ $.Key }}`, "plain": "{{ .Key }}"},
			wantPath: "./out.jsonl",
			warnings: []string{"p.yml:10: connectors[src].settings.plain: environment variable n is not set"},
		},
		{
			name:     "a variable set to empty is the user's choice: no warning",
			settings: "          prefix: ${EMPTY}x",
			path:     "./${EMPTY}out.jsonl",
			want:     map[string]string{"prefix": "x"},
			wantPath: "./out.jsonl",
		},
		{
			name:     "an unset variable in the middle of a path is a warning",
			settings: "          rate: 1",
			path:     "./${NOPE}/x.jsonl",
			wantPath: ".//x.jsonl",
			warnings: []string{"p.yml:14: connectors[out].settings.path: environment variable NOPE is not set"},
		},
		{
			name:     "an unset variable that starts a path is an error, never a path at the root",
			settings: "          rate: 1",
			path:     "${OUTDIR}/x.jsonl",
			wantErr:  []string{"p.yml:14", `pipeline "p"`, "connectors[out].settings.path", "OUTDIR is not set", "root of the file system"},
		},
		{
			name:     "so is an empty one, and in a file URL",
			settings: "          url: file://${EMPTY}/x",
			path:     "./out.jsonl",
			wantErr:  []string{"p.yml:9", "connectors[src].settings.url", "EMPTY is empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, errs := parsePipelines(env, FileContent{Name: "p.yml", Data: []byte(envPipeline(tt.settings, tt.path))})
			if tt.wantErr != nil {
				if len(ps) != 0 || len(errs) != 1 {
					t.Fatalf("got %d pipelines and errors %v, want the pipeline refused with one error", len(ps), errs)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(errs[0].Error(), w) {
						t.Errorf("error %q does not contain %q", errs[0], w)
					}
				}
				return
			}
			if len(errs) > 0 || len(ps) != 1 {
				t.Fatalf("got %d pipelines, errors %v", len(ps), errs)
			}
			p := ps[0]
			for k, v := range tt.want {
				if got, ok := p.Connectors[0].Settings[k]; !ok || got != v {
					t.Errorf("setting %s = %q (set: %v), want %q", k, got, ok, v)
				}
			}
			eq(t, "destination path", p.Connectors[1].Settings["path"], tt.wantPath)
			if len(p.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings %v, want %d", p.Warnings, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if !strings.Contains(p.Warnings[i].String(), w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, p.Warnings[i], w)
				}
			}
		})
	}
}

func TestDefinitionShowsVariablesAsWritten(t *testing.T) {
	env := mapEnv(map[string]string{"PW": "hunter2", "HOST": "db.example", "KEY": "s3cr3t"})
	data := envPipeline("          url: postgres://user:${PW}@${HOST}/db\n          dsn: password=$PW\n          token: ${KEY}\n          plain: $HOST", "./out.jsonl")
	ps, errs := parsePipelines(env, FileContent{Name: "p.yml", Data: []byte(data)})
	if len(errs) > 0 || len(ps) != 1 {
		t.Fatalf("errors %v", errs)
	}
	p := ps[0]
	eq(t, "url runs expanded", p.Connectors[0].Settings["url"], "postgres://user:hunter2@db.example/db")
	eq(t, "token runs expanded", p.Connectors[0].Settings["token"], "s3cr3t")
	for _, secret := range []string{"hunter2", "s3cr3t", "db.example"} {
		if strings.Contains(p.Definition, secret) {
			t.Errorf("the definition shows %q, a value of the environment:\n%s", secret, p.Definition)
		}
	}
	if !strings.Contains(p.Definition, "plain: $HOST") {
		t.Errorf("the definition does not show the value as written:\n%s", p.Definition)
	}
}

func TestUnsetVariablesWarnAtMostABoundedNumberOfTimes(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		b.WriteString("${V" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "}")
	}
	ps, errs := parsePipelines(mapEnv(nil), FileContent{Name: "p.yml", Data: []byte(envPipeline("          many: "+b.String(), "./o.jsonl"))})
	if len(errs) > 0 || len(ps) != 1 {
		t.Fatalf("errors %v", errs)
	}
	if n := len(ps[0].Warnings); n != maxEnvWarnings+1 {
		t.Fatalf("%d warnings, want %d and one that counts the rest", n, maxEnvWarnings+1)
	}
	if last := ps[0].Warnings[maxEnvWarnings].Message; !strings.Contains(last, "more uses") {
		t.Errorf("last warning %q does not count the rest", last)
	}
}

func TestExpandVarsMatchesOSExpand(t *testing.T) {
	mapping := func(name string) string {
		if name == "X" || name == "$" || name == "1" {
			return "<" + name + ">"
		}
		return ""
	}
	for _, s := range []string{
		"", "$", "$$", "$X", "${X}", "${X", "${}", "a$", "$ x", "$X$X", "${X}y", "$1x", "${$}", "$-", "${X:-d}", "$Xy", "${{X}}", "é$Xé",
	} {
		got := expandVars(s, func(name string, _ []byte, _ string) string { return mapping(name) })
		if want := os.Expand(s, mapping); got != want {
			t.Errorf("expandVars(%q) = %q, os.Expand = %q", s, got, want)
		}
	}
}

func TestLoadPipelinesExpandsTheProcessEnvironment(t *testing.T) {
	t.Setenv("CONDUIT_TEST_EXPAND_RATE", "7")
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/p.yml", []byte(envPipeline("          rate: ${CONDUIT_TEST_EXPAND_RATE}", "./o.jsonl")), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := loadOK(t, dir)
	if len(ps) != 1 {
		t.Fatalf("%d pipelines", len(ps))
	}
	eq(t, "rate", ps[0].Connectors[0].Settings["rate"], "7")
}

func TestErrorsShowExpandedValuesAsWritten(t *testing.T) {
	env := mapEnv(map[string]string{"SECRET": "hunter2x", "N": "7"})
	data := envPipeline("          rate: ${SECRET}\n          other: $N", "./o.jsonl")
	ps, errs := parsePipelines(env, FileContent{Name: "p.yml", Data: []byte(data)})
	if len(errs) > 0 || len(ps) != 1 {
		t.Fatalf("errors %v", errs)
	}
	p := ps[0]
	// As the runtime reports a setting a connector refuses.
	err := p.SettingError(0, "rate", &SettingValueError{Setting: "rate", Value: "hunter2x"})
	msg := err.Error()
	if strings.Contains(msg, "hunter2x") || !strings.Contains(msg, `"${SECRET}" is not a number`) {
		t.Errorf("error %q shows the expanded value", msg)
	}
	var sve *SettingValueError
	if !errors.As(err, &sve) {
		t.Errorf("the error chain lost its type: %v", err)
	}
	// A short value is replaced in its own field's error only.
	if msg := p.SettingError(0, "rate", errors.New(`"7" and "7"`)).Error(); !strings.Contains(msg, `"7" and "7"`) {
		t.Errorf("a short value of another field was replaced: %q", msg)
	}
	if msg := p.SettingError(0, "other", errors.New(`"7" is odd`)).Error(); !strings.Contains(msg, `"$N" is odd`) {
		t.Errorf("the field's own value was not shown as written: %q", msg)
	}

	// A problem found while reading the file is shown as written too.
	_, errs = parsePipelines(env, FileContent{Name: "p.yml", Data: []byte(strings.Replace(data, "    connectors:", "    status: ${SECRET}\n    connectors:", 1))})
	if len(errs) != 1 || strings.Contains(errs[0].Error(), "hunter2x") {
		t.Errorf("errors %v show the expanded value", errs)
	}
}

// SettingValueError stands for a connector's error about a setting's value.
type SettingValueError struct{ Setting, Value string }

func (e *SettingValueError) Error() string { return fmt.Sprintf("%q is not a number", e.Value) }

// FuzzExpandVars checks that expansion reads references exactly as
// os.Expand (and so Conduit) does, whatever the text.
func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"$", "${X}", "$$", "a${}b", "${X", "{{ $x }}", "$1$#${-}"} {
		f.Add(s)
	}
	mapping := func(name string) string { return "<" + name + ">" }
	f.Fuzz(func(t *testing.T, s string) {
		got := expandVars(s, func(name string, _ []byte, _ string) string { return mapping(name) })
		if want := os.Expand(s, mapping); got != want {
			t.Errorf("expandVars(%q) = %q, os.Expand = %q", s, got, want)
		}
	})
}
