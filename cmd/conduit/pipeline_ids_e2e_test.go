package main

import (
	"fmt"
	"strings"
	"testing"
)

// Pipeline ids that Conduit refuses, or that cannot be addressed in an API
// path, are refused in pipeline files and through the API, with the file
// and line.
func TestPipelineIDsAreRestricted(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 100))
	w.write("pipelines/slash.yml", strings.NewReplacer("id: seq", "id: a/b", "./out.jsonl", "./slash.jsonl").Replace(fmt.Sprintf(generatorToFile, 100)))
	w.write("dotdot.yml", strings.NewReplacer("id: seq", `id: ".."`, "./out.jsonl", "./dotdot.jsonl").Replace(fmt.Sprintf(generatorToFile, 100)))
	w.write("long.yml", strings.NewReplacer("id: seq", "id: "+strings.Repeat("x", 300), "./out.jsonl", "./long.jsonl").Replace(fmt.Sprintf(generatorToFile, 100)))
	p := w.start("run")
	address := apiAddress(t, p)
	waitForLog(t, p, `pipelines/slash.yml:3: pipeline \"a/b\": id: \"a/b\" holds '/'`)

	for file, want := range map[string]string{
		"dotdot.yml": `api:dotdot.yml:3: pipeline ".." id: ".." cannot be a pipeline id`,
		"long.yml":   "is 300 characters long; a pipeline id has at most 128",
	} {
		res := w.pipelines(address, "apply", file)
		if res.code == 0 {
			t.Errorf("apply %s: accepted:\n%s%s", file, res.stdout, res.stderr)
		}
		out := strings.ReplaceAll(res.stdout+res.stderr, ":", "")
		if !strings.Contains(out, strings.ReplaceAll(want, ":", "")) {
			t.Errorf("apply %s does not say %q:\n%s%s", file, want, res.stdout, res.stderr)
		}
	}
	// Only seq runs; the others are listed as invalid, if at all.
	for id, row := range tableRows(w.mustPipelines(address, "list")) {
		if id != "seq" && (len(row) < 2 || row[1] != "invalid") {
			t.Errorf("pipeline %.40q is listed as %.80q, want invalid", id, row)
		}
	}
	stopProcess(t, p)
}
