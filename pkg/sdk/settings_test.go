package sdk_test

import (
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/sdk"
)

func TestSettingsReadValuesAndDefaults(t *testing.T) {
	s := sdk.NewSettings(map[string]string{"path": " /tmp/out ", "batch": "50", "rate": "2.5", "sync": "true",
		"timeout": "1m30s", "blank": "  ", "sdk.batch.size": "10"})
	if got := s.String("path", ""); got != "/tmp/out" {
		t.Errorf("String = %q", got)
	}
	if got := s.Int("batch", 1, 1, 100); got != 50 {
		t.Errorf("Int = %d", got)
	}
	if got := s.Float("rate", 0, 0, 10); got != 2.5 {
		t.Errorf("Float = %v", got)
	}
	if !s.Bool("sync", false) {
		t.Error("Bool = false")
	}
	if got := s.Duration("timeout", 0); got != 90*time.Second {
		t.Errorf("Duration = %s", got)
	}
	if s.Has("blank") || s.String("blank", "def") != "def" {
		t.Error("a blank value should count as not set")
	}
	if got := s.Int("missing", 7, 0, 10); got != 7 {
		t.Errorf("default Int = %d", got)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err = %v; sdk.* settings are Conduit's and accepted", err)
	}
}

func TestSettingsErrorsNameTheSettingAndAreFatal(t *testing.T) {
	tests := []struct {
		name string
		m    map[string]string
		read func(*sdk.Settings)
		want string
	}{
		{"not a number", map[string]string{"batch": "ten"}, func(s *sdk.Settings) { s.Int("batch", 1, 1, 100) }, `setting "batch": "ten" is not a whole number`},
		{"out of range", map[string]string{"batch": "0"}, func(s *sdk.Settings) { s.Int("batch", 1, 1, 100) }, `setting "batch": "0" must be between 1 and 100`},
		{"not a float", map[string]string{"rate": "NaN"}, func(s *sdk.Settings) { s.Float("rate", 1, 0, 10) }, `setting "rate": "NaN" is not a number`},
		{"float out of range", map[string]string{"rate": "-1"}, func(s *sdk.Settings) { s.Float("rate", 1, 0, 10) }, `setting "rate": "-1" must be between 0 and 10`},
		{"not a bool", map[string]string{"sync": "yes please"}, func(s *sdk.Settings) { s.Bool("sync", false) }, `setting "sync": "yes please" is not a boolean`},
		{"not a duration", map[string]string{"timeout": "30"}, func(s *sdk.Settings) { s.Duration("timeout", 0) }, `setting "timeout": "30" is not a duration`},
		{"negative duration", map[string]string{"timeout": "-1s"}, func(s *sdk.Settings) { s.Duration("timeout", 0) }, `setting "timeout": "-1s" must not be negative`},
		{"unknown setting", map[string]string{"path": "x", "pth": "y"}, func(s *sdk.Settings) { s.String("path", "") }, `setting "pth": unknown setting (known: path)`},
		{"first problem wins", map[string]string{"a": "x", "b": "y"}, func(s *sdk.Settings) {
			s.Int("a", 0, 0, 1)
			s.Int("b", 0, 0, 1)
		}, `setting "a": "x" is not a whole number`},
		{"Failf", map[string]string{}, func(s *sdk.Settings) { s.Failf("path", "is required") }, `setting "path": is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sdk.NewSettings(tt.m)
			tt.read(s)
			err := s.Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err = %v, want %q", err, tt.want)
			}
			if c := cerrors.Classify(err); c.Class != cerrors.ClassFatal || c.Code != 400 {
				t.Errorf("classified %+v, want fatal 400: settings do not heal on a restart", c)
			}
		})
	}
}
