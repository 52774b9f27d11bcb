package config

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns how many bytes f allocates on the heap. Tests bound the
// loader's work by this count rather than by time, which depends on the
// machine.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxLoadAlloc is far above what loading a small file costs and far below
// what expanding its aliases would.
const maxLoadAlloc = 32 << 20

// A file whose aliases contain themselves or expand a thousandfold is
// reported at the alias and left out, cheaply; the files beside it load.
func TestLoadPipelinesAliases(t *testing.T) {
	dir := filepath.Join("testdata", "aliases")
	var (
		ps   []Pipeline
		errs []error
	)
	if n := allocated(func() { ps, errs = LoadPipelines(dir) }); n > maxLoadAlloc {
		t.Errorf("loading allocated %d bytes, want at most %d", n, maxLoadAlloc)
	}
	if len(ps) != 1 || ps[0].ID != "good" {
		t.Fatalf("valid pipelines = %v, want only good", ps)
	}
	eq(t, "destination settings through an alias", ps[0].Connectors[1].Settings["rate"], "10")
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2:\n%v", len(errs), errs)
	}
	wantPipelineError(t, errs[0], filepath.Join(dir, "billion-laughs.yml"), 13, "", "",
		"aliases expand to more than 100000 values", "alias *d", "anchor &d at line 12")
	wantPipelineError(t, errs[1], filepath.Join(dir, "self-reference.yml"), 8, "", "",
		"alias *s is inside the value it refers to (anchor &s at line 8)")
}

func TestLoadPipelinesExpansionLimits(t *testing.T) {
	head := "version: \"2.2\"\npipelines:\n  - id: p\n    connectors:\n      - id: src\n        type: source\n        plugin: builtin:generator\n        settings:\n"
	tests := []struct {
		name     string
		settings string // indented below settings:, starting at line 9
		line     int
		want     string
	}{
		{
			name:     "nested too deep without aliases",
			settings: "          a: " + strings.Repeat("{a: ", 100) + "x" + strings.Repeat("}", 100) + "\n",
			line:     9,
			want:     "nested more than 100 levels deep",
		},
		{
			name: "nested too deep through aliases",
			settings: "          a: &a " + strings.Repeat("{a: ", 60) + "x" + strings.Repeat("}", 60) + "\n" +
				"          b: " + strings.Repeat("{b: ", 40) + "*a" + strings.Repeat("}", 40) + "\n",
			line: 9,
			want: "nested more than 100 levels deep",
		},
		{
			name:     "mutual reference",
			settings: "          a: &a {b: &b {a: *a}}\n",
			line:     9,
			want:     "alias *a is inside the value it refers to",
		},
		{
			// An alias as the key at every level repeats a long name in
			// each flattened name below it.
			name: "long names through aliased keys",
			settings: "          k: &k " + strings.Repeat("k", 60000) + "\n" +
				"          l1: &l1 {*k: x}\n" +
				"          l2: &l2 {*k: *l1}\n" +
				"          l3: &l3 {*k: *l2}\n" +
				"          l4: &l4 {*k: *l3}\n" +
				"          l5: &l5 {*k: *l4}\n" +
				"          l6: &l6 {x1: *l5, x2: *l5, x3: *l5, x4: *l5, x5: *l5, x6: *l5, x7: *l5, x8: *l5}\n" +
				"          l7: &l7 {y1: *l6, y2: *l6, y3: *l6, y4: *l6, y5: *l6, y6: *l6, y7: *l6, y8: *l6}\n",
			// The key's line is that of its anchor.
			line: 9,
			want: "settings flatten into more than 4194304 bytes of dotted names",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := writeFile(t, dir, "p.yml", head+tc.settings)
			writeFile(t, dir, "q.yml", strings.ReplaceAll(head, "id: p", "id: q")+
				"          rate: 1\n      - {id: dst, type: destination, plugin: builtin:log}\n")
			var (
				ps   []Pipeline
				errs []error
			)
			if n := allocated(func() { ps, errs = LoadPipelines(dir) }); n > maxLoadAlloc {
				t.Errorf("loading allocated %d bytes, want at most %d", n, maxLoadAlloc)
			}
			if len(ps) != 1 || ps[0].ID != "q" {
				t.Errorf("valid pipelines = %v, want only q", ps)
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			pipeline, field := "", ""
			if strings.Contains(tc.want, "settings flatten") {
				pipeline, field = "p", "connectors[src].settings"
			}
			wantPipelineError(t, errs[0], file, tc.line, pipeline, field, tc.want)
		})
	}
}

// conduit.yml gets the same protection as pipeline files.
func TestLoadConfigFileAliases(t *testing.T) {
	laughs := "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for i := 1; i <= 9; i++ {
		prev := "*x" + itoa(i-1)
		laughs += "x" + itoa(i) + ": &x" + itoa(i) + " [" + strings.Repeat(prev+", ", 9) + prev + "]\n"
	}
	tests := []struct {
		name    string
		content string
		line    int
		want    string
	}{
		{"self reference", "log:\n  level: info\npipelines: &p {path: ./p, nested: *p}\n", 3, "alias *p is inside the value it refers to"},
		{"billion laughs", laughs, 5, "aliases expand to more than 100000 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "conduit.yml", tc.content)
			var err error
			if n := allocated(func() { _, _, err = Load(LoadOptions{WorkDir: dir}) }); n > maxLoadAlloc {
				t.Errorf("loading allocated %d bytes, want at most %d", n, maxLoadAlloc)
			}
			wantKeyError(t, err, path, tc.line, "", tc.want)
		})
	}
}

func TestLoadFileSizeLimit(t *testing.T) {
	big := "# " + strings.Repeat("x", maxFileBytes) + "\n"
	t.Run("conduit.yml", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFile(t, dir, "conduit.yml", big)
		_, _, err := Load(LoadOptions{WorkDir: dir})
		wantKeyError(t, err, path, 0, "", "file is too large", "at most 4194304 bytes")
	})
	t.Run("pipeline file", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFile(t, dir, "big.yml", big)
		writeFile(t, dir, "ok.yml", "version: \"2.2\"\npipelines:\n  - id: ok\n    connectors:\n      - {id: src, type: source, plugin: builtin:generator}\n      - {id: dst, type: destination, plugin: builtin:log}\n")
		ps, errs := LoadPipelines(dir)
		if len(ps) != 1 || ps[0].ID != "ok" {
			t.Errorf("valid pipelines = %v, want only ok", ps)
		}
		if len(errs) != 1 {
			t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
		}
		var pe *PipelineError
		if !errors.As(errs[0], &pe) || pe.File != path || !strings.Contains(pe.Error(), "file is too large") {
			t.Errorf("error = %v, want a *PipelineError naming %s as too large", errs[0], path)
		}
	})
}

// yaml.v3 gives the line of the enclosing construct, 0-based for some
// problems and none at all on the first line; users get the line of the
// problem, in conduit.yml and in pipeline files alike.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name    string
		content string
		line    int
		want    string
	}{
		{"unclosed list on line 2", "log:\n  levle: [debug\n", 2, "did not find expected ',' or ']'"},
		{"unclosed list on line 1", "levle: [debug\n", 1, "did not find expected ',' or ']'"},
		{"unclosed list before more lines", "a: 1\nb: [1, 2\n\n\n# end\n", 2, "did not find expected ',' or ']'"},
		{"unclosed map", "a: 1\nb:\n  c: {d: 1\n", 3, "did not find expected ',' or '}'"},
		{"misindented key", "log:\n  level: debug\n format: json\n", 3, "did not find expected key"},
		{"misindented list item", "a:\n  - x\n  - y\n z: 1\n", 4, ""},
		{"unclosed quote", "a: 1\nb: \"abc\n", 2, "found unexpected end of stream"},
		{"tab indentation on line 1", "\ta: 1\n", 1, "found character that cannot start any token"},
		{"mapping in a plain value", "a: 1\nb: c: d\n", 2, "mapping values are not allowed in this context"},
		{"in the second document", "a: 1\n---\nb: 2\nc: [\n", 4, "did not find expected node content"},
		{"unknown anchor", "a: 1\nb: [x, *nope]\n", 2, "unknown anchor 'nope' referenced"},
		{"after a byte order mark", "\xef\xbb\xbfa: 1\nb: [x\n", 2, "did not find expected ',' or ']'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "conduit.yml", tc.content)
			_, _, err := Load(LoadOptions{WorkDir: dir})
			wantKeyError(t, err, path, tc.line, "", "invalid YAML: "+tc.want)

			pdir := t.TempDir()
			file := writeFile(t, pdir, "p.yml", tc.content)
			_, errs := LoadPipelines(pdir)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
			}
			wantPipelineError(t, errs[0], file, tc.line, "", "", "invalid YAML: "+tc.want)
		})
	}
}
