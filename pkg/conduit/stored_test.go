package conduit

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestStoredFormatsGolden pins the persisted formats of API-applied
// pipelines and managed rules: a change that makes this fail makes the
// records every existing database holds unreadable.
func TestStoredFormatsGolden(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 30, 0, 0, time.UTC)
	tests := []struct {
		golden string
		encode func() ([]byte, error)
		decode func([]byte) (any, error)
		want   any
	}{
		{
			golden: "api-pipeline.golden.json",
			encode: func() ([]byte, error) {
				return encodeStoredPipeline(storedPipeline{ID: "orders", Name: "orders.yaml",
					FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at})
			},
			decode: func(b []byte) (any, error) { return decodeStoredPipeline(b) },
			want: storedPipeline{Version: 1, ID: "orders", Name: "orders.yaml",
				FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at},
		},
		{
			golden: "managed-rule.golden.json",
			encode: func() ([]byte, error) {
				return encodeStoredRule(storedRule{Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n",
					File: "rules.yaml", Line: 3, LoadedAt: at})
			},
			decode: func(b []byte) (any, error) { return decodeStoredRule(b) },
			want: storedRule{Version: 1, Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n",
				File: "rules.yaml", Line: 3, LoadedAt: at},
		},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			golden := filepath.Join("testdata", tt.golden)
			encoded, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if *updateGolden {
				if err := os.WriteFile(golden, append(encoded, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if string(encoded)+"\n" != string(want) {
				t.Fatalf("encoded record changed; this is the on-disk format (a change needs a new version):\n got %s\nwant %s", encoded, want)
			}
			got, err := tt.decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("decoded %+v from the golden file, want %+v", got, tt.want)
			}
		})
	}
}

// Records written before they carried a version read as version 1; a
// version this conduit does not know is refused, not misread.
func TestStoredFormatsVersions(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 30, 0, 0, time.UTC)
	// The bytes conduit wrote before the version field (testdata/*.v0.golden.json).
	for _, tt := range []struct {
		golden string
		decode func([]byte) (any, error)
		want   any
	}{
		{"api-pipeline.v0.golden.json", func(b []byte) (any, error) { return decodeStoredPipeline(b) },
			storedPipeline{Version: 1, ID: "orders", Name: "orders.yaml", FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at}},
		{"managed-rule.v0.golden.json", func(b []byte) (any, error) { return decodeStoredRule(b) },
			storedRule{Version: 1, Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n", File: "rules.yaml", Line: 3, LoadedAt: at}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}

	if _, err := decodeStoredPipeline([]byte(`{"version":2,"id":"orders"}`)); err == nil {
		t.Error("a stored pipeline of version 2 decoded")
	}
	if _, err := decodeStoredRule([]byte(`{"version":2,"name":"r"}`)); err == nil {
		t.Error("a stored rule of version 2 decoded")
	}
}
