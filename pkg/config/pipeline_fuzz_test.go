package config

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzLoadPipelines feeds arbitrary files to the pipeline loader: what
// LoadPipelines does with each file it has read (the reading is left out
// to keep the fuzzer fast). Whatever the input, the loader must return,
// with every problem located in the file, and its work must stay bounded:
// it may allocate a fixed amount plus a multiple of the input, never what
// the input's aliases would expand to. The bound is on bytes allocated,
// not on time, so a slow machine cannot make it fail.
func FuzzLoadPipelines(f *testing.F) {
	fuzzEnv := func(name string) (string, bool) { return "value", name == "SET" }
	for _, name := range []string{
		filepath.Join("testdata", "valid", "example.yml"),
		filepath.Join("testdata", "aliases", "good.yml"),
		filepath.Join("testdata", "aliases", "self-reference.yml"),
		filepath.Join("testdata", "aliases", "billion-laughs.yml"),
		filepath.Join("testdata", "bad", "invalid-yaml.yml"),
	} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("settings: &s {rate: 1, nested: *s}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("version: 2.2\npipelines:\n  - {id: a, connectors: [{id: s, type: source, plugin: x, settings: {a: &v '$SET${UNSET}$$', b: *v}}, {id: d, type: destination, plugin: y, settings: {path: ${UNSET}/x}}]}\n"))
	f.Add([]byte("k: &k kkkkkkkk\nl1: &l1 {*k: x}\nl2: &l2 {*k: *l1, x: *l1}\nl3: {*k: *l2, y: *l2}\n"))
	f.Add([]byte("version: 2.2\npipelines:\n  - &p {id: a, connectors: [{id: s, type: source, plugin: x, settings: {a: {b: 1}}}, {id: d, type: destination, plugin: y}]}\n  - *p\n  - *p\n"))

	const (
		fixedAlloc   = 32 << 20
		allocPerByte = 1 << 10
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "p.yml"
		var (
			results []parsed
			ms      runtime.MemStats
		)
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		results = parsePipelineFile(file, data, fuzzEnv)
		runtime.ReadMemStats(&ms)
		if n, limit := ms.TotalAlloc-before, uint64(fixedAlloc+allocPerByte*len(data)); n > limit {
			t.Errorf("loading %d bytes allocated %d bytes, want at most %d", len(data), n, limit)
		}
		settings := 0
		for _, r := range results {
			if r.err != nil {
				if r.err.File != file || r.err.Err == nil {
					t.Errorf("error %v is not about %s", r.err, file)
				}
				continue
			}
			p := r.p
			if p.File != file || p.ID == "" {
				t.Errorf("pipeline %+v has no id or the wrong file", p)
			}
			for _, c := range p.Connectors {
				settings += len(c.Settings)
			}
			for _, pr := range p.Processors {
				settings += len(pr.Settings)
			}
		}
		// Every setting is a value written in the file or added by an alias.
		if limit := len(data) + maxAliasValues; settings > limit {
			t.Errorf("%d settings from %d bytes, want at most %d", settings, len(data), limit)
		}
	})
}
