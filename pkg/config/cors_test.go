package config

import (
	"slices"
	"strings"
	"testing"
)

// api.http.cors.allowed-origins is a list in a file, comma-separated text
// in the environment and on the command line, and refuses what is no
// origin, naming the key and the entry.
func TestAllowedOrigins(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		args    []string
		want    []string
		wantErr []string
	}{
		{name: "file", file: "api:\n  http:\n    cors:\n      allowed-origins: [\"https://console.example.com\", \"http://localhost:3000\"]\n",
			want: []string{"https://console.example.com", "http://localhost:3000"}},
		{name: "env", env: map[string]string{"CONDUIT_API_HTTP_CORS_ALLOWED_ORIGINS": "https://a.example, http://127.0.0.1:5173"},
			want: []string{"https://a.example", "http://127.0.0.1:5173"}},
		{name: "flag", args: []string{"--api.http.cors.allowed-origins=https://a.example"}, want: []string{"https://a.example"}},
		{name: "star", file: "api:\n  http:\n    cors:\n      allowed-origins: [\"*\"]\n",
			wantErr: []string{"conduit.yml", "api.http.cors.allowed-origins", "[0]", "any web page"}},
		{name: "null", env: map[string]string{"CONDUIT_API_HTTP_CORS_ALLOWED_ORIGINS": "https://a.example,null"},
			wantErr: []string{"CONDUIT_API_HTTP_CORS_ALLOWED_ORIGINS", "[1]", "null"}},
		{name: "a path", file: "api:\n  http:\n    cors:\n      allowed-origins: [\"https://a.example/app\"]\n",
			wantErr: []string{"api.http.cors.allowed-origins", "must be an origin", "https://a.example/app"}},
		{name: "no scheme", file: "api:\n  http:\n    cors:\n      allowed-origins: [\"a.example\"]\n",
			wantErr: []string{"api.http.cors.allowed-origins", "must be an origin"}},
		{name: "not a list", file: "api:\n  http:\n    cors:\n      allowed-origins: https://a.example\n",
			wantErr: []string{"api.http.cors.allowed-origins", "a list of strings"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				writeFile(t, dir, "conduit.yml", tc.file)
			}
			c, _, err := Load(LoadOptions{Flags: flags(t, tc.args...), LookupEnv: env(tc.env), WorkDir: dir})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("loaded %v, want an error", c.API.HTTP.CORS.AllowedOrigins)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.API.HTTP.CORS.AllowedOrigins; !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
