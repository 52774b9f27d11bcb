// Package sdktest is the acceptance suite for connectors written with
// pkg/sdk: run it from a connector's own tests to check the contract the
// runtime relies on, without starting the runtime.
//
//	func TestSource(t *testing.T) {
//		sdktest.Source(t, sdktest.SourceConfig{
//			New:         func() sdk.Source { return newSource() },
//			Settings:    map[string]string{"table": "orders"},
//			BadSettings: map[string]string{"table": ""},
//		})
//	}
//
// Each check is a subtest:
//
//   - configure: good settings are accepted; bad ones are refused with a
//     fatal error (a restart cannot fix settings);
//   - read and ack: records come at most max at a time, each with a
//     position and an operation, and their acknowledgement in read order
//     succeeds;
//   - resume: a new instance opened at the position of a record read
//     continues with the record after it;
//   - cancel: Read returns promptly once its context is done;
//   - errors carry codes: an error the connector is made to return (with
//     FailSettings) carries a code, so the runtime need not guess;
//   - teardown: after Teardown no goroutine the connector started is
//     left, and Teardown works after a failed Configure and without Open;
//   - a destination writes what it is given (with ReadBack, what it holds
//     is what it was given, in order), and one that reports its last
//     position (sdk.PositionReporter) reports the last record written.
package sdktest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/sdk"
)

// SourceConfig describes the source under test.
type SourceConfig struct {
	// New returns a new, unconfigured source.
	New func() sdk.Source
	// Settings configure a source that works and produces at least
	// Records records.
	Settings map[string]string
	// BadSettings, if set, must be refused by Configure.
	BadSettings map[string]string
	// FailSettings, if set, make the source fail in Open or Read: the
	// error must carry a code.
	FailSettings map[string]string
	// Records is how many records the checks read (default 10).
	Records int
	// Timeout bounds each call (default 10s).
	Timeout time.Duration
}

// DestinationConfig describes the destination under test.
type DestinationConfig struct {
	// New returns a new, unconfigured destination.
	New func() sdk.Destination
	// Settings configure a destination that works. Each instance of one
	// check writes to the place they name; use a fresh directory per test.
	Settings map[string]string
	// BadSettings, if set, must be refused by Configure.
	BadSettings map[string]string
	// FailSettings, if set, make the destination fail in Open or Write:
	// the error must carry a code.
	FailSettings map[string]string
	// ReadBack, if set, returns what the destination holds after Teardown,
	// for the check that it holds what it was given.
	ReadBack func(t testing.TB) []sdk.Record
	// Records is how many records the checks write (default 10).
	Records int
	// Timeout bounds each call (default 10s).
	Timeout time.Duration
}

// Source runs the suite against a source.
func Source(t *testing.T, cfg SourceConfig) {
	t.Helper()
	if cfg.New == nil {
		t.Fatal("sdktest.Source: SourceConfig.New is nil")
	}
	cfg = cfg.withDefaults()
	for _, c := range sourceChecks {
		t.Run(c.name, func(t *testing.T) { c.run(t, cfg) })
	}
}

// Destination runs the suite against a destination.
func Destination(t *testing.T, cfg DestinationConfig) {
	t.Helper()
	if cfg.New == nil {
		t.Fatal("sdktest.Destination: DestinationConfig.New is nil")
	}
	cfg = cfg.withDefaults()
	for _, c := range destinationChecks {
		t.Run(c.name, func(t *testing.T) { c.run(t, cfg) })
	}
}

const defaultRecords, defaultTimeout = 10, 10 * time.Second

func (c SourceConfig) withDefaults() SourceConfig {
	if c.Records <= 0 {
		c.Records = defaultRecords
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

func (c DestinationConfig) withDefaults() DestinationConfig {
	if c.Records <= 0 {
		c.Records = defaultRecords
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

// sourceChecks and destinationChecks take testing.TB, so that the suite's
// own tests can run them against broken connectors and see them fail.
var sourceChecks = []struct {
	name string
	run  func(testing.TB, SourceConfig)
}{
	{"configure", checkSourceConfigure},
	{"read and ack", checkReadAndAck},
	{"resume after a position", checkResume},
	{"read stops when cancelled", checkReadCancel},
	{"errors carry codes", checkSourceErrorCodes},
	{"teardown releases everything", checkSourceTeardown},
}

var destinationChecks = []struct {
	name string
	run  func(testing.TB, DestinationConfig)
}{
	{"configure", checkDestinationConfigure},
	{"writes what it is given", checkWrite},
	{"reports its last position", checkLastPosition},
	{"errors carry codes", checkDestinationErrorCodes},
	{"teardown releases everything", checkDestinationTeardown},
}

// call runs f with a context that ends after timeout, and fails tb if f
// does not return by then.
func call(tb testing.TB, timeout time.Duration, what string, f func(ctx context.Context) error) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout + time.Second):
		tb.Fatalf("%s did not return within %s", what, timeout)
		return nil
	}
}

func configured(tb testing.TB, cfg SourceConfig, settings map[string]string) sdk.Source {
	tb.Helper()
	src := cfg.New()
	if err := call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
		return src.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "source", Settings: clone(settings)})
	}); err != nil {
		tb.Fatalf("Configure with Settings: %v", err)
	}
	return src
}

func opened(tb testing.TB, cfg SourceConfig, pos sdk.Position) sdk.Source {
	tb.Helper()
	src := configured(tb, cfg, cfg.Settings)
	if err := call(tb, cfg.Timeout, "Open", func(ctx context.Context) error { return src.Open(ctx, pos) }); err != nil {
		tb.Fatalf("Open(%q): %v", pos, err)
	}
	tb.Cleanup(func() { _ = call(tb, cfg.Timeout, "Teardown", src.Teardown) })
	return src
}

// readN reads n records, asking for at most 1, 3, 7, ... at a time, and
// acknowledges each read in order.
func readN(tb testing.TB, cfg SourceConfig, src sdk.Source, n int, ack bool) []sdk.Record {
	tb.Helper()
	var out []sdk.Record
	deadline := time.Now().Add(cfg.Timeout)
	for m := 1; len(out) < n; m = m*2 + 1 {
		if time.Now().After(deadline) {
			tb.Fatalf("read %d of %d records within %s", len(out), n, cfg.Timeout)
		}
		maxRecs := min(m, n-len(out))
		var recs []sdk.Record
		err := call(tb, cfg.Timeout, "Read", func(ctx context.Context) error {
			var err error
			recs, err = src.Read(ctx, maxRecs)
			return err
		})
		if err != nil {
			tb.Fatalf("Read(max %d): %v", maxRecs, err)
		}
		if len(recs) > maxRecs {
			tb.Fatalf("Read(max %d) returned %d records", maxRecs, len(recs))
		}
		positions := make([]sdk.Position, 0, len(recs))
		for i := range recs {
			r := recs[i].Clone()
			if len(r.Position) == 0 {
				tb.Fatalf("record %d has no position: Open could not resume after it", len(out)+1)
			}
			if r.Operation == 0 {
				tb.Fatalf("record %d (position %q) has no operation", len(out)+1, r.Position)
			}
			out = append(out, r)
			positions = append(positions, r.Position)
		}
		if ack && len(positions) > 0 {
			if err := call(tb, cfg.Timeout, "Ack", func(ctx context.Context) error { return src.Ack(ctx, positions) }); err != nil {
				tb.Fatalf("Ack of %d records in read order: %v", len(positions), err)
			}
		}
	}
	return out
}

func checkSourceConfigure(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	src := configured(tb, cfg, cfg.Settings)
	_ = call(tb, cfg.Timeout, "Teardown", src.Teardown)
	if cfg.BadSettings == nil {
		return
	}
	bad := cfg.New()
	err := call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
		return bad.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "source", Settings: clone(cfg.BadSettings)})
	})
	checkFatalSettings(tb, err)
	_ = call(tb, cfg.Timeout, "Teardown", bad.Teardown)
}

// checkFatalSettings checks the error of Configure with bad settings. An
// error without a code is sent as fatal by the SDK, so it is accepted.
func checkFatalSettings(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		tb.Fatal("Configure accepted BadSettings")
	}
	if c := cerrors.Classify(err); c.Source != cerrors.SourceDefault && c.Class != cerrors.ClassFatal {
		tb.Errorf("Configure refused BadSettings with a %s error (code %d): a restart cannot fix settings, make it fatal", c.Class, c.Code)
	}
}

func checkReadAndAck(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	src := opened(tb, cfg, nil)
	recs := readN(tb, cfg, src, cfg.Records, true)
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[string(r.Position)] {
			tb.Errorf("position %q came twice: a source resumes after a position, so each must be unique", r.Position)
		}
		seen[string(r.Position)] = true
	}
}

func checkResume(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	first := readN(tb, cfg, opened(tb, cfg, nil), cfg.Records, true)
	k := len(first) / 2
	again := readN(tb, cfg, opened(tb, cfg, first[k-1].Position), len(first)-k, false)
	for i, r := range again {
		if want := first[k+i].Position; string(r.Position) != string(want) {
			tb.Fatalf("opened at position %q (record %d), record %d after it has position %q, want %q (the one read after it before)",
				first[k-1].Position, k, i+1, r.Position, want)
		}
	}
}

func checkReadCancel(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	src := opened(tb, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := src.Read(ctx, 1)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			tb.Errorf("Read with a cancelled context returned %v, want context.Canceled (or records already at hand)", err)
		}
	case <-time.After(cfg.Timeout):
		tb.Fatalf("Read did not return within %s of its context being cancelled", cfg.Timeout)
	}
}

func checkSourceErrorCodes(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	if cfg.FailSettings == nil {
		return
	}
	src := configured(tb, cfg, cfg.FailSettings)
	defer func() { _ = call(tb, cfg.Timeout, "Teardown", src.Teardown) }()
	err := call(tb, cfg.Timeout, "Open", func(ctx context.Context) error { return src.Open(ctx, nil) })
	for i := 0; err == nil && i < cfg.Records*10; i++ {
		err = call(tb, cfg.Timeout, "Read", func(ctx context.Context) error {
			_, err := src.Read(ctx, 1)
			return err
		})
	}
	checkCoded(tb, err)
}

func checkCoded(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		tb.Fatal("the connector did not fail with FailSettings")
	}
	if c := cerrors.Classify(err); c.Code == 0 {
		tb.Errorf("error %q has no code: give it one (sdk.Transient, sdk.Fatal, sdk.WithCode) so that the runtime need not guess", err)
	}
}

func checkSourceTeardown(tb testing.TB, cfg SourceConfig) {
	tb.Helper()
	before := goroutines()
	src := configured(tb, cfg, cfg.Settings)
	if err := call(tb, cfg.Timeout, "Open", func(ctx context.Context) error { return src.Open(ctx, nil) }); err != nil {
		tb.Fatalf("Open: %v", err)
	}
	readN(tb, cfg, src, cfg.Records, true)
	if err := call(tb, cfg.Timeout, "Teardown", src.Teardown); err != nil {
		tb.Errorf("Teardown: %v", err)
	}
	checkGoroutines(tb, before, cfg.Timeout)

	// Teardown without Open, and after a failed Configure.
	if err := call(tb, cfg.Timeout, "Teardown", configured(tb, cfg, cfg.Settings).Teardown); err != nil {
		tb.Errorf("Teardown without Open: %v", err)
	}
	if cfg.BadSettings != nil {
		bad := cfg.New()
		_ = call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
			return bad.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "source", Settings: clone(cfg.BadSettings)})
		})
		if err := call(tb, cfg.Timeout, "Teardown", bad.Teardown); err != nil {
			tb.Errorf("Teardown after a failed Configure: %v", err)
		}
	}
}

// goroutines returns the ids of the goroutines that run now, with their
// stacks.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		// "goroutine 42 [running]:"
		if rest, ok := strings.CutPrefix(g, "goroutine "); ok {
			id, _, _ := strings.Cut(rest, " ")
			out[id] = g
		}
	}
	return out
}

// checkGoroutines waits until every goroutine that started since before
// has ended. It compares goroutines, not their number: other tests of the
// process start and end theirs meanwhile.
func checkGoroutines(tb testing.TB, before map[string]string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var leaked []string
		for id, stack := range goroutines() {
			if _, old := before[id]; !old {
				leaked = append(leaked, stack)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("%d goroutines still run after Teardown that started with the connector:\n%s",
				len(leaked), strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Records returns n records as a source would produce them, with positions
// "1" to "n", for destination tests.
func Records(n int) []sdk.Record {
	recs := make([]sdk.Record, n)
	for i := range recs {
		pos := sdk.Position(strconv.Itoa(i + 1))
		recs[i] = sdk.Record{Position: pos, Operation: sdk.OperationCreate,
			Metadata: sdk.Metadata{sdk.MetadataVersion: sdk.OpenCDCVersion},
			Key:      sdk.RawData(pos),
			Payload:  sdk.Change{After: sdk.StructuredData{"id": int64(i + 1), "name": fmt.Sprintf("record-%d", i+1)}}}
	}
	return recs
}

func configuredDestination(tb testing.TB, cfg DestinationConfig, settings map[string]string) sdk.Destination {
	tb.Helper()
	d := cfg.New()
	if err := call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
		return d.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "destination", Settings: clone(settings)})
	}); err != nil {
		tb.Fatalf("Configure with Settings: %v", err)
	}
	return d
}

func openedDestination(tb testing.TB, cfg DestinationConfig) sdk.Destination {
	tb.Helper()
	d := configuredDestination(tb, cfg, cfg.Settings)
	if err := call(tb, cfg.Timeout, "Open", d.Open); err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return d
}

// writeAll writes recs in batches of 1, 3, 7, ...
func writeAll(tb testing.TB, cfg DestinationConfig, d sdk.Destination, recs []sdk.Record) {
	tb.Helper()
	for i, m := 0, 1; i < len(recs); m = m*2 + 1 {
		batch := recs[i:min(i+m, len(recs))]
		var n int
		err := call(tb, cfg.Timeout, "Write", func(ctx context.Context) error {
			var err error
			n, err = d.Write(ctx, batch)
			return err
		})
		if err != nil || n != len(batch) {
			tb.Fatalf("Write of %d records returned %d, %v; want all of them written", len(batch), n, err)
		}
		i += len(batch)
	}
}

func checkDestinationConfigure(tb testing.TB, cfg DestinationConfig) {
	tb.Helper()
	d := configuredDestination(tb, cfg, cfg.Settings)
	_ = call(tb, cfg.Timeout, "Teardown", d.Teardown)
	if cfg.BadSettings == nil {
		return
	}
	bad := cfg.New()
	err := call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
		return bad.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "destination", Settings: clone(cfg.BadSettings)})
	})
	checkFatalSettings(tb, err)
	_ = call(tb, cfg.Timeout, "Teardown", bad.Teardown)
}

func checkWrite(tb testing.TB, cfg DestinationConfig) {
	tb.Helper()
	d := openedDestination(tb, cfg)
	recs := Records(cfg.Records)
	writeAll(tb, cfg, d, recs)
	if err := call(tb, cfg.Timeout, "Teardown", d.Teardown); err != nil {
		tb.Fatalf("Teardown: %v", err)
	}
	if cfg.ReadBack == nil {
		return
	}
	held := cfg.ReadBack(tb)
	got := make([]string, len(held))
	for i, r := range held {
		got[i] = string(r.Position)
	}
	want := make([]string, len(recs))
	for i, r := range recs {
		want[i] = string(r.Position)
	}
	if !slices.Equal(got, want) {
		tb.Fatalf("the destination holds positions %v, want %v: what it reports written must be what it holds, in order", got, want)
	}
	for i := range held {
		if held[i].Operation != recs[i].Operation || string(held[i].Key.Bytes()) != string(recs[i].Key.Bytes()) {
			tb.Errorf("record %d holds operation %v key %q, want %v %q", i+1, held[i].Operation, held[i].Key.Bytes(), recs[i].Operation, recs[i].Key.Bytes())
		}
	}
}

func checkLastPosition(tb testing.TB, cfg DestinationConfig) {
	tb.Helper()
	if _, ok := cfg.New().(sdk.PositionReporter); !ok {
		return
	}
	d := openedDestination(tb, cfg)
	recs := Records(cfg.Records)
	writeAll(tb, cfg, d, recs)
	if err := call(tb, cfg.Timeout, "Teardown", d.Teardown); err != nil {
		tb.Fatalf("Teardown: %v", err)
	}
	again := openedDestination(tb, cfg)
	defer func() { _ = call(tb, cfg.Timeout, "Teardown", again.Teardown) }()
	var last sdk.Position
	var ok bool
	if err := call(tb, cfg.Timeout, "LastPosition", func(ctx context.Context) error {
		var err error
		last, ok, err = again.(sdk.PositionReporter).LastPosition(ctx)
		return err
	}); err != nil {
		tb.Fatalf("LastPosition: %v", err)
	}
	if want := recs[len(recs)-1].Position; !ok || string(last) != string(want) {
		tb.Fatalf("LastPosition after writing %d records = %q (ok %v), want %q: a wrong answer loses or duplicates records", len(recs), last, ok, want)
	}
}

func checkDestinationErrorCodes(tb testing.TB, cfg DestinationConfig) {
	tb.Helper()
	if cfg.FailSettings == nil {
		return
	}
	d := configuredDestination(tb, cfg, cfg.FailSettings)
	defer func() { _ = call(tb, cfg.Timeout, "Teardown", d.Teardown) }()
	err := call(tb, cfg.Timeout, "Open", d.Open)
	recs := Records(cfg.Records)
	for i := 0; err == nil && i < len(recs); i++ {
		err = call(tb, cfg.Timeout, "Write", func(ctx context.Context) error {
			_, err := d.Write(ctx, recs[i:i+1])
			return err
		})
	}
	checkCoded(tb, err)
}

func checkDestinationTeardown(tb testing.TB, cfg DestinationConfig) {
	tb.Helper()
	before := goroutines()
	d := openedDestination(tb, cfg)
	writeAll(tb, cfg, d, Records(cfg.Records))
	if err := call(tb, cfg.Timeout, "Teardown", d.Teardown); err != nil {
		tb.Errorf("Teardown: %v", err)
	}
	checkGoroutines(tb, before, cfg.Timeout)
	if err := call(tb, cfg.Timeout, "Teardown", configuredDestination(tb, cfg, cfg.Settings).Teardown); err != nil {
		tb.Errorf("Teardown without Open: %v", err)
	}
	if cfg.BadSettings != nil {
		bad := cfg.New()
		_ = call(tb, cfg.Timeout, "Configure", func(ctx context.Context) error {
			return bad.Configure(ctx, sdk.Config{PipelineID: "sdktest", ConnectorID: "destination", Settings: clone(cfg.BadSettings)})
		})
		if err := call(tb, cfg.Timeout, "Teardown", bad.Teardown); err != nil {
			tb.Errorf("Teardown after a failed Configure: %v", err)
		}
	}
}
