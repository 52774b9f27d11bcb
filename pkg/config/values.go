package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"gopkg.in/yaml.v3"

	"github.com/conduitry/conduit/pkg/gctuning"
)

// Kind is the type of a configuration value. It decides how the value is
// read from YAML, from environment variables and from flags.
type Kind int

// Kinds of configuration values. The zero Kind is invalid on purpose.
const (
	KindString Kind = iota + 1
	KindBool
	KindInt
	KindFloat
	KindDuration
	// KindDurations is a list of durations: a YAML sequence in files,
	// comma-separated text in environment variables and flags.
	KindDurations
	// KindStrings is a list of strings: a YAML sequence in files,
	// comma-separated text in environment variables and flags.
	KindStrings
)

// String returns the kind's name as shown in flag help.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindDuration:
		return "duration"
	case KindDurations:
		return "durations"
	case KindStrings:
		return "strings"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// expected is how a valid value of the kind looks, for error messages.
func (k Kind) expected() string {
	switch k {
	case KindBool:
		return "true or false"
	case KindInt:
		return "an integer"
	case KindFloat:
		return "a number"
	case KindDuration:
		return "a duration such as 500ms, 30s, 1m30s or 2h"
	case KindDurations:
		return "a list of durations such as [1m, 1h, 24h]"
	case KindStrings:
		return "a list of strings such as [a, b]"
	default:
		return "a string"
	}
}

// kindOf maps the Go type of a default value to its Kind; the key table
// uses it so a key's kind cannot disagree with its field's type.
func kindOf(v any) Kind {
	switch v.(type) {
	case string:
		return KindString
	case bool:
		return KindBool
	case int:
		return KindInt
	case float64:
		return KindFloat
	case time.Duration:
		return KindDuration
	case []time.Duration:
		return KindDurations
	case []string:
		return KindStrings
	}
	panic(fmt.Sprintf("config: unsupported value type %T", v))
}

// parseText reads a value from an environment variable or a flag.
func parseText(k Kind, s string) (any, error) {
	switch k {
	case KindString:
		return s, nil
	case KindBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("expected %s, got %q", k.expected(), s)
		}
		return b, nil
	case KindInt:
		i, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("expected %s, got %q", k.expected(), s)
		}
		return i, nil
	case KindFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("expected %s, got %q", k.expected(), s)
		}
		return f, nil
	case KindDuration:
		return parseDuration(s)
	case KindDurations:
		// "1m,1h,24h", or as YAML writes it: "[1m, 1h, 24h]".
		s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
		list := []time.Duration{}
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			d, err := parseDuration(part)
			if err != nil {
				return nil, err
			}
			list = append(list, d)
		}
		return list, nil
	case KindStrings:
		// "a,b", or as YAML writes it: "[a, b]".
		s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
		list := []string{}
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				list = append(list, part)
			}
		}
		return list, nil
	}
	panic("config: unknown kind " + k.String())
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		// time's own message ("time: missing unit in duration") does not say
		// what to write instead.
		return 0, fmt.Errorf("invalid duration %q: expected %s", s, KindDuration.expected())
	}
	return d, nil
}

// parseNode reads a value from YAML. Types are strict: a quoted "true" is a
// string, not a bool, because accepting it would hide a mistake in a file
// that is otherwise typed.
func parseNode(k Kind, n *yaml.Node) (any, error) {
	n = unalias(n)
	switch k {
	case KindDurations:
		return parseDurationsNode(n)
	case KindStrings:
		return parseStringsNode(n)
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("expected %s, got %s", k.expected(), describe(n))
	}
	tag := n.ShortTag()
	if tag == "!!null" {
		// "key:" with nothing after it is most often a value that was
		// deleted by accident; make the user choose.
		return nil, fmt.Errorf("no value; write %s, or remove the key to use the default", k.expected())
	}
	mismatch := func() error { return fmt.Errorf("expected %s, got %s", k.expected(), describe(n)) }
	switch k {
	case KindString:
		return n.Value, nil
	case KindBool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			return nil, mismatch()
		}
		return b, nil
	case KindInt:
		var i int
		if tag != "!!int" || n.Decode(&i) != nil {
			return nil, mismatch()
		}
		return i, nil
	case KindFloat:
		var f float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			return nil, mismatch()
		}
		return f, nil
	case KindDuration:
		// A plain 30s is a YAML string; a bare 0 is an int and means 0s.
		if tag != "!!str" && tag != "!!int" {
			return nil, mismatch()
		}
		return parseDuration(n.Value)
	}
	panic("config: unknown kind " + k.String())
}

// parseDurationsNode reads a YAML sequence of durations; entry i's error
// names it as [i].
func parseDurationsNode(n *yaml.Node) ([]time.Duration, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("expected %s, got %s", KindDurations.expected(), describe(n))
	}
	list := make([]time.Duration, 0, len(n.Content))
	for i, item := range n.Content {
		v, err := parseNode(KindDuration, item)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		list = append(list, v.(time.Duration))
	}
	return list, nil
}

// parseStringsNode reads a YAML sequence of strings; entry i's error
// names it as [i].
func parseStringsNode(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("expected %s, got %s", KindStrings.expected(), describe(n))
	}
	list := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = unalias(item)
		if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
			return nil, fmt.Errorf("[%d]: expected a string, got %s", i, describe(item))
		}
		list = append(list, item.Value)
	}
	return list, nil
}

// formatValue writes a value the way a user would type it, used for
// defaults in flag help and in error messages.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Duration:
		return formatDuration(v)
	case []time.Duration:
		parts := make([]string, len(v))
		for i, d := range v {
			parts[i] = formatDuration(d)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// formatDuration prints 1m instead of time's 1m0s, so defaults in help and
// messages look like what users write.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// Validators shared by the key table, pipeline files and Resolve.

func oneOf(allowed ...string) func(string) error {
	return func(s string) error {
		for _, a := range allowed {
			if s == a {
				return nil
			}
		}
		msg := fmt.Sprintf("must be one of %s, got %q", strings.Join(allowed, ", "), excerpt(s))
		if sug := suggest(s, allowed); sug != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		return fmt.Errorf("%s", msg)
	}
}

func gcHeadroom(s string) error {
	_, err := gctuning.ParseHeadroom(s)
	return err
}

func memoryLimit(s string) error {
	_, err := gctuning.ParseMemoryLimit(s)
	return err
}

// optional accepts the empty string, and what check accepts.
func optional(check func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return check(s)
	}
}

// WasmMemoryLimit parses processors.memory-limit: a size in bytes, 1MiB
// to 4GiB (what a 32-bit WebAssembly module can address).
func WasmMemoryLimit(s string) (uint64, error) {
	n, err := humanize.ParseBytes(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be a size such as 1GiB or 256MiB, got %q", s)
	case n < 1<<20:
		return 0, fmt.Errorf("must be at least 1MiB, got %q; write the unit, e.g. 256MiB", s)
	case n > 4<<30:
		return 0, fmt.Errorf("must be at most 4GiB (what a WebAssembly module can address), got %q", s)
	}
	return n, nil
}

func wasmMemoryLimit(s string) error {
	_, err := WasmMemoryLimit(s)
	return err
}

// JavaScriptMemoryLimit parses processors.javascript.memory-limit: a size
// in bytes, at least 1MiB.
func JavaScriptMemoryLimit(s string) (uint64, error) {
	n, err := humanize.ParseBytes(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be a size such as 256MiB or 1GiB, got %q", s)
	case n < 1<<20:
		return 0, fmt.Errorf("must be at least 1MiB, got %q; write the unit, e.g. 256MiB", s)
	}
	return n, nil
}

func javaScriptMemoryLimit(s string) error {
	_, err := JavaScriptMemoryLimit(s)
	return err
}

func notEmpty(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

func hostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		var reason string
		if ae, ok := err.(*net.AddrError); ok {
			reason = ae.Err
		} else {
			reason = err.Error()
		}
		return fmt.Errorf("must be host:port (e.g. 127.0.0.1:8080), got %q: %s", s, reason)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("must be host:port with a port between 0 and 65535, got %q", s)
	}
	return nil
}

// webOrigins checks api.http.cors.allowed-origins: each entry is an
// origin as a browser sends it, http or https, a host and maybe a port,
// nothing more. "*" and "null" are refused: either would let every web
// page drive the API.
func webOrigins(list []string) error {
	for i, o := range list {
		if o == "*" || strings.EqualFold(o, "null") {
			return fmt.Errorf("[%d]: %q would let any web page call the API; list each origin (scheme://host[:port]) whose pages may", i, o)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("[%d]: must be an origin such as https://console.example.com or http://localhost:3000 (scheme, host and optional port only), got %q", i, o)
		}
		if port := u.Port(); port != "" {
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("[%d]: port must be between 1 and 65535, got %q", i, o)
			}
		}
	}
	return nil
}

func nonNegativeDuration(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", formatDuration(d))
	}
	return nil
}

func positiveDurations(list []time.Duration) error {
	for i, d := range list {
		if d <= 0 {
			return fmt.Errorf("[%d]: must be greater than 0, got %s", i, formatDuration(d))
		}
	}
	return nil
}

func positiveDuration(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be greater than 0, got %s", formatDuration(d))
	}
	return nil
}

// instanceID keeps an instance id printable and short: it is shown in
// tables and stored with every lease.
func instanceID(s string) error {
	if len(s) > 128 {
		return fmt.Errorf("must have at most 128 characters, got %d", len(s))
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("must not contain white space or control characters: %q", s)
		}
	}
	return nil
}

// leaseTTL is at least a second: leases are renewed three times per TTL,
// and a shorter one would be lost on every pause of the database.
// maxLeaseTTL bounds cluster.lease-ttl: a lease that outlives a day is
// a pipeline that stays down a day when its instance dies (and a quarter
// of it must fit PostgreSQL's session timeouts, in milliseconds of an
// int32).
const maxLeaseTTL = 24 * time.Hour

func leaseTTL(d time.Duration) error {
	if d < time.Second || d > maxLeaseTTL {
		return fmt.Errorf("must be at least 1s and at most %s, got %s", formatDuration(maxLeaseTTL), formatDuration(d))
	}
	return nil
}

func backoffFactor(f float64) error {
	if !(f >= 1) || math.IsInf(f, 1) { // !(f >= 1) also rejects NaN
		return fmt.Errorf("must be at least 1, got %s", formatValue(f))
	}
	return nil
}

func maxRetries(i int) error {
	if i < -1 {
		return fmt.Errorf("must be -1 (retry forever) or at least 0, got %d", i)
	}
	return nil
}

func jitter(f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("must be between 0 and 1, got %s", formatValue(f))
	}
	return nil
}

func nonNegativeInt(i int) error {
	if i < 0 {
		return fmt.Errorf("must not be negative, got %d", i)
	}
	return nil
}

func positiveInt(i int) error {
	if i < 1 {
		return fmt.Errorf("must be at least 1, got %d", i)
	}
	return nil
}
