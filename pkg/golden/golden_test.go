package golden

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// failures records what File reports instead of failing the test.
type failures struct {
	testing.TB
	message string
}

func (f *failures) Helper() {}

func (f *failures) Fatalf(format string, args ...any) {
	f.message = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *failures) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// check runs File as a test would, and returns what it reported.
func check(t *testing.T, name string, got []byte) (want []byte, failed string) {
	f := &failures{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		want = File(f, name, got)
	}()
	<-done
	return want, f.message
}

// The golden file's bytes pass and are returned; other bytes, or a file
// that is not there, fail the test with the path.
func TestFile(t *testing.T) {
	if want, failed := check(t, "sample.golden.json", []byte("{\"a\":1}\n")); failed != "" || string(want) != "{\"a\":1}\n" {
		t.Fatalf("the golden bytes: %q, %s", want, failed)
	}
	if _, failed := check(t, "sample.golden.json", []byte("{\"a\":2}\n")); !strings.Contains(failed, "testdata/sample.golden.json: the encoding changed") {
		t.Fatalf("other bytes: %q", failed)
	}
	if _, failed := check(t, "missing.golden", []byte{0xff}); !strings.Contains(failed, "run with -update to create it") {
		t.Fatalf("a missing file: %q", failed)
	}
}
