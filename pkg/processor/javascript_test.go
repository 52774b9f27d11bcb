package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/custom"

	"github.com/conduitry/conduit/pkg/record"
)

// newJS builds custom.javascript with script under limits, through the
// registry as the engine gets it.
func newJS(t *testing.T, limits JavaScriptLimits, script string) Processor {
	t.Helper()
	p, err := NewRegistry(BuiltinWith(ConduitOptions{JavaScript: limits})...).New("custom.javascript", Config{Settings: map[string]string{"script": script}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// TestJavaScriptMatchesConduit runs this package's custom.javascript and
// Conduit's side by side on the same scripts and records, and checks that
// they make the same records, drop the same ones and reject the same ones
// with the same message.
func TestJavaScriptMatchesConduit(t *testing.T) {
	quietSDKLogs()
	scripts := map[string]string{
		"identity": `function process(r) { return r; }`,
		"change fields": `function process(rec) {
			rec.Operation = "update";
			rec.Metadata["returned"] = "JS";
			rec.Key = RawData("baz");
			if (rec.Payload.After != null && rec.Payload.After["name"] !== undefined) { rec.Payload.After["ccc"] = "baz"; }
			return rec;
		}`,
		"new structured payload": `function process(rec) {
			rec.Payload.After = new StructuredData();
			rec.Payload.After["foo"] = "bar";
			rec.Payload.After["n"] = 3;
			return rec;
		}`,
		"raw payload from text": `function process(rec) {
			let existing = rec.Payload.After == null ? "" : String.fromCharCode.apply(String, rec.Key);
			rec.Payload.After = RawData("hello, " + existing);
			return rec;
		}`,
		"new record": `function process(record) {
			r = new Record();
			r.Position = "3";
			r.Metadata["returned"] = "JS";
			r.Key = new RawData("baz");
			r.Payload.After = new RawData("foobar");
			return r;
		}`,
		"filter all":         `function process(r) { return null; }`,
		"no return":          `function process(r) { r.Metadata["x"] = "y"; }`,
		"filter by metadata": `function process(r) { return r.Metadata["table"] === "users" ? r : null; }`,
		"delete metadata":    `function process(rec) { delete rec.Metadata.table; rec.Metadata["new_key"] = "v"; return rec; }`,
		"position text":      `function process(rec) { rec.Position = "foobar"; return rec; }`,
		"operation":          `function process(rec) { rec.Operation = "delete"; return rec; }`,
		"bad operation":      `function process(rec) { rec.Operation = "explode"; return rec; }`,
		"throws":             `function process(r) { throw new Error('something bad happened'); }`,
		"type error":         `function process(r) { var m; return m.test; }`,
		"returns a number":   `function process(r) { return 5; }`,
		// Conduit's globals live in one of a pool of runtimes (a fresh one
		// whenever the pool dropped it), so a script cannot count on them.
		"helpers and globals": `var prefix = "call-";
			function label() { return prefix + "x"; }
			function process(rec) { rec.Metadata["label"] = label(); return rec; }`,
		"nested structured": `function process(rec) {
			if (rec.Payload.After != null && rec.Payload.After["address"] !== undefined) {
				rec.Payload.After["city"] = rec.Payload.After["address"]["city"];
			}
			return rec;
		}`,
	}
	records := map[string]func() record.Record{
		"full": testRecord,
		"raw payload": func() record.Record {
			r := testRecord()
			r.Payload = record.Change{After: record.RawData("world")}
			return r
		},
		"structured key": func() record.Record {
			r := testRecord()
			r.Key = record.StructuredData{"id": 1}
			return r
		},
		"empty": func() record.Record { return record.Record{} },
	}
	ctx := context.Background()
	for sname, script := range scripts {
		for rname, mk := range records {
			t.Run(sname+"/"+rname, func(t *testing.T) {
				ours := newJS(t, JavaScriptLimits{}, script)
				theirs := custom.NewJavascriptProcessor(log.Nop())
				if err := theirs.Configure(ctx, config.Config{"script": script}); err != nil {
					t.Fatal(err)
				}
				if err := theirs.Open(ctx); err != nil {
					t.Fatal(err)
				}
				// Twice: a script's globals live on between records.
				for i := range 2 {
					rec := mk()
					oerr := ours.Process(ctx, &rec)
					got, panicked := conduitJSProcess(theirs, mk())
					if panicked != nil {
						// Conduit's panics (writing to a record without
						// metadata); under Conduit that took the process
						// down, here the record is rejected.
						if oerr == nil || errors.Is(oerr, ErrFiltered) {
							t.Fatalf("call %d: Conduit's panics (%v), ours: %v", i, panicked, oerr)
						}
						return
					}
					switch g := got.(type) {
					case sdk.FilterRecord:
						if !errors.Is(oerr, ErrFiltered) {
							t.Fatalf("call %d: Conduit's drops the record, ours: %v", i, oerr)
						}
					case sdk.ErrorRecord:
						if oerr == nil || errors.Is(oerr, ErrFiltered) {
							t.Fatalf("call %d: Conduit's rejects the record (%v), ours: %v", i, g.Error, oerr)
						}
						if strings.Contains(g.Error.Error(), "js function expected to return") || strings.Contains(g.Error.Error(), "could not unmarshal operation") {
							// Ours says what to return, or which field is
							// wrong, instead of naming Go types.
							return
						}
						if oerr.Error() != g.Error.Error() {
							t.Fatalf("call %d: message %q, Conduit's %q", i, oerr, g.Error)
						}
					case sdk.SingleRecord:
						if oerr != nil {
							t.Fatalf("call %d: ours: %v, Conduit's: %+v", i, oerr, g)
						}
						ob, err := opencdc.JSONSerializer{}.Serialize(record.ToOpenCDC(&rec))
						if err != nil {
							t.Fatal(err)
						}
						wb, err := opencdc.JSONSerializer{}.Serialize(opencdc.Record(g))
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(ob, wb) {
							t.Fatalf("call %d: record differs from Conduit's\n ours: %s\nConduit: %s", i, ob, wb)
						}
					default:
						t.Fatalf("Conduit's returned %T", got)
					}
				}
			})
		}
	}
}

// conduitJSProcess runs Conduit's processor on rec, recovering its panic.
func conduitJSProcess(p sdk.Processor, rec record.Record) (got sdk.ProcessedRecord, panicked any) {
	defer func() { panicked = recover() }()
	return p.Process(context.Background(), []opencdc.Record{record.ToOpenCDC(&rec)})[0], nil
}

func TestJavaScriptSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "proc.js")
	if err := os.WriteFile(file, []byte(`function process(r) { r.Metadata["from"] = "file"; return r; }`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		settings    map[string]string
		wantSetting string
		wantErr     []string
	}{
		{name: "script.path", settings: map[string]string{"script.path": file}},
		{name: "sdk schema setting accepted", settings: map[string]string{"script": "function process(r) { return r; }", "sdk.schema.decode.payload.enabled": "false"}},
		{name: "neither", settings: map[string]string{}, wantSetting: "script", wantErr: []string{"one of script and script.path is required"}},
		{name: "both", settings: map[string]string{"script": "function process(r) { return r; }", "script.path": file},
			wantSetting: "script.path", wantErr: []string{"only one of script and script.path"}},
		{name: "file missing", settings: map[string]string{"script.path": filepath.Join(dir, "nope.js")},
			wantSetting: "script.path", wantErr: []string{"cannot read the script", "nope.js"}},
		{name: "no process function", settings: map[string]string{"script": "function something() {}"},
			wantSetting: "script", wantErr: []string{"defines no function process(record)"}},
		{name: "top level throws", settings: map[string]string{"script": "throw new Error('boom'); function process(r) { return r; }"},
			wantSetting: "script", wantErr: []string{"boom"}},
		{name: "syntax error in file", settings: map[string]string{"script.path": writeTemp(t, dir, "bad.js", "function {")},
			wantSetting: "script.path", wantErr: []string{"SyntaxError"}},
		{name: "unknown setting", settings: map[string]string{"script": "function process(r) { return r; }", "scirpt": "x"},
			wantSetting: "scirpt", wantErr: []string{"unknown setting"}},
	}
	reg := NewRegistry(Builtin()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.New("custom.javascript", Config{Settings: tt.settings})
			if tt.wantSetting == "" {
				if err != nil {
					t.Fatal(err)
				}
				rec := testRecord()
				if err := p.Process(context.Background(), &rec); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tt.wantErr...)
			var se *SettingError
			if !errors.As(err, &se) || se.Setting != tt.wantSetting {
				t.Errorf("got %v, want a setting error about %q", err, tt.wantSetting)
			}
		})
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// spinScript loops for ever on a record whose metadata says spin, and
// passes the others.
const spinScript = `function process(rec) {
	if (rec.Metadata["spin"] === "yes") { while (true) {} }
	rec.Metadata["seen"] = "yes";
	return rec;
}`

// gojaRunning reports whether any goroutine is inside goja's interpreter.
func gojaRunning() bool {
	buf := make([]byte, 4<<20)
	n := runtime.Stack(buf, true)
	return bytes.Contains(buf[:n], []byte("dop251/goja.(*vm)."))
}

// TestJavaScriptInterruptedWhenContextEnds checks that a script that never
// returns is interrupted when the run's context ends (a forced stop): the
// call returns with the context's error and nothing keeps running the
// script, and the next record gets a fresh runtime.
func TestJavaScriptInterruptedWhenContextEnds(t *testing.T) {
	p, err := NewRegistry(Builtin()...).New("custom.javascript", Config{Settings: map[string]string{"script": spinScript}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	rec := testRecord()
	rec.Metadata["spin"] = "yes"
	go func() { errc <- p.Process(ctx, &rec) }()
	// The script is looping once goja's interpreter shows on a stack.
	for !gojaRunning() {
		select {
		case err := <-errc:
			t.Fatalf("Process returned before its context ended: %v", err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Process did not return after its context ended")
	}
	if gojaRunning() {
		t.Fatal("the script still runs after Process returned")
	}
	next := testRecord()
	if err := p.Process(context.Background(), &next); err != nil || next.Metadata["seen"] != "yes" {
		t.Fatalf("next record: %v, %v", err, next.Metadata)
	}
}

// TestJavaScriptTimeout checks that a call that runs longer than the
// timeout is interrupted with an error naming the setting, and that the
// next record is processed.
func TestJavaScriptTimeout(t *testing.T) {
	p := newJS(t, JavaScriptLimits{Timeout: 100 * time.Millisecond}, spinScript)
	rec := testRecord()
	rec.Metadata["spin"] = "yes"
	errc := make(chan error, 1)
	go func() { errc <- p.Process(context.Background(), &rec) }()
	select {
	case err := <-errc:
		wantErr(t, err, "custom.javascript", "processors.javascript.timeout (100ms)", "interrupted")
		if errors.Is(err, context.Canceled) || errors.Is(err, ErrFiltered) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a looping script was not interrupted")
	}
	next := testRecord()
	if err := p.Process(context.Background(), &next); err != nil || next.Metadata["seen"] != "yes" {
		t.Fatalf("next record: %v, %v", err, next.Metadata)
	}

	// The script's top level is bounded too: it runs when the processor
	// is built, which is when a pipeline file is checked.
	_, err := NewRegistry(BuiltinWith(ConduitOptions{JavaScript: JavaScriptLimits{Timeout: 100 * time.Millisecond}})...).New("custom.javascript",
		Config{Settings: map[string]string{"script": "while (true) {}\nfunction process(r) { return r; }"}})
	wantErr(t, err, `setting "script"`, "processors.javascript.timeout")
}

// memoryBomb is the script of the report: it holds ever more arrays of a
// million numbers (16 MB each in goja) until something stops it.
const memoryBomb = `function process(rec) {
	if (rec.Metadata["bomb"] !== "yes") { rec.Metadata["seen"] = "yes"; return rec; }
	a = [];
	while (true) { a.push(new Array(1000000).fill(1.5)); }
}`

// TestJavaScriptMemoryBudget runs the script of the report, which
// allocates without bound, with a small budget: the call is interrupted
// with an error naming the budget, the memory is given back, and the next
// record is processed. Before the budget, the process died with "fatal
// error: out of memory".
func TestJavaScriptMemoryBudget(t *testing.T) {
	p := newJS(t, JavaScriptLimits{MemoryLimit: 48 << 20, Timeout: 5 * time.Minute}, memoryBomb)
	runtime.GC()
	before := heapLive()
	rec := testRecord()
	rec.Metadata["bomb"] = "yes"
	err := p.Process(context.Background(), &rec)
	wantErr(t, err, "custom.javascript", "memory budget", "processors.javascript.memory-limit is 48 MiB", "interrupted")
	if errors.Is(err, ErrFiltered) || EndsRun(err) {
		t.Fatalf("got %v, want the record rejected", err)
	}
	runtime.GC()
	if after := heapLive(); after > before+32<<20 {
		t.Errorf("live heap %d MiB after the script was stopped, %d MiB before: its arrays were not released", after>>20, before>>20)
	}
	next := testRecord()
	if err := p.Process(context.Background(), &next); err != nil || next.Metadata["seen"] != "yes" {
		t.Fatalf("next record: %v, %v", err, next.Metadata)
	}
}

// TestJavaScriptMemoryBudgetIgnoresGarbage checks that a script that
// allocates a lot but keeps little is not stopped: garbage does not count
// against the budget.
func TestJavaScriptMemoryBudgetIgnoresGarbage(t *testing.T) {
	p := newJS(t, JavaScriptLimits{MemoryLimit: 16 << 20, Timeout: 5 * time.Minute}, `function process(rec) {
		let n = 0;
		for (let i = 0; i < 25; i++) { let s = "x".repeat(4000000) + i; n += s.length; }
		rec.Metadata["made"] = String(n);
		return rec;
	}`)
	rec := testRecord()
	if err := p.Process(context.Background(), &rec); err != nil {
		t.Fatalf("a script that made 100 MB of garbage under a 16 MiB budget: %v", err)
	}
	if rec.Metadata["made"] != "100000040" {
		t.Fatalf("metadata %v", rec.Metadata)
	}
}

// TestJavaScriptRequireRefusedByDefault checks that without
// processors.javascript.require-path a script cannot read files with
// require, and that the error names the setting. Before, it read any file
// conduit could.
func TestJavaScriptRequireRefusedByDefault(t *testing.T) {
	dir := t.TempDir()
	secret := writeTemp(t, dir, "secret.json", `{"password":"hunter2"}`)
	for _, script := range []string{
		fmt.Sprintf(`function process(r) { r.Metadata["leak"] = require(%q).password; return r; }`, secret),
		fmt.Sprintf(`var s = require(%q); function process(r) { r.Metadata["leak"] = s.password; return r; }`, secret),
	} {
		p, err := NewRegistry(Builtin()...).New("custom.javascript", Config{Settings: map[string]string{"script": script}})
		if err == nil {
			rec := testRecord()
			err = p.Process(context.Background(), &rec)
			if rec.Metadata["leak"] != "" {
				t.Fatalf("the script read %s: %q", secret, rec.Metadata["leak"])
			}
		}
		wantErr(t, err, "refused", "processors.javascript.require-path is not set")
	}
}

// TestJavaScriptRequireFromDirectory checks that modules are read from
// processors.javascript.require-path, including modules they require, and
// that nothing outside it can be reached: not by an absolute path, not
// with .., not through a symbolic link.
func TestJavaScriptRequireFromDirectory(t *testing.T) {
	outside := t.TempDir()
	secret := writeTemp(t, outside, "secret.json", `{"password":"hunter2"}`)
	dir := t.TempDir()
	writeTemp(t, dir, "greet.js", `var cfg = require("./greeting.json"); module.exports = function(n) { return cfg.word + ", " + n; };`)
	writeTemp(t, dir, "greeting.json", `{"word":"hello"}`)
	if err := os.Mkdir(filepath.Join(dir, "lib"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeTemp(t, filepath.Join(dir, "lib"), "index.js", `module.exports = { up: function(s) { return s.toUpperCase(); } };`)
	if err := os.Symlink(secret, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	limits := JavaScriptLimits{RequirePath: dir}

	p := newJS(t, limits, `var greet = require("./greet"); var lib = require("./lib");
		function process(r) { r.Metadata["greeting"] = lib.up(greet("ann")); return r; }`)
	rec := testRecord()
	if err := p.Process(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	if got := rec.Metadata["greeting"]; got != "HELLO, ANN" {
		t.Fatalf("greeting %q", got)
	}

	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path string }{
		{"absolute", secret},
		{"dot-dot", "./" + rel},
		{"symbolic link to a file outside", "./link.json"},
		{"through a linked directory", "./linkdir/secret.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newJS(t, limits, fmt.Sprintf(`function process(r) { r.Metadata["leak"] = JSON.stringify(require(%q)); return r; }`, tc.path))
			rec := testRecord()
			err := p.Process(context.Background(), &rec)
			wantErr(t, err, "refused")
			if rec.Metadata["leak"] != "" {
				t.Fatalf("read outside the directory: %s", rec.Metadata["leak"])
			}
		})
	}
}
