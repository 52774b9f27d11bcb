package plugin

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings reads a plugin's settings and remembers which keys were looked
// at, so that whatever is left over can be reported as unknown. The first
// problem wins: a user fixes one setting, runs again, and sees the next one,
// in a deterministic order (known settings in the order the plugin reads
// them, then unknown keys sorted).
type Settings struct {
	m     map[string]string
	known []string // documented names, for the "unknown setting" message
	used  map[string]bool
	err   error
}

// NewSettings returns a reader of m.
func NewSettings(m map[string]string) *Settings {
	return &Settings{m: m, used: make(map[string]bool, len(m))}
}

// Fail records a problem with key; only the first problem is kept.
func (s *Settings) Fail(key string, err error) {
	if s.err == nil {
		s.err = &SettingError{Setting: key, Err: err}
	}
}

// Failf is Fail with a formatted message.
func (s *Settings) Failf(key, format string, args ...any) {
	s.Fail(key, fmt.Errorf(format, args...))
}

// Raw returns the value as written and marks key as known and used. An
// empty or blank value counts as absent, the way Conduit treats `key: ""`.
func (s *Settings) Raw(key string) (string, bool) {
	s.known = append(s.known, key)
	s.used[key] = true
	v, ok := s.m[key]
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

// String returns the value, or def when absent.
func (s *Settings) String(key, def string) string {
	if v, ok := s.Raw(key); ok {
		return v
	}
	return def
}

// Required returns the value and records a problem when it is absent; what
// says what the setting is for.
func (s *Settings) Required(key, what string) string {
	v, ok := s.Raw(key)
	if !ok {
		s.Failf(key, "is required (%s)", what)
	}
	return v
}

// Bool parses true/false (and the other forms strconv accepts).
func (s *Settings) Bool(key string, def bool) bool {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		s.Failf(key, "%q is not a boolean (use true or false)", v)
		return def
	}
	return b
}

// Float parses a finite, non-negative number.
func (s *Settings) Float(key string, def float64) float64 {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		s.Failf(key, "%q is not a number", v)
		return def
	case f < 0:
		s.Failf(key, "%q must be 0 or more", v)
		return def
	}
	return f
}

// Int parses a whole number >= minimum.
func (s *Settings) Int(key string, def, minimum int64) int64 {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		s.Failf(key, "%q is not a whole number", v)
		return def
	case n < minimum:
		s.Failf(key, "%q must be %d or more", v, minimum)
		return def
	}
	return n
}

// IntRange parses a whole number in [minimum, maximum]; ok is false when
// the setting is absent or wrong.
func (s *Settings) IntRange(key string, minimum, maximum int) (n int, ok bool) {
	v, present := s.Raw(key)
	if !present {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		s.Failf(key, "%q is not a whole number", v)
		return 0, false
	case n < minimum || n > maximum:
		s.Failf(key, "%q must be between %d and %d", v, minimum, maximum)
		return 0, false
	}
	return n, true
}

// Duration parses a non-negative Go duration ("100ms", "1.5s", "2m").
func (s *Settings) Duration(key string, def time.Duration) time.Duration {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil:
		s.Failf(key, "%q is not a duration (write it like 100ms, 1s or 1m30s)", v)
		return def
	case d < 0:
		s.Failf(key, "%q must not be negative", v)
		return def
	}
	return d
}

// Prefixed returns the keys that start with prefix, sorted, and marks them
// as used. doc is the pattern shown in "known settings" (e.g. "sdk.*").
func (s *Settings) Prefixed(prefix, doc string) []string {
	s.known = append(s.known, doc)
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			s.used[k] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Document adds a pattern (e.g. "sdk.schema.*") to the "known settings"
// list without reading anything.
func (s *Settings) Document(pattern string) { s.known = append(s.known, pattern) }

// Value returns a value as written without marking it known or used.
func (s *Settings) Value(key string) string { return s.m[key] }

// Undocumented runs read with the keys it reads left out of the "known
// settings" list, for families of keys that a pattern already documents.
func (s *Settings) Undocumented(read func()) {
	n := len(s.known)
	read()
	s.known = s.known[:n]
}

// Done reports the first problem, or else the first unknown setting, with
// a "did you mean" when only the case differs and the list of known ones.
func (s *Settings) Done() error {
	if s.err != nil {
		return s.err
	}
	var unknown []string
	for k := range s.m {
		if !s.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	k := unknown[0]
	msg := "unknown setting"
	for _, known := range s.known {
		if strings.EqualFold(known, k) {
			msg += fmt.Sprintf(" (did you mean %q?)", known)
			break
		}
	}
	known := slices.Clone(s.known)
	slices.Sort(known)
	known = slices.Compact(known)
	named := slices.DeleteFunc(slices.Clone(known), func(k string) bool { return strings.HasSuffix(k, "*") })
	if len(named) == 0 {
		// Listing only accepted-and-ignored families would mislead.
		return &SettingError{Setting: k, Err: errors.New(msg + "; this plugin has no settings")}
	}
	return &SettingError{Setting: k, Err: errors.New(msg + "; known settings: " + strings.Join(known, ", "))}
}
