package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/conduitry/conduit/pkg/sdk"
)

// The failures of this connector mirror builtin:chaos (see pkg/connector's
// documentation), with two differences that come from living in its own
// process:
//
//   - builtin:chaos keeps its counts in the runtime's memory; this process
//     is started anew for every run of the pipeline, so what must outlive a
//     run (the number of failures so far, for fail.count, and of successful
//     opens, for fail.on open) is kept in the fail.state file;
//   - an error ends the run, and with it this process, so a run fails at
//     most once; fail.every and fail.duration of builtin:chaos have nothing
//     to count in and are not offered.

// Operations a connector can fail (setting fail.on).
const (
	opOpen  = "open"
	opRead  = "read"
	opAck   = "ack"
	opWrite = "write"
)

// Error formats (setting fail.format).
const (
	formatTyped = "typed"
	formatJSON  = "json"
	formatText  = "text"
)

const (
	defaultMessage = "flaky: injected failure"
	defaultCode    = sdk.CodeUnavailable
	// crashStatus is the exit status of fail.crash, distinct from the
	// SDK's own (0, 1, 2) so a test can tell a planned crash from others.
	crashStatus = 3
)

// policy is a parsed set of fail.* settings.
type policy struct {
	on      string // "" = never fail
	after   int64
	count   int64 // 0 = no limit
	code    int
	format  string
	message string
	crash   bool
	state   string // the state file, "" = none
	// record makes a write failure name the record it stopped at
	// (sdk.ForRecord), so that a dead-letter rule can take it.
	record bool
}

// parsePolicy reads the fail.* settings of a source or destination.
func parsePolicy(s *sdk.Settings, role string) policy {
	ops := []string{opOpen, opRead, opAck}
	if role == roleDestination {
		ops = []string{opOpen, opWrite}
	}
	p := policy{on: strings.ToLower(s.String("fail.on", ""))}
	if p.on != "" && !slices.Contains(ops, p.on) {
		s.Failf("fail.on", "%q is not an operation a %s can fail (want %s)", p.on, role, strings.Join(ops, ", "))
	}
	p.after = s.Int("fail.after", 0, 0, 1<<62)
	p.count = s.Int("fail.count", 0, 0, 1<<62)
	p.code = int(s.Int("fail.code", defaultCode, 100, 599))
	p.format = strings.ToLower(s.String("fail.format", formatTyped))
	p.message = s.String("fail.message", defaultMessage)
	p.crash = s.Bool("fail.crash", false)
	p.state = s.String("fail.state", "")
	p.record = s.Bool("fail.record", false)
	if p.record && (role != roleDestination || (p.on != "" && p.on != opWrite)) {
		s.Failf("fail.record", "only applies to a destination with fail.on write")
	}

	switch p.format {
	case formatTyped, formatJSON:
	case formatText:
		if s.Has("fail.code") {
			s.Failf("fail.code", "does not apply to fail.format text (a text error carries no code; use typed or json)")
		}
	default:
		s.Failf("fail.format", "%q is not an error format (want typed, json or text)", p.format)
	}
	if p.crash {
		for _, k := range []string{"fail.code", "fail.format"} {
			if s.Has(k) {
				s.Failf(k, "does not apply to fail.crash (the process exits instead of returning an error)")
			}
		}
	}
	// Each run is a new process: a count kept in memory starts at zero
	// every time, so these two could never take effect without the file.
	if p.count > 0 && p.state == "" {
		s.Failf("fail.count", "needs fail.state: the runtime starts a new process for every run, "+
			"so the failures so far must be counted in a file")
	}
	if p.on == opOpen && p.after > 0 && p.state == "" {
		s.Failf("fail.after", "with fail.on open needs fail.state: every run opens once, in a new process, "+
			"so the successful opens must be counted in a file")
	}
	return p
}

// fingerprint identifies the settings a state file counts for; changing
// any of them starts the counts over, as with builtin:chaos.
func (p policy) fingerprint() string {
	return fmt.Sprintf("on=%s after=%d count=%d code=%d format=%s crash=%t message=%q",
		p.on, p.after, p.count, p.code, p.format, p.crash, p.message)
}

// state is what the fail.state file holds between runs.
type state struct {
	// Owner is pipeline/connector/role: one file per connector, so two
	// connectors cannot reset each other's counts by accident.
	Owner string `json:"owner"`
	// Policy is the fingerprint of the settings the counts are for.
	Policy string `json:"policy"`
	// Failures is how many failures were injected so far.
	Failures int64 `json:"failures"`
	// Opens is how many opens succeeded so far (for fail.on open).
	Opens int64 `json:"opens"`
}

// process is what the connectors need from the process, injected so that
// tests neither sleep nor exit.
type process struct {
	exit   func(code int)
	stderr io.Writer
}

// injector decides and makes the failures of one connector instance.
type injector struct {
	p     policy
	proc  process
	label string // e.g. `flaky source "gen"`, the start of every message

	// mu guards the counts. The SDK never overlaps two calls of the same
	// operation and only one operation fails, but the guard keeps that an
	// assumption nobody has to check.
	mu     sync.Mutex
	passed int64 // units (records) that passed the failing operation in this run
	st     state
}

// newInjector builds the injector and reads the state file, if any.
func newInjector(p policy, proc process, cfg sdk.Config, role string) (*injector, error) {
	in := &injector{
		p:     p,
		proc:  proc,
		label: fmt.Sprintf("flaky %s %q", role, cfg.ConnectorID),
		st: state{
			Owner:  cfg.PipelineID + "/" + cfg.ConnectorID + "/" + role,
			Policy: p.fingerprint(),
		},
	}
	if p.state == "" {
		return in, nil
	}
	b, err := os.ReadFile(p.state)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return in, nil
	case err != nil:
		return nil, fmt.Errorf("setting %q: %w", "fail.state", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("setting %q: %s is not a flaky state file: %w", "fail.state", p.state, err)
	}
	if st.Owner != in.st.Owner {
		return nil, fmt.Errorf("setting %q: %s counts for %s, not %s; give every connector its own file",
			"fail.state", p.state, st.Owner, in.st.Owner)
	}
	if st.Policy == in.st.Policy {
		in.st = st
	}
	return in, nil
}

// active reports whether op is the operation that fails.
func (in *injector) active(op string) bool { return in.p.on == op }

// plan decides a call of the failing operation that carries n units
// (records; 1 for open): how many may pass before the failure point, and
// whether the call reaches it. It changes nothing.
func (in *injector) plan(n int64) (pass int64, fail bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.p.count > 0 && in.st.Failures >= in.p.count {
		return n, false
	}
	done := in.passed
	if in.p.on == opOpen {
		done = in.st.Opens
	}
	room := in.p.after - done
	switch {
	case room <= 0:
		return 0, true
	case n <= room:
		return n, false
	default:
		return room, true
	}
}

// pass records that n units went through the failing operation.
func (in *injector) pass(n int64) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.p.on != opOpen {
		in.passed += n
		return nil
	}
	in.st.Opens += n
	return in.saveLocked()
}

// openAttempt names the open being made, for the message of a failing
// one: "attempt 3" is the third open (counted across runs with fail.state).
func (in *injector) openAttempt() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return fmt.Sprintf("attempt %d", in.st.Opens+1)
}

// fail records a failure and makes it: an error in the configured format,
// or, with fail.crash, the exit of the process. op and where (e.g. "record
// 51") go into the message.
func (in *injector) fail(op, where string) error {
	in.mu.Lock()
	in.st.Failures++
	ordinal := in.st.Failures
	// The count must be on disk before the error leaves (or the process
	// exits): the runtime may stop this process right after.
	saveErr := in.saveLocked()
	in.mu.Unlock()
	if saveErr != nil {
		// Without the count the failures would never stop; say so rather
		// than loop forever.
		return sdk.Fatal(saveErr)
	}

	msg := fmt.Sprintf("%s (failure %d)", in.p.message, ordinal)
	if in.p.count > 0 {
		msg = fmt.Sprintf("%s (failure %d of %d)", in.p.message, ordinal, in.p.count)
	}
	if in.p.crash {
		fmt.Fprintf(in.proc.stderr, "%s: %s: %s: %s: crashing on purpose (fail.crash), exit status %d\n",
			in.label, op, where, msg, crashStatus)
		in.proc.exit(crashStatus)
		return errors.New("flaky: crashed") // only reached when exit is a test's fake
	}
	switch in.p.format {
	case formatJSON:
		// What a connector in any language can do: make the error's text
		// the wire JSON object. The SDK sends it on unchanged.
		b, _ := json.Marshal(struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{in.p.code, fmt.Sprintf("%s: %s: %s: %s", in.label, op, where, msg)})
		return errors.New(string(b))
	case formatText:
		return fmt.Errorf("%s: %s: %s: %s", in.label, op, where, msg)
	default:
		// The code sits three %w below the text, to show that wrapping,
		// however deep, keeps the classification across the process.
		err := sdk.WithCode(errors.New(msg), in.p.code)
		err = fmt.Errorf("%s: %w", where, err)
		err = fmt.Errorf("%s: %w", op, err)
		return fmt.Errorf("%s: %w", in.label, err)
	}
}

// saveLocked writes the state file, if any, atomically: a crash halfway
// must not leave a file that the next run cannot read.
func (in *injector) saveLocked() error {
	if in.p.state == "" {
		return nil
	}
	b, err := json.Marshal(in.st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(in.p.state)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fail.state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(in.p.state)+".*")
	if err != nil {
		return fmt.Errorf("fail.state: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), in.p.state)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("fail.state %s: %w", in.p.state, err)
	}
	return nil
}

// describe says what the plan is, for the line logged at open, so that a
// flaky connector left in a pipeline by mistake shows up in the log.
func (p policy) describe() string {
	if p.on == "" {
		return "never fails (no fail.on)"
	}
	unit := "records in each run"
	if p.on == opOpen {
		unit = "successful opens"
	}
	how := fmt.Sprintf("format %s, code %d", p.format, p.code)
	switch {
	case p.crash:
		how = fmt.Sprintf("exits with status %d", crashStatus)
	case p.format == formatText:
		how = "format text, no code"
	}
	limit := "on every run"
	if p.count > 0 {
		limit = fmt.Sprintf("%d times in all", p.count)
	}
	return fmt.Sprintf("fails %s after %d %s, %s (%s)", p.on, p.after, unit, limit, how)
}
