package errors_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	cerrors "github.com/conduitry/conduit/errors"
)

// fuzzSeeds are the texts TestClassifyWire covers plus some shapes that
// stress the suffix search; testdata/fuzz/FuzzClassify holds any crashers
// found since.
var fuzzSeeds = []string{
	`{"code":503,"message":"dial tcp 127.0.0.1:5432: connect: connection refused"}`,
	`{"code":422,"message":"bad record","details":{"table":"users","id":7}}`,
	" \n{\"code\":503,\"message\":\"x\"}\t ",
	`write: {"code":400,"message":"bad"}`,
	`write: {"code":422,"message":"bad","details":{"a":{"b":{"c":1}}}}`,
	`get: {"code":404,"message":"no key {id} in {table}"}`,
	`{"code":"503","message":"x"}`,
	`{"code":503.5,"message":"x"}`,
	`{"code":503.0,"message":"x"}`,
	`{"code":5.03e2,"message":"x"}`,
	`{"code":1e300,"message":"x"}`,
	`{"code":-0,"message":"x"}`,
	`{"message":"x"}`,
	`{"code":999,"message":"x"}`,
	`{"code":null,"message":"x"}`,
	`{"code":503}`,
	`write: {"code":400}`,
	`[{"code":400,"message":"bad"}]`,
	`{}`,
	`{"code":503`,
	`panic in func() { return nil }`,
	`write: {"code":400,"message":"bad"} (after 3 retries)`,
	`{"a":1} {"code":400,"message":"bad"}`,
	`{"error":{"code":400,"message":"bad"}}`,
	`{"code":400,"message":"bad","details":"row 7"}`,
	`{"code":400,"message":42}`,
	`{"code":400,"message":"\ud800"}`,
	"{\"code\":400,\"message\":\"\xff\"}",
	"\xff: {\"code\":400,\"message\":\"bad\"}",
	"write: " + nestedWire(31),
	"write: " + nestedWire(40),
	strings.Repeat("{", 64) + strings.Repeat("}", 64),
	strings.Repeat(`{"a":`, 64) + "}",
	"connection reset by peer",
	"",
	"}",
	"{",
}

// fuzzCodes are paired with the seed texts in turn.
var fuzzCodes = []int{0, 400, 408, 422, 429, 501, 503, 599, 600, -1, 99, 100}

// FuzzClassify checks the invariants Classify promises for any error text:
// it does not panic, the verdict is always a valid one, a code is always in
// 100-599 and agrees with the class, and the verdict survives MarshalWire.
// code is attached with WithCode, Fatal and Transient to check that a typed
// code decides over any text.
func FuzzClassify(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzCodes[i%len(fuzzCodes)])
	}
	f.Fuzz(func(t *testing.T, text string, code int) {
		c := cerrors.Classify(errors.New(text))
		checkInvariants(t, c)
		// Text alone can only be decided by the JSON or the default.
		if c.Source != cerrors.SourceJSON && c.Source != cerrors.SourceDefault {
			t.Fatalf("Source = %v for plain text", c.Source)
		}
		if (c.Source == cerrors.SourceJSON) != (c.Code != 0) {
			t.Fatalf("Source %v with Code %d", c.Source, c.Code)
		}
		if c.Source == cerrors.SourceDefault && c.Class != cerrors.ClassTransient {
			t.Fatalf("default is %v, want transient", c.Class)
		}

		// ClassifyOr differs from Classify only where Classify defaulted.
		or := cerrors.ClassifyOr(errors.New(text), cerrors.ClassFatal)
		checkInvariants(t, or)
		if c.Source == cerrors.SourceDefault {
			if or.Class != cerrors.ClassFatal || or.Source != cerrors.SourceRule || or.Message != c.Message || or.Code != 0 {
				t.Fatalf("ClassifyOr = %+v, Classify = %+v", or, c)
			}
		} else if or.Class != c.Class || or.Source != c.Source || or.Code != c.Code || or.Message != c.Message {
			t.Fatalf("ClassifyOr = %+v, Classify = %+v", or, c)
		}

		// A valid typed code wins over whatever the text says; an invalid
		// one changes nothing.
		coded := cerrors.WithCode(errors.New(text), code)
		tc := cerrors.Classify(coded)
		checkInvariants(t, tc)
		valid := code >= 100 && code <= 599
		if valid {
			if tc.Class != cerrors.ClassOf(code) || tc.Code != code || tc.Source != cerrors.SourceTyped || tc.Message != text {
				t.Fatalf("Classify(WithCode(text, %d)) = %+v", code, tc)
			}
		} else if tc.Class != c.Class || tc.Code != c.Code || tc.Source != c.Source || tc.Message != c.Message {
			t.Fatalf("Classify(WithCode(text, %d)) = %+v, Classify(text) = %+v", code, tc, c)
		}
		wantFatal, wantTransient := cerrors.DefaultFatalCode, cerrors.DefaultTransientCode
		if valid && cerrors.ClassOf(code) == cerrors.ClassFatal {
			wantFatal = code
		}
		if valid && cerrors.ClassOf(code) == cerrors.ClassTransient {
			wantTransient = code
		}
		if fc := cerrors.Classify(cerrors.Fatal(coded)); fc.Class != cerrors.ClassFatal || fc.Code != wantFatal || fc.Source != cerrors.SourceTyped || fc.Message != text {
			t.Fatalf("Classify(Fatal(WithCode(text, %d))) = %+v", code, fc)
		}
		if trc := cerrors.Classify(cerrors.Transient(coded)); trc.Class != cerrors.ClassTransient || trc.Code != wantTransient || trc.Source != cerrors.SourceTyped || trc.Message != text {
			t.Fatalf("Classify(Transient(WithCode(text, %d))) = %+v", code, trc)
		}

		// Across the wire: the receiver decides what the sender decided.
		// JSON can only carry valid UTF-8; MarshalWire replaces the rest.
		b := cerrors.MarshalWire(errors.New(text))
		got := cerrors.Classify(errors.New(string(b)))
		checkInvariants(t, got)
		if got.Class != c.Class || got.Code != c.Code || got.Source != c.Source {
			t.Fatalf("after MarshalWire %s: %+v, before: %+v", b, got, c)
		}
		if utf8.ValidString(c.Message) && got.Message != c.Message {
			t.Fatalf("after MarshalWire %s: message %q, before %q", b, got.Message, c.Message)
		}
		if !sameDetails(got.Details, c.Details) {
			t.Fatalf("after MarshalWire %s: details %#v, before %#v", b, got.Details, c.Details)
		}
		// After the first hop the text is valid UTF-8, so a second hop
		// must send the same bytes (invalid UTF-8 is escaped as \ufffd by
		// the first and sent raw as U+FFFD by the second).
		if again := cerrors.MarshalWire(errors.New(string(b))); utf8.ValidString(c.Message) && string(again) != string(b) {
			t.Fatalf("second hop %s, first hop %s", again, b)
		}
	})
}

func checkInvariants(t *testing.T, c cerrors.Classification) {
	t.Helper()
	if c.Class != cerrors.ClassTransient && c.Class != cerrors.ClassFatal {
		t.Fatalf("invalid Class %v in %+v", c.Class, c)
	}
	switch c.Source {
	case cerrors.SourceTyped, cerrors.SourceJSON, cerrors.SourceDefault, cerrors.SourceRule:
	default:
		t.Fatalf("invalid Source %v in %+v", c.Source, c)
	}
	if c.Code != 0 && (c.Code < 100 || c.Code > 599) {
		t.Fatalf("Code %d outside 100-599", c.Code)
	}
	if c.Code != 0 && c.Class != cerrors.ClassOf(c.Code) {
		t.Fatalf("Class %v, but ClassOf(%d) = %v", c.Class, c.Code, cerrors.ClassOf(c.Code))
	}
}

// sameDetails treats nil and empty alike: MarshalWire omits empty details.
func sameDetails(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

const mib = 1 << 20

// hugeText is an adversarial text about size bytes long, with what
// Classify should make of it.
type hugeText struct {
	name string
	text string
	want cerrors.Classification // Message is not compared (too long to read)
}

func hugeTexts(size int) []hugeText {
	const obj = `{"code":400,"message":"bad"}`
	filler := strings.Repeat("x", size)
	// 32 nested candidate objects around one long string, then one brace
	// too many: every try of the suffix search reads the whole string
	// before json.Valid fails, the worst case of its 32 tries.
	late := "prefix " + strings.Repeat(`{"k":[`, 32) + `"` + filler + `"` + strings.Repeat("]}", 32) + "}"

	const deep = 100_000
	return []hugeText{
		{name: "open braces", text: strings.Repeat("{", size),
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "close braces", text: strings.Repeat("}", size),
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "open objects then a brace", text: strings.Repeat(`{"a":`, size/5) + "}",
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "open braces then a brace", text: strings.Repeat("{", size) + "}",
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "text then the wire object", text: filler + obj,
			want: cerrors.Classification{Class: cerrors.ClassFatal, Code: 400, Source: cerrors.SourceJSON}},
		{name: "huge message in the wire object", text: `{"code":400,"message":"` + filler + `"}`,
			want: cerrors.Classification{Class: cerrors.ClassFatal, Code: 400, Source: cerrors.SourceJSON}},
		{name: "text then 100k nested objects",
			text: filler + strings.Repeat(`{"a":`, deep) + "1" + strings.Repeat("}", deep),
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "wire object with 100k nested details",
			text: `{"code":400,"message":"bad","details":` + strings.Repeat(`{"a":`, deep) + "1" + strings.Repeat("}", deep) + "}",
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
		{name: "32 candidates each read the whole text", text: late,
			want: cerrors.Classification{Class: cerrors.ClassTransient, Source: cerrors.SourceDefault}},
	}
}

// TestClassifyHugeInputs checks that Classify returns on megabyte-long
// adversarial texts. The guard is generous: it catches a hang or a blow-up
// (a quadratic scan of a MiB takes hours), not a slow machine - the
// slowest shape takes about 4 s under the race detector, and a shared
// machine running the suite beside other work made that more than 10;
// BenchmarkClassifyHugeText measures the speed.
func TestClassifyHugeInputs(t *testing.T) {
	const guard = 2 * time.Minute
	for _, tt := range hugeTexts(mib) {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan cerrors.Classification, 1)
			go func() { done <- cerrors.Classify(errors.New(tt.text)) }()
			timer := time.NewTimer(guard)
			defer timer.Stop()
			select {
			case c := <-done:
				checkInvariants(t, c)
				if c.Class != tt.want.Class || c.Code != tt.want.Code || c.Source != tt.want.Source {
					t.Errorf("got %v %d %v, want %v %d %v", c.Class, c.Code, c.Source, tt.want.Class, tt.want.Code, tt.want.Source)
				}
				if c.Source == cerrors.SourceDefault && c.Message != tt.text {
					t.Errorf("default message is not the text (len %d, want %d)", len(c.Message), len(tt.text))
				}
			case <-timer.C:
				t.Fatalf("Classify did not return within %v on %d bytes", guard, len(tt.text))
			}
		})
	}
}

// BenchmarkClassifyHugeText runs each adversarial shape at three sizes; with
// -benchmem and the MB/s column, a linear Classify shows the same MB/s at
// every size (a quadratic one drops 4x per step).
func BenchmarkClassifyHugeText(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, mib} {
		for _, tt := range hugeTexts(size) {
			err := errors.New(tt.text)
			b.Run(tt.name+"/"+byteSize(size), func(b *testing.B) {
				b.SetBytes(int64(len(tt.text)))
				for b.Loop() {
					cerrors.Classify(err)
				}
			})
		}
	}
}

func byteSize(n int) string {
	if n >= mib {
		return strconv.Itoa(n/mib) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
