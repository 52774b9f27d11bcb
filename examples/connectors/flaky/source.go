package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/conduitry/conduit/pkg/sdk"
)

const (
	roleSource      = "source"
	roleDestination = "destination"
)

// maxCatchUp bounds how far a rate-limited source catches up after the
// pipeline could not keep up: at most this much time's worth of records at
// once, instead of a flood.
const maxCatchUp = time.Second

// clock is the time a source paces itself by, injected so that tests do not
// sleep.
type clock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// source produces numbered records like builtin:generator: record n has
// position and key "n" and the payload {"id": n, "name": "flaky-n"}. It
// fails as its fail.* settings say.
type source struct {
	proc  process
	clock clock

	id          string
	interval    time.Duration // between records; 0 = as fast as possible
	recordCount uint64        // stop after this many in total; 0 = unlimited
	in          *injector

	seq  uint64    // sequence number of the last record produced
	next time.Time // when the next record is due (rate limiting)

	// buf and text are reused by every Read: the SDK encodes what Read
	// returns before it calls Read again, so a source may build the next
	// batch in the same memory (records, their maps, their bytes) instead
	// of allocating it anew for every record.
	buf  []sdk.Record
	text []byte
}

func newSource(proc process, clk clock) *source { return &source{proc: proc, clock: clk} }

// Configure reads rate, recordCount and the fail.* settings and, with
// fail.state, the failures of earlier runs.
func (s *source) Configure(_ context.Context, cfg sdk.Config) error {
	set := sdk.NewSettings(cfg.Settings)
	if rate := set.Float("rate", 0, 0, math.MaxFloat64); rate > 0 {
		iv := float64(time.Second) / rate
		if iv >= math.MaxInt64 {
			set.Failf("rate", "%v is too small", rate)
		}
		s.interval = time.Duration(iv) // above 1e9/s this is 0: no limit, as meant
	}
	// -1 was Conduit's older spelling of "unlimited".
	if n := set.Int("recordCount", 0, -1, math.MaxInt64); n > 0 {
		s.recordCount = uint64(n)
	}
	p := parsePolicy(set, roleSource)
	if err := set.Err(); err != nil {
		// Fatal: a restart would read the same settings. (The SDK would
		// make an uncoded Configure error fatal anyway; saying it is
		// clearer.)
		return sdk.Fatal(err)
	}
	in, err := newInjector(p, s.proc, cfg, roleSource)
	if err != nil {
		return sdk.Fatal(err)
	}
	s.id, s.in = cfg.ConnectorID, in
	return nil
}

// Open resumes after pos, the sequence number of the last acknowledged
// record: the next record is pos+1.
func (s *source) Open(_ context.Context, pos sdk.Position) error {
	s.seq = 0
	if pos != nil {
		n, err := strconv.ParseUint(string(pos), 10, 64)
		if err != nil {
			return sdk.Fatalf("flaky source %q: position %q is not a record sequence number", s.id, pos)
		}
		s.seq = n
	}
	fmt.Fprintf(s.proc.stderr, "flaky source %q: opening after position %d; %s\n", s.id, s.seq, s.in.p.describe())
	if s.in.active(opOpen) {
		if _, fail := s.in.plan(1); fail {
			return s.in.fail(opOpen, s.in.openAttempt())
		}
		if err := s.in.pass(1); err != nil {
			return sdk.Fatal(err)
		}
	}
	return nil
}

// Read returns the records that are due, at most max. With fail.on read it
// returns at most the records left before the failure point, and the next
// read fails. After recordCount records it waits until ctx is done.
func (s *source) Read(ctx context.Context, max int) ([]sdk.Record, error) {
	want := max
	if c := s.recordCount; c > 0 {
		if s.seq >= c {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		want = int(min(uint64(want), c-s.seq))
	}
	if s.in.active(opRead) {
		pass, fail := s.in.plan(int64(want))
		if pass == 0 && fail {
			return nil, s.in.fail(opRead, fmt.Sprintf("record %d", s.seq+1))
		}
		want = int(pass)
	}
	n, now, err := s.pace(ctx, want)
	if err != nil {
		return nil, err
	}
	if s.in.active(opRead) {
		_ = s.in.pass(int64(n)) // counts in memory for read; nothing to save
	}
	return s.records(n, now), nil
}

// pace waits until a record is due and says how many of want are due now.
func (s *source) pace(ctx context.Context, want int) (int, time.Time, error) {
	now := s.clock.now()
	if s.interval == 0 {
		return want, now, nil
	}
	if s.next.IsZero() {
		s.next = now
	}
	if wait := s.next.Sub(now); wait > 0 {
		select {
		case <-ctx.Done():
			return 0, now, ctx.Err()
		case <-s.clock.after(wait):
		}
		now = s.clock.now()
	}
	if now.Sub(s.next) > maxCatchUp {
		s.next = now.Add(-maxCatchUp)
	}
	n := min(want, int(now.Sub(s.next)/s.interval)+1)
	s.next = s.next.Add(time.Duration(n) * s.interval)
	return n, now, nil
}

// records makes the next n records.
func (s *source) records(n int, now time.Time) []sdk.Record {
	if cap(s.buf) < n {
		s.buf = make([]sdk.Record, n)
	}
	recs := s.buf[:n]
	s.text = strconv.AppendInt(s.text[:0], now.UnixNano(), 10)
	at := string(s.text)
	s.text = s.text[:0]
	for i := range recs {
		s.seq++
		start := len(s.text)
		s.text = strconv.AppendUint(s.text, s.seq, 10)
		pos := sdk.Position(s.text[start:len(s.text):len(s.text)])
		r := &recs[i]
		if r.Metadata == nil {
			r.Metadata = make(sdk.Metadata, 4)
		}
		r.Metadata[sdk.MetadataReadAt] = at
		r.Metadata[sdk.MetadataCreatedAt] = at
		// conduit.source.connector.id is the runtime's to set, as
		// Conduit's runtime does: "pipeline:connector".
		after, ok := r.Payload.After.(sdk.StructuredData)
		if !ok || after == nil {
			after = make(sdk.StructuredData, 2)
		}
		after["id"] = int64(s.seq)
		after["name"] = "flaky-" + string(pos)
		r.Position, r.Operation, r.Key = pos, sdk.OperationCreate, sdk.RawData(pos)
		r.Payload = sdk.Change{After: after}
	}
	return recs
}

// Ack has nothing to confirm upstream (the position is the sequence
// number). With fail.on ack, an ack that would cross the failure point
// fails as a whole.
func (s *source) Ack(_ context.Context, positions []sdk.Position) error {
	if !s.in.active(opAck) || len(positions) == 0 {
		return nil
	}
	pass, fail := s.in.plan(int64(len(positions)))
	if fail {
		return s.in.fail(opAck, fmt.Sprintf("position %s", positions[pass]))
	}
	return s.in.pass(pass)
}

// Teardown has nothing to release.
func (s *source) Teardown(context.Context) error { return nil }
