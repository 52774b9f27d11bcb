package jsonenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestEncoderMatchesJSON compares each kind of value with what
// json.Marshal writes for it, including the strings and times it leaves
// to encoding/json or refuses.
func TestEncoderMatchesJSON(t *testing.T) {
	strs := []string{"", "plain text 123", "quote \" backslash \\", "<html> & </html>", "tab\tnl\ncr\r", "ctl\x00\x07\x1b\x7f",
		"bs\bff\f", "é 日本", "sep\u2028\u2029", "bad \xff utf8"}
	for _, s := range strs {
		e := New(nil)
		e.String(s)
		want, _ := json.Marshal(s)
		if !e.OK || !bytes.Equal(e.Buf, want) {
			t.Errorf("String(%q) = %s (ok %v), want %s", s, e.Buf, e.OK, want)
		}
	}
	times := []time.Time{{}, time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -5*3600-30*60)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("s", 61))}
	for _, tm := range times {
		e := New(nil)
		e.Time(tm)
		want, err := json.Marshal(tm)
		// The encoder may leave to encoding/json a time it would write
		// (an offset with seconds); it must never write one it refuses.
		if (err != nil && e.OK) || (e.OK && !bytes.Equal(e.Buf, want)) {
			t.Errorf("Time(%v) = %s (ok %v), json.Marshal = %s, %v", tm, e.Buf, e.OK, want, err)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		tm := time.Unix(rng.Int64N(1<<35)-1<<34, rng.Int64N(1e9)).In(time.FixedZone("z", (rng.IntN(48*60)-24*60)*60))
		e := New(nil)
		e.Time(tm)
		want, err := json.Marshal(tm)
		if (err != nil && e.OK) || (e.OK && !bytes.Equal(e.Buf, want)) {
			t.Fatalf("Time(%v) = %s (ok %v), json.Marshal = %s, %v", tm, e.Buf, e.OK, want, err)
		}
	}
	for _, b := range [][]byte{nil, {}, []byte("pos-1"), {0, 0xff, 0xfe}} {
		e := New(nil)
		e.Bytes(b)
		want, _ := json.Marshal(b)
		if !bytes.Equal(e.Buf, want) {
			t.Errorf("Bytes(%q) = %s, want %s", b, e.Buf, want)
		}
	}
	e := New(nil)
	e.Int(-42)
	e.Raw(",")
	e.Uint(1 << 63)
	e.Raw(",")
	e.Bool(true)
	if got := string(e.Buf); got != "-42,9223372036854775808,true" {
		t.Errorf("numbers: %s", got)
	}
}

// TestOptionalFields: an optional field is written with its key when set
// and left out, key and all, when it is the zero value.
func TestOptionalFields(t *testing.T) {
	e := New(nil)
	e.Raw("{")
	e.OptionalString(`"a":`, "")
	e.OptionalString(`"b":`, "x")
	e.OptionalInt(`,"c":`, 0)
	e.OptionalInt(`,"d":`, -3)
	e.OptionalTime(`,"e":`, time.Time{})
	e.OptionalTime(`,"f":`, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	e.Raw("}")
	if got, want := string(e.Buf), `{"b":"x","d":-3,"f":"2026-11-27T00:00:00Z"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
