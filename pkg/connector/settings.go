package connector

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// settings reads a connector's settings and remembers which keys were
// looked at, so that whatever is left over can be reported as unknown.
// The first problem wins: a user fixes one setting, runs again, and sees the
// next one, and the order is deterministic (known settings in the order the
// connector reads them, then unknown keys sorted).
type settings struct {
	m     map[string]string
	known []string // documented names, for the "unknown setting" message
	used  map[string]bool
	err   error
}

func newSettings(m map[string]string) *settings {
	return &settings{m: m, used: make(map[string]bool, len(m))}
}

// fail records the first problem.
func (s *settings) fail(key string, err error) {
	if s.err == nil {
		s.err = &SettingError{Setting: key, Err: err}
	}
}

func (s *settings) failf(key, format string, args ...any) {
	s.fail(key, fmt.Errorf(format, args...))
}

// raw returns the value as written. An empty value counts as absent, the way
// Conduit treats `key: ""`.
func (s *settings) raw(key string) (string, bool) {
	s.known = append(s.known, key)
	s.used[key] = true
	v, ok := s.m[key]
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

func (s *settings) string(key, def string) string {
	if v, ok := s.raw(key); ok {
		return v
	}
	return def
}

func (s *settings) required(key, what string) string {
	v, ok := s.raw(key)
	if !ok {
		s.failf(key, "is required (%s)", what)
	}
	return v
}

func (s *settings) bool(key string, def bool) bool {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		s.failf(key, "%q is not a boolean (use true or false)", v)
		return def
	}
	return b
}

// float parses a finite, non-negative number.
func (s *settings) float(key string, def float64) float64 {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		s.failf(key, "%q is not a number", v)
		return def
	case f < 0:
		s.failf(key, "%q must be 0 or more", v)
		return def
	}
	return f
}

// int parses a whole number >= min.
func (s *settings) int(key string, def, minimum int64) int64 {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		s.failf(key, "%q is not a whole number", v)
		return def
	case n < minimum:
		s.failf(key, "%q must be %d or more", v, minimum)
		return def
	}
	return n
}

// duration parses a non-negative Go duration ("100ms", "1.5s", "2m").
func (s *settings) duration(key string, def time.Duration) time.Duration {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil:
		s.failf(key, "%q is not a duration (write it like 100ms, 1s or 1m30s)", v)
		return def
	case d < 0:
		s.failf(key, "%q must not be negative", v)
		return def
	}
	return d
}

// prefixed returns the keys that start with prefix, sorted, and marks them
// as used. doc is the pattern shown in "known settings".
func (s *settings) prefixed(prefix, doc string) []string {
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

// connectorRole says which sdk.* settings apply.
type connectorRole int

const (
	roleSource connectorRole = iota + 1
	roleDestination
)

// sdkRecordFormat is the only record format the destinations write.
const sdkRecordFormat = "opencdc/json"

// sdk handles Conduit's SDK middleware settings (sdk.*), so that a pipeline
// file written for Conduit runs unchanged. The engine does batching itself,
// and this runtime has no schema registry and no per-connector rate limiter,
// so almost all of them are accepted and ignored; the ones with a
// well-known type are still checked, so a typo in a value is not silently
// swallowed. See the package documentation for the list.
func (s *settings) sdk(role connectorRole) {
	keys := s.prefixed("sdk.", "sdk.*")
	// The typed readers below add each key to s.known; "sdk.*" covers them.
	defer func(n int) { s.known = s.known[:n] }(len(s.known))
	for _, k := range keys {
		v := s.m[k]
		if strings.TrimSpace(v) == "" {
			continue
		}
		switch {
		case k == "sdk.batch.size",
			role == roleDestination && k == "sdk.rate.burst":
			s.int(k, 0, 0)
		case k == "sdk.batch.delay":
			s.duration(k, 0)
		case role == roleDestination && k == "sdk.rate.perSecond":
			s.float(k, 0)
		case k == "sdk.schema.extract.key.enabled",
			k == "sdk.schema.extract.payload.enabled",
			k == "sdk.schema.context.enabled":
			s.bool(k, false)
		case role == roleDestination && k == "sdk.record.format":
			if f := strings.TrimSpace(v); f != sdkRecordFormat {
				s.failf(k, "%q is not supported (the only record format is %s)", v, sdkRecordFormat)
			}
		}
	}
}

// done reports the first problem, or the first unknown setting.
func (s *settings) done() error {
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
	return &SettingError{
		Setting: k,
		Err:     errors.New(msg + "; known settings: " + strings.Join(known, ", ")),
	}
}
