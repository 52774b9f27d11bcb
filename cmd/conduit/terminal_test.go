package main

import (
	"bytes"
	"testing"
)

func TestEscapeControls(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "plain text and layout stay", in: "ID\tSTATUS\norders  running\n", want: "ID\tSTATUS\norders  running\n"},
		{name: "other languages stay", in: "commande échouée: 注文 ✓", want: "commande échouée: 注文 ✓"},
		{name: "a title change and a screen wipe", in: "\x1b]0;pwned\x07\x1b[2Jgone", want: `\x1b]0;pwned\x07\x1b[2Jgone`},
		{name: "carriage return and backspace", in: "ok\rFAIL\b", want: `ok\x0dFAIL\x08`},
		{name: "DEL", in: "a\x7fb", want: `a\x7fb`},
		{name: "the one-character CSI of C1", in: "a\u009b2Jb", want: `a\u009b2Jb`},
		{name: "a right-to-left override", in: "txt.\u202eexe", want: `txt.\u202eexe`},
		{name: "bytes that are not UTF-8", in: "a\xffb", want: `a\xffb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := humanOutput(&b).Write([]byte(tc.in))
			if err != nil || n != len(tc.in) {
				t.Fatalf("Write: %d, %v", n, err)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
