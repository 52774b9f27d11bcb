package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
)

// The standalone processor of these tests is testdata/wasmproc, built with
// Conduit's processor SDK for wasip1 once per test run. Compiling it to
// machine code takes tens of seconds, minutes in a test built with -race:
// testdata/wasmcompile, built without -race, compiles it into a cache that
// outlives the run, as conduit's own cache does, and the tests load it
// from there.

// wazeroCacheVersion is the wazero version this test binary files its
// compilation cache under: wazero reads it from the binary's build
// information, which a test binary has without its dependencies, so here
// it is wazero's default, "dev", where wasmcompile (a program) would say
// the module's version. wasmcompile is built with this one, or the cache
// it fills would be another than the one the tests read, and they would
// compile the module again with -race.
func wazeroCacheVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" && dep.Version != "" && dep.Version != "(devel)" {
				return dep.Version
			}
		}
	}
	return "dev"
}

// testMemoryLimit keeps the out-of-memory test small and fast.
const testMemoryLimit = 128 << 20

var wasmTest struct {
	once       sync.Once
	dir        string // processors.path: upper.wasm and bad.wasm
	standalone *Standalone
	logs       *observer.ObservedLogs
	err        error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if wasmTest.dir != "" {
		_ = os.RemoveAll(filepath.Dir(wasmTest.dir))
	}
	os.Exit(code)
}

// BuildWasmProcessor builds testdata/wasmproc as a WebAssembly module at out.
func buildWasmProcessor(out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./testdata/wasmproc")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build ./testdata/wasmproc: %v\n%s", err, b)
	}
	return nil
}

// testStandalone returns the standalone processors of the test run: the
// test processor (upper.wasm) and a file that is not a module (bad.wasm).
func testStandalone(t testing.TB) (*Standalone, *observer.ObservedLogs) {
	t.Helper()
	wasmTest.once.Do(func() {
		tmp, err := os.MkdirTemp("", "conduit-wasm-test-")
		if err != nil {
			wasmTest.err = err
			return
		}
		wasmTest.dir = filepath.Join(tmp, "processors")
		if err := os.Mkdir(wasmTest.dir, 0o755); err != nil {
			wasmTest.err = err
			return
		}
		if err := buildWasmProcessor(filepath.Join(wasmTest.dir, "upper.wasm")); err != nil {
			wasmTest.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(wasmTest.dir, "bad.wasm"), []byte("not a module"), 0o644); err != nil {
			wasmTest.err = err
			return
		}
		cache := filepath.Join(os.TempDir(), "conduit-wasm-test-cache")
		cmd := exec.Command("go", "run", "-ldflags=-X=github.com/tetratelabs/wazero/internal/version.version="+wazeroCacheVersion(),
			"./testdata/wasmcompile", cache, filepath.Join(wasmTest.dir, "upper.wasm"))
		if b, err := cmd.CombinedOutput(); err != nil {
			wasmTest.err = fmt.Errorf("go run ./testdata/wasmcompile: %v\n%s", err, b)
			return
		}
		if dirs, _ := filepath.Glob(filepath.Join(cache, "wazero-"+wazeroCacheVersion()+"-*")); len(dirs) == 0 {
			wasmTest.err = fmt.Errorf("wasmcompile filled no cache for wazero version %q in %s: the tests would compile the module again, with -race (minutes); see wazeroCacheVersion",
				wazeroCacheVersion(), cache)
			return
		}
		core, logs := observer.New(zapcore.DebugLevel)
		wasmTest.logs = logs
		wasmTest.standalone, wasmTest.err = NewStandalone(context.Background(), StandaloneConfig{
			Dir: wasmTest.dir, MemoryLimit: testMemoryLimit, CacheDir: cache, Logger: zap.New(core)})
	})
	if wasmTest.err != nil {
		t.Fatal(wasmTest.err)
	}
	return wasmTest.standalone, wasmTest.logs
}

func upperRecord(key, name string) *record.Record {
	return &record.Record{
		Position:  record.Position("pos-" + key),
		Operation: record.OperationCreate,
		Metadata:  record.Metadata{"table": "users"},
		Key:       record.RawData(key),
		Payload:   record.Change{After: record.StructuredData{"name": name, "age": 30}},
	}
}

// newUpper builds the test processor through a registry, as a pipeline
// names it, and closes it at the end of the test.
func newUpper(t *testing.T, ref string, settings map[string]string) Processor {
	t.Helper()
	s, _ := testStandalone(t)
	reg := NewRegistry(Builtin()...).WithStandalone(s)
	p, err := reg.New(ref, Config{PipelineID: "pl", ProcessorID: t.Name(), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.(Closer).Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

func TestStandaloneLoadsDirectory(t *testing.T) {
	s, logs := testStandalone(t)
	found := logs.FilterMessage("standalone processor found").All()
	if len(found) != 1 || found[0].ContextMap()["name"] != "test.upper" || found[0].ContextMap()["version"] != "v0.1.0" ||
		!strings.HasSuffix(found[0].ContextMap()["file"].(string), "upper.wasm") {
		t.Errorf("found logs %v, want one for upper.wasm, test.upper v0.1.0", found)
	}
	skipped := logs.FilterMessage("not a standalone processor; skipped").All()
	if len(skipped) != 1 || !strings.HasSuffix(skipped[0].ContextMap()["file"].(string), "bad.wasm") {
		t.Errorf("skipped logs %v, want one naming bad.wasm", skipped)
	}

	reg := NewRegistry(Builtin()...).WithStandalone(s)
	for _, ref := range []string{"standalone:test.upper", "test.upper", "standalone:test.upper@v0.1.0", "test.upper@latest", "standalone:upper"} {
		if p, err := reg.Lookup(ref); err != nil || p.Name != "test.upper" {
			t.Errorf("Lookup(%q) = %q, %v; want test.upper", ref, p.Name, err)
		}
	}
	// Unprefixed names that no module has are the built-in processors.
	if p, err := reg.Lookup("field.set"); err != nil || p.Name != "field.set" {
		t.Errorf("Lookup(field.set) = %q, %v", p.Name, err)
	}
	_, err := reg.Lookup("standalone:test.upper@v0.2.0")
	if !errors.Is(err, ErrUnknownPlugin) || !strings.Contains(err.Error(), "has no version v0.2.0") || !strings.Contains(err.Error(), "it has v0.1.0") {
		t.Errorf("unknown version: %v", err)
	}
	_, err = reg.Lookup("standalone:nope")
	wantErr(t, err, `no standalone processor named "nope"`, "it has standalone:test.upper", "could not be loaded: bad.wasm")

	// Without WithStandalone they are refused, as before.
	if _, err := NewRegistry(Builtin()...).Lookup("standalone:test.upper"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("registry without standalone processors: %v", err)
	}
}

func TestStandaloneMissingDirectoryHasNone(t *testing.T) {
	s, err := NewStandalone(context.Background(), StandaloneConfig{Dir: filepath.Join(t.TempDir(), "none")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRegistry().WithStandalone(s).Lookup("standalone:x"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("got %v", err)
	}
}

func TestStandaloneSettingsCheckedWhenLoaded(t *testing.T) {
	s, _ := testStandalone(t)
	reg := NewRegistry(Builtin()...).WithStandalone(s)
	_, err := reg.New("test.upper", Config{Settings: map[string]string{"feild": "x"}})
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "feild" {
		t.Fatalf("got %v, want a SettingError naming feild", err)
	}
	// The processor SDK's schema settings are accepted, as on built-ins.
	if _, err := reg.New("test.upper", Config{Settings: map[string]string{"sdk.schema.decode.payload.enabled": "false"}}); err != nil {
		t.Fatal(err)
	}
}

func TestStandaloneProcessesRecords(t *testing.T) {
	p := newUpper(t, "standalone:test.upper", map[string]string{"prefix": "Dr."})
	for _, name := range []string{"alice", "bob"} {
		rec := upperRecord("1", name)
		if err := p.Process(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		want := upperRecord("1", "Dr."+strings.ToUpper(name))
		sameRecord(t, rec, want)
	}

	rec := upperRecord("2", "drop")
	if err := p.Process(context.Background(), rec); !errors.Is(err, ErrFiltered) {
		t.Errorf("drop: got %v, want ErrFiltered", err)
	}
}

func TestStandaloneErrorsAreClassified(t *testing.T) {
	p := newUpper(t, "test.upper", nil)
	tests := []struct {
		name      string
		value     string
		class     cerrors.Class
		code      int
		wantInMsg string
	}{
		{name: "plain error is fatal", value: "fail", class: cerrors.ClassFatal, wantInMsg: "record 7 is refused"},
		{name: "code 503 is transient", value: "fail503", class: cerrors.ClassTransient, code: 503, wantInMsg: "backend unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Process(context.Background(), upperRecord("7", tt.value))
			if err == nil || EndsRun(err) {
				t.Fatalf("got %v, want a record error", err)
			}
			c := cerrors.ClassifyProcessor(err)
			if c.Class != tt.class || c.Code != tt.code || !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("got %v classified %+v, want class %v code %d", err, c, tt.class, tt.code)
			}
		})
	}
	// The module is still there for the next record.
	rec := upperRecord("8", "carol")
	if err := p.Process(context.Background(), rec); err != nil || rec.Payload.After.(record.StructuredData)["name"] != "CAROL" {
		t.Fatalf("after errors: %v, %v", err, rec.Payload.After)
	}
}

func TestStandaloneModuleThatStopsEndsTheRun(t *testing.T) {
	p := newUpper(t, "test.upper", nil)
	_, logs := testStandalone(t)
	tests := []struct {
		value string
		want  []string
	}{
		{value: "panic", want: []string{"standalone:test.upper@v0.1.0 (upper.wasm) stopped", "boom on record 3"}},
		{value: "trap", want: []string{"WebAssembly trap: out of bounds memory access"}},
		{value: "exit", want: []string{"the module exited with status 3"}},
		{value: "oom", want: []string{"ran out of memory (processors.memory-limit is 128 MiB)", "fatal error: out of memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			err := p.Process(context.Background(), upperRecord("3", tt.value))
			if !EndsRun(err) {
				t.Fatalf("got %v, want an error that ends the run", err)
			}
			wantErr(t, err, tt.want...)
			if c := cerrors.ClassifyProcessor(err); c.Class != cerrors.ClassFatal {
				t.Errorf("classified %+v, want fatal", c)
			}
			if tt.value == "oom" {
				// The Go runtime's stack trace is one log entry, not one
				// per line.
				traces := logs.FilterMessage("standalone processor stack trace").All()
				if len(traces) == 0 || !strings.Contains(traces[len(traces)-1].ContextMap()["trace"].(string), "runtime.throw") {
					t.Errorf("no stack trace logged: %v", traces)
				}
				for _, e := range logs.FilterMessageSnippet("standalone processor printed: runtime.").All() {
					t.Errorf("a line of the stack trace logged on its own: %s", e.Message)
				}
			}
			// A fresh instance takes the next record.
			rec := upperRecord("4", "dave")
			if err := p.Process(context.Background(), rec); err != nil || rec.Payload.After.(record.StructuredData)["name"] != "DAVE" {
				t.Fatalf("next record: %v, %v", err, rec.Payload.After)
			}
		})
	}
}

func TestStandaloneEndlessModuleIsStoppedWithTheRun(t *testing.T) {
	p := newUpper(t, "test.upper", nil)
	// The run's context ends while the module is inside its loop (a
	// forced stop); Process returns only once the module is stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Process(ctx, upperRecord("5", "loop")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
	rec := upperRecord("6", "frank")
	if err := p.Process(context.Background(), rec); err != nil || rec.Payload.After.(record.StructuredData)["name"] != "FRANK" {
		t.Fatalf("next record: %v, %v", err, rec.Payload.After)
	}
}

func TestStandaloneCloseReleasesTheInstance(t *testing.T) {
	s, _ := testStandalone(t)
	reg := NewRegistry(Builtin()...).WithStandalone(s)
	p, err := reg.New("test.upper", Config{PipelineID: "pl", ProcessorID: "close", Condition: `{{ eq .Metadata.table "users" }}`})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Process(context.Background(), upperRecord("1", "eve")); err != nil {
		t.Fatal(err)
	}
	// A standalone processor may split, so its condition is a
	// conditionalSplitter.
	inst := p.(*conditionalSplitter).conditional.next.(*wasmProcessor).inst
	c, ok := p.(Closer)
	if !ok {
		t.Fatalf("%T with a condition is not a Closer", p)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.done:
	default:
		t.Fatal("the module still runs after Close")
	}
	if inst.exitErr != nil {
		t.Errorf("the module did not exit cleanly: %v", inst.exitErr)
	}
	// Closing again, or a processor that never ran, is fine.
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A module that turns one record into several (sdk.MultiRecord) is a
// Splitter: the records come back in order, with the original's position
// (the engine derives each one's own), sharing nothing with it.
func TestStandaloneMultiRecord(t *testing.T) {
	p := newUpper(t, "standalone:test.upper", map[string]string{"prefix": "x-"})
	sp, ok := p.(Splitter)
	if !ok {
		t.Fatalf("%T is not a Splitter", p)
	}
	rec := upperRecord("7", "twice")
	got, err := sp.ProcessMulti(context.Background(), rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	for i, r := range got {
		if string(r.Position) != string(rec.Position) {
			t.Errorf("record %d: position %q, want the original's %q", i, r.Position, rec.Position)
		}
		want := fmt.Sprintf("x-TWICE-%d", i)
		if after := r.Payload.After.(record.StructuredData); after["name"] != want {
			t.Errorf("record %d: name %v, want %s", i, after["name"], want)
		}
	}
	if after := rec.Payload.After.(record.StructuredData); after["name"] != "twice" {
		t.Errorf("the original changed: %v", after)
	}
	// Through Process (no Splitter-aware caller), one record stays one.
	one := upperRecord("8", "bob")
	if err := p.Process(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	sameRecord(t, one, upperRecord("8", "x-BOB"))
}
