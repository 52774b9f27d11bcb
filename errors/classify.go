package errors

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
)

// Source says how a classification was decided, named as the audit log,
// the persisted state and the API spell it; the audit log records it so
// that "why was this fatal?" has an answer. The zero value is invalid.
type Source string

// Sources.
const (
	// SourceTyped: a *Error with a valid code was found in the chain.
	SourceTyped Source = "typed"
	// SourceJSON: the error text was (or ended with) the wire JSON object.
	SourceJSON Source = "json"
	// SourceDefault: nothing said otherwise, so transient, the safe default.
	SourceDefault Source = "default"
	// SourceRule: a rule of the runtime decided, e.g. "processor errors
	// without a code are fatal" or "a plugin that crashed is transient".
	SourceRule Source = "rule"
)

// String returns the source's name; an invalid source prints as
// Source(...) so that it stands out (the zero value as Source(0)).
func (s Source) String() string {
	switch s {
	case SourceTyped, SourceJSON, SourceDefault, SourceRule:
		return string(s)
	case "":
		return "Source(0)"
	default:
		return fmt.Sprintf("Source(%q)", string(s))
	}
}

// ParseSource is the inverse of Source.String.
func ParseSource(s string) (Source, error) {
	switch src := Source(s); src {
	case SourceTyped, SourceJSON, SourceDefault, SourceRule:
		return src, nil
	}
	return "", fmt.Errorf("unknown classification source %q", s)
}

// Classification is the verdict on an error.
type Classification struct {
	Class Class
	// Code is the error's code, 0 when it has none (or an invalid one).
	Code int
	// Message is what the user should read: the error's text, or for a
	// wire error the message inside the JSON (after any prefix the host
	// added), not the JSON around it. A wire object without a message
	// (`{"code":503}`) has nothing better to show, so its text is kept.
	Message string
	Source  Source
	// Details are the wire error's details, or those of the typed error
	// (of the nearest *Error it wraps that has any, so Fatal(WithDetails(...))
	// keeps them).
	Details map[string]any
}

// Classify decides whether err is transient or fatal:
//
//  1. a *Error in the chain (errors.As: any depth of %w, errors.Join) with a
//     code in 100-599: by the code table (SourceTyped);
//  2. else the error text as the wire JSON object, whole or at its end after
//     a prefix such as "write: " (SourceJSON);
//  3. else transient (SourceDefault) - plain text, malformed JSON, JSON
//     without an integer code, codes outside 100-599.
//
// Classify never panics and is linear in the length of the text for any
// input. A nil err gets the zero Classification.
func Classify(err error) Classification {
	if err == nil {
		return Classification{}
	}
	text := err.Error()
	if coded := findCoded(err); coded != nil {
		// Fatal, Transient and WithCode add a *Error without details around
		// one that may have them; the facts still belong to this error.
		var details map[string]any
		if d := findError(coded, func(e *Error) bool { return e.Details != nil }); d != nil {
			details = d.Details
		}
		source := SourceTyped
		if coded.fromWire {
			source = SourceJSON
		}
		return Classification{Class: ClassOf(coded.Code), Code: coded.Code, Message: text, Source: source, Details: details}
	}
	if c, ok := parseWire(text); ok {
		return c
	}
	return Classification{Class: ClassTransient, Message: text, Source: SourceDefault}
}

// ClassifyOr is Classify, except that where Classify would fall back to its
// default, class applies instead with SourceRule. The engine uses it for
// processors, whose uncoded errors are fatal: a processor is deterministic,
// so running it again gives the same error.
func ClassifyOr(err error, class Class) Classification {
	c := Classify(err)
	if c.Source == SourceDefault && err != nil {
		c.Class, c.Source = class, SourceRule
	}
	return c
}

// ClassifyProcessor classifies an error a processor returned. Without a
// code it is fatal, not transient as Classify would say: a processor is
// deterministic, so running it again on the same record gives the same
// error. The engine (which nacks or restarts by it) and the supervisor
// (which reports it) both classify processor errors through here.
func ClassifyProcessor(err error) Classification {
	return ClassifyOr(err, ClassFatal)
}

// ComponentKind is the kind of pipeline component an error came from, as
// errors, events and the API name it.
type ComponentKind string

// Component kinds.
const (
	ComponentSource          ComponentKind = "source"
	ComponentDestination     ComponentKind = "destination"
	ComponentProcessor       ComponentKind = "processor"
	ComponentDeadLetterQueue ComponentKind = "dead-letter-queue"
)

// ClassifyComponent classifies an error that a component of kind returned:
// a processor's with ClassifyProcessor, any other's with Classify. Every
// place that classifies a component's error - the engine, the supervisor,
// the dead-letter decision, the dead-lettered event - goes through here, so
// they cannot disagree.
func ClassifyComponent(kind ComponentKind, err error) Classification {
	if kind == ComponentProcessor {
		return ClassifyProcessor(err)
	}
	return Classify(err)
}

// maxWireCandidates bounds how many '{' positions parseWire tries when the
// JSON object sits at the end of a longer text; each try is linear, so the
// whole is linear too. Objects nested deeper than this are not found in the
// suffix form (the whole-text form has no limit).
const maxWireCandidates = 32

// wireError is the JSON shape of an error crossing a process boundary.
type wireError struct {
	Code    json.RawMessage `json:"code"`
	Message *string         `json:"message"`
	Details map[string]any  `json:"details"`
}

func parseWire(text string) (Classification, bool) {
	trimmed := strings.TrimSpace(text)
	if !strings.HasSuffix(trimmed, "}") {
		return Classification{}, false
	}
	if strings.HasPrefix(trimmed, "{") {
		if c, ok := decodeWire("", trimmed); ok {
			return c, true
		}
	}
	// A host may have wrapped the text: "write: {...}". Look for the
	// object's opening brace from the right.
	end := len(trimmed)
	for tries := 0; tries < maxWireCandidates; tries++ {
		i := strings.LastIndexByte(trimmed[:end], '{')
		if i <= 0 {
			return Classification{}, false
		}
		if c, ok := decodeWire(trimmed[:i], trimmed[i:]); ok {
			return c, true
		}
		end = i
	}
	return Classification{}, false
}

// decodeWire decodes obj as the wire object. It accepts it when it is a JSON
// object with a string message or an integer code; a code that is missing,
// not an integer or outside 100-599 makes it transient by default.
func decodeWire(prefix, obj string) (Classification, bool) {
	if !json.Valid([]byte(obj)) {
		return Classification{}, false
	}
	var w wireError
	dec := json.NewDecoder(strings.NewReader(obj))
	if err := dec.Decode(&w); err != nil {
		return Classification{}, false
	}
	code, codeOK := wireCode(w.Code)
	if !codeOK && w.Message == nil {
		// Some other JSON that happens to end the text; not ours.
		return Classification{}, false
	}
	msg := obj
	if w.Message != nil {
		msg = *w.Message
	}
	c := Classification{Message: prefix + msg, Details: w.Details}
	if codeOK && validCode(code) {
		c.Class, c.Code, c.Source = ClassOf(code), code, SourceJSON
	} else {
		c.Class, c.Source = ClassTransient, SourceDefault
	}
	return c, true
}

// wireCode accepts only integral JSON numbers that fit an int.
func wireCode(raw json.RawMessage) (int, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' || raw[0] == 'n' || raw[0] == 't' || raw[0] == 'f' || raw[0] == '{' || raw[0] == '[' {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// MarshalWire encodes err as the wire JSON object: the code of its
// classification (omitted when it has none, so the receiver's default
// applies, as it would in process), the text of the whole chain as message,
// and the typed error's details. sdk.Serve sends every error this way.
func MarshalWire(err error) []byte {
	if err == nil {
		return nil
	}
	c := Classify(err)
	details := c.Details
	var re *recordError
	if errors.As(err, &re) {
		// The record the error names travels as a detail; the caller's
		// map is not changed.
		details = maps.Clone(details)
		if details == nil {
			details = map[string]any{}
		}
		details[DetailPosition] = base64.StdEncoding.EncodeToString(re.position)
	}
	out := struct {
		Code    int            `json:"code,omitempty"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	}{Code: c.Code, Message: c.Message, Details: details}
	b, mErr := json.Marshal(out)
	if mErr != nil {
		// Details that cannot be JSON are dropped rather than losing the
		// code and the message.
		out.Details = nil
		b, _ = json.Marshal(out)
	}
	return b
}
