package reconciler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conduitry/conduit/pkg/config"
)

func pipe(id, file string, line int, rate string) config.Pipeline {
	return config.Pipeline{ID: id, Status: config.StatusRunning, File: file, Line: line,
		Connectors: []config.Connector{
			{ID: "src", Type: config.TypeSource, Plugin: "builtin:generator", Settings: map[string]string{"rate": rate},
				Path: "connectors[src]", Line: line + 3, SettingLines: map[string]int{"rate": line + 6}},
			{ID: "dst", Type: config.TypeDestination, Plugin: "builtin:log", Path: "connectors[dst]", Line: line + 7},
		}}
}

func running(p config.Pipeline) Running {
	fp, err := Fingerprint(p)
	if err != nil {
		panic(err)
	}
	o := Origin{File: p.File, Line: p.Line}
	return Running{Pipeline: p, Origin: o, Fingerprint: fp}
}

func want(p config.Pipeline) Desired {
	return Desired{Pipeline: p, Origin: Origin{File: p.File, Line: p.Line}}
}

func api(p config.Pipeline) Desired {
	p.File, p.Line = "", 0
	return Desired{Pipeline: p}
}

// summary is a plan in one line per change: "action id [fields] (kept)".
func summary(p Plan) string {
	var lines []string
	for _, c := range p.Changes {
		s := c.Action.String() + " " + c.ID
		if len(c.Fields) > 0 {
			s += " " + fmt.Sprint(c.Fields)
		}
		if c.Kept {
			s += " (kept)"
		}
		for _, pr := range c.Problems {
			s += " !" + pr.Err.Error()
		}
		lines = append(lines, s)
	}
	for _, pr := range p.Problems {
		lines = append(lines, "problem "+pr.File+": "+pr.Err.Error())
	}
	return strings.Join(lines, "\n")
}

func TestMake(t *testing.T) {
	a, b, c := pipe("a", "/p/a.yml", 3, "10"), pipe("b", "/p/b.yml", 3, "10"), pipe("c", "/p/c.yml", 3, "10")
	for _, tc := range []struct {
		name     string
		running  []Running
		desired  []Desired
		problems []Problem
		want     string
	}{
		{
			name:    "first load creates everything",
			desired: []Desired{want(b), want(a)},
			want:    "create a\ncreate b",
		},
		{
			name:    "nothing changed",
			running: []Running{running(a)},
			desired: []Desired{want(a)},
			want:    "unchanged a",
		},
		{
			name:    "moved within its file or to another file: not a change",
			running: []Running{running(a)},
			desired: []Desired{want(pipe("a", "/p/other.yml", 40, "10"))},
			want:    "unchanged a",
		},
		{
			name:    "a setting changed",
			running: []Running{running(a)},
			desired: []Desired{want(pipe("a", "/p/a.yml", 3, "20"))},
			want:    "update a [connectors[src].settings.rate]",
		},
		{
			name:    "removed from the files",
			running: []Running{running(a), running(b)},
			desired: []Desired{want(a)},
			want:    "delete b\nunchanged a",
		},
		{
			name:    "renamed in place: delete and create",
			running: []Running{running(a)},
			desired: []Desired{want(pipe("a2", "/p/a.yml", 3, "10"))},
			want:    "delete a\ncreate a2",
		},
		{
			name:     "an entry became invalid: the running version stays",
			running:  []Running{running(a), running(b)},
			desired:  []Desired{want(b)},
			problems: []Problem{{PipelineID: "a", File: "/p/a.yml", Line: 9, Err: errors.New("connectors[src].plugin: unknown")}},
			want:     "invalid a (kept) !connectors[src].plugin: unknown\nunchanged b",
		},
		{
			name:     "a new invalid entry",
			desired:  []Desired{want(b)},
			problems: []Problem{{PipelineID: "c", File: "/p/c.yml", Err: errors.New("no source")}},
			want:     "create b\ninvalid c !no source",
		},
		{
			name:     "a file that cannot be parsed keeps its pipelines",
			running:  []Running{running(a), running(b)},
			desired:  []Desired{want(b)},
			problems: []Problem{{File: "/p/a.yml", Err: errors.New("yaml: line 4: did not find expected key")}},
			want:     "unchanged a (kept) !yaml: line 4: did not find expected key\nunchanged b\nproblem /p/a.yml: yaml: line 4: did not find expected key",
		},
		{
			name:     "a missing directory keeps every file pipeline, not the API's",
			running:  []Running{running(a), running(b), {Pipeline: c, Fingerprint: "x"}},
			problems: []Problem{{File: "/p", Err: errors.New("pipelines directory does not exist")}},
			want:     "delete c\nunchanged a (kept) !pipelines directory does not exist\nunchanged b (kept) !pipelines directory does not exist\nproblem /p: pipelines directory does not exist",
		},
		{
			// The loader names files under the path cleaned and a missing
			// directory as configured.
			name:     "a missing directory named ./pipelines keeps the pipelines of pipelines/a.yml",
			running:  []Running{running(pipe("a", "pipelines/a.yml", 3, "10"))},
			problems: []Problem{{File: "./pipelines", Err: errors.New("pipelines directory does not exist")}},
			want:     "unchanged a (kept) !pipelines directory does not exist\nproblem ./pipelines: pipelines directory does not exist",
		},
		{
			name:    "an id from a file and from the API: the first wins",
			desired: []Desired{want(a), api(pipe("a", "", 0, "99"))},
			want:    "create a !pipeline a: id already defined at /p/a.yml:3 (that definition is used)",
		},
		{
			name:    "API pipelines are deleted only when not desired",
			running: []Running{{Pipeline: c, Fingerprint: mustFingerprint(c)}},
			desired: []Desired{api(c)},
			want:    "unchanged c",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Make(tc.running, tc.desired, tc.problems)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(plan); got != tc.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func mustFingerprint(p config.Pipeline) string {
	fp, err := Fingerprint(p)
	if err != nil {
		panic(err)
	}
	return fp
}

func TestDiffNamesFieldsAsAFileDoes(t *testing.T) {
	before := pipe("a", "/p/a.yml", 3, "10")
	after := pipe("a", "/p/a.yml", 3, "10")
	after.Name = "renamed"
	after.Connectors[1].Settings = map[string]string{"level": "warn"}
	after.Processors = []config.Processor{{ID: "p1", Plugin: "field.set", Workers: 1}}
	retries := 5
	after.ErrorRecovery.MaxRetries = &retries
	after.DLQ.WindowSize = 3
	got, err := Diff(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := "[connectors[dst].settings.level dead-letter-queue.window-size error-recovery.max-retries name processors (order) processors[p1]]"
	if fmt.Sprint(got) != want {
		t.Errorf("changed fields %v\nwant %s", got, want)
	}

	reordered := pipe("a", "/p/a.yml", 3, "10")
	reordered.Processors = []config.Processor{{ID: "p2", Plugin: "b"}, {ID: "p1", Plugin: "a"}}
	ordered := reordered
	ordered.Processors = []config.Processor{{ID: "p1", Plugin: "a"}, {ID: "p2", Plugin: "b"}}
	got, _ = Diff(ordered, reordered)
	if fmt.Sprint(got) != "[processors (order)]" {
		t.Errorf("reordered processors: %v", got)
	}
	if mustFingerprint(ordered) == mustFingerprint(reordered) {
		t.Error("processors run in order: reordering them must change the fingerprint")
	}
}

func TestFingerprintIgnoresWhereAPipelineIsWritten(t *testing.T) {
	a := pipe("a", "/p/a.yml", 3, "10")
	moved := pipe("a", "/q/b.yml", 77, "10")
	if mustFingerprint(a) != mustFingerprint(moved) {
		t.Error("the same pipeline at another place has another fingerprint")
	}
	if mustFingerprint(a) == mustFingerprint(pipe("a", "/p/a.yml", 3, "11")) {
		t.Error("a changed setting kept the fingerprint")
	}
}

func TestFromFiles(t *testing.T) {
	p := pipe("a", "/p/a.yml", 3, "10")
	desired, problems := FromFiles([]config.Pipeline{p}, []error{
		&config.PipelineError{File: "/p/b.yml", Line: 7, PipelineID: "b", Err: errors.New("bad")},
		errors.New("plain"),
	})
	if len(desired) != 1 || desired[0].Origin.String() != "/p/a.yml:3" {
		t.Errorf("desired %+v", desired)
	}
	if len(problems) != 2 || problems[0].PipelineID != "b" || problems[0].Line != 7 || problems[1].PipelineID != "" {
		t.Errorf("problems %+v", problems)
	}
}

// ordersFile is a pipeline file of the pipeline "orders" writing to path.
func ordersFile(path string) string {
	return `version: "2.2"
pipelines:
  - id: orders
    connectors:
      - id: gen
        type: source
        plugin: builtin:generator
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ` + path + "\n"
}

// The definition a pipeline runs from wins over a newcomer with its id,
// whatever the order of the file names; only when nothing runs (a cold
// start) or the id left its file does path order decide.
func TestTheDefinitionThatRunsWinsOverANewcomer(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func() ([]Desired, []Problem) {
		return FromFiles(config.LoadPipelines(dir))
	}
	z, copyFile := filepath.Join(dir, "z-orders.yml"), filepath.Join(dir, "a-orders-copy.yml")
	write("z-orders.yml", ordersFile("./orders.jsonl"))
	desired, problems := load()
	plan, err := Make(nil, desired, problems)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(plan); got != "create orders" {
		t.Fatalf("first load: %s", got)
	}
	runs := running(plan.Changes[0].Desired.Pipeline)

	dupOf := func(file string) string {
		return fmt.Sprintf(`!%s:3: pipeline "orders": id: duplicate pipeline id, already defined at %s:3, which runs it (that definition is used, this one is not)`, file, z)
	}
	for _, tc := range []struct {
		name      string
		z, copied string // "" leaves the file out
		running   []Running
		want      string
		settings  string // the destination path of the definition that runs
	}{
		{
			name: "a copy with another path is a duplicate; the running one is unchanged",
			z:    ordersFile("./orders.jsonl"), copied: ordersFile("./copy.jsonl"),
			running: []Running{runs},
			want:    "unchanged orders " + dupOf(copyFile), settings: "./orders.jsonl",
		},
		{
			name: "the running file changes beside the copy: its change applies",
			z:    ordersFile("./orders-v2.jsonl"), copied: ordersFile("./copy.jsonl"),
			running: []Running{runs},
			want:    "update orders [connectors[out].settings.path] " + dupOf(copyFile), settings: "./orders-v2.jsonl",
		},
		{
			name: "the running file becomes invalid beside the copy: the running version stays",
			z:    strings.Replace(ordersFile("./orders.jsonl"), "type: destination", "type: sink", 1), copied: ordersFile("./copy.jsonl"),
			running: []Running{runs},
			want:    "invalid orders (kept)",
		},
		{
			name:    "the running file is removed: the copy takes the pipeline over (a move)",
			copied:  ordersFile("./copy.jsonl"),
			running: []Running{runs},
			want:    "update orders [connectors[out].settings.path]", settings: "./copy.jsonl",
		},
		{
			name: "a cold start: the first file in path order wins",
			z:    ordersFile("./orders.jsonl"), copied: ordersFile("./copy.jsonl"),
			want:     fmt.Sprintf(`create orders !%s:3: pipeline "orders": id: duplicate pipeline id, already defined at %s:3 (that definition is used)`, z, copyFile),
			settings: "./copy.jsonl",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, content := range map[string]string{"z-orders.yml": tc.z, "a-orders-copy.yml": tc.copied} {
				_ = os.Remove(filepath.Join(dir, name))
				if content != "" {
					write(name, content)
				}
			}
			desired, problems := load()
			plan, err := Make(tc.running, desired, problems)
			if err != nil {
				t.Fatal(err)
			}
			got := summary(plan)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("plan:\n%s\nwant it to begin with:\n%s", got, tc.want)
			}
			c := plan.Changes[0]
			if tc.settings == "" {
				if c.Desired != nil {
					t.Fatalf("the running version must stay, but %s would run", c.Desired.Origin)
				}
				// Both definitions are reported: the broken running one and
				// the copy that does not take over.
				copyErr := fmt.Sprintf(`!%s:3: pipeline "orders": id: duplicate pipeline id, already defined at %s, which runs it (invalid there now: the running version stays; this one is not used)`, copyFile, z)
				if !strings.Contains(got, `z-orders.yml:9: pipeline "orders": connectors[out].type`) || !strings.Contains(got, copyErr) {
					t.Errorf("the problems do not name both files:\n%s", got)
				}
				return
			}
			if path := c.Desired.Pipeline.Connectors[1].Settings["path"]; path != tc.settings {
				t.Errorf("the pipeline would write to %s, want %s", path, tc.settings)
			}
		})
	}
}

// A file that defines the id of a pipeline created through the API does
// not take it over.
func TestAFileDoesNotTakeOverAnAPIPipeline(t *testing.T) {
	c := pipe("c", "", 0, "10")
	plan, err := Make([]Running{{Pipeline: c, Fingerprint: mustFingerprint(c)}},
		[]Desired{want(pipe("c", "/p/c.yml", 3, "99")), api(c)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `unchanged c !/p/c.yml:3: pipeline "c": id: duplicate pipeline id, already defined at api, which runs it (that definition is used, this one is not)`
	if got := summary(plan); got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
}

// At a start nothing runs yet: the definition the pipeline ran with last
// wins over a duplicate that sorts first; an id that never ran keeps the
// first in path order.
func TestPreferLastRun(t *testing.T) {
	dir := t.TempDir()
	z, copyFile := filepath.Join(dir, "z-orders.yml"), filepath.Join(dir, "a-orders-copy.yml")
	for file, path := range map[string]string{z: "./orders.jsonl", copyFile: "./copy.jsonl"} {
		if err := os.WriteFile(file, []byte(ordersFile(path)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loaded, errs := config.LoadPipelines(dir)
	var ranWith string
	for _, err := range errs {
		var dup *config.DuplicateIDError
		if errors.As(err, &dup) {
			ranWith = mustFingerprint(dup.Pipeline) // z-orders.yml's, set aside by path order
		}
	}
	for _, tc := range []struct {
		name    string
		lastRun func(string) (string, bool)
		path    string
		problem string
	}{
		{
			name:    "ran with z-orders.yml",
			lastRun: func(id string) (string, bool) { return ranWith, id == "orders" },
			path:    "./orders.jsonl",
			problem: fmt.Sprintf(`%s:3: pipeline "orders": id: duplicate pipeline id, already defined at %s:3, which it ran with last`, copyFile, z),
		},
		{
			name:    "never ran",
			lastRun: func(string) (string, bool) { return "", false },
			path:    "./copy.jsonl",
			problem: fmt.Sprintf(`%s:3: pipeline "orders": id: duplicate pipeline id, already defined at %s:3 (that definition is used)`, z, copyFile),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired, problems := FromFiles(slices.Clone(loaded), slices.Clone(errs))
			desired, problems = PreferLastRun(desired, problems, tc.lastRun)
			plan, err := Make(nil, desired, problems)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Changes) != 1 || plan.Changes[0].Action != Create {
				t.Fatalf("plan: %s", summary(plan))
			}
			c := plan.Changes[0]
			if got := c.Desired.Pipeline.Connectors[1].Settings["path"]; got != tc.path {
				t.Errorf("orders would write to %s, want %s", got, tc.path)
			}
			if len(c.Problems) != 1 || !strings.HasPrefix(c.Problems[0].Err.Error(), tc.problem) {
				t.Errorf("problems: %s\nwant one beginning %s", summary(plan), tc.problem)
			}
		})
	}
}

// At a start, a file with the id of a pipeline that ran from the API
// does not take it over.
func TestPreferLastRunOverAFileForAnAPIPipeline(t *testing.T) {
	ran := pipe("c", "", 0, "10")
	desired, problems := PreferLastRun([]Desired{want(pipe("c", "/p/c.yml", 3, "99")), api(ran)}, nil,
		func(id string) (string, bool) { return mustFingerprint(ran), id == "c" })
	plan, err := Make(nil, desired, problems)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Changes) != 1 || plan.Changes[0].Desired == nil || !plan.Changes[0].Desired.Origin.API() {
		t.Fatalf("plan: %s; want the API's definition to win", summary(plan))
	}
	if got := summary(plan); !strings.Contains(got, `/p/c.yml:3: pipeline "c": id: duplicate pipeline id, already defined at api`) {
		t.Errorf("plan: %s", got)
	}
}

// A fingerprint is persisted with each pipeline's state (ConfigHash): a new
// version of conduit that computed another for the same pipeline would
// take every pipeline for changed and drop its recovery on upgrade. Fields
// added to the pipeline format must leave it as it is for pipelines that
// do not use them.
func TestFingerprintIsStableAcrossVersions(t *testing.T) {
	if got, want := mustFingerprint(pipe("orders", "pipelines/orders.yml", 3, "10")), "sha256:49ced57cec43e446"; got != want {
		t.Errorf("fingerprint %s, want %s (the one earlier versions persisted)", got, want)
	}
}
