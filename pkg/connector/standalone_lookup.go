package connector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"
)

// Conduit finds a standalone connector by the name in its specification,
// not by its file name: users drop conduit-connector-kafka in the
// connectors directory and name it standalone:kafka. The runtime looks for
// a file of the reference's name first (how plugins of pkg/sdk are
// found), and otherwise asks each executable in connectors.path for its
// specification, the way a connector built with Conduit's SDK prints it
// (`<executable> specs`). Answers are cached per file, until the file
// changes.
//
// Connectors built with Conduit's SDK before v0.13 have no `specs`
// command: asked so, they start as plugins and fail for want of their
// environment. Those that speak version 2 of Conduit's connector protocol
// (SDK v0.10 to v0.12) are then started as a plugin and asked for their
// specification over the protocol, as Conduit asks every connector. Those
// of older SDKs (version 1 of the protocol) cannot be run here; a lookup
// that finds no connector names them, with the SDK version to rebuild
// with.

// SpecProbeTimeout bounds `<executable> specs`, the question that finds a
// connector of Conduit's SDK by its specification's name (and
// connectors.start-timeout, when that is shorter). Such a connector prints
// its specification and exits at once; an executable that does not answer
// in time is killed - its process group and every process below it - and
// named in the pipeline's error if no other executable has the name.
const SpecProbeTimeout = 5 * time.Second

// specProbeWaitDelay is how long a probe's output may stay open after the
// probe was killed or exited (a process it left holds the pipe): then the
// pipe is closed, so nothing waits on what the probe left.
const specProbeWaitDelay = time.Second

// specCache remembers the specification names of the executables in the
// connectors directory.
type specCache struct {
	mu      sync.Mutex
	entries map[string]specEntry // by absolute path
}

type specEntry struct {
	size    int64
	modTime time.Time
	name    string // "" when the file is not a connector of Conduit's SDK
	version string // the version in its specification
	// silent: the executable did not answer in time; it is not asked
	// again until the file changes.
	silent bool
	// oldProtocol is the version of Conduit's connector protocol the
	// executable spoke when it is older than the runtime's, else 0.
	oldProtocol int
}

// specProbeTimeout is the time an executable has to print its
// specification.
func (h *StandaloneHost) specProbeTimeout() time.Duration {
	return min(SpecProbeTimeout, h.cfg.StartTimeout)
}

// findByConduitName returns the executable in the host's directory whose
// Conduit specification is named name, "" when none is, and the
// executables that did not answer in time. version chooses among
// executables of the name as Conduit chooses: "" and "latest" take the
// highest version (semantic versions above others), any other version
// the executable of that version - or the only one of the name, whatever
// its version (Conduit would refuse it).
func (h *StandaloneHost) findByConduitName(ctx context.Context, name, version string) (found string, silent []string, err error) {
	matches, silent, old, err := h.conduitMatches(ctx, name)
	if err != nil {
		return "", nil, err
	}
	if len(matches) == 0 {
		if len(old) > 0 {
			verb := "speaks"
			if len(old) > 1 {
				verb = "speak"
			}
			return "", silent, fmt.Errorf("no executable in connectors.path (%s) is a Conduit connector named %q; "+
				"%s %s version 1 of Conduit's connector protocol (built with Conduit's connector SDK before v0.10), "+
				"which this runtime can neither ask for its name nor run: rebuild with the SDK v0.10 or later",
				h.cfg.Dir, name, strings.Join(old, ", "), verb)
		}
		return "", silent, nil
	}
	var chosen []specMatch
	if version == "" || version == versionLatest {
		for _, m := range matches {
			switch {
			case len(chosen) == 0 || versionGreater(m.version, chosen[0].version):
				chosen = []specMatch{m}
			case m.version == chosen[0].version:
				chosen = append(chosen, m)
			}
		}
	} else {
		for _, m := range matches {
			if m.version == version {
				chosen = append(chosen, m)
			}
		}
		if len(chosen) == 0 && len(matches) == 1 {
			// The only connector of the name runs whatever its version:
			// connectors built from source often say "(devel)", and the
			// version was not checked before.
			chosen = matches
		}
		if len(chosen) == 0 {
			versions := make([]string, len(matches))
			for i, m := range matches {
				versions[i] = m.version + " (" + m.path + ")"
			}
			slices.Sort(versions)
			return "", silent, fmt.Errorf("no Conduit connector named %q in connectors.path (%s) has version %s; it has %s (leave the version out, or write @latest, for the highest)",
				name, h.cfg.Dir, version, strings.Join(versions, ", "))
		}
	}
	if len(chosen) == 1 {
		return chosen[0].path, silent, nil
	}
	paths := make([]string, len(chosen))
	for i, m := range chosen {
		paths[i] = m.path
	}
	slices.Sort(paths)
	return "", silent, fmt.Errorf("%d executables in connectors.path (%s) are Conduit connectors named %q of version %q: %s; keep one",
		len(chosen), h.cfg.Dir, name, chosen[0].version, strings.Join(paths, ", "))
}

// versionLatest asks for the highest version of a plugin.
const versionLatest = "latest"

// specMatch is an executable whose specification has the name looked for.
type specMatch struct{ path, version string }

// versionGreater orders plugin versions as Conduit does: semantic versions
// by their order and above any other, other versions by their text.
func versionGreater(a, b string) bool {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	switch {
	case errA != nil && errB != nil:
		return a > b
	case errB != nil:
		return true
	case errA != nil:
		return false
	}
	return va.GreaterThan(vb)
}

// conduitMatches returns the executables in the host's directory whose
// Conduit specification is named name, those that did not answer in time,
// and those of an older version of Conduit's protocol, which cannot tell.
func (h *StandaloneHost) conduitMatches(ctx context.Context, name string) (matches []specMatch, silent, old []string, err error) {
	entries, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, nil
		}
		return nil, nil, nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		path, err := filepath.Abs(filepath.Join(h.cfg.Dir, e.Name()))
		if err != nil {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		entry, err := h.conduitName(ctx, path, fi)
		switch {
		case err != nil:
			return nil, nil, nil, err
		case entry.silent:
			silent = append(silent, path)
		case entry.oldProtocol != 0:
			old = append(old, path)
		case entry.name == name:
			matches = append(matches, specMatch{path: path, version: entry.version})
		}
	}
	return matches, silent, old, nil
}

// has reports whether the host has a standalone connector of name: an
// executable of that file name in its directory, or one (or several,
// which running it then reports) whose Conduit specification has that
// name. Executables that cannot be asked, or do not answer, count as not
// having it.
func (h *StandaloneHost) has(ctx context.Context, name string) bool {
	if checkStandaloneName(name) != nil {
		return false
	}
	if fi, err := os.Stat(filepath.Join(h.cfg.Dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return true
	}
	matches, _, _, err := h.conduitMatches(ctx, name)
	return err == nil && len(matches) > 0
}

// conduitName is what the executable at path said of its specification,
// from the cache or by running it. The error is ctx's, when it ended
// first.
func (h *StandaloneHost) conduitName(ctx context.Context, path string, fi fs.FileInfo) (specEntry, error) {
	h.specs.mu.Lock()
	if e, ok := h.specs.entries[path]; ok && e.size == fi.Size() && e.modTime.Equal(fi.ModTime()) {
		h.specs.mu.Unlock()
		return e, nil
	}
	h.specs.mu.Unlock()
	name, version, err := readConduitSpecName(ctx, path, h.specProbeTimeout())
	var oldProtocol int
	if err == nil && name == "" {
		name, version, oldProtocol, err = h.specifyOverProtocol(ctx, path)
	}
	if err != nil && ctx.Err() != nil {
		return specEntry{}, err
	}
	entry := specEntry{size: fi.Size(), modTime: fi.ModTime(), name: name, version: version, silent: err != nil, oldProtocol: oldProtocol}
	h.specs.mu.Lock()
	defer h.specs.mu.Unlock()
	if h.specs.entries == nil {
		h.specs.entries = map[string]specEntry{}
	}
	h.specs.entries[path] = entry
	return entry, nil
}

// errNoSpecAnswer: the executable did not print its specification in time.
var errNoSpecAnswer = errors.New("no specification in time")

// readConduitSpecName runs `path specs` and reads the name from the YAML
// specification a connector of Conduit's SDK prints; "" for anything else.
// An executable that does not answer within timeout is killed with every
// process it started, and the error is errNoSpecAnswer (ctx's error when
// ctx ended first); nothing it leaves running keeps the call waiting.
func readConduitSpecName(ctx context.Context, path string, timeout time.Duration) (name, version string, err error) {
	probeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(probeCtx, path, "specs")
	cmd.Env = pluginEnv(os.Environ(), "")
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &out, max: 1 << 20}
	setProcessGroup(cmd)
	cmd.Cancel = func() error {
		// Found while the probe runs: its children still link to it.
		tree := findDescendants(cmd.Process.Pid)
		err := kill(cmd.Process)
		tree.kill()
		return err
	}
	cmd.WaitDelay = specProbeWaitDelay
	err = cmd.Run()
	if cmd.Process != nil {
		// The rest of its process group, if it left any: a probe has
		// nothing to leave running.
		_ = kill(cmd.Process)
	}
	switch {
	case ctx.Err() != nil:
		return "", "", ctx.Err()
	case probeCtx.Err() != nil:
		return "", "", errNoSpecAnswer
	case err != nil:
		return "", "", nil
	}
	var spec struct {
		Specification struct {
			Name    string `yaml:"name"`
			Version string `yaml:"version"`
		} `yaml:"specification"`
	}
	if yaml.Unmarshal(out.Bytes(), &spec) != nil {
		return "", "", nil
	}
	return spec.Specification.Name, spec.Specification.Version, nil
}

// specifyOverProtocol starts the executable at path as a plugin, with
// the environment of both protocols, and asks a plugin of Conduit's
// protocol for its specification's name; "" for a plugin of pkg/sdk and
// for an executable that is no plugin; and its version. oldProtocol is the version of
// Conduit's protocol a plugin spoke that the runtime does not. An
// executable that does not answer within the probe's time is stopped and
// the error is errNoSpecAnswer (ctx's error when ctx ended first).
func (h *StandaloneHost) specifyOverProtocol(ctx context.Context, path string) (name, version string, oldProtocol int, err error) {
	probeCtx, cancel := context.WithTimeout(ctx, h.specProbeTimeout())
	defer cancel()
	p := newPluginProcess(h, filepath.Base(path), roleDestination, Config{PipelineID: "conduit", ConnectorID: "specification"})
	p.path = path
	defer p.stop(0)
	if err := p.start(probeCtx); err != nil {
		var pv *protocolVersionError
		switch {
		case ctx.Err() != nil:
			return "", "", 0, ctx.Err()
		case errors.As(err, &pv):
			return "", "", pv.version, nil
		case probeCtx.Err() != nil:
			return "", "", 0, errNoSpecAnswer
		}
		return "", "", 0, nil
	}
	if p.conduit == nil {
		return "", "", 0, nil
	}
	spec := p.specify(probeCtx)
	if probeCtx.Err() != nil && ctx.Err() == nil && spec.Name == "" {
		return "", "", 0, errNoSpecAnswer
	}
	return spec.Name, spec.Version, 0, ctx.Err()
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
