package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
)

// chaosHarness drives one chaos connector the way the supervisor does: a
// connector that failed is torn down and a new one is built from the same
// plugin (a restart), so every multi-step case also checks that the
// counters survive restarts.
type chaosHarness struct {
	t      *testing.T
	plugin Plugin
	clock  *clocktest.Clock
	cfg    Config
	batch  int           // records per read or write
	step   time.Duration // the clock advances this much after every step

	src Source
	dst Destination
}

func newChaosHarness(t *testing.T, settings map[string]string, batch int, step time.Duration) *chaosHarness {
	clock := newFakeClock()
	return &chaosHarness{
		t:      t,
		plugin: NewChaosPlugin(clock.Now),
		clock:  clock,
		cfg:    Config{PipelineID: "p1", ConnectorID: "gen", Settings: settings},
		batch:  batch,
		step:   step,
	}
}

var ordinalRE = regexp.MustCompile(`\(failure (\d+)( of \d+)?\)`)

// outcome renders a call's result: "4" for 4 records, "E2" for injected
// failure number 2, "3E2" for 3 records written before failure 2, "ok" for
// an open.
func (h *chaosHarness) outcome(n int, err error) string {
	h.t.Helper()
	if err == nil {
		return fmt.Sprint(n)
	}
	m := ordinalRE.FindStringSubmatch(err.Error())
	if m == nil {
		h.t.Fatalf("error without a failure ordinal: %v", err)
	}
	if n > 0 {
		return fmt.Sprintf("%dE%s", n, m[1])
	}
	return "E" + m[1]
}

// restart tears the current connectors down; the next step builds new ones.
func (h *chaosHarness) restart() {
	h.t.Helper()
	ctx := context.Background()
	if h.src != nil {
		if err := h.src.Teardown(ctx); err != nil {
			h.t.Fatalf("source Teardown: %v", err)
		}
		h.src = nil
	}
	if h.dst != nil {
		if err := h.dst.Teardown(ctx); err != nil {
			h.t.Fatalf("destination Teardown: %v", err)
		}
		h.dst = nil
	}
}

func (h *chaosHarness) source() Source {
	h.t.Helper()
	if h.src == nil {
		src, err := h.plugin.NewSource(h.cfg)
		if err != nil {
			h.t.Fatalf("NewSource: %v", err)
		}
		if err := src.Open(context.Background(), nil); err != nil {
			h.t.Fatalf("Open: %v", err)
		}
		h.src = src
	}
	return h.src
}

func (h *chaosHarness) destination() Destination {
	h.t.Helper()
	if h.dst == nil {
		dst, err := h.plugin.NewDestination(h.cfg)
		if err != nil {
			h.t.Fatalf("NewDestination: %v", err)
		}
		if err := dst.Open(context.Background()); err != nil {
			h.t.Fatalf("Open: %v", err)
		}
		h.dst = dst
	}
	return h.dst
}

// run performs steps calls of op and returns their outcomes.
func (h *chaosHarness) run(role connectorRole, op string, steps int) []string {
	h.t.Helper()
	ctx := context.Background()
	var out []string
	for range steps {
		var n int
		var err error
		switch {
		case op == chaosOpen && role == roleSource:
			var src Source
			if src, err = h.plugin.NewSource(h.cfg); err != nil {
				h.t.Fatalf("NewSource: %v", err)
			}
			err = src.Open(ctx, nil)
			n = 1
			if tErr := src.Teardown(ctx); tErr != nil {
				h.t.Fatalf("Teardown: %v", tErr)
			}
		case op == chaosOpen:
			var dst Destination
			if dst, err = h.plugin.NewDestination(h.cfg); err != nil {
				h.t.Fatalf("NewDestination: %v", err)
			}
			err = dst.Open(ctx)
			n = 1
			if tErr := dst.Teardown(ctx); tErr != nil {
				h.t.Fatalf("Teardown: %v", tErr)
			}
		case op == chaosRead:
			n, err = h.source().Read(ctx, make([]record.Record, h.batch))
		case op == chaosAck:
			src := h.source()
			recs := readN(h.t, src, h.batch)
			pos := make([]record.Position, len(recs))
			for i, r := range recs {
				pos[i] = r.Position
			}
			err = src.Ack(ctx, pos)
			n = len(pos)
		case op == chaosWrite:
			n, err = h.destination().Write(ctx, chaosRecords(h.batch))
		}
		if err != nil {
			n = max(n, 0)
			if op == chaosOpen || op == chaosAck {
				n = 0
			}
		}
		out = append(out, h.outcome(n, err))
		if err != nil {
			h.restart()
		}
		h.clock.Advance(h.step)
	}
	h.restart()
	return out
}

func chaosRecords(n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = testRecord(fmt.Sprint(i+1), record.RawData("payload"))
	}
	return recs
}

func TestChaosFailurePlans(t *testing.T) {
	tests := []struct {
		name     string
		role     connectorRole
		op       string // the operation the steps call
		settings map[string]string
		batch    int
		step     time.Duration // clock advance after each call
		want     []string
	}{
		// Source, read.
		{name: "read: no fail.on never fails", role: roleSource, op: chaosRead,
			settings: map[string]string{}, batch: 4,
			want: []string{"4", "4", "4"}},
		{name: "read: fail.on alone fails every call", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read"}, batch: 4,
			want: []string{"E1", "E2", "E3"}},
		{name: "read: after 6 shortens the batch, then every call fails", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.after": "6"}, batch: 4,
			want: []string{"4", "2", "E1", "E2"}},
		{name: "read: a blip that heals after 3 failures", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.count": "3"}, batch: 4,
			want: []string{"E1", "E2", "E3", "4", "4"}},
		{name: "read: after and count", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.after": "6", "fail.count": "2"}, batch: 4,
			want: []string{"4", "2", "E1", "E2", "4", "4"}},
		{name: "read: every 5 records", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.after": "2", "fail.every": "5"}, batch: 4,
			want: []string{"2", "E1", "4", "1", "E2", "4", "1", "E3"}},
		{name: "read: duration stops the failures", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.duration": "10s"}, batch: 4, step: 3 * time.Second,
			want: []string{"E1", "E2", "E3", "E4", "4", "4"}},
		{name: "read: duration with every", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.every": "4", "fail.duration": "10s"}, batch: 4, step: 3 * time.Second,
			want: []string{"E1", "4", "E2", "4", "4", "4"}},
		{name: "read: count ends before duration", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.duration": "1h", "fail.count": "2"}, batch: 4, step: time.Second,
			want: []string{"E1", "E2", "4"}},
		{name: "read: duration ends before count", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "read", "fail.duration": "2s", "fail.count": "10"}, batch: 4, step: time.Second,
			want: []string{"E1", "E2", "4"}},
		{name: "read: failing open does not fail reads", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "open", "fail.after": "1"}, batch: 4,
			want: []string{"4", "4"}},

		// Source, ack.
		{name: "ack: fail.on alone fails every call", role: roleSource, op: chaosAck,
			settings: map[string]string{"fail.on": "ack"}, batch: 4,
			want: []string{"E1", "E2"}},
		{name: "ack: the call that crosses after fails as a whole", role: roleSource, op: chaosAck,
			settings: map[string]string{"fail.on": "ack", "fail.after": "6", "fail.count": "1"}, batch: 4,
			want: []string{"4", "E1", "4", "4"}},
		{name: "ack: every 8", role: roleSource, op: chaosAck,
			settings: map[string]string{"fail.on": "ack", "fail.after": "4", "fail.every": "8"}, batch: 4,
			want: []string{"4", "E1", "4", "4", "E2", "4"}},
		{name: "ack: reads do not count", role: roleSource, op: chaosRead,
			settings: map[string]string{"fail.on": "ack"}, batch: 4,
			want: []string{"4", "4"}},

		// Source, open.
		{name: "source open: after 2", role: roleSource, op: chaosOpen,
			settings: map[string]string{"fail.on": "open", "fail.after": "2"},
			want:     []string{"1", "1", "E1", "E2"}},
		{name: "source open: every 2, count 2", role: roleSource, op: chaosOpen,
			settings: map[string]string{"fail.on": "open", "fail.after": "1", "fail.every": "2", "fail.count": "2"},
			want:     []string{"1", "E1", "1", "1", "E2", "1", "1", "1"}},
		{name: "source open: duration", role: roleSource, op: chaosOpen,
			settings: map[string]string{"fail.on": "open", "fail.duration": "5s"}, step: 2 * time.Second,
			want: []string{"E1", "E2", "E3", "1", "1"}},

		// Destination, open.
		{name: "destination open: after 1, count 1", role: roleDestination, op: chaosOpen,
			settings: map[string]string{"fail.on": "open", "fail.after": "1", "fail.count": "1"},
			want:     []string{"1", "E1", "1", "1"}},
		{name: "destination open: down for 30s", role: roleDestination, op: chaosOpen,
			settings: map[string]string{"fail.on": "open", "fail.duration": "30s"}, step: 10 * time.Second,
			want: []string{"E1", "E2", "E3", "1"}},

		// Destination, write.
		{name: "write: no fail.on discards", role: roleDestination, op: chaosWrite,
			settings: map[string]string{}, batch: 4,
			want: []string{"4", "4"}},
		{name: "write: fail.on alone fails every call", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write"}, batch: 4,
			want: []string{"E1", "E2"}},
		{name: "write: after 6 writes the prefix and fails at record 7", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write", "fail.after": "6"}, batch: 4,
			want: []string{"4", "2E1", "E2"}},
		{name: "write: every 5", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write", "fail.every": "5"}, batch: 4,
			want: []string{"E1", "4", "1E2", "4", "1E3"}},
		{name: "write: partial writes half", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write", "fail.partial": "true", "fail.count": "2"}, batch: 4,
			want: []string{"2E1", "2E2", "4"}},
		{name: "write: partial after the prefix writes half of the rest", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write", "fail.after": "6", "fail.partial": "true"}, batch: 4,
			want: []string{"4", "3E1", "2E2"}},
		{name: "write: down for 30s", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "write", "fail.after": "8", "fail.duration": "30s"}, batch: 4, step: 10 * time.Second,
			want: []string{"4", "4", "E1", "E2", "E3", "4"}},
		{name: "write: failing open does not fail writes", role: roleDestination, op: chaosWrite,
			settings: map[string]string{"fail.on": "open", "fail.after": "1"}, batch: 4,
			want: []string{"4", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newChaosHarness(t, tt.settings, tt.batch, tt.step)
			got := h.run(tt.role, tt.op, len(tt.want))
			if !slices.Equal(got, tt.want) {
				t.Errorf("outcomes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChaosErrorFormats(t *testing.T) {
	const text = `chaos source "gen": read: chaos: injected failure (failure 1 of 2)`
	tests := []struct {
		name        string
		settings    map[string]string
		wantClass   cerrors.Class
		wantCode    int
		wantSource  cerrors.Source
		wantMessage string
		wantText    string // err.Error(), when it differs from wantMessage
	}{
		{name: "typed by default",
			settings:  map[string]string{},
			wantClass: cerrors.ClassTransient, wantCode: 503, wantSource: cerrors.SourceTyped, wantMessage: text},
		{name: "typed fatal",
			settings:  map[string]string{"fail.format": "typed", "fail.code": "400"},
			wantClass: cerrors.ClassFatal, wantCode: 400, wantSource: cerrors.SourceTyped, wantMessage: text},
		{name: "typed rate limited",
			settings:  map[string]string{"fail.code": "429"},
			wantClass: cerrors.ClassTransient, wantCode: 429, wantSource: cerrors.SourceTyped, wantMessage: text},
		{name: "json transient",
			settings:  map[string]string{"fail.format": "json"},
			wantClass: cerrors.ClassTransient, wantCode: 503, wantSource: cerrors.SourceJSON, wantMessage: text,
			wantText: `{"code":503,"message":"chaos source \"gen\": read: chaos: injected failure (failure 1 of 2)"}`},
		{name: "json fatal 501",
			settings:  map[string]string{"fail.format": "JSON", "fail.code": "501"},
			wantClass: cerrors.ClassFatal, wantCode: 501, wantSource: cerrors.SourceJSON, wantMessage: text,
			wantText: `{"code":501,"message":"chaos source \"gen\": read: chaos: injected failure (failure 1 of 2)"}`},
		{name: "text has no code",
			settings:  map[string]string{"fail.format": "text"},
			wantClass: cerrors.ClassTransient, wantCode: 0, wantSource: cerrors.SourceDefault, wantMessage: text},
		{name: "custom message",
			settings:  map[string]string{"fail.message": "connection refused", "fail.code": "502"},
			wantClass: cerrors.ClassTransient, wantCode: 502, wantSource: cerrors.SourceTyped,
			wantMessage: `chaos source "gen": read: connection refused (failure 1 of 2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settings := maps.Clone(tt.settings)
			settings["fail.on"] = "read"
			settings["fail.count"] = "2"
			src, err := NewChaosPlugin(newFakeClock().Now).NewSource(Config{PipelineID: "p", ConnectorID: "gen", Settings: settings})
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Open(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			_, err = src.Read(context.Background(), make([]record.Record, 4))
			if err == nil {
				t.Fatal("Read succeeded, want the injected failure")
			}
			wantText := tt.wantText
			if wantText == "" {
				wantText = tt.wantMessage
			}
			if err.Error() != wantText {
				t.Errorf("error text = %s\nwant         %s", err, wantText)
			}
			got := cerrors.Classify(err)
			if got.Class != tt.wantClass || got.Code != tt.wantCode || got.Source != tt.wantSource || got.Message != tt.wantMessage {
				t.Errorf("Classify = {%v %d %v %q}, want {%v %d %v %q}",
					got.Class, got.Code, got.Source, got.Message, tt.wantClass, tt.wantCode, tt.wantSource, tt.wantMessage)
			}
			var coded *cerrors.Error
			isTyped := errors.As(err, &coded)
			if isTyped != (tt.wantSource == cerrors.SourceTyped) {
				t.Errorf("errors.As(*cerrors.Error) = %v, want %v", isTyped, tt.wantSource == cerrors.SourceTyped)
			}
			if _, top := err.(*cerrors.Error); top {
				t.Error("the typed error is not wrapped: the code should sit below a %w")
			}
		})
	}
}

func TestChaosDestinationErrorNamesConnectorAndOperation(t *testing.T) {
	plugin := NewChaosPlugin(newFakeClock().Now)
	dst, err := plugin.NewDestination(Config{ConnectorID: "sink", Settings: map[string]string{"fail.on": "open"}})
	if err != nil {
		t.Fatal(err)
	}
	err = dst.Open(context.Background())
	if want := `chaos destination "sink": open: chaos: injected failure (failure 1)`; err == nil || err.Error() != want {
		t.Errorf("Open error = %v, want %s", err, want)
	}
}

func TestChaosPartialWriteToFile(t *testing.T) {
	tests := []struct {
		name  string
		batch int
		want  int
	}{
		{name: "even batch", batch: 10, want: 5},
		{name: "odd batch", batch: 7, want: 3},
		{name: "one record", batch: 1, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out", "chaos.jsonl")
			plugin := NewChaosPlugin(newFakeClock().Now)
			cfg := Config{PipelineID: "p", ConnectorID: "sink", Settings: map[string]string{
				"path": path, "fail.on": "write", "fail.partial": "true", "fail.count": "1", "fail.code": "500",
			}}
			batch := chaosRecords(tt.batch)

			dst, err := plugin.NewDestination(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			n, err := dst.Write(context.Background(), batch)
			if n != tt.want || err == nil {
				t.Fatalf("Write = %d, %v; want %d and the injected failure", n, err, tt.want)
			}
			if err := dst.Teardown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := positions(readRecords(t, path)); !slices.Equal(got, positions(batch[:tt.want])) {
				t.Errorf("file holds positions %v, want %v", got, positions(batch[:tt.want]))
			}

			// The restarted destination writes the rest; count 1 is used up.
			dst, err = plugin.NewDestination(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n, err := dst.Write(context.Background(), batch[tt.want:]); err != nil || n != tt.batch-tt.want {
				t.Fatalf("Write after restart = %d, %v; want %d, nil", n, err, tt.batch-tt.want)
			}
			if err := dst.Teardown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := positions(readRecords(t, path)); !slices.Equal(got, positions(batch)) {
				t.Errorf("file holds positions %v, want %v", got, positions(batch))
			}
		})
	}
}

func TestChaosStateIsPerPluginAndConnector(t *testing.T) {
	failOnce := map[string]string{"fail.on": "read", "fail.count": "1"}
	read := func(t *testing.T, reg *Registry, pipelineID, connectorID string, settings map[string]string) string {
		t.Helper()
		src, err := reg.NewSource("builtin:chaos", Config{PipelineID: pipelineID, ConnectorID: connectorID, Settings: settings})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Open(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		defer src.Teardown(context.Background())
		n, err := src.Read(context.Background(), make([]record.Record, 2))
		if err != nil {
			return "fail"
		}
		return fmt.Sprint(n)
	}
	reg1, reg2 := NewRegistry(Builtin()...), NewRegistry(Builtin()...)
	steps := []struct {
		name       string
		reg        *Registry
		pipelineID string
		connector  string
		settings   map[string]string
		want       string
	}{
		{name: "first registry fails once", reg: reg1, pipelineID: "p", connector: "c", settings: failOnce, want: "fail"},
		{name: "first registry, restarted", reg: reg1, pipelineID: "p", connector: "c", settings: failOnce, want: "2"},
		{name: "second registry has its own count", reg: reg2, pipelineID: "p", connector: "c", settings: failOnce, want: "fail"},
		{name: "another connector id", reg: reg1, pipelineID: "p", connector: "c2", settings: failOnce, want: "fail"},
		{name: "another pipeline", reg: reg1, pipelineID: "p2", connector: "c", settings: failOnce, want: "fail"},
		{name: "changed settings reset the count", reg: reg1, pipelineID: "p", connector: "c",
			settings: map[string]string{"fail.on": "read", "fail.count": "1", "fail.message": "other"}, want: "fail"},
		{name: "and count again", reg: reg1, pipelineID: "p", connector: "c",
			settings: map[string]string{"fail.on": "read", "fail.count": "1", "fail.message": "other"}, want: "2"},
	}
	for _, s := range steps {
		if got := read(t, s.reg, s.pipelineID, s.connector, s.settings); got != s.want {
			t.Errorf("%s: read = %s, want %s", s.name, got, s.want)
		}
	}

	// The source and the destination of one id count separately.
	plugin := NewChaosPlugin(newFakeClock().Now)
	cfg := Config{PipelineID: "p", ConnectorID: "both", Settings: map[string]string{"fail.on": "open", "fail.count": "1"}}
	src, _ := plugin.NewSource(cfg)
	dst, _ := plugin.NewDestination(cfg)
	if src.Open(context.Background(), nil) == nil || dst.Open(context.Background()) == nil {
		t.Error("source and destination of the same id share a counter; want one failure each")
	}
}

func TestChaosConstructionDoesNotCount(t *testing.T) {
	// The runtime builds connectors to validate pipeline files; that must
	// not use up failures.
	plugin := NewChaosPlugin(newFakeClock().Now)
	cfg := Config{PipelineID: "p", ConnectorID: "c", Settings: map[string]string{"fail.on": "open", "fail.count": "1"}}
	for range 3 {
		if _, err := plugin.NewSource(cfg); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := plugin.NewSource(cfg)
	if err := src.Open(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "(failure 1 of 1)") {
		t.Errorf("Open = %v, want failure 1 of 1", err)
	}
}

func TestChaosCancelledCallsDoNotCount(t *testing.T) {
	plugin := NewChaosPlugin(newFakeClock().Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	src, _ := plugin.NewSource(Config{ConnectorID: "s", Settings: map[string]string{"fail.on": "read"}})
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(ctx, make([]record.Record, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a done context = %v, want context.Canceled", err)
	}
	if _, err := src.Read(context.Background(), make([]record.Record, 1)); err == nil || !strings.Contains(err.Error(), "(failure 1)") {
		t.Errorf("Read = %v, want failure 1", err)
	}

	dst, _ := plugin.NewDestination(Config{ConnectorID: "d", Settings: map[string]string{"fail.on": "write"}})
	if err := dst.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Write(ctx, chaosRecords(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a done context = %v, want context.Canceled", err)
	}
	if _, err := dst.Write(context.Background(), chaosRecords(1)); err == nil || !strings.Contains(err.Error(), "(failure 1)") {
		t.Errorf("Write = %v, want failure 1", err)
	}
}

func TestChaosSourceProducesGeneratorRecords(t *testing.T) {
	tests := []struct {
		name     string
		settings map[string]string
		pos      string
		wantPos  []string
		wantData map[string]bool // payload fields expected in every record
	}{
		{name: "no settings: id field", settings: nil,
			wantPos: []string{"1", "2", "3"}, wantData: map[string]bool{"id": true}},
		{name: "resume after 7", settings: map[string]string{"fail.on": "ack", "fail.after": "100"}, pos: "7",
			wantPos: []string{"8", "9", "10"}, wantData: map[string]bool{"id": true}},
		{name: "own fields replace the default", settings: map[string]string{"format.options.name": "string"},
			wantPos: []string{"1", "2", "3"}, wantData: map[string]bool{"name": true}},
		{name: "recordCount limits the batch", settings: map[string]string{"recordCount": "2"},
			wantPos: []string{"1", "2"}, wantData: map[string]bool{"id": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := NewChaosPlugin(nil).NewSource(Config{ConnectorID: "gen", Settings: tt.settings})
			if err != nil {
				t.Fatal(err)
			}
			var pos record.Position
			if tt.pos != "" {
				pos = record.Position(tt.pos)
			}
			if err := src.Open(context.Background(), pos); err != nil {
				t.Fatal(err)
			}
			recs := readN(t, src, 3)
			if got := positions(recs); !slices.Equal(got, tt.wantPos) {
				t.Errorf("positions = %v, want %v", got, tt.wantPos)
			}
			for _, r := range recs {
				data, ok := r.Payload.After.(record.StructuredData)
				if !ok {
					t.Fatalf("payload is %T, want structured", r.Payload.After)
				}
				got := map[string]bool{}
				for k := range data {
					got[k] = true
				}
				if !maps.Equal(got, tt.wantData) {
					t.Errorf("payload fields = %v, want %v", got, tt.wantData)
				}
				if r.Metadata[record.MetadataSourceConnectorID] != "gen" {
					t.Errorf("metadata = %v, want the connector id", r.Metadata)
				}
			}
		})
	}
}

func TestChaosSettingErrors(t *testing.T) {
	tests := []struct {
		name     string
		role     connectorRole
		settings map[string]string
		setting  string
		want     []string
	}{
		{name: "write is not a source operation", role: roleSource,
			settings: map[string]string{"fail.on": "write"}, setting: "fail.on",
			want: []string{`"write"`, "want open, read, ack"}},
		{name: "read is not a destination operation", role: roleDestination,
			settings: map[string]string{"fail.on": "read"}, setting: "fail.on",
			want: []string{"want open, write"}},
		{name: "negative after", role: roleSource,
			settings: map[string]string{"fail.on": "read", "fail.after": "-1"}, setting: "fail.after",
			want: []string{"0 or more"}},
		{name: "every not a number", role: roleDestination,
			settings: map[string]string{"fail.every": "often"}, setting: "fail.every",
			want: []string{"not a whole number"}},
		{name: "negative count", role: roleSource,
			settings: map[string]string{"fail.count": "-3"}, setting: "fail.count",
			want: []string{"0 or more"}},
		{name: "negative duration", role: roleSource,
			settings: map[string]string{"fail.duration": "-1s"}, setting: "fail.duration",
			want: []string{"negative"}},
		{name: "duration without unit", role: roleDestination,
			settings: map[string]string{"fail.duration": "30"}, setting: "fail.duration",
			want: []string{"not a duration"}},
		{name: "code too small", role: roleSource,
			settings: map[string]string{"fail.code": "99"}, setting: "fail.code",
			want: []string{"100 or more"}},
		{name: "code too large", role: roleSource,
			settings: map[string]string{"fail.code": "600"}, setting: "fail.code",
			want: []string{"599 or less"}},
		{name: "code not a number", role: roleDestination,
			settings: map[string]string{"fail.code": "fatal"}, setting: "fail.code",
			want: []string{"not a whole number"}},
		{name: "unknown format", role: roleSource,
			settings: map[string]string{"fail.format": "xml"}, setting: "fail.format",
			want: []string{"typed, json or text"}},
		{name: "code with text format", role: roleSource,
			settings: map[string]string{"fail.format": "text", "fail.code": "400"}, setting: "fail.code",
			want: []string{"text error carries no code"}},
		{name: "partial on a source", role: roleSource,
			settings: map[string]string{"fail.partial": "true"}, setting: "fail.partial",
			want: []string{"only applies to a destination"}},
		{name: "partial with open", role: roleDestination,
			settings: map[string]string{"fail.on": "open", "fail.partial": "true"}, setting: "fail.partial",
			want: []string{"only applies to fail.on write"}},
		{name: "partial not a bool", role: roleDestination,
			settings: map[string]string{"fail.partial": "half"}, setting: "fail.partial",
			want: []string{"not a boolean"}},
		{name: "unknown fail setting", role: roleSource,
			settings: map[string]string{"fail.rate": "1"}, setting: "fail.rate",
			want: []string{"unknown setting", "fail.on"}},
		{name: "wrong case", role: roleDestination,
			settings: map[string]string{"Fail.On": "write"}, setting: "Fail.On",
			want: []string{`did you mean "fail.on"`}},
		{name: "unknown source setting lists chaos settings too", role: roleSource,
			settings: map[string]string{"path": "/tmp/x"}, setting: "path",
			want: []string{"unknown setting", "format.type", "fail.on"}},
		{name: "generator setting checked", role: roleSource,
			settings: map[string]string{"format.type": "xml"}, setting: "format.type",
			want: []string{"not a format"}},
		{name: "generator file format still needs its path", role: roleSource,
			settings: map[string]string{"format.type": "file"}, setting: "format.options.path",
			want: []string{"required"}},
		{name: "fail settings checked before the generator's", role: roleSource,
			settings: map[string]string{"format.type": "xml", "fail.on": "write"}, setting: "fail.on"},
		{name: "sync without path", role: roleDestination,
			settings: map[string]string{"sync": "true"}, setting: "sync",
			want: []string{"only applies with path"}},
		{name: "unknown destination setting", role: roleDestination,
			settings: map[string]string{"pth": "/tmp/x"}, setting: "pth",
			want: []string{"unknown setting", "path", "fail.on"}},
		{name: "unknown destination setting with path", role: roleDestination,
			settings: map[string]string{"path": "/tmp/x", "mode": "0600"}, setting: "mode",
			want: []string{"unknown setting", "sync", "fail.partial"}},
		{name: "file setting checked", role: roleDestination,
			settings: map[string]string{"path": "/tmp/x", "sync": "sometimes"}, setting: "sync",
			want: []string{"not a boolean"}},
		{name: "sdk record format checked without path", role: roleDestination,
			settings: map[string]string{"sdk.record.format": "avro"}, setting: "sdk.record.format",
			want: []string{"not supported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugin := NewChaosPlugin(nil)
			cfg := Config{ConnectorID: "c", Settings: tt.settings}
			var err error
			if tt.role == roleSource {
				_, err = plugin.NewSource(cfg)
			} else {
				_, err = plugin.NewDestination(cfg)
			}
			wantSettingError(t, err, tt.setting, tt.want...)
		})
	}
}

func TestChaosValidSettings(t *testing.T) {
	tests := []struct {
		name     string
		role     connectorRole
		settings map[string]string
	}{
		{name: "source, everything", role: roleSource, settings: map[string]string{
			"fail.on": "Ack", "fail.after": "10", "fail.every": "5", "fail.duration": "1m",
			"fail.count": "3", "fail.code": "429", "fail.format": "json", "fail.message": "boom",
			"format.options.n": "int", "rate": "100", "sdk.batch.size": "10"}},
		{name: "destination, everything", role: roleDestination, settings: map[string]string{
			"fail.on": "write", "fail.after": "10", "fail.every": "5", "fail.duration": "1m",
			"fail.count": "3", "fail.code": "400", "fail.format": "typed", "fail.message": "boom",
			"fail.partial": "true", "path": "/tmp/never-opened", "sync": "true"}},
		{name: "text format with default code", role: roleDestination, settings: map[string]string{
			"fail.on": "open", "fail.format": "text"}},
		{name: "empty values are defaults", role: roleSource, settings: map[string]string{
			"fail.on": "", "fail.code": "", "fail.partial": ""}},
		{name: "settings without fail.on are inert", role: roleDestination, settings: map[string]string{
			"fail.count": "2", "fail.partial": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugin := NewChaosPlugin(nil)
			cfg := Config{ConnectorID: "c", Settings: tt.settings}
			var err error
			if tt.role == roleSource {
				_, err = plugin.NewSource(cfg)
			} else {
				_, err = plugin.NewDestination(cfg)
			}
			if err != nil {
				t.Errorf("error = %v, want none", err)
			}
		})
	}
}

func TestChaosInRegistry(t *testing.T) {
	reg := NewRegistry(Builtin()...)
	if _, err := reg.NewSource("builtin:chaos", Config{}); err != nil {
		t.Errorf("NewSource(builtin:chaos) without settings: %v", err)
	}
	if _, err := reg.NewDestination("chaos@latest", Config{}); err != nil {
		t.Errorf("NewDestination(chaos@latest) without settings: %v", err)
	}
	_, err := reg.Lookup("builtin:nope")
	if err == nil || !strings.Contains(err.Error(), "builtin:chaos") {
		t.Errorf("Lookup error = %v, want builtin:chaos among the known plugins", err)
	}
}

func TestChaosConcurrentReadAndAck(t *testing.T) {
	// Read and Ack run on different goroutines; -race checks the state.
	plugin := NewChaosPlugin(newFakeClock().Now)
	src, err := plugin.NewSource(Config{ConnectorID: "c", Settings: map[string]string{
		"fail.on": "ack", "fail.after": "1000000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	positions := make(chan []record.Position, 8)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(positions)
		batch := make([]record.Record, 16)
		for range 200 {
			n, err := src.Read(context.Background(), batch)
			if err != nil {
				t.Errorf("Read: %v", err)
				return
			}
			pos := make([]record.Position, n)
			for i := range pos {
				pos[i] = batch[i].Position
			}
			positions <- pos
		}
	})
	for pos := range positions {
		if err := src.Ack(context.Background(), pos); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestChaosPlanDescription(t *testing.T) {
	tests := []struct {
		name   string
		policy chaosPolicy
		want   string
	}{
		{name: "off", policy: chaosPolicy{}, want: "never fails (no fail.on)"},
		{name: "every call", policy: chaosPolicy{on: "read", format: "typed", code: 503},
			want: "fails read after 0 records, then on every call (format typed, code 503)"},
		{name: "once", policy: chaosPolicy{on: "write", after: 99, count: 1, every: 5, format: "typed", code: 422},
			want: "fails write after 99 records, once (format typed, code 422)"},
		{name: "every, duration, count", policy: chaosPolicy{on: "open", every: 2, duration: 30 * time.Second, count: 3, format: "text"},
			want: "fails open after 0 successful opens, then every 2 successful opens for 30s, 3 failures at most (format text)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.describe(); got != tt.want {
				t.Errorf("describe() = %q\nwant         %q", got, tt.want)
			}
		})
	}
}
