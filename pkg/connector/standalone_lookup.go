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
}

// findByConduitName returns the executable in the host's directory whose
// Conduit specification is named name; "" when none is.
func (h *StandaloneHost) findByConduitName(ctx context.Context, name string) (string, error) {
	entries, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	var found []string
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
		if h.conduitName(ctx, path, fi) == name {
			found = append(found, path)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	slices.Sort(found)
	return "", fmt.Errorf("%d executables in connectors.path (%s) are Conduit connectors named %q: %s; keep one",
		len(found), h.cfg.Dir, name, strings.Join(found, ", "))
}

// conduitName is the specification name of the executable at path, from
// the cache or by running it.
func (h *StandaloneHost) conduitName(ctx context.Context, path string, fi fs.FileInfo) string {
	h.specs.mu.Lock()
	if e, ok := h.specs.entries[path]; ok && e.size == fi.Size() && e.modTime.Equal(fi.ModTime()) {
		h.specs.mu.Unlock()
		return e.name
	}
	h.specs.mu.Unlock()
	name := readConduitSpecName(ctx, path, h.cfg.StartTimeout)
	h.specs.mu.Lock()
	defer h.specs.mu.Unlock()
	if h.specs.entries == nil {
		h.specs.entries = map[string]specEntry{}
	}
	h.specs.entries[path] = specEntry{size: fi.Size(), modTime: fi.ModTime(), name: name}
	return name
}

// readConduitSpecName runs `path specs` and reads the name from the YAML
// specification a connector of Conduit's SDK prints; "" for anything else.
func readConduitSpecName(ctx context.Context, path string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "specs")
	cmd.Env = pluginEnv(os.Environ(), "")
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &out, max: 1 << 20}
	if err := cmd.Run(); err != nil {
		return ""
	}
	var spec struct {
		Specification struct {
			Name string `yaml:"name"`
		} `yaml:"specification"`
	}
	if yaml.Unmarshal(out.Bytes(), &spec) != nil {
		return ""
	}
	return spec.Specification.Name
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
