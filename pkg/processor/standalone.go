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
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit-processor-sdk/pprocutils"
	"github.com/conduitio/conduit/pkg/foundation/log"
	conduitplugin "github.com/conduitio/conduit/pkg/plugin"
	"github.com/conduitio/conduit/pkg/plugin/processor/standalone"
	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero/experimental"
	"go.uber.org/zap"
)

// Standalone processors are WebAssembly modules built with Conduit's
// processor SDK (GOOS=wasip1 GOARCH=wasm), found in processors.path and run
// by Conduit's own standalone processor runtime (wazero), as under Conduit.
// NewStandalone compiles every module in the directory once, at startup;
// each processor of a pipeline run gets an instance of its own, created on
// its first record and closed when the run ends.

// DefaultStandaloneMemoryLimit is the linear memory an instance of a
// standalone processor may use unless StandaloneConfig says otherwise
// (processors.memory-limit).
const DefaultStandaloneMemoryLimit = 1 << 30

// maxWasmMemory is what a 32-bit WebAssembly module can address.
const maxWasmMemory = 4 << 30

// standaloneLoadTimeout bounds the load of one module at startup: its
// compilation and its answer to the question for its specification.
const standaloneLoadTimeout = time.Minute

// standaloneCloseTimeout bounds the teardown of one instance.
const standaloneCloseTimeout = 5 * time.Second

// StandaloneConfig says where the standalone processors are and what an
// instance may use.
type StandaloneConfig struct {
	// Dir is processors.path. A directory that does not exist has no
	// processors.
	Dir string
	// MemoryLimit is the most linear memory, in bytes, one instance may
	// use; 0 means DefaultStandaloneMemoryLimit. A module that needs more
	// runs out of memory, which ends its run (see Process).
	MemoryLimit uint64
	// Logger receives what was found, the files that could not be loaded
	// and what the modules log. Nil: nothing is logged.
	Logger *zap.Logger
}

// Standalone holds the standalone processors found in a directory. It is
// immutable once built and safe for concurrent use. A Registry resolves
// references to them when built WithStandalone.
type Standalone struct {
	cfg StandaloneConfig
	log *zap.Logger
	reg *standalone.Registry
	// byName holds the processors by specification name.
	byName map[string][]standaloneEntry
	// byFile maps a module's file name without .wasm to its
	// specification name, for references by file name.
	byFile map[string]string
	// failed names the files that could not be loaded and why, for the
	// error of a reference that finds nothing.
	failed []string

	// muted drops the runtime's log lines while it is made.
	muted atomic.Bool
	// instances counts the instances made, for their unique names.
	instances atomic.Uint64
	// outputs holds, by instance id, what each running instance printed
	// last, for the error that says why it stopped.
	outputs sync.Map // string -> *moduleOutput
}

// standaloneEntry is one module found.
type standaloneEntry struct {
	path string
	spec sdk.Specification
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
		if s.reg == nil {
			// Made only when there is something to load: the runtime
			// lives as long as the process.
			quietSDKLogs()
			// Conduit's runtime logs through zerolog: its lines reach
			// conduit's log through moduleLog, which also keeps each
			// instance's last output.
			zl := zerolog.New(&moduleLog{s: s}).Level(zerolog.InfoLevel)
			// Conduit's registry only takes Register calls once it has
			// read a directory, and says so in its log: it is given one it
			// cannot read, and its log is muted meanwhile. Files are
			// loaded by load, which says which failed and why.
			s.muted.Store(true)
			reg, err := standalone.NewRegistry(log.New(zl), os.DevNull, noSchemas{})
			s.muted.Store(false)
			if err != nil {
				return nil, fmt.Errorf("standalone processors: %w", err)
			}
			s.reg = reg
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

// load compiles the module at path and registers it; a failure is logged
// and remembered.
func (s *Standalone) load(ctx context.Context, path string) {
	fail := func(err error) {
		s.log.Warn("not a standalone processor; skipped", zap.String("file", path), zap.Error(err))
		s.failed = append(s.failed, fmt.Sprintf("%s (%v)", filepath.Base(path), err))
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = errors.New("not a regular file")
		}
		fail(err)
		return
	}
	// Conduit's registry names the instance it asks for the
	// specification so; files are loaded one after the other.
	const id = "init-processor"
	out := s.watch(id, s.log)
	defer s.outputs.Delete(id)
	lctx, cancel := context.WithTimeout(ctx, standaloneLoadTimeout)
	defer cancel()
	start := time.Now()
	full, err := s.reg.Register(s.instanceContext(lctx, out), path)
	if err != nil {
		if msg := out.summary(); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		fail(err)
		return
	}
	name := full.PluginName()
	var spec sdk.Specification
	for fn, sp := range s.reg.List() {
		if fn == full {
			spec = sp
		}
	}
	s.byName[name] = append(s.byName[name], standaloneEntry{path: path, spec: spec})
	base := strings.TrimSuffix(filepath.Base(path), ".wasm")
	if _, ok := s.byFile[base]; !ok {
		s.byFile[base] = name
	}
	s.log.Info("standalone processor found", zap.String("file", path), zap.String("name", name),
		zap.String("version", spec.Version), zap.Duration("compiled_in", time.Since(start)))
}

// newID returns a name for a new instance, unique in the runtime (wazero
// refuses two modules of one name).
func (s *Standalone) newID(base string) string {
	return fmt.Sprintf("%s#%d", base, s.instances.Add(1))
}

// watch starts keeping what instance id prints; its lines go to lg.
func (s *Standalone) watch(id string, lg *zap.Logger) *moduleOutput {
	o := &moduleOutput{log: lg}
	s.outputs.Store(id, o)
	return o
}

// instanceContext is the context an instance is made with: it carries the
// allocator that bounds the instance's memory, and is never cancelled
// (the instance outlives the call that makes it).
func (s *Standalone) instanceContext(ctx context.Context, out *moduleOutput) context.Context {
	limit := s.cfg.MemoryLimit
	return experimental.WithMemoryAllocator(context.WithoutCancel(ctx), experimental.MemoryAllocatorFunc(
		func(capacity, _ uint64) experimental.LinearMemory {
			return &boundedMemory{buf: make([]byte, 0, min(capacity, limit)), limit: limit, hit: &out.outOfMemory}
		}))
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

// noSchemas is the schema service of the modules: there is no schema
// registry here, and the modules' schema middleware is off (see
// newProcessor), so only a module that asks by itself gets here.
type noSchemas struct{}

func (noSchemas) CreateSchema(context.Context, pprocutils.CreateSchemaRequest) (pprocutils.CreateSchemaResponse, error) {
	return pprocutils.CreateSchemaResponse{}, pprocutils.NewError(pprocutils.ErrorCodeInternal, "this runtime has no schema registry")
}

func (noSchemas) GetSchema(context.Context, pprocutils.GetSchemaRequest) (pprocutils.GetSchemaResponse, error) {
	return pprocutils.GetSchemaResponse{}, pprocutils.ErrSubjectNotFound
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
