package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// EnvPrefix starts the name of every environment variable conduit reads.
const EnvPrefix = "CONDUIT_"

// Warning is something in the inputs of Load that was ignored but that the
// user probably meant to have an effect. Load returns, for now, one per
// environment variable that starts with EnvPrefix but that conduit does
// not read: a misspelled key in conduit.yml is an error, while a
// misspelled variable would otherwise be ignored without a word. They are
// not errors, because other tools may set CONDUIT_ variables of their own.
type Warning struct {
	// Source is where the input was found, e.g. "env CONDUIT_LOG_LEVLE".
	Source string
	// Message says what was ignored and, when a known name is close,
	// which one was probably meant.
	Message string
}

// String reads like a KeyError: "env CONDUIT_LOG_LEVLE: unknown ...".
func (w Warning) String() string { return w.Source + ": " + w.Message }

// otherEnvVars are the CONDUIT_ variables that are not configuration keys
// but that conduit reads: the runtime sets them for the standalone
// connectors it starts (pkg/sdk reads the first two, Conduit's connector
// SDK the others) and in the environment of standalone processors' modules,
// and a conduit started by a connector's tests may inherit them.
var otherEnvVars = []string{
	"CONDUIT_PLUGIN_SOCKET",
	"CONDUIT_PLUGIN_PROTOCOL",
	"CONDUIT_PLUGIN_MAGIC_COOKIE",
	"CONDUIT_CONNECTOR_ID",
	"CONDUIT_CONNECTOR_LOG_LEVEL",
	"CONDUIT_CONNECTOR_MAX_RECEIVE_RECORD_SIZE",
	"CONDUIT_CONNECTOR_TOKEN",
	"CONDUIT_CONNECTOR_UTILITIES_GRPC_TARGET",
	// Those of a standalone processor's module (Conduit's processor SDK;
	// its CONDUIT_LOG_LEVEL is log.level's name too).
	"CONDUIT_MAGIC_COOKIE",
	"CONDUIT_PROCESSOR_ID",
}

// otherEnvPrefixes start variables that conduit's own tests read, such as
// the knobs of the crash test under cmd/conduit (CONDUIT_CRASH_RECORDS),
// which the conduit processes that test starts inherit; CONDUIT_TEST_ is
// kept for the tests' own use.
var otherEnvPrefixes = []string{
	"CONDUIT_CRASH_",
	"CONDUIT_TEST_",
}

// knownEnvVars lists every CONDUIT_ variable that conduit reads, sorted.
func knownEnvVars() []string {
	names := []string{ConfigPathEnv}
	for _, k := range keyTable {
		names = append(names, EnvVar(k.name))
	}
	for from := range keyAliases {
		names = append(names, EnvVar(from))
	}
	names = append(names, otherEnvVars...)
	sort.Strings(names)
	return names
}

// unknownEnv returns a warning for each variable of environ (KEY=value
// entries, as os.Environ gives them) that starts with EnvPrefix and that
// conduit does not read, sorted by name.
func unknownEnv(environ []string) []Warning {
	known := knownEnvVars()
	isKnown := make(map[string]bool, len(known))
	for _, n := range known {
		isKnown[n] = true
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || isKnown[name] || hasAnyPrefix(name, otherEnvPrefixes) {
			continue
		}
		isKnown[name] = true // once, even if listed twice
		names = append(names, name)
	}
	sort.Strings(names)
	// Suggestions are configuration keys only: nobody means to set a
	// plugin's variable on the runtime.
	keys := slices.DeleteFunc(slices.Clone(known), func(n string) bool { return slices.Contains(otherEnvVars, n) })
	conduitOnly := make(map[string]string, len(conduitOnlyKeys))
	for k := range conduitOnlyKeys {
		conduitOnly[EnvVar(k)] = k
	}
	out := make([]Warning, 0, len(names))
	for _, name := range names {
		if k, ok := conduitOnly[name]; ok {
			out = append(out, Warning{Source: "env " + name, Message: "Conduit's " + k + ", a setting this product does not have; ignored"})
			continue
		}
		msg := "unknown conduit environment variable, ignored"
		if s := suggestEnv(name, keys); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		out = append(out, Warning{Source: "env " + name, Message: msg})
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// suggestEnv returns the known variable that name most likely misspells,
// or "". known is sorted, so a tie goes to the first name.
//
// Variable names lose the difference between "." and "-" of the keys, so
// they are compared as a whole: a typo (CONDUIT_LOG_LEVLE), or the right
// last word with the wrong words before it (CONDUIT_API_TOKEN for
// CONDUIT_API_AUTH_TOKEN) when only one variable ends that way.
func suggestEnv(name string, known []string) string {
	rest := strings.TrimPrefix(name, EnvPrefix)
	best, bestDist := "", max(2, len(rest)/4)+1
	for _, k := range known {
		if d := levenshtein(rest, strings.TrimPrefix(k, EnvPrefix)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return best
	}
	last := rest
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		last = rest[i+1:]
	}
	if last == "" {
		return ""
	}
	var matches []string
	for _, k := range known {
		if strings.HasSuffix(k, "_"+last) {
			matches = append(matches, k)
		}
	}
	if len(matches) > 1 {
		// CONDUIT_API_TOKEN: of the tokens, the one of the API.
		first, _, _ := strings.Cut(rest, "_")
		matches = slices.DeleteFunc(matches, func(k string) bool {
			return !strings.HasPrefix(strings.TrimPrefix(k, EnvPrefix), first+"_")
		})
	}
	if len(matches) != 1 {
		return "" // none, or ambiguous: CONDUIT_PATH could be any of the paths
	}
	return matches[0]
}
