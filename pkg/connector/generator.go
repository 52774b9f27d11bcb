package connector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

// Generator payload formats (setting format.type).
const (
	formatStructured = "structured"
	formatRaw        = "raw"
	formatFile       = "file"
)

type fieldType int

const (
	fieldInt fieldType = iota + 1
	fieldString
	fieldBool
	fieldTime
	fieldDuration
)

func parseFieldType(name string) (fieldType, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "int":
		return fieldInt, true
	case "string":
		return fieldString, true
	case "bool":
		return fieldBool, true
	case "time":
		return fieldTime, true
	case "duration":
		return fieldDuration, true
	}
	return 0, false
}

type genField struct {
	name    string
	typ     fieldType
	isID    bool   // an int field named "id" carries the sequence number
	jsonKey []byte // `"name":`, pre-encoded for the raw format
}

// maxCatchUp bounds how far a rate-limited generator catches up after the
// pipeline could not keep up (backpressure, a paused reader): at most this
// much time's worth of records is produced at once, instead of a flood.
const maxCatchUp = time.Second

type generatorConfig struct {
	format      string
	fields      []genField // sorted by name
	filePath    string
	ops         []record.Operation
	interval    time.Duration // time between records; 0 = unlimited
	recordCount uint64        // 0 = unlimited
	burstOn     time.Duration
	burstOff    time.Duration // 0 = no bursts
}

// generatorSource is builtin:generator. See the package documentation for
// its settings.
type generatorSource struct {
	cfg    generatorConfig
	nodeID string // Conduit's name of this source, for conduit.source.connector.id

	// Injected for tests; time.Now and time.After in production.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	rng      *rand.Rand
	seq      uint64 // sequence number of the last record produced
	opened   bool
	fileData []byte // format.type file: the file's content, read by Open

	next       time.Time // when the next record is due (rate limiting)
	burstStart time.Time // start of the current burst
	rawEst     int       // estimated bytes of one raw payload, to size slabs
}

// NewGeneratorSource builds a builtin:generator source. It only parses the
// settings; format.type file reads its file in Open.
func NewGeneratorSource(cfg Config) (Source, error) {
	c, err := parseGeneratorSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	seed := uint64(time.Now().UnixNano())
	return &generatorSource{
		cfg:    c,
		nodeID: cfg.NodeID(),
		now:    time.Now,
		after:  time.After,
		rng:    rand.New(rand.NewPCG(seed, seed>>32|seed<<32)),
		rawEst: 16 + 24*len(c.fields),
	}, nil
}

func parseGeneratorSettings(m map[string]string) (generatorConfig, error) {
	s := plugin.NewSettings(m)
	var c generatorConfig

	for _, k := range s.Prefixed("collections.", "collections.*") {
		s.Failf(k, "collections are not supported yet; use format.type, format.options.* and operations")
	}

	c.format = strings.ToLower(strings.TrimSpace(s.String("format.type", formatStructured)))
	switch c.format {
	case formatStructured, formatRaw, formatFile:
	default:
		s.Failf("format.type", "%q is not a format (want structured, raw or file)", c.format)
	}
	const optPrefix = "format.options."
	for _, k := range s.Prefixed(optPrefix, "format.options.*") {
		name := k[len(optPrefix):]
		if c.format == formatFile {
			if name != "path" {
				s.Failf(k, "does not apply to format.type file (it only takes format.options.path)")
			}
			continue
		}
		typ, ok := parseFieldType(m[k])
		switch {
		case name == "":
			s.Failf(k, "the field name is missing (write format.options.<field>: <type>)")
		case !ok:
			s.Failf(k, "%q is not a field type (want int, string, bool, time or duration)", m[k])
		}
		key, _ := json.Marshal(name) // a string always encodes
		c.fields = append(c.fields, genField{
			name:    name,
			typ:     typ,
			isID:    name == "id" && typ == fieldInt,
			jsonKey: append(key, ':'),
		})
	}
	if c.format == formatFile {
		c.filePath = s.Required("format.options.path", "the file whose content becomes every payload")
	} else if len(c.fields) == 0 {
		s.Failf("format.options", "at least one field is required for format.type %s, e.g. format.options.id: int", c.format)
	}

	c.ops = []record.Operation{record.OperationCreate}
	if v, ok := s.Raw("operations"); ok {
		c.ops = c.ops[:0]
		for name := range strings.SplitSeq(v, ",") {
			op, err := record.ParseOperation(strings.ToLower(strings.TrimSpace(name)))
			if err != nil {
				s.Fail("operations", err)
				break
			}
			c.ops = append(c.ops, op)
		}
	}

	rate := s.Float("rate", 0)
	// readTime is Conduit's deprecated "time to read one record"; it maps to
	// rate = 1/readTime and only applies when rate is not set.
	if readTime := s.Duration("readTime", 0); rate == 0 && readTime > 0 {
		c.interval = readTime
	} else if rate > 0 {
		iv := float64(time.Second) / rate
		if iv >= math.MaxInt64 {
			s.Failf("rate", "%v is too small (at least one record every 290 years)", rate)
		}
		// Rates above 1e9/s round to 0: no limit, which is what they mean.
		c.interval = time.Duration(iv)
	}
	// Conduit's older default was -1 for "unlimited"; accept it too.
	switch n := s.Int("recordCount", 0, math.MinInt64); {
	case n > 0:
		c.recordCount = uint64(n)
	case n < -1:
		s.Failf("recordCount", "%q must be 0 (unlimited) or more", m["recordCount"])
	}
	c.burstOn = s.Duration("burst.generateTime", time.Second)
	c.burstOff = s.Duration("burst.sleepTime", 0)
	if c.burstOff > 0 && c.burstOn == 0 {
		s.Failf("burst.generateTime", "must be more than 0 when burst.sleepTime is set")
	}
	sdkSettings(s, roleSource)
	return c, s.Done()
}

// Open resumes after pos, the decimal sequence number of the last record the
// pipeline processed: the next record has sequence pos+1.
func (g *generatorSource) Open(_ context.Context, pos record.Position) error {
	g.seq = 0
	if len(pos) > 0 {
		n, err := strconv.ParseUint(string(pos), 10, 64)
		if err != nil {
			return fmt.Errorf("generator: position %q is not a record sequence number (want decimal digits)", pos)
		}
		g.seq = n
	}
	if g.cfg.format == formatFile {
		data, err := os.ReadFile(g.cfg.filePath)
		if err != nil {
			return fmt.Errorf("generator: format.options.path: %w", err)
		}
		g.fileData = data
	}
	g.next, g.burstStart = time.Time{}, time.Time{}
	g.opened = true
	return nil
}

// Read fills batch with the records that are due: a full batch when there is
// no rate limit, otherwise those whose time has come (at least one). Once
// recordCount records were produced it blocks until ctx is done.
func (g *generatorSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	if !g.opened {
		return 0, fmt.Errorf("generator: %w", errReadBeforeOpen)
	}
	if len(batch) == 0 {
		return 0, errors.New("generator: read called with an empty batch")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	want := len(batch)
	if c := g.cfg.recordCount; c > 0 {
		if g.seq >= c {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		want = int(min(uint64(want), c-g.seq))
	}
	now, n, err := g.pace(ctx, want)
	if err != nil {
		return 0, err
	}
	g.fill(batch[:n], now)
	return n, nil
}

// pace waits until at least one record is due and says how many of want
// are due now. Bursts gate the rate: a record that would be due at or after
// the end of the current burst waits for the next burst instead.
func (g *generatorSource) pace(ctx context.Context, want int) (time.Time, int, error) {
	now := g.now()
	limited := g.cfg.interval > 0
	if limited && g.next.IsZero() {
		g.next = now
	}
	if g.cfg.burstOff > 0 {
		if g.burstStart.IsZero() {
			g.burstStart = now
		}
		due := now
		if limited && g.next.After(now) {
			due = g.next
		}
		if end := g.burstStart.Add(g.cfg.burstOn); !due.Before(end) {
			if err := g.waitUntil(ctx, end.Add(g.cfg.burstOff)); err != nil {
				return now, 0, err
			}
			now = g.now()
			g.burstStart = now
			g.next = now // a new burst does not catch up on the pause
		}
	}
	if !limited {
		return now, want, nil
	}
	if err := g.waitUntil(ctx, g.next); err != nil {
		return now, 0, err
	}
	now = g.now()
	if lag := now.Sub(g.next); lag > maxCatchUp {
		g.next = now.Add(-maxCatchUp)
	}
	due := now.Sub(g.next)/g.cfg.interval + 1
	n := int(min(time.Duration(want), due))
	g.next = g.next.Add(time.Duration(n) * g.cfg.interval)
	return now, n, nil
}

// waitUntil blocks until the injected clock reaches t or ctx is done.
func (g *generatorSource) waitUntil(ctx context.Context, t time.Time) error {
	for {
		d := t.Sub(g.now())
		if d <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.after(d):
		}
	}
}

// fill writes the next len(batch) records into batch. It reuses the
// Metadata and StructuredData maps already in batch (the engine hands a
// batch back only when nobody references it any more) and puts every
// record's position, key and raw payload into one slab allocated per batch,
// so steady-state cost is a handful of allocations per batch plus one per
// boxed random number.
func (g *generatorSource) fill(batch []record.Record, now time.Time) {
	readAt := strconv.FormatInt(now.UnixNano(), 10)
	var nowValue any = now // boxed once per batch, shared: time.Time is immutable

	digits := len(strconv.AppendUint(make([]byte, 0, 24), g.seq+uint64(len(batch)), 10))
	per := 2 * digits
	if g.cfg.format == formatRaw {
		per += g.rawEst
	}
	slab := make([]byte, 0, per*len(batch))
	rawBytes := 0

	for i := range batch {
		g.seq++
		r := &batch[i]

		start := len(slab)
		slab = strconv.AppendUint(slab, g.seq, 10)
		pos := slab[start:len(slab):len(slab)]
		slab = append(slab, pos...)
		key := slab[start+len(pos) : len(slab) : len(slab)]

		md := r.Metadata
		if md == nil {
			md = make(record.Metadata, 4)
		}
		g.setMetadata(md, readAt)
		if len(md) != 3 {
			// Keys left over from whoever had the map before (a processor).
			// Clearing only then skips the cost of clear in the usual case.
			clear(md)
			g.setMetadata(md, readAt)
		}

		op := g.cfg.ops[(g.seq-1)%uint64(len(g.cfg.ops))]
		var before, after record.Data
		switch g.cfg.format {
		case formatStructured:
			// Maps of the record this slot held before.
			spare := [2]record.StructuredData{reusable(r.Payload.After), reusable(r.Payload.Before)}
			if op != record.OperationCreate && op != record.OperationSnapshot {
				before = g.structured(g.takeMap(&spare), nowValue)
			}
			if op != record.OperationDelete {
				after = g.structured(g.takeMap(&spare), nowValue)
			}
		case formatRaw:
			start := len(slab)
			if op != record.OperationCreate && op != record.OperationSnapshot {
				slab = g.raw(slab, now)
				before = record.RawData(slab[start:len(slab):len(slab)])
			}
			mid := len(slab)
			if op != record.OperationDelete {
				slab = g.raw(slab, now)
				after = record.RawData(slab[mid:len(slab):len(slab)])
			}
			rawBytes += len(slab) - start
		case formatFile:
			if op != record.OperationCreate && op != record.OperationSnapshot {
				before = record.RawData(bytes.Clone(g.fileData))
			}
			if op != record.OperationDelete {
				after = record.RawData(bytes.Clone(g.fileData))
			}
		}

		*r = record.Record{
			Position:  pos,
			Operation: op,
			Metadata:  md,
			Key:       record.RawData(key),
			Payload:   record.Change{Before: before, After: after},
		}
	}
	if rawBytes > 0 {
		// Updates carry two payloads; size for the worst case next time.
		g.rawEst = max(g.rawEst, 2*rawBytes/len(batch)+8)
	}
}

// StampsSourceMetadata tells the engine that every record read carries
// opencdc.readAt and conduit.source.connector.id already.
func (g *generatorSource) StampsSourceMetadata() {}

func (g *generatorSource) setMetadata(md record.Metadata, readAt string) {
	md[record.MetadataReadAt] = readAt
	md[record.MetadataCreatedAt] = readAt
	md[record.MetadataSourceConnectorID] = g.nodeID
}

// takeMap returns a spare map (not cleared: structured overwrites it), or a
// new one when none is left.
func (g *generatorSource) takeMap(spare *[2]record.StructuredData) record.StructuredData {
	for j, m := range spare {
		if m != nil {
			spare[j] = nil
			return m
		}
	}
	return make(record.StructuredData, len(g.cfg.fields))
}

func reusable(d record.Data) record.StructuredData {
	if m, ok := d.(record.StructuredData); ok {
		return m
	}
	return nil
}

// structured fills m with one value per field, and nothing else.
func (g *generatorSource) structured(m record.StructuredData, now any) record.StructuredData {
	g.setFields(m, now)
	if len(m) != len(g.cfg.fields) {
		// A reused map had other keys; field names are unique, so equal
		// lengths mean there are none.
		clear(m)
		g.setFields(m, now)
	}
	return m
}

func (g *generatorSource) setFields(m record.StructuredData, now any) {
	for _, f := range g.cfg.fields {
		switch f.typ {
		case fieldInt:
			if f.isID {
				m[f.name] = int(g.seq)
			} else {
				m[f.name] = g.rng.Int()
			}
		case fieldString:
			m[f.name] = wordValues[g.rng.IntN(len(wordValues))]
		case fieldBool:
			m[f.name] = g.rng.IntN(2) == 0
		case fieldTime:
			m[f.name] = now
		case fieldDuration:
			m[f.name] = time.Duration(g.rng.Int64N(int64(time.Hour)))
		}
	}
}

// raw appends the JSON object of one value per field, the same values the
// structured format would hold (times as RFC 3339, durations as nanoseconds,
// which is how encoding/json writes them).
func (g *generatorSource) raw(dst []byte, now time.Time) []byte {
	dst = append(dst, '{')
	for i, f := range g.cfg.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.jsonKey...)
		switch f.typ {
		case fieldInt:
			if f.isID {
				dst = strconv.AppendUint(dst, g.seq, 10)
			} else {
				dst = strconv.AppendInt(dst, int64(g.rng.Int()), 10)
			}
		case fieldString:
			dst = append(dst, '"')
			dst = append(dst, words[g.rng.IntN(len(words))]...)
			dst = append(dst, '"')
		case fieldBool:
			dst = strconv.AppendBool(dst, g.rng.IntN(2) == 0)
		case fieldTime:
			dst = append(dst, '"')
			dst = now.AppendFormat(dst, time.RFC3339Nano)
			dst = append(dst, '"')
		case fieldDuration:
			dst = strconv.AppendInt(dst, g.rng.Int64N(int64(time.Hour)), 10)
		}
	}
	return append(dst, '}')
}

// Ack does nothing: a position is a sequence number, so the generator has
// nothing to release.
func (g *generatorSource) Ack(context.Context, []record.Position) error { return nil }

// Teardown does nothing; the generator holds no resources.
func (g *generatorSource) Teardown(context.Context) error { return nil }
