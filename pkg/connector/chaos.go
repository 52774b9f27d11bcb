package connector

import (
	"github.com/conduitry/conduit/pkg/plugin"

	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
)

// builtin:chaos is a source and a destination that fail on purpose, for
// testing alerting and the supervisor's recovery. The source produces what
// builtin:generator produces and the destination discards records or appends
// them like builtin:file; both inject the failures that the fail.* settings
// describe. See the package documentation for the settings.
//
// The supervisor builds new connectors for every restart, so what a failure
// plan has done so far (records passed, failures injected, when the first
// one happened) lives in the plugin value, not in a connector: one map per
// NewChaosPlugin call, keyed by pipeline, connector and role.

// Operations a chaos connector can fail (setting fail.on).
const (
	chaosOpen  = "open"
	chaosRead  = "read"
	chaosAck   = "ack"
	chaosWrite = "write"
)

// Error formats (setting fail.format).
const (
	chaosTyped = "typed"
	chaosJSON  = "json"
	chaosText  = "text"
)

const (
	chaosFailPrefix     = "fail."
	chaosDefaultMessage = "chaos: injected failure"
)

// chaosPolicy is a parsed set of fail.* settings. It is comparable, so the
// state of a connector can tell when its settings changed.
type chaosPolicy struct {
	on       string // "" = never fail
	after    int64
	every    int64
	duration time.Duration
	count    int64
	code     int
	format   string
	message  string
	partial  bool
	// record makes a write failure name the record it stopped at
	// (cerrors.ForRecord), as a connector does when one record is the
	// trouble.
	record bool
}

// parseChaosSettings splits m into the fail.* settings, which it parses,
// and the rest, which the caller hands to the connector it wraps. Keys are
// routed case-insensitively so that "Fail.On" gets a "did you mean" instead
// of an "unknown setting" from the wrapped connector.
func parseChaosSettings(m map[string]string, role connectorRole) (chaosPolicy, map[string]string, error) {
	failM := make(map[string]string)
	rest := make(map[string]string, len(m))
	for k, v := range m {
		if strings.HasPrefix(strings.ToLower(k), chaosFailPrefix) {
			failM[k] = v
		} else {
			rest[k] = v
		}
	}

	s := plugin.NewSettings(failM)
	p := chaosPolicy{}
	ops := []string{chaosOpen, chaosRead, chaosAck}
	if role == roleDestination {
		ops = []string{chaosOpen, chaosWrite}
	}
	if v, ok := s.Raw("fail.on"); ok {
		p.on = strings.ToLower(strings.TrimSpace(v))
		if !slices.Contains(ops, p.on) {
			s.Failf("fail.on", "%q is not an operation a %s can fail (want %s)",
				v, chaosRoleName(role), strings.Join(ops, ", "))
		}
	}
	p.after = s.Int("fail.after", 0, 0)
	p.every = s.Int("fail.every", 0, 0)
	p.duration = s.Duration("fail.duration", 0)
	p.count = s.Int("fail.count", 0, 0)
	codeSet := strings.TrimSpace(failM["fail.code"]) != ""
	p.code = int(s.Int("fail.code", cerrors.DefaultTransientCode, 100))
	if p.code > 599 {
		s.Failf("fail.code", "%q must be 599 or less (an HTTP-like status code, 100-599)", failM["fail.code"])
	}
	p.format = strings.ToLower(strings.TrimSpace(s.String("fail.format", chaosTyped)))
	switch p.format {
	case chaosTyped, chaosJSON:
	case chaosText:
		if codeSet {
			s.Failf("fail.code", "does not apply to fail.format text (a text error carries no code; use typed or json)")
		}
	default:
		s.Failf("fail.format", "%q is not an error format (want typed, json or text)", p.format)
	}
	p.message = s.String("fail.message", chaosDefaultMessage)
	if role == roleDestination {
		p.partial = s.Bool("fail.partial", false)
		if p.partial && p.on != "" && p.on != chaosWrite {
			s.Failf("fail.partial", "only applies to fail.on write")
		}
		p.record = s.Bool("fail.record", false)
		if p.record && p.on != "" && p.on != chaosWrite {
			s.Failf("fail.record", "only applies to fail.on write")
		}
	} else {
		for _, k := range []string{"fail.partial", "fail.record"} {
			if _, ok := s.Raw(k); ok {
				s.Failf(k, "only applies to a destination (fail.on write)")
			}
		}
	}
	if err := s.Done(); err != nil {
		return chaosPolicy{}, nil, err
	}
	return p, rest, nil
}

func chaosRoleName(r connectorRole) string {
	if r == roleDestination {
		return "destination"
	}
	return "source"
}

// chaosSettingsHelp is appended to the "unknown setting" errors of the
// wrapped connector, whose list of known settings lacks the fail.* ones.
const chaosSettingsHelp = "; chaos settings: fail.on, fail.after, fail.every, fail.duration, " +
	"fail.count, fail.code, fail.format, fail.message, fail.partial and fail.record (destination)"

// chaosWrapSettingError adds the chaos settings to an "unknown setting"
// error of the wrapped connector.
func chaosWrapSettingError(err error) error {
	var se *SettingError
	if errors.As(err, &se) && strings.HasPrefix(se.Err.Error(), "unknown setting") {
		return &SettingError{Setting: se.Setting, Err: fmt.Errorf("%w%s", se.Err, chaosSettingsHelp)}
	}
	return err
}

// chaosKey names the connector a chaosCounter belongs to.
type chaosKey struct {
	pipelineID  string
	connectorID string
	role        connectorRole
}

// chaosCounter is what a failure plan has done so far, across every
// connector instance built for the same key.
type chaosCounter struct {
	policy    chaosPolicy // the settings it counts for; others reset it
	passed    int64       // records (opens for fail.on open) that went through
	due       int64       // the next failure is due once passed reaches this
	failures  int64
	firstFail time.Time // zero until the first failure
}

// stopped reports whether a stop condition (fail.count, fail.duration) ended
// the failures.
func (c *chaosCounter) stopped(now time.Time) bool {
	p := &c.policy
	switch {
	case p.count > 0 && c.failures >= p.count:
		return true
	case p.duration > 0 && c.failures > 0 && now.Sub(c.firstFail) >= p.duration:
		return true
	}
	return false
}

// plan decides a call of the failing operation that carries n units
// (records, or 1 for open): how many of them may pass before the failure
// point, and whether the call reaches it. It changes nothing.
func (c *chaosCounter) plan(n int64, now time.Time) (pass int64, fail bool) {
	if c.stopped(now) {
		return n, false
	}
	room := c.due - c.passed
	if room <= 0 {
		return 0, true
	}
	if n <= room {
		return n, false
	}
	return room, true
}

// commit records the outcome of a call: passed units went through, and the
// call failed or not. It returns the failure's ordinal.
func (c *chaosCounter) commit(passed int64, failed bool, now time.Time) int64 {
	c.passed += passed
	if !failed {
		return 0
	}
	c.failures++
	if c.failures == 1 {
		c.firstFail = now
	}
	// fail.every 0 makes the next failure due at once: every call fails.
	c.due = c.passed + c.policy.every
	return c.failures
}

// chaosState is the plugin's memory of every chaos connector it built.
type chaosState struct {
	now      func() time.Time
	mu       sync.Mutex
	counters map[chaosKey]*chaosCounter
}

// NewChaosPlugin returns the builtin:chaos plugin: a source and a
// destination that fail on purpose as their fail.* settings say. Every call
// returns a plugin with its own failure counters, shared by all connectors it
// builds, so that counts survive the supervisor's restarts (which build new
// connectors) but not into another registry. now is the clock fail.duration
// is measured with; nil means time.Now. Builtin uses time.Now; tests pass a
// fake one.
func NewChaosPlugin(now func() time.Time) Plugin {
	if now == nil {
		now = time.Now
	}
	st := &chaosState{now: now, counters: make(map[chaosKey]*chaosCounter)}
	return Plugin{Name: "chaos", NewSource: st.newSource, NewDestination: st.newDestination}
}

// chaosInjector is the part of a chaos connector that decides and makes
// failures; the source and the destination each embed one.
type chaosInjector struct {
	st     *chaosState
	key    chaosKey
	policy chaosPolicy
}

// active reports whether op is the operation that fails.
func (in *chaosInjector) active(op string) bool { return in.policy.on == op }

// plan looks up the counter (creating it, or resetting it when the settings
// changed) and decides a call of n units.
func (in *chaosInjector) plan(n int64) (pass int64, fail bool, now time.Time) {
	now = in.st.now()
	in.st.mu.Lock()
	defer in.st.mu.Unlock()
	pass, fail = in.counterLocked().plan(n, now)
	return pass, fail, now
}

func (in *chaosInjector) counterLocked() *chaosCounter {
	c := in.st.counters[in.key]
	if c == nil || c.policy != in.policy {
		c = &chaosCounter{policy: in.policy, due: in.policy.after}
		in.st.counters[in.key] = c
	}
	return c
}

// commit records the outcome of a planned call and, when it failed, returns
// the injected error.
func (in *chaosInjector) commit(op string, passed int64, failed bool, now time.Time) error {
	in.st.mu.Lock()
	ordinal := in.counterLocked().commit(passed, failed, now)
	in.st.mu.Unlock()
	if !failed {
		return nil
	}
	return in.failure(op, ordinal)
}

// failure builds the injected error in the configured format. Its text is,
// e.g., `chaos source "gen": read: chaos: injected failure (failure 2 of 3)`.
func (in *chaosInjector) failure(op string, ordinal int64) error {
	p := &in.policy
	msg := fmt.Sprintf("%s (failure %d)", p.message, ordinal)
	if p.count > 0 {
		msg = fmt.Sprintf("%s (failure %d of %d)", p.message, ordinal, p.count)
	}
	ctx := fmt.Sprintf("chaos %s %q: %s", chaosRoleName(in.key.role), in.key.connectorID, op)
	switch p.format {
	case chaosJSON:
		full := errors.New(ctx + ": " + msg)
		return errors.New(string(cerrors.MarshalWire(cerrors.WithCode(full, p.code))))
	case chaosText:
		return errors.New(ctx + ": " + msg)
	default:
		// The code sits one %w below the text, to show that wrapping keeps
		// the classification.
		return fmt.Errorf("%s: %w", ctx, cerrors.WithCode(errors.New(msg), p.code))
	}
}

// describe says what the plan is, for the log line written at open.
func (p chaosPolicy) describe() string {
	if p.on == "" {
		return "never fails (no fail.on)"
	}
	unit := "records"
	if p.on == chaosOpen {
		unit = "successful opens"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fails %s after %d %s", p.on, p.after, unit)
	if p.count == 1 {
		b.WriteString(", once")
	} else {
		if p.every > 0 {
			fmt.Fprintf(&b, ", then every %d %s", p.every, unit)
		} else {
			b.WriteString(", then on every call")
		}
		if p.duration > 0 {
			fmt.Fprintf(&b, " for %s", p.duration)
		}
		if p.count > 1 {
			fmt.Fprintf(&b, ", %d failures at most", p.count)
		}
	}
	fmt.Fprintf(&b, " (format %s", p.format)
	if p.format != chaosText {
		fmt.Fprintf(&b, ", code %d", p.code)
	}
	b.WriteString(")")
	return b.String()
}

// chaosWithDefault returns m, or a copy with key set to value when m has no key
// with the given prefix.
func chaosWithDefault(m map[string]string, prefix, key, value string) map[string]string {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return m
		}
	}
	out := maps.Clone(m)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out[key] = value
	return out
}
