package config

import (
	"strings"
	"testing"
)

// A configuration the API server would refuse is refused by Load, before
// anything is opened, naming the key and where its value came from, and
// never showing the token.
func TestLoadAPIAuth(t *testing.T) {
	const (
		longToken  = "0123456789abcdef"
		shortToken = "s3cr3t-short"
	)
	tests := []struct {
		name string
		file string
		env  map[string]string
		args []string
		// The error; source "" means Load succeeds. "conduit.yml" stands
		// for the file's path.
		source string
		line   int
		key    string
		want   []string
	}{
		{name: "default address without token"},
		{name: "127.0.0.0/8 without token", env: map[string]string{"CONDUIT_API_HTTP_ADDRESS": "127.1.2.3:8080"}},
		{name: "::1 without token", args: []string{"--api.http.address=[::1]:8080"}},
		{name: "localhost without token", file: "api:\n  http:\n    address: localhost:8080\n"},
		{name: "short token on loopback", env: map[string]string{"CONDUIT_API_AUTH_TOKEN": shortToken}},
		{name: "all interfaces with a long token", env: map[string]string{"CONDUIT_API_HTTP_ADDRESS": "0.0.0.0:8080", "CONDUIT_API_AUTH_TOKEN": longToken}},
		{name: "API disabled", file: "api:\n  enabled: false\n  http:\n    address: 0.0.0.0:8080\n"},
		{
			name:   "all interfaces without token, from the file",
			file:   "api:\n  http:\n    address: 0.0.0.0:8080\n",
			source: "conduit.yml", line: 3, key: "api.http.address",
			want: []string{"0.0.0.0:8080 is not a loopback address and api.auth.token is empty", "CONDUIT_API_AUTH_TOKEN"},
		},
		{
			name:   "empty host without token, from a flag",
			args:   []string{"--api.http.address=:8080"},
			source: "flag --api.http.address", key: "api.http.address",
			want: []string{":8080 is not a loopback address"},
		},
		{
			name:   "a name that is not localhost, from the environment",
			env:    map[string]string{"CONDUIT_API_HTTP_ADDRESS": "myhost:8080"},
			source: "env CONDUIT_API_HTTP_ADDRESS", key: "api.http.address",
			want: []string{"myhost:8080 is not a loopback address"},
		},
		{
			name:   "short token on a non-loopback address",
			file:   "api:\n  http:\n    address: 10.0.0.5:8080\n",
			env:    map[string]string{"CONDUIT_API_AUTH_TOKEN": shortToken},
			source: "env CONDUIT_API_AUTH_TOKEN", key: "api.auth.token",
			want: []string{"is 12 characters long; on the non-loopback address 10.0.0.5:8080 (api.http.address, conduit.yml:3) it must have at least 16"},
		},
		{
			name:   "trailing newline, even on loopback",
			file:   "api:\n  auth:\n    token: \"" + longToken + "\\n\"\n",
			source: "conduit.yml", line: 3, key: "api.auth.token",
			want: []string{"starts or ends with white space"},
		},
		{
			name:   "leading space",
			args:   []string{"--api.auth.token= " + longToken},
			source: "flag --api.auth.token", key: "api.auth.token",
			want: []string{"starts or ends with white space"},
		},
		{
			name:   "space inside",
			env:    map[string]string{"CONDUIT_API_AUTH_TOKEN": "01234567 89abcdef"},
			source: "env CONDUIT_API_AUTH_TOKEN", key: "api.auth.token",
			want: []string{"contains white space or a control character"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, err := loadCase(t, tc.file, tc.args, tc.env)
			if tc.source == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			source := tc.source
			if source == "conduit.yml" {
				source = path
			}
			for i, w := range tc.want {
				tc.want[i] = strings.ReplaceAll(w, "conduit.yml", path)
			}
			wantKeyError(t, err, source, tc.line, tc.key, tc.want...)
			for _, secret := range []string{longToken, shortToken, "01234567 89abcdef"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the token", err)
				}
			}
		})
	}
}
