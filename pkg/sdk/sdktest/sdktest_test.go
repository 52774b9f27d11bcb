package sdktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/sdk"
)

// counter is a well-behaved source: records 1, 2, 3, ... with their number
// as position; "fail" makes Read fail with a 503; "start" must be a number.
type counter struct {
	next       int
	fail       bool
	uncoded    bool
	overfill   bool // returns one record more than asked
	noResume   bool // ignores the position Open gets
	ignoresCtx bool // Read blocks without looking at its context
	leak       bool // Open starts a goroutine Teardown does not stop
	stop       chan struct{}
}

func (c *counter) Configure(_ context.Context, cfg sdk.Config) error {
	s := sdk.NewSettings(cfg.Settings)
	c.next = int(s.Int("start", 0, 0, 1<<40))
	c.fail = s.Bool("fail", false)
	return s.Err()
}

func (c *counter) Open(_ context.Context, pos sdk.Position) error {
	if pos != nil && !c.noResume {
		n, err := strconv.Atoi(string(pos))
		if err != nil {
			return sdk.Fatal(err)
		}
		c.next = n
	}
	if c.leak {
		c.stop = make(chan struct{})
		go func() {
			// Left running by Teardown; it ends on its own so the test
			// process does not keep it.
			select {
			case <-c.stop:
			case <-time.After(5 * time.Second):
			}
		}()
	}
	return nil
}

func (c *counter) Read(ctx context.Context, maxRecs int) ([]sdk.Record, error) {
	if c.ignoresCtx {
		// Blocks well past the suite's timeout, whatever ctx says.
		<-time.After(2 * time.Second)
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.fail {
		if c.uncoded {
			return nil, errors.New("upstream went away")
		}
		return nil, sdk.Transient(errors.New("upstream went away"))
	}
	n := maxRecs
	if c.overfill {
		n++
	}
	recs := make([]sdk.Record, n)
	for i := range recs {
		c.next++
		recs[i] = sdk.Record{Position: sdk.Position(strconv.Itoa(c.next)), Operation: sdk.OperationCreate}
	}
	return recs, nil
}

func (c *counter) Ack(context.Context, []sdk.Position) error { return nil }
func (c *counter) Teardown(context.Context) error            { return nil }

// memory is a destination that keeps records in a store shared by its
// instances (a stand-in for a table), optionally reporting its last one.
type memory struct {
	store    *memStore
	fail     bool
	uncoded  bool
	dropLast bool // says it wrote a record it did not keep
}

type memStore struct {
	mu   sync.Mutex
	recs []sdk.Record
}

func (m *memory) Configure(_ context.Context, cfg sdk.Config) error {
	s := sdk.NewSettings(cfg.Settings)
	m.fail = s.Bool("fail", false)
	s.Has("path") // accepted: the suite's broken case gives it as BadSettings
	return s.Err()
}
func (m *memory) Open(context.Context) error { return nil }
func (m *memory) Write(_ context.Context, recs []sdk.Record) (int, error) {
	if m.fail {
		if m.uncoded {
			return 0, errors.New("disk full")
		}
		return 0, sdk.WithCode(errors.New("disk full"), 507)
	}
	m.store.mu.Lock()
	defer m.store.mu.Unlock()
	for i, r := range recs {
		if m.dropLast && i == len(recs)-1 && len(recs) > 1 {
			break
		}
		m.store.recs = append(m.store.recs, r.Clone())
	}
	return len(recs), nil
}
func (m *memory) Teardown(context.Context) error { return nil }

func (m *memory) readBack(testing.TB) []sdk.Record {
	m.store.mu.Lock()
	defer m.store.mu.Unlock()
	return append([]sdk.Record(nil), m.store.recs...)
}

// reporting is memory with sdk.PositionReporter.
type reporting struct {
	memory
	wrong bool
}

func (r *reporting) LastPosition(context.Context) (sdk.Position, bool, error) {
	r.store.mu.Lock()
	defer r.store.mu.Unlock()
	if len(r.store.recs) == 0 {
		return nil, true, nil
	}
	last := r.store.recs[len(r.store.recs)-1].Position
	if r.wrong && len(r.store.recs) > 1 {
		last = r.store.recs[len(r.store.recs)-2].Position
	}
	return last, true, nil
}

func TestAWellBehavedSourcePasses(t *testing.T) {
	Source(t, SourceConfig{
		New:          func() sdk.Source { return &counter{} },
		Settings:     map[string]string{"start": "100"},
		BadSettings:  map[string]string{"start": "many"},
		FailSettings: map[string]string{"fail": "true"},
	})
}

func TestAWellBehavedDestinationPasses(t *testing.T) {
	store := &memStore{}
	Destination(t, DestinationConfig{
		New:          func() sdk.Destination { return &reporting{memory: memory{store: store}} },
		Settings:     map[string]string{},
		BadSettings:  map[string]string{"fail": "sometimes"},
		FailSettings: map[string]string{"fail": "true"},
		ReadBack: func(tb testing.TB) []sdk.Record {
			recs := (&memory{store: store}).readBack(tb)
			store.recs = nil // each check starts from an empty table
			return recs
		},
	})
}

// recorder is a testing.TB that records failures instead of failing the
// test; Fatal stops the check it runs.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

type stopCheck struct{}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(stopCheck{})
}
func (r *recorder) Fatal(args ...any)        { r.Fatalf("%s", strings.TrimSpace(fmt.Sprintln(args...))) }
func (r *recorder) Error(args ...any)        { r.Errorf("%s", strings.TrimSpace(fmt.Sprintln(args...))) }
func (r *recorder) Cleanup(f func())         { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool             { return len(r.failures) > 0 }
func (r *recorder) Context() context.Context { return context.Background() }

// runCheck runs one check against a recorder and returns what it reported.
func runCheck(t *testing.T, check func(testing.TB)) []string {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stopCheck); !ok {
					panic(p)
				}
			}
		}()
		check(r)
	}()
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			r.cleanups[i]()
		}()
	}
	return r.failures
}

func sourceCheck(name string) func(testing.TB, SourceConfig) {
	for _, c := range sourceChecks {
		if c.name == name {
			return c.run
		}
	}
	panic("no source check " + name)
}

func destinationCheck(name string) func(testing.TB, DestinationConfig) {
	for _, c := range destinationChecks {
		if c.name == name {
			return c.run
		}
	}
	panic("no destination check " + name)
}

// Each check fails for the connector that breaks what it checks.
func TestTheSuiteCatchesBrokenConnectors(t *testing.T) {
	short := 300 * time.Millisecond
	sources := []struct {
		check string
		cfg   SourceConfig
		want  string
	}{
		{"configure", SourceConfig{New: func() sdk.Source { return &counter{} }, BadSettings: map[string]string{"start": "1"}},
			"Configure accepted BadSettings"},
		{"read and ack", SourceConfig{New: func() sdk.Source { return &counter{overfill: true} }}, "Read(max 1) returned 2 records"},
		{"resume after a position", SourceConfig{New: func() sdk.Source { return &counter{noResume: true} }}, "opened at position"},
		{"read stops when cancelled", SourceConfig{New: func() sdk.Source { return &counter{ignoresCtx: true} }, Timeout: short},
			"did not return within"},
		{"errors carry codes", SourceConfig{New: func() sdk.Source { return &counter{uncoded: true} }, FailSettings: map[string]string{"fail": "true"}},
			`error "upstream went away" has no code`},
		{"teardown releases everything", SourceConfig{New: func() sdk.Source { return &counter{leak: true} }, Timeout: short},
			"goroutines still run after Teardown"},
	}
	for _, tc := range sources {
		t.Run("source/"+tc.check, func(t *testing.T) {
			failures := runCheck(t, func(tb testing.TB) { sourceCheck(tc.check)(tb, tc.cfg.withDefaults()) })
			if len(failures) == 0 || !strings.Contains(strings.Join(failures, "\n"), tc.want) {
				t.Errorf("failures %q, want one containing %q", failures, tc.want)
			}
		})
	}
	destinations := []struct {
		check string
		cfg   func(store *memStore) DestinationConfig
		want  string
	}{
		{"writes what it is given", func(store *memStore) DestinationConfig {
			return DestinationConfig{New: func() sdk.Destination { return &memory{store: store, dropLast: true} },
				ReadBack: (&memory{store: store}).readBack}
		}, "what it reports written must be what it holds"},
		{"reports its last position", func(store *memStore) DestinationConfig {
			return DestinationConfig{New: func() sdk.Destination { return &reporting{memory: memory{store: store}, wrong: true} }}
		}, "LastPosition after writing 10 records"},
		{"errors carry codes", func(store *memStore) DestinationConfig {
			return DestinationConfig{New: func() sdk.Destination { return &memory{store: store, uncoded: true} },
				FailSettings: map[string]string{"fail": "true"}}
		}, `error "disk full" has no code`},
		{"configure", func(store *memStore) DestinationConfig {
			return DestinationConfig{New: func() sdk.Destination { return &memory{store: store} }, BadSettings: map[string]string{"path": "x"}}
		}, "Configure accepted BadSettings"},
	}
	for _, tc := range destinations {
		t.Run("destination/"+tc.check, func(t *testing.T) {
			cfg := tc.cfg(&memStore{}).withDefaults()
			failures := runCheck(t, func(tb testing.TB) { destinationCheck(tc.check)(tb, cfg) })
			if len(failures) == 0 || !strings.Contains(strings.Join(failures, "\n"), tc.want) {
				t.Errorf("failures %q, want one containing %q", failures, tc.want)
			}
		})
	}
}
