package config

import (
	"fmt"
	"strings"
	"unicode"
)

// Limits of the ids in pipeline files. Pipeline and connector ids are
// Conduit's: its pipeline service accepts only the characters of
// idChars, at most 128 of them for a pipeline and 256 for a connector.
// Conduit does not restrict processor ids; conduit refuses what cannot
// be shown or addressed (see checkProcessorID).
const (
	MaxPipelineIDLength  = 128
	MaxConnectorIDLength = 256
	MaxProcessorIDLength = 256
)

// idCharsHelp says which characters an id may hold, for errors.
const idCharsHelp = "letters A-Z and a-z, digits and - _ : ."

// idChar reports whether r may be in a pipeline or connector id:
// Conduit's ^[A-Za-z0-9-_:.]*$.
func idChar(r rune) bool {
	return r < unicode.MaxASCII && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_:.", r))
}

// checkPipelineID refuses a pipeline id that Conduit refuses, and "." and
// "..", which name no pipeline in an API path (/v1/pipelines/..).
func checkPipelineID(id string) error {
	return checkID(id, "pipeline", MaxPipelineIDLength)
}

// checkConnectorID is checkPipelineID for a connector id.
func checkConnectorID(id string) error {
	return checkID(id, "connector", MaxConnectorIDLength)
}

func checkID(id, what string, max int) error {
	if id == "" {
		return nil // "required" is said where the entry ends
	}
	if len(id) > max {
		return fmt.Errorf("is %d characters long; a %s id has at most %d", len(id), what, max)
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return !idChar(r) }); i >= 0 {
		r := []rune(id[i:])[0]
		return fmt.Errorf("%q holds %s, which a %s id cannot; use only %s", id, describeRune(r), what, idCharsHelp)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%q cannot be a %s id: it cannot be addressed in an API path; use a name", id, what)
	}
	return nil
}

// checkProcessorID refuses a processor id that cannot be printed as it is
// (a control character, an escape sequence) or addressed in an API path
// ("/", ".", ".."), or that is longer than MaxProcessorIDLength. Conduit
// accepts any processor id; these cannot work here.
func checkProcessorID(id string) error {
	if len(id) > MaxProcessorIDLength {
		return fmt.Errorf("is %d characters long; a processor id has at most %d", len(id), MaxProcessorIDLength)
	}
	if i := strings.IndexFunc(id, func(r rune) bool {
		return r == '/' || r == '\\' || r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != ' '
	}); i >= 0 {
		r := []rune(id[i:])[0]
		return fmt.Errorf("%q holds %s, which a processor id cannot; use %s", id, describeRune(r), idCharsHelp)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%q cannot be a processor id: it cannot be addressed in an API path; use a name", id)
	}
	return nil
}

// describeRune names r for an error without printing it raw.
func describeRune(r rune) string {
	if unicode.IsPrint(r) && r < unicode.MaxASCII {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("the character %U", r)
}
