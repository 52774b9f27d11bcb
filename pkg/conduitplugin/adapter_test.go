package conduitplugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-connector-sdk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/writeguard"
)

// countingSource is a connector of Conduit's SDK: it counts from its
// position, and records what it is acked and told.
type countingSource struct {
	sdk.UnimplementedSource
	cfg countingSourceConfig

	mu         sync.Mutex
	next       int
	acked      []string
	failAfter  int    // Read fails once it passed this number; 0: never; -1: at once
	beforeRead func() // called at the start of every Read, when set
	tornDown   bool
	events     []string
}

type countingSourceConfig struct {
	sdk.UnimplementedSourceConfig
	Prefix string `json:"prefix"`
}

var countingParams = config.Parameters{
	"prefix": {Type: config.ParameterTypeString, Default: "n"},
	"limit":  {Type: config.ParameterTypeInt, Validations: []config.Validation{config.ValidationRequired{}}},
}

func (s *countingSource) Config() sdk.SourceConfig { return &s.cfg }

func (s *countingSource) Open(_ context.Context, pos opencdc.Position) error {
	if pos != nil {
		n, err := strconv.Atoi(string(pos))
		if err != nil {
			return err
		}
		s.next = n
	}
	return nil
}

func (s *countingSource) Read(ctx context.Context) (opencdc.Record, error) {
	if s.beforeRead != nil {
		s.beforeRead()
	}
	s.mu.Lock()
	s.next++
	n, fail := s.next, s.failAfter
	s.mu.Unlock()
	if fail != 0 && n > fail {
		return opencdc.Record{}, errors.New("upstream went away")
	}
	select {
	case <-ctx.Done():
		return opencdc.Record{}, ctx.Err()
	default:
	}
	return opencdc.Record{
		Position:  opencdc.Position(strconv.Itoa(n)),
		Operation: opencdc.OperationCreate,
		Metadata:  opencdc.Metadata{"n": strconv.Itoa(n)},
		Key:       opencdc.RawData(s.cfg.Prefix + strconv.Itoa(n)),
		Payload:   opencdc.Change{After: opencdc.StructuredData{"n": n}},
	}, nil
}

func (s *countingSource) Ack(_ context.Context, pos opencdc.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = append(s.acked, string(pos))
	return nil
}

func (s *countingSource) Teardown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tornDown = true
	return nil
}

func (s *countingSource) LifecycleOnCreated(_ context.Context, c config.Config) error {
	s.events = append(s.events, "created "+c["prefix"])
	return nil
}

func (s *countingSource) LifecycleOnDeleted(_ context.Context, c config.Config) error {
	s.events = append(s.events, "deleted "+c["prefix"])
	return nil
}

func (s *countingSource) LifecycleOnUpdated(_ context.Context, before, after config.Config) error {
	s.events = append(s.events, "updated "+before["prefix"]+" -> "+after["prefix"])
	return nil
}

type memState struct{ v []byte }

func (m *memState) Load(context.Context) ([]byte, error) { return m.v, nil }
func (m *memState) Save(_ context.Context, v []byte) error {
	m.v = append([]byte(nil), v...)
	return nil
}

func newCountingSource(impl *countingSource, settings map[string]string, state State) *Source {
	plug := InProcessSDKSource(impl, pconnector.PluginConfig{ConnectorID: "p:src"}, countingParams)
	return NewSource(plug, Options{PipelineID: "p", ConnectorID: "src", Plugin: "builtin:counting",
		Settings: settings, State: state, Params: countingParams})
}

func readRecords(t *testing.T, s *Source, n int) []record.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []record.Record
	batch := make([]record.Record, 4)
	for len(out) < n {
		k, err := s.Read(ctx, batch)
		if err != nil {
			t.Fatalf("read after %d records: %v", len(out), err)
		}
		out = append(out, batch[:k]...)
	}
	return out
}

func TestSourceReadsAcksAndResumes(t *testing.T) {
	impl := &countingSource{}
	state := &memState{}
	src := newCountingSource(impl, map[string]string{"prefix": "a", "limit": "9"}, state)
	ctx := context.Background()
	if err := src.Open(ctx, record.Position("10")); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, src, 6)
	for i, r := range recs {
		n := 11 + i
		if string(r.Position) != strconv.Itoa(n) || r.Operation != record.OperationCreate ||
			string(r.Key.Bytes()) != "a"+strconv.Itoa(n) || r.Metadata["n"] != strconv.Itoa(n) {
			t.Fatalf("record %d = %+v, want position %d with key a%d", i, r, n, n)
		}
		if got := r.Payload.After.(record.StructuredData)["n"]; got != n {
			t.Fatalf("record %d payload n = %v, want %d", i, got, n)
		}
	}
	if err := src.Ack(ctx, []record.Position{recs[0].Position, recs[1].Position}); err != nil {
		t.Fatal(err)
	}
	if err := src.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	if strings.Join(impl.acked, ",") != "11,12" || !impl.tornDown {
		t.Errorf("acked %v, torn down %v; want 11,12 acked in order and a teardown", impl.acked, impl.tornDown)
	}
	impl.mu.Unlock()
	if strings.Join(impl.events, ";") != "created a" {
		t.Errorf("lifecycle events %q, want one created", impl.events)
	}

	// The same settings again: no event; changed ones: updated.
	for _, tc := range []struct{ prefix, want string }{{"a", ""}, {"b", "updated a -> b"}} {
		impl2 := &countingSource{}
		src2 := newCountingSource(impl2, map[string]string{"prefix": tc.prefix, "limit": "9"}, state)
		if err := src2.Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := src2.Teardown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(impl2.events, ";"); got != tc.want {
			t.Errorf("prefix %s: lifecycle events %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func TestSourceErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("settings the connector refuses are fatal", func(t *testing.T) {
		src := newCountingSource(&countingSource{}, map[string]string{"prefix": "a"}, nil) // no limit
		err := src.Open(ctx, nil)
		if err == nil || cerrors.Classify(err).Class != cerrors.ClassFatal || !strings.Contains(err.Error(), "limit") ||
			!strings.Contains(err.Error(), "builtin:counting") {
			t.Fatalf("Open = %v (%+v), want a fatal error naming the setting and the plugin", err, cerrors.Classify(err))
		}
		if err := src.Teardown(ctx); err != nil {
			t.Errorf("Teardown after a failed Open: %v", err)
		}
	})
	t.Run("a read error ends the run and is transient", func(t *testing.T) {
		src := newCountingSource(&countingSource{failAfter: 3}, map[string]string{"limit": "1"}, nil)
		if err := src.Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = src.Teardown(ctx) }()
		readRecords(t, src, 3)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := src.Read(rctx, make([]record.Record, 4))
		if err == nil || !strings.Contains(err.Error(), "upstream went away") || cerrors.Classify(err).Class != cerrors.ClassTransient {
			t.Fatalf("Read = %v, want the connector's error, transient", err)
		}
		if _, again := src.Read(rctx, make([]record.Record, 4)); again == nil || again.Error() != err.Error() {
			t.Errorf("Read after the end = %v, want the same error", again)
		}
	})
	t.Run("a connector failing at its first read ends the run with its error", func(t *testing.T) {
		// The SDK's plugin panics when its reading goroutine ends before
		// its acknowledging one started, which a read failing at once
		// does when the scheduler lets it: many runs to give it the chance.
		for range 300 {
			src := newCountingSource(&countingSource{failAfter: -1}, map[string]string{"limit": "1"}, nil)
			if err := src.Open(ctx, nil); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := src.Read(rctx, make([]record.Record, 4))
			cancel()
			if err == nil || !strings.Contains(err.Error(), "upstream went away") {
				t.Fatalf("Read = %v, want the connector's error", err)
			}
			if err := src.Teardown(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("read gives up when its context ends", func(t *testing.T) {
		impl := &countingSource{}
		src := newCountingSource(impl, map[string]string{"limit": "1"}, nil)
		if err := src.Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = src.Teardown(ctx) }()
		src.pending = nil
		// Drain what is ready, then wait on a context that ends.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for {
			if _, err := src.Read(cctx, make([]record.Record, 1024)); errors.Is(err, context.Canceled) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// memoryDestination is a destination of Conduit's SDK that keeps what it
// is written; failAt makes the write of that position fail.
type memoryDestination struct {
	sdk.UnimplementedDestination
	cfg    memoryDestinationConfig
	mu     sync.Mutex
	got    []opencdc.Record
	writes []int
	failAt string
}

type memoryDestinationConfig struct {
	sdk.UnimplementedDestinationConfig
}

func (d *memoryDestination) Config() sdk.DestinationConfig  { return &d.cfg }
func (d *memoryDestination) Open(context.Context) error     { return nil }
func (d *memoryDestination) Teardown(context.Context) error { return nil }

func (d *memoryDestination) Write(_ context.Context, recs []opencdc.Record) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes = append(d.writes, len(recs))
	for i, r := range recs {
		if string(r.Position) == d.failAt {
			return i, fmt.Errorf("constraint violated by %s", r.Position)
		}
		d.got = append(d.got, r)
	}
	return len(recs), nil
}

func newMemoryDestination(impl *memoryDestination, settings map[string]string) *Destination {
	params := config.Parameters{
		"sdk.batch.size":  {Type: config.ParameterTypeInt},
		"sdk.batch.delay": {Type: config.ParameterTypeDuration},
	}
	plug := sdk.NewDestinationPlugin(impl, pconnector.PluginConfig{ConnectorID: "p:dst"}, params)
	return NewDestination(InProcessDestination(plug), Options{PipelineID: "p", ConnectorID: "dst", Plugin: "builtin:memory",
		Settings: settings, Params: params})
}

func batchOf(from, to int) []record.Record {
	var out []record.Record
	for i := from; i <= to; i++ {
		out = append(out, record.Record{Position: record.Position(strconv.Itoa(i)), Operation: record.OperationCreate,
			Metadata: record.Metadata{"i": strconv.Itoa(i)}, Payload: record.Change{After: record.RawData("v" + strconv.Itoa(i))}})
	}
	return out
}

func TestDestinationWritesEachBatchOnce(t *testing.T) {
	impl := &memoryDestination{}
	// A batch size the SDK would hold records back for: the engine's
	// batches are written as they are instead.
	dst := newMemoryDestination(impl, map[string]string{"sdk.batch.size": "1000"})
	ctx := context.Background()
	if err := dst.Open(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]record.Record{batchOf(1, 3), batchOf(4, 4), batchOf(5, 9)} {
		n, err := dst.Write(ctx, b)
		if err != nil || n != len(b) {
			t.Fatalf("Write(%d records) = %d, %v", len(b), n, err)
		}
	}
	if err := dst.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(impl.writes) != "[3 1 5]" || len(impl.got) != 9 || string(impl.got[8].Payload.After.Bytes()) != "v9" ||
		impl.got[4].Metadata["i"] != "5" {
		t.Errorf("the connector wrote batches %v with %d records, want [3 1 5] with 9", impl.writes, len(impl.got))
	}
}

func TestDestinationWriteErrorNamesTheRecord(t *testing.T) {
	impl := &memoryDestination{failAt: "3"}
	dst := newMemoryDestination(impl, nil)
	ctx := context.Background()
	if err := dst.Open(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := dst.Write(ctx, batchOf(1, 5))
	if n != 2 || err == nil || !strings.Contains(err.Error(), "constraint violated by 3") {
		t.Fatalf("Write = %d, %v; want 2 written and the connector's error", n, err)
	}
	if pos, ok := cerrors.RecordOf(err); !ok || string(pos) != "3" {
		t.Errorf("the error names record %q (%v), want 3", pos, ok)
	}
	if cerrors.Classify(err).Class != cerrors.ClassTransient {
		t.Errorf("classified %+v, want transient", cerrors.Classify(err))
	}
	if _, again := dst.Write(ctx, batchOf(6, 6)); again == nil {
		t.Error("a write after a failed one succeeded; the run is over")
	}
	if err := dst.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRecordsChangeTypeWithoutCopies(t *testing.T) {
	meta := opencdc.Metadata{"k": "v"}
	raw := opencdc.RawData("key")
	payload := opencdc.StructuredData{"a": 1}
	in := opencdc.Record{Position: opencdc.Position("p"), Operation: opencdc.OperationUpdate, Metadata: meta, Key: raw,
		Payload: opencdc.Change{After: payload}}
	var out record.Record
	record.FromOpenCDC(&in, &out)
	out.Metadata["added"] = "x"
	out.Payload.After.(record.StructuredData)["b"] = 2
	if meta["added"] != "x" || payload["b"] != 2 || &out.Key.(record.RawData)[0] != &raw[0] {
		t.Error("FromOpenCDC copied a field")
	}
	if out.Operation != record.OperationUpdate || out.Payload.Before != nil {
		t.Errorf("converted %+v", out)
	}
	back := record.ToOpenCDC(&out)
	if back.Operation != opencdc.OperationUpdate || back.Payload.Before != nil || back.Metadata["k"] != "v" {
		t.Errorf("back %+v", back)
	}
}

func TestValidateSettings(t *testing.T) {
	params := config.Parameters{
		"url":      {Type: config.ParameterTypeString, Validations: []config.Validation{config.ValidationRequired{}}},
		"mode":     {Type: config.ParameterTypeString, Default: "a", Validations: []config.Validation{config.ValidationInclusion{List: []string{"a", "b"}}}},
		"size":     {Type: config.ParameterTypeInt},
		"tables.*": {Type: config.ParameterTypeString},
	}
	tests := []struct {
		settings      map[string]string
		setting, want string
	}{
		{map[string]string{"url": "x", "tables.users": "id"}, "", ""},
		{map[string]string{}, "url", "required"},
		{map[string]string{"url": "x", "mode": "c"}, "mode", `"c" value must be included in the list [a,b]`},
		{map[string]string{"url": "x", "size": "big"}, "size", "not an integer"},
		{map[string]string{"url": "x", "Mode": "a"}, "Mode", `unknown setting (did you mean "mode"?)`},
		{map[string]string{"url": "x", "tables": "y"}, "tables", "known settings: mode, size, tables.*, url"},
	}
	for _, tt := range tests {
		err := ValidateSettings(params, tt.settings)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tt.settings, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "error validating") {
			t.Errorf("%v: error %v, want one saying %q", tt.settings, err, tt.want)
			continue
		}
		if s := settingOf(err); s != tt.setting {
			t.Errorf("%v: setting %q, want %q (%v)", tt.settings, s, tt.setting, err)
		}
	}
}

func settingOf(err error) string {
	var se *plugin.SettingError
	if errors.As(err, &se) {
		return se.Setting
	}
	return ""
}

func TestLogLine(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	LogLine(log, []byte(`{"@level":"warn","@message":"slot exists","@timestamp":"x","slot":"s1"}`))
	LogLine(log, []byte(`{"level":"error","message":"boom","n":3}`))
	LogLine(log, []byte("plain text"))
	LogLine(log, []byte("  "))
	all := logs.All()
	if len(all) != 3 {
		t.Fatalf("%d entries, want 3: %v", len(all), all)
	}
	if all[0].Level != zap.WarnLevel || all[0].Message != "slot exists" || all[0].ContextMap()["slot"] != "s1" || len(all[0].Context) != 1 {
		t.Errorf("first entry %+v", all[0])
	}
	if all[1].Level != zap.ErrorLevel || all[1].Message != "boom" {
		t.Errorf("second entry %+v", all[1])
	}
	if all[2].Level != zap.InfoLevel || all[2].Message != "plain text" {
		t.Errorf("third entry %+v", all[2])
	}
}

func TestSourceSettingsKeepBatchingInProcessOnly(t *testing.T) {
	settings := map[string]string{"prefix": "x", "sdk.batch.size": "1000", "sdk.batch.delay": "10ms"}
	core, logs := observer.New(zap.WarnLevel)
	for _, tc := range []struct {
		remote bool
		want   config.Config
	}{
		{false, config.Config{"prefix": "x", "sdk.batch.size": "1000", "sdk.batch.delay": "10ms"}},
		{true, config.Config{"prefix": "x"}},
	} {
		got := Options{Settings: settings, Remote: tc.remote, Logger: zap.New(core)}.sourceSettings()
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("remote %v: configured with %v, want %v", tc.remote, got, tc.want)
		}
	}
	var named []string
	for _, e := range logs.All() {
		named = append(named, e.ContextMap()["setting"].(string))
	}
	if fmt.Sprint(named) != "[sdk.batch.size sdk.batch.delay]" {
		t.Errorf("warnings name %v, want each batching setting once", named)
	}
	if settings["sdk.batch.size"] != "1000" {
		t.Errorf("the file's settings were changed: %v", settings)
	}
}

// A deleted pipeline's connector gets its deleted event with the settings
// it last ran with - once, and only if it ever ran.
func TestDeletedEvent(t *testing.T) {
	ctx := context.Background()
	state := &memState{}
	never := &countingSource{}
	if err := newCountingSource(never, map[string]string{"prefix": "a", "limit": "1"}, state).Deleted(ctx); err != nil {
		t.Fatal(err)
	}
	if len(never.events) != 0 {
		t.Fatalf("a connector that never ran got %q", never.events)
	}
	ran := &countingSource{}
	src := newCountingSource(ran, map[string]string{"prefix": "a", "limit": "1"}, state)
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := src.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := &countingSource{}
	del := newCountingSource(deleted, map[string]string{"prefix": "b", "limit": "1"}, state)
	if err := del.Deleted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := del.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deleted.events, ";"); got != "deleted a" {
		t.Fatalf("events %q, want deleted with the settings it ran with", got)
	}
	again := &countingSource{}
	src = newCountingSource(again, map[string]string{"prefix": "c", "limit": "1"}, state)
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = src.Teardown(ctx)
	if got := strings.Join(again.events, ";"); got != "created c" {
		t.Fatalf("created again after a deletion: %q, want created", got)
	}
}

// bulkSource is a connector of Conduit's SDK that sends size records a
// message, as Conduit's PostgreSQL source sends a snapshot's fetch, and
// tells calls of every ReadN.
type bulkSource struct {
	sdk.UnimplementedSource
	cfg   countingSourceConfig
	size  int
	next  int
	calls chan int
}

func (s *bulkSource) Config() sdk.SourceConfig                     { return &s.cfg }
func (s *bulkSource) Open(context.Context, opencdc.Position) error { return nil }
func (s *bulkSource) Teardown(context.Context) error               { return nil }

func (s *bulkSource) ReadN(ctx context.Context, _ int) ([]opencdc.Record, error) {
	recs := make([]opencdc.Record, s.size)
	for i := range recs {
		s.next++
		recs[i] = opencdc.Record{Position: opencdc.Position(strconv.Itoa(s.next)), Operation: opencdc.OperationSnapshot,
			Payload: opencdc.Change{After: opencdc.RawData("x")}}
	}
	select {
	case s.calls <- s.next:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return recs, nil
}

// A plugin that sends large messages runs ahead of the engine by about
// one message, not by as many messages as the receiver may hold: a
// snapshot must not sit in memory while the engine writes it out.
func TestSourceReadsAheadByRecordsNotMessages(t *testing.T) {
	impl := &bulkSource{size: 2 * receiveAheadRecords, calls: make(chan int, 64)}
	plug := InProcessSDKSource(impl, pconnector.PluginConfig{ConnectorID: "p:src"}, countingParams)
	src := NewSource(plug, Options{PipelineID: "p", ConnectorID: "src", Plugin: "builtin:bulk",
		Settings: map[string]string{"limit": "1"}, Params: countingParams})
	ctx := context.Background()
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Teardown(ctx) }()
	// The first message waits for Read; the plugin prepares the second
	// and holds it while it sends.
	for want := 1; want <= 2; want++ {
		select {
		case <-impl.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("the plugin read %d messages, want 2 before the engine reads", want-1)
		}
	}
	select {
	case n := <-impl.calls:
		t.Fatalf("the plugin read a third message (up to record %d) before the engine read anything", n)
	case <-time.After(200 * time.Millisecond):
	}
	// Reading the first message lets the receiver take the second and
	// the plugin read a third.
	got := readRecords(t, src, impl.size)
	if string(got[0].Position) != "1" || string(got[len(got)-1].Position) != strconv.Itoa(impl.size) {
		t.Fatalf("read positions %s..%s, want 1..%d", got[0].Position, got[len(got)-1].Position, impl.size)
	}
	select {
	case <-impl.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not read its third message once the engine read the first")
	}
}

// A write guard that refuses after the conversion: the batch is not sent
// to the plugin, the error is the guard's (transient), and the stream
// stays usable for the writes the guard allows again.
func TestDestinationChecksTheWriteGuardBeforeSending(t *testing.T) {
	impl := &memoryDestination{}
	dst := newMemoryDestination(impl, nil)
	lost := errors.New("the lease may have expired")
	var refuse atomic.Bool
	ctx := writeguard.With(context.Background(), func() error {
		if refuse.Load() {
			return lost
		}
		return nil
	})
	if err := dst.Open(ctx); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	if n, err := dst.Write(ctx, batchOf(1, 3)); n != 0 || !errors.Is(err, lost) || cerrors.Classify(err).Class != cerrors.ClassTransient {
		t.Fatalf("refused Write = %d, %v; want 0 and the guard's error, transient", n, err)
	}
	refuse.Store(false)
	if n, err := dst.Write(ctx, batchOf(4, 5)); n != 2 || err != nil {
		t.Fatalf("allowed Write = %d, %v", n, err)
	}
	if err := dst.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	impl.mu.Lock()
	defer impl.mu.Unlock()
	if fmt.Sprint(impl.writes) != "[2]" || len(impl.got) != 2 || string(impl.got[0].Position) != "4" {
		t.Errorf("the connector wrote batches %v (%d records), want only the allowed one, [2]", impl.writes, len(impl.got))
	}
}
