package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// settings reads a connector's settings and remembers which it read, so
// that a misspelled one is reported instead of silently ignored. The first
// problem wins, so the user fixes one at a time in a stable order.
//
// It is deliberately self-contained (only the standard library) so that
// this example can be copied out of the repository as a template.
type settings struct {
	m    map[string]string
	used map[string]bool
	err  error
}

func newSettings(m map[string]string) *settings {
	return &settings{m: m, used: make(map[string]bool, len(m))}
}

// failf records a problem with key.
func (s *settings) failf(key, format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("setting %q: %s", key, fmt.Sprintf(format, args...))
	}
}

// raw returns the value; an empty or blank value counts as absent, the way
// Conduit treats `key: ""`.
func (s *settings) raw(key string) (string, bool) {
	s.used[key] = true
	v, ok := s.m[key]
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (s *settings) has(key string) bool {
	_, ok := s.raw(key)
	return ok
}

func (s *settings) str(key, def string) string {
	if v, ok := s.raw(key); ok {
		return v
	}
	return def
}

// int parses a whole number in [lo, hi].
func (s *settings) int(key string, def, lo, hi int64) int64 {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		s.failf(key, "%q is not a whole number", v)
	case n < lo || n > hi:
		s.failf(key, "%q must be between %d and %d", v, lo, hi)
	default:
		return n
	}
	return def
}

// float parses a finite number >= 0.
func (s *settings) float(key string, def float64) float64 {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		s.failf(key, "%q is not a number", v)
	case f < 0:
		s.failf(key, "%q must be 0 or more", v)
	default:
		return f
	}
	return def
}

func (s *settings) bool(key string, def bool) bool {
	v, ok := s.raw(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.failf(key, "%q is not a boolean (use true or false)", v)
		return def
	}
	return b
}

// done returns the first problem, or else the first unknown setting with
// the list of known ones. Keys starting with "sdk." are Conduit's
// connector-SDK middleware settings; a pipeline file written for Conduit
// may carry them, so they are accepted and ignored.
func (s *settings) done() error {
	if s.err != nil {
		return s.err
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
	return fmt.Errorf("setting %q: unknown setting (known: %s)", unknown[0], strings.Join(known, ", "))
}
