package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// humanOutput is w for text meant for a terminal (tables, descriptions,
// event lines, messages): every control character but newline and tab is
// written as a visible escape, so an id or an error text that came from
// elsewhere (an upstream system's error message, a pipeline file) cannot
// move the cursor, rewrite the screen or retitle the window. JSON and YAML
// output does not go through it: it keeps every value exact and writes the
// same characters in the escapes of its own syntax (escapeJSONControls,
// jsonToYAML).
func humanOutput(w io.Writer) io.Writer { return terminalWriter{w: w} }

type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	if _, err := t.w.Write(escapeControls(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeControls returns p with the characters a terminal acts on written
// as escapes: C0 controls but \n and \t (\x1b), DEL, C1 controls (\u009b,
// the one-byte CSI), the bidirectional overrides that make text read in
// another order than it is, and bytes that are not UTF-8 (\xff). The
// printable text, any language, is kept as it is.
func escapeControls(p []byte) []byte {
	clean := true
	for _, c := range p {
		if c >= 0x80 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return p
	}
	out := make([]byte, 0, len(p)+16)
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, p[0])
		case r == '\n' || r == '\t':
			out = append(out, p[:size]...)
		case r < 0x20 || r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[:size]...)
		}
		p = p[size:]
	}
	return out
}

// isBidiControl reports the characters that reorder the text around them
// (embeddings, overrides, isolates).
func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// escapeJSONControls returns the JSON document raw with every character a
// terminal acts on written as a JSON \u escape: the C0 controls the encoder
// left (none outside JSON's own whitespace), DEL, the C1 controls (U+009B
// is a one-character CSI) and the bidirectional overrides, which encoders
// write as they are. The document decodes to the same value; only its
// bytes change, so `--json` piped to a terminal or to jq is safe and exact.
// Outside strings JSON has only ASCII, so every such character found is in
// a string, where a \u escape means the same character. A byte that is not
// UTF-8 (no encoder here writes one) becomes U+FFFD, as decoders read it.
func escapeJSONControls(raw []byte) []byte {
	if !needsJSONEscape(raw) {
		return raw
	}
	out := make([]byte, 0, len(raw)+32)
	for len(raw) > 0 {
		r, size := utf8.DecodeRune(raw)
		switch {
		case r == utf8.RuneError && size <= 1:
			out = append(out, `\ufffd`...)
		case r == '\n' || r == '\t' || r == '\r':
			out = append(out, raw[:size]...)
		case terminalControl(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, raw[:size]...)
		}
		raw = raw[size:]
	}
	return out
}

// needsJSONEscape reports whether raw holds a character escapeJSONControls
// rewrites; most documents hold none and are returned as they are.
func needsJSONEscape(raw []byte) bool {
	for len(raw) > 0 {
		c := raw[0]
		if c < 0x80 {
			if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f {
				return true
			}
			raw = raw[1:]
			continue
		}
		r, size := utf8.DecodeRune(raw)
		if (r == utf8.RuneError && size <= 1) || terminalControl(r) {
			return true
		}
		raw = raw[size:]
	}
	return false
}

// terminalControl reports the characters a terminal acts on instead of
// showing: C0 controls, DEL, C1 controls and the bidirectional controls.
func terminalControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r)
}

// holdsTerminalControl reports whether s holds a terminal control other
// than newline and tab, which are layout.
func holdsTerminalControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && terminalControl(r) })
}
