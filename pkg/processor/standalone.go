package processor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/conduitio/conduit-commons/config"
	sdk "github.com/conduitio/conduit-processor-sdk"
	processorv1 "github.com/conduitio/conduit-processor-sdk/proto/processor/v1"
	conduitplugin "github.com/conduitio/conduit/pkg/plugin"
	"github.com/dustin/go-humanize"
	"github.com/tetratelabs/wazero"
	"go.uber.org/zap"
)

// Standalone processors are WebAssembly modules built with Conduit's
// processor SDK (GOOS=wasip1 GOARCH=wasm), found in processors.path and run
// with wazero, as under Conduit (see standalone_runtime.go for the
// protocol). NewStandalone compiles every module in the directory once, at
// startup, keeping the compiled code in a cache on disk so that the next
// start does not compile again; each processor of a pipeline run gets an
// instance of its own, made on its first record and closed when the run
// ends.

// DefaultStandaloneMemoryLimit is the linear memory an instance of a
// standalone processor may use unless StandaloneConfig says otherwise
// (processors.memory-limit).
const DefaultStandaloneMemoryLimit = 1 << 30

// maxWasmMemory is what a 32-bit WebAssembly module can address.
const maxWasmMemory = 4 << 30

// standaloneSpecTimeout bounds a module's answer to the question for its
// specification, at startup.
const standaloneSpecTimeout = 10 * time.Second

// standaloneCloseTimeout bounds the teardown of one instance; a module
// that does not exit by then is stopped.
const standaloneCloseTimeout = 5 * time.Second

// StandaloneConfig says where the standalone processors are and how they
// run.
type StandaloneConfig struct {
	// Dir is processors.path. A directory that does not exist has no
	// processors.
	Dir string
	// MemoryLimit is the most linear memory, in bytes, one instance may
	// use; 0 means DefaultStandaloneMemoryLimit. A module that needs more
	// runs out of memory, which ends its run (see EndRun).
	MemoryLimit uint64
	// CacheDir keeps compiled modules between starts; "" means
	// DefaultStandaloneCacheDir, "-" no cache.
	CacheDir string
	// Logger receives what was found, the files that could not be loaded
	// and what the modules log. Nil: nothing is logged.
	Logger *zap.Logger
}

// DefaultStandaloneCacheDir is where compiled modules are kept unless
// StandaloneConfig says otherwise: conduit/wasm in the user's cache
// directory ($XDG_CACHE_HOME or ~/.cache on Linux); "" when there is none.
func DefaultStandaloneCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "conduit", "wasm")
}

// Standalone holds the standalone processors found in a directory. It is
// immutable once built and safe for concurrent use. A Registry resolves
// references to them when built WithStandalone.
type Standalone struct {
	cfg StandaloneConfig
	log *zap.Logger
	rt  *wasmRuntime
	// byName holds the processors by specification name.
	byName map[string][]standaloneEntry
	// byFile maps a module's file name without .wasm to its
	// specification name, for references by file name.
	byFile map[string]string
	// failed names the files that could not be loaded and why, for the
	// error of a reference that finds nothing.
	failed []string
	// instances counts the instances made, for their unique names.
	instances atomic.Uint64
}

// standaloneEntry is one module found.
type standaloneEntry struct {
	path     string
	spec     sdk.Specification
	compiled wazero.CompiledModule
}

// NewStandalone loads every file in cfg.Dir as a standalone processor:
// it compiles the module and asks it for its specification. A file that is
// not such a module is logged, naming the file and the reason, and skipped;
// it fails no pipeline but one that names it. Only an error of the
// WebAssembly runtime itself is returned.
func NewStandalone(ctx context.Context, cfg StandaloneConfig) (*Standalone, error) {
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = DefaultStandaloneMemoryLimit
	}
	cfg.MemoryLimit = min(cfg.MemoryLimit, maxWasmMemory)
	s := &Standalone{cfg: cfg, log: cfg.Logger, byName: map[string][]standaloneEntry{}, byFile: map[string]string{}}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if cfg.Dir == "" {
		return s, nil
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("no standalone processors: processors.path does not exist", zap.String("path", cfg.Dir))
			return s, nil
		}
		s.log.Warn("standalone processors: cannot read processors.path", zap.String("path", cfg.Dir), zap.Error(err))
		return s, nil
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if s.rt == nil {
			// Made only when there is something to load: the runtime
			// lives as long as the process.
			rt, err := newWasmRuntime(ctx, s.cache())
			if err != nil {
				return nil, fmt.Errorf("standalone processors: %w", err)
			}
			s.rt = rt
		}
		s.load(ctx, filepath.Join(cfg.Dir, e.Name()))
	}
	names := make([]string, 0, len(s.byName))
	for name, es := range s.byName {
		for _, e := range es {
			names = append(names, name+"@"+e.spec.Version)
		}
	}
	slices.Sort(names)
	s.log.Info("standalone processors loaded", zap.String("path", cfg.Dir), zap.Strings("processors", names), zap.Int("failed", len(s.failed)))
	return s, nil
}

// cache returns the compilation cache, nil when there is none or it
// cannot be used (compiling each time is slower, not wrong).
func (s *Standalone) cache() wazero.CompilationCache {
	dir := s.cfg.CacheDir
	switch dir {
	case "-":
		return nil
	case "":
		dir = DefaultStandaloneCacheDir()
		if dir == "" {
			return nil
		}
	}
	if err := privateCacheDir(dir); err != nil {
		s.log.Warn("standalone processors: the compilation cache is not private to conduit's user, so it is not used; modules are compiled at every start", zap.String("dir", dir), zap.Error(err))
		return nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		s.log.Warn("standalone processors: no compilation cache; modules are compiled at every start", zap.String("dir", dir), zap.Error(err))
		return nil
	}
	return c
}

// load compiles the module at path and asks it for its specification; a
// failure is logged and remembered.
func (s *Standalone) load(ctx context.Context, path string) {
	fail := func(err error) {
		s.log.Warn("not a standalone processor; skipped", zap.String("file", path), zap.Error(err))
		s.failed = append(s.failed, fmt.Sprintf("%s (%v)", filepath.Base(path), err))
	}
	fi, err := os.Stat(path)
	if err != nil {
		fail(err)
		return
	}
	if !fi.Mode().IsRegular() {
		fail(errors.New("not a regular file"))
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fail(err)
		return
	}
	start := time.Now()
	compiled, err := s.rt.rt.CompileModule(ctx, b)
	if err != nil {
		fail(fmt.Errorf("not a WebAssembly module: %w", err))
		return
	}
	spec, err := s.specify(compiled, path)
	if err != nil {
		_ = compiled.Close(ctx)
		fail(err)
		return
	}
	if spec.Name == "" {
		_ = compiled.Close(ctx)
		fail(errors.New("its specification has no name"))
		return
	}
	for _, other := range s.byName[spec.Name] {
		if other.spec.Version == spec.Version {
			_ = compiled.Close(ctx)
			fail(fmt.Errorf("%s@%s is also %s; keep one", spec.Name, spec.Version, filepath.Base(other.path)))
			return
		}
	}
	name := spec.Name
	s.byName[name] = append(s.byName[name], standaloneEntry{path: path, spec: spec, compiled: compiled})
	base := strings.TrimSuffix(filepath.Base(path), ".wasm")
	if _, ok := s.byFile[base]; !ok {
		s.byFile[base] = name
	}
	s.log.Info("standalone processor found", zap.String("file", path), zap.String("name", name),
		zap.String("version", spec.Version), zap.Duration("loaded_in", time.Since(start)))
}

// specify runs the module and asks it for its specification.
func (s *Standalone) specify(compiled wazero.CompiledModule, path string) (sdk.Specification, error) {
	out := newModuleOutput(s.log.With(zap.String("file", path)))
	inst, err := s.rt.start(compiled, s.newID("specify"), s.cfg.MemoryLimit, out)
	if err != nil {
		return sdk.Specification{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), standaloneSpecTimeout)
	defer cancel()
	resp, err := inst.call(ctx, &processorv1.CommandRequest{Request: &processorv1.CommandRequest_Specify{Specify: &processorv1.Specify_Request{}}})
	if err != nil {
		inst.kill()
		out.flush()
		out.trace()
		switch {
		case errors.Is(err, errModuleStopped):
			return sdk.Specification{}, fmt.Errorf("it stopped when asked for its specification (is it built with Conduit's processor SDK?): %s",
				stopReason(inst, out, s.cfg.MemoryLimit))
		case ctx.Err() != nil:
			return sdk.Specification{}, fmt.Errorf("it did not answer with its specification within %s", standaloneSpecTimeout)
		}
		return sdk.Specification{}, fmt.Errorf("specification: %w", err)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), standaloneCloseTimeout)
	defer cancelClose()
	inst.close(closeCtx)
	sp := resp.GetSpecify()
	if sp == nil {
		return sdk.Specification{}, fmt.Errorf("it answered the question for its specification with %T", resp.Response)
	}
	params := make(config.Parameters, len(sp.Parameters))
	if err := params.FromProto(sp.Parameters); err != nil {
		return sdk.Specification{}, fmt.Errorf("its specification's parameters: %w", err)
	}
	return sdk.Specification{Name: sp.Name, Summary: sp.Summary, Description: sp.Description,
		Version: sp.Version, Author: sp.Author, Parameters: params}, nil
}

// newID returns a name for a new instance, unique in the runtime (wazero
// refuses two modules of one name).
func (s *Standalone) newID(base string) string {
	return fmt.Sprintf("%s#%d", base, s.instances.Add(1))
}

// has reports whether a standalone processor has the name, as its
// specification's name or its file's.
func (s *Standalone) has(name string) bool {
	_, ok := s.byName[name]
	_, byFile := s.byFile[name]
	return ok || byFile
}

// find returns the processor of the name and version, as Conduit chooses:
// "" and "latest" take the highest version.
func (s *Standalone) find(name, version string) (standaloneEntry, error) {
	es, ok := s.byName[name]
	if !ok {
		if n, byFile := s.byFile[name]; byFile {
			es = s.byName[n]
		}
	}
	if len(es) == 0 {
		var known []string
		for n := range s.byName {
			known = append(known, "standalone:"+n)
		}
		slices.Sort(known)
		msg := fmt.Sprintf("no standalone processor named %q in processors.path (%s)", name, s.cfg.Dir)
		if len(known) > 0 {
			msg += "; it has " + strings.Join(known, ", ")
		}
		if len(s.failed) > 0 {
			msg += "; these files could not be loaded: " + strings.Join(s.failed, "; ")
		}
		return standaloneEntry{}, errors.New(msg)
	}
	if version == "" || version == conduitplugin.PluginVersionLatest {
		best := es[0]
		for _, e := range es[1:] {
			if fullName(e).PluginVersionGreaterThan(fullName(best)) {
				best = e
			}
		}
		return best, nil
	}
	versions := make([]string, 0, len(es))
	for _, e := range es {
		if e.spec.Version == version {
			return e, nil
		}
		versions = append(versions, e.spec.Version)
	}
	slices.Sort(versions)
	return standaloneEntry{}, fmt.Errorf("standalone processor %q has no version %s in processors.path (%s); it has %s (leave the version out, or write @latest, for the highest)",
		name, version, s.cfg.Dir, strings.Join(versions, ", "))
}

func fullName(e standaloneEntry) conduitplugin.FullName {
	return conduitplugin.NewFullName(conduitplugin.PluginTypeStandalone, e.spec.Name, e.spec.Version)
}

// plugin returns the Plugin that builds processors of entry e.
func (s *Standalone) plugin(e standaloneEntry) Plugin {
	return Plugin{Name: e.spec.Name, New: func(cfg Config) (Processor, error) {
		return s.newProcessor(e, cfg)
	}}
}

// newProcessor checks cfg's settings against the processor's specification
// and returns a processor whose instance is made on its first record: New
// must not do I/O, and an instance holds a goroutine and the module's
// memory until it is closed.
func (s *Standalone) newProcessor(e standaloneEntry, cfg Config) (*wasmProcessor, error) {
	settings, err := conduitSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	checked := settings.Sanitize().ApplyDefaults(e.spec.Parameters)
	if err := checked.Validate(e.spec.Parameters); err != nil {
		return nil, conduitSettingError(e.spec.Parameters, err)
	}
	// Records are decoded by their source here, and there is no schema
	// registry: the SDK's schema middleware in the module has nothing to do.
	for _, k := range []string{"sdk.schema.decode.key.enabled", "sdk.schema.decode.payload.enabled",
		"sdk.schema.encode.key.enabled", "sdk.schema.encode.payload.enabled"} {
		if _, ok := e.spec.Parameters[k]; ok {
			settings[k] = "false"
		}
	}
	lg := cfg.Logger
	if lg == nil {
		lg = s.log
	}
	base := cfg.PipelineID + ":" + cfg.ProcessorID
	if base == ":" {
		base = e.spec.Name
	}
	return &wasmProcessor{s: s, entry: e, name: "standalone:" + e.spec.Name + "@" + e.spec.Version,
		base: base, settings: settings, log: lg}, nil
}

// boundedMemory is the linear memory of an instance, which refuses to grow
// past limit: the module then fails to allocate (a Go module dies with
// "fatal error: out of memory") instead of taking the host's memory.
type boundedMemory struct {
	buf   []byte
	limit uint64
	hit   *atomic.Bool
}

func (m *boundedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.hit.Store(true)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Grow by half again, as append would, to keep reallocations few.
	grown := make([]byte, size, min(max(size, uint64(cap(m.buf))*3/2), m.limit))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

func (m *boundedMemory) Free() { m.buf = nil }

// limitText says a memory limit for people.
func limitText(n uint64) string { return humanize.IBytes(n) }
