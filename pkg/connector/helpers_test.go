package connector

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
)

// newFakeClock is a clock whose After advances time by the requested
// duration and fires at once, so rate-limited code runs instantly while
// the times it sees are exactly what a real clock would show; Advance
// moves time without anyone waiting (a stall).
func newFakeClock() *clocktest.Clock {
	return clocktest.NewAt(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
}

// blockingAfter returns an After that reports each wait on the returned
// channel and then never fires, for tests that cancel a waiting call.
func blockingAfter() (func(time.Duration) <-chan time.Time, <-chan time.Duration) {
	waiting := make(chan time.Duration, 16)
	return func(d time.Duration) <-chan time.Time {
		waiting <- d
		return nil
	}, waiting
}

// wantSettingError checks err is a *SettingError for setting whose message
// contains every one of want.
func wantSettingError(t *testing.T, err error, setting string, want ...string) {
	t.Helper()
	var se *SettingError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v, want a *SettingError for %q", err, setting)
	}
	if se.Setting != setting {
		t.Errorf("SettingError.Setting = %q, want %q (error: %v)", se.Setting, setting, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func keyText(r record.Record) string {
	if r.Key == nil {
		return "<nil>"
	}
	return string(r.Key.Bytes())
}

func positions(recs []record.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Position)
	}
	return out
}
