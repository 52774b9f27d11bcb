package sdk

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings reads a connector's settings (Config.Settings) in Configure.
// It remembers which settings were read, so that a misspelled one is
// reported instead of silently ignored, and it keeps the first problem
// only, so that the user fixes one at a time in a stable order:
//
//	s := sdk.NewSettings(cfg.Settings)
//	d.path = s.String("path", "")
//	d.batch = s.Int("batch.size", 100, 1, 10_000)
//	d.timeout = s.Duration("timeout", 30*time.Second)
//	if d.path == "" {
//		s.Failf("path", "is required")
//	}
//	return s.Err()
//
// A value that is empty or blank counts as not set, as Conduit treats
// `key: ""`. Err's error is fatal (400) and names the setting.
type Settings struct {
	m    map[string]string
	used map[string]bool
	err  error
}

// NewSettings reads m, normally Config.Settings.
func NewSettings(m map[string]string) *Settings {
	return &Settings{m: m, used: make(map[string]bool, len(m))}
}

// Failf records a problem with key; only the first problem is kept.
func (s *Settings) Failf(key, format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("setting %q: %s", key, fmt.Sprintf(format, args...))
	}
}

// Raw returns key's value, trimmed, and whether it is set.
func (s *Settings) Raw(key string) (string, bool) {
	s.used[key] = true
	v, ok := s.m[key]
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// Has reports whether key is set.
func (s *Settings) Has(key string) bool {
	_, ok := s.Raw(key)
	return ok
}

// String returns key's value, or def when it is not set.
func (s *Settings) String(key, def string) string {
	if v, ok := s.Raw(key); ok {
		return v
	}
	return def
}

// Int returns key's value as a whole number in [lo, hi], or def when it is
// not set.
func (s *Settings) Int(key string, def, lo, hi int64) int64 {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		s.Failf(key, "%q is not a whole number", v)
	case n < lo || n > hi:
		s.Failf(key, "%q must be between %d and %d", v, lo, hi)
	default:
		return n
	}
	return def
}

// Float returns key's value as a finite number in [lo, hi], or def when it
// is not set.
func (s *Settings) Float(key string, def, lo, hi float64) float64 {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		s.Failf(key, "%q is not a number", v)
	case f < lo || f > hi:
		s.Failf(key, "%q must be between %v and %v", v, lo, hi)
	default:
		return f
	}
	return def
}

// Bool returns key's value (true or false, as strconv.ParseBool reads
// it), or def when it is not set.
func (s *Settings) Bool(key string, def bool) bool {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.Failf(key, "%q is not a boolean (use true or false)", v)
		return def
	}
	return b
}

// Duration returns key's value as a duration of 0 or more ("500ms",
// "30s", "2h"), or def when it is not set.
func (s *Settings) Duration(key string, def time.Duration) time.Duration {
	v, ok := s.Raw(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		s.Failf(key, "%q is not a duration (write it like 500ms, 30s or 2h)", v)
	case d < 0:
		s.Failf(key, "%q must not be negative", v)
	default:
		return d
	}
	return def
}

// Err returns the first problem, or else the first setting nothing read,
// with the list of those that were; nil when all is well. Keys starting
// with "sdk." are Conduit's connector-SDK settings: a pipeline file
// written for Conduit may carry them, so they are accepted and ignored.
// The error is fatal (400): settings do not heal on a restart.
func (s *Settings) Err() error {
	if s.err != nil {
		return Fatal(s.err)
	}
	var unknown, known []string
	for k := range s.m {
		if !s.used[k] && !strings.HasPrefix(k, "sdk.") {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	for k := range s.used {
		known = append(known, k)
	}
	slices.Sort(unknown)
	slices.Sort(known)
	return Fatal(fmt.Errorf("setting %q: unknown setting (known: %s)", unknown[0], strings.Join(known, ", ")))
}
