//go:build linux

package connector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
)

// silentExecutable writes an executable that never answers: it starts a
// child in its process group and one that leaves it (setsid), then sleeps.
// Every process it starts carries marker in its command line.
func silentExecutable(t *testing.T, dir, name string) (marker string) {
	t.Helper()
	marker = fmt.Sprintf("%d.%d", 3000+rand.N(1000), rand.N(1000000))
	script := fmt.Sprintf("#!/bin/sh\nsleep %[1]s &\nsetsid sleep %[1]s &\nexec sleep %[1]s\n", marker)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range markedProcesses(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return marker
}

// markedProcesses are the live processes (zombies left out) whose command
// line contains marker.
func markedProcesses(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), marker) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitForMarked waits until the processes with marker number want.
func waitForMarked(t *testing.T, marker string, want int) {
	t.Helper()
	var got []int
	clocktest.Eventually(t, func() bool { got = markedProcesses(marker); return len(got) == want }, func() string {
		return fmt.Sprintf("%d processes with %q (%v), want %d", len(got), marker, got, want)
	})
}

// An executable in connectors.path that never prints its specification
// does not hang the lookup of a connector by its Conduit name: it is
// killed with everything it started, and the error names it.
func TestStandaloneSpecProbeThatNeverAnswers(t *testing.T) {
	dir := t.TempDir()
	marker := silentExecutable(t, dir, "silent")
	h := newStandaloneHarness(t, StandaloneConfig{Dir: dir, StartTimeout: 300 * time.Millisecond})
	src := h.source("kafka", nil)
	err := wait(t, result(t, func() error { return src.Open(context.Background(), nil) }), "Open")
	if err == nil || cerrors.Classify(err).Class != cerrors.ClassFatal {
		t.Fatalf("Open: %v, want a fatal error", err)
	}
	for _, want := range []string{filepath.Join(dir, "silent"), "specs", "killed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	waitForMarked(t, marker, 0)
	// The answer is remembered: the executable is not started again.
	err = wait(t, result(t, func() error { return h.source("kafka", nil).Open(context.Background(), nil) }), "Open")
	if err == nil || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("second Open: %v", err)
	}
	if pids := markedProcesses(marker); len(pids) != 0 {
		t.Errorf("the silent executable was started again: %v", pids)
	}
}

// A stop (the context of Open ends) does not wait for the probe.
func TestStandaloneSpecProbeEndsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	marker := silentExecutable(t, dir, "silent")
	h := newStandaloneHarness(t, StandaloneConfig{Dir: dir, StartTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := result(t, func() error { return h.source("kafka", nil).Open(ctx, nil) })
	waitForMarked(t, marker, 3)
	cancel()
	err := wait(t, opened, "Open")
	if err == nil || cerrors.Classify(err).Class == cerrors.ClassFatal {
		t.Fatalf("Open: %v, want the context's error, not a fatal one", err)
	}
	waitForMarked(t, marker, 0)
}

// A plugin that never answers the handshake is stopped with every process
// it started, also one that left its process group.
func TestStandaloneStopKillsWhatThePluginStarted(t *testing.T) {
	dir := t.TempDir()
	marker := silentExecutable(t, dir, "silent")
	h := newStandaloneHarness(t, StandaloneConfig{Dir: dir, StartTimeout: 300 * time.Millisecond})
	src := h.source("silent", nil)
	err := wait(t, result(t, func() error { return src.Open(context.Background(), nil) }), "Open")
	if err == nil {
		t.Fatal("Open of a plugin that never answers succeeded")
	}
	waitForMarked(t, marker, 0)
	assertGone(t, src.p)
}
