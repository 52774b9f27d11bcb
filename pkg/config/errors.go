package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// KeyError reports a problem with one key of the global configuration. Its
// message reads like a compiler error so that editors and people can jump to
// the spot:
//
//	conduit.yml:14: pipelines.error-recovery.jitter: must be between 0 and 1, got 1.5
//	env CONDUIT_LOG_LEVEL: log.level: must be one of debug, info, warn, error, got "verbose"
//	flag --api.http.address: api.http.address: must be host:port, ...
type KeyError struct {
	// Source is where the value came from: the path of the configuration
	// file, "env NAME" for an environment variable, "flag --name" for a
	// flag, or "default".
	Source string
	// Line is the 1-based line in the file, 0 when Source is not a file or
	// the problem has no line (for example a file that cannot be read).
	Line int
	// Key is the dotted key, e.g. "log.level"; empty for problems with the
	// file as a whole (malformed YAML).
	Key string
	// Err is the problem itself, without location.
	Err error
}

// Error implements error.
func (e *KeyError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(errString(e.Err))
	return b.String()
}

// Unwrap returns the underlying problem, so errors.Is works through KeyError.
func (e *KeyError) Unwrap() error { return e.Err }

// PipelineError reports a problem with a pipeline configuration file or one
// pipeline in it. LoadPipelines returns these, and callers that validate more
// (plugins, connector settings) build them with Pipeline.FieldError so every
// pipeline problem reads the same:
//
//	pipelines/bad.yml:12: pipeline "orders": connectors[src].plugin: unknown plugin "builtin:nope"
type PipelineError struct {
	// File is the path of the pipeline file (or of the pipelines directory
	// when that cannot be read).
	File string
	// Line is the 1-based line of the offending field, 0 when unknown.
	Line int
	// PipelineID is the id of the pipeline, empty for problems with the
	// file as a whole or a pipeline without an id.
	PipelineID string
	// Field is the path of the offending field relative to the pipeline,
	// e.g. "connectors[src].settings.rate" or "dead-letter-queue.window-size".
	// Connectors and processors are named by id when they have one, else by
	// their 0-based index. For file-level problems it is the top-level field
	// (e.g. "version"), for a pipeline without id it starts with
	// "pipelines[N]".
	Field string
	// Err is the problem itself, without location.
	Err error
}

// Error implements error.
func (e *PipelineError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.PipelineID != "" {
		fmt.Fprintf(&b, ": pipeline %q", e.PipelineID)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(errString(e.Err))
	return b.String()
}

// Unwrap returns the underlying problem, so errors.Is works through
// PipelineError.
func (e *PipelineError) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return "invalid"
	}
	return err.Error()
}

// unknownNameError is the error for a key or field that is not known. It
// suggests the closest known name because most unknown names are typos, and
// a silently ignored typo (jiter: 0.5) is a setting the user believes is
// active.
func unknownNameError(what, name string, known []string) error {
	// The error's location prefix already names the key, so the message
	// does not repeat it.
	if s := suggest(name, known); s != "" {
		return fmt.Errorf("unknown %s; did you mean %q?", what, s)
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	return fmt.Errorf("unknown %s; known: %s", what, strings.Join(sorted, ", "))
}

// suggest returns the known name closest to name, or "" when nothing is close
// enough to be a plausible typo. Dotted names are compared both as a whole
// and by their last segment, so "pipelines.min-delay" finds
// "pipelines.error-recovery.min-delay".
func suggest(name string, known []string) string {
	sorted := append([]string(nil), known...)
	sort.Strings(sorted) // deterministic choice between equally close names

	leaf := lastSegment(name)
	limit := max(2, len(leaf)/3)
	best, bestDist := "", limit+1
	parent := parentOf(name)
	for _, k := range sorted {
		if parentOf(k) != parent {
			continue
		}
		if d := levenshtein(strings.ToLower(leaf), strings.ToLower(lastSegment(k))); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return best
	}
	// The right name in the wrong place.
	for _, k := range sorted {
		if lastSegment(k) == leaf {
			return k
		}
	}
	for _, k := range sorted {
		if levenshtein(name, k) <= 2 {
			return k
		}
	}
	return ""
}

func lastSegment(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func parentOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return ""
}

// levenshtein is the edit distance between a and b (bytes; names are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
