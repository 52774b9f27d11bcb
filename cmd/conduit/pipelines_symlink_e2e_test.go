package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// swapLink points the link name in dir at target the way a deploy does:
// a new link renamed over the old one, in one step.
func swapLink(t *testing.T, dir, target, name string) {
	t.Helper()
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// noDeletion fails when a pipeline was stopped because it was deleted.
func noDeletion(t *testing.T, p *process, ids ...string) {
	t.Helper()
	for _, id := range ids {
		for _, e := range filterEvents(events(t, p, id), "stopped") {
			if e.Reason == "deleted" {
				t.Fatalf("pipeline %s was deleted; output:\n%s", id, p.stderr.String())
			}
		}
	}
}

// A deploy that puts release directories behind a symbolic link
// (`mv pipelines pipelines.rel1 && ln -s pipelines.rel1 pipelines`) while
// conduit runs deletes nothing, and the files behind the link are watched;
// a link pointed at an empty release deletes nothing either - the
// deletion is held and reported, also after SIGHUP - and pointing it back
// resumes; a start with the link reads the release it points to.
func TestADeployBehindASymlinkDeletesNothing(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 500))
	out := filepath.Join(w.dir, "out.jsonl")
	p := w.start("run")
	waitForRecords(t, p, out, 50)

	// The directory moved aside and a link put in its place.
	rel1 := filepath.Join(w.dir, "pipelines.rel1")
	if err := os.Rename(filepath.Join(w.dir, "pipelines"), rel1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipelines.rel1", filepath.Join(w.dir, "pipelines")); err != nil {
		t.Fatal(err)
	}
	n := len(ids(t, out))
	waitForRecords(t, p, out, n+100)
	noDeletion(t, p, "seq")
	waitForLog(t, p, "watching the pipelines directory where its link points now")
	// A file added behind the link is seen.
	w.write("pipelines.rel1/q.yml", strings.NewReplacer("id: seq", "id: q", "./out.jsonl", "./q.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	waitForRecords(t, p, filepath.Join(w.dir, "q.jsonl"), 20)
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+50)
	noDeletion(t, p, "seq", "q")

	// The link pointed at a release with no pipeline files: held.
	if err := os.Mkdir(filepath.Join(w.dir, "pipelines.rel2"), 0o755); err != nil {
		t.Fatal(err)
	}
	swapLink(t, w.dir, "pipelines.rel2", "pipelines")
	waitForLog(t, p, "pipelines not deleted: the pipeline files define none any more")
	address := apiAddress(t, p)
	list := w.mustPipelines(address, "list")
	if !strings.Contains(list, "pipelines.allow-delete-all") {
		t.Errorf("the list does not report the held deletion:\n%s", list)
	}
	if rows := tableRows(list); rows["seq"] == nil || rows["q"] == nil {
		t.Errorf("the list lost a pipeline: %v", rows)
	}
	held := strings.Count(p.stderr.String(), "pipelines not deleted")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, pollInterval, func() bool { return strings.Count(p.stderr.String(), "pipelines not deleted") > held },
		func() string { return "SIGHUP did not report the held deletion again:\n" + p.stderr.String() })
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+50)
	noDeletion(t, p, "seq", "q")

	// Pointed back: nothing to do, and the files are watched again.
	swapLink(t, w.dir, "pipelines.rel1", "pipelines")
	w.write("pipelines.rel1/r.yml", strings.NewReplacer("id: seq", "id: r", "./out.jsonl", "./r.jsonl").Replace(fmt.Sprintf(generatorToFile, 500)))
	waitForRecords(t, p, filepath.Join(w.dir, "r.jsonl"), 20)
	noDeletion(t, p, "seq", "q")
	stopProcess(t, p)

	// A start through the link reads the release it points to.
	p = w.start("run")
	n = len(ids(t, out))
	waitForRecords(t, p, out, n+50)
	if strings.Contains(p.stderr.String(), "in no pipeline file any more") {
		t.Fatalf("a start through the link deleted pipelines:\n%s", p.stderr.String())
	}
	stopProcess(t, p)
	checkSequence(t, ids(t, out), 0)
}
