package processor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// settings reads a processor's settings and remembers which keys were looked
// at, so that whatever is left over can be reported as unknown. The first
// problem wins: a user fixes one setting, runs again and sees the next one,
// in a deterministic order (known settings in the order the processor reads
// them, then unknown keys sorted).
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

// raw returns the value as written. An empty (or blank) value counts as
// absent, the way Conduit treats `key: ""`.
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

// intRange parses a whole number in [minimum, maximum]; ok is false when the
// setting is absent or wrong.
func (s *settings) intRange(key string, minimum, maximum int) (n int, ok bool) {
	v, present := s.raw(key)
	if !present {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		s.failf(key, "%q is not a whole number", v)
		return 0, false
	case n < minimum || n > maximum:
		s.failf(key, "%q must be between %d and %d", v, minimum, maximum)
		return 0, false
	}
	return n, true
}

// sdkSchema accepts Conduit's processor-SDK schema settings
// (sdk.schema.decode.* and sdk.schema.encode.*), so that a pipeline file
// written for Conduit runs unchanged. There is no schema registry here, so
// they change nothing; their values are still checked so that a typo in a
// value is not silently swallowed. Other sdk.* keys are left over and
// reported as unknown, as Conduit does.
func (s *settings) sdkSchema() {
	s.known = append(s.known, "sdk.schema.*")
	n := len(s.known)
	// The readers below append each key to s.known; "sdk.schema.*" covers them.
	defer func() { s.known = s.known[:n] }()
	keys := make([]string, 0, 4)
	for k := range s.m {
		if strings.HasPrefix(k, "sdk.schema.") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch k {
		case "sdk.schema.decode.key.enabled", "sdk.schema.decode.payload.enabled",
			"sdk.schema.encode.key.enabled", "sdk.schema.encode.payload.enabled":
			if v, ok := s.raw(k); ok {
				if _, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
					s.failf(k, "%q is not a boolean (use true or false)", v)
				}
			}
		case "sdk.schema.encode.key.subject", "sdk.schema.encode.payload.subject":
			s.raw(k)
		case "sdk.schema.encode.type":
			if v, ok := s.raw(k); ok && strings.TrimSpace(v) != "avro" {
				s.failf(k, "%q is not a schema type (the only one is avro)", v)
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
	if len(known) == 1 && known[0] == "sdk.schema.*" {
		// filter: listing only the ignored SDK keys would be misleading.
		return &SettingError{Setting: k, Err: errors.New(msg + "; this processor has no settings")}
	}
	return &SettingError{
		Setting: k,
		Err:     errors.New(msg + "; known settings: " + strings.Join(known, ", ")),
	}
}
