package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/store"
)

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
				return EncodePipeline(Pipeline{ID: "orders", Name: "orders.yaml",
					FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at})
			},
			decode: func(b []byte) (any, error) { return DecodePipeline(b) },
			want: Pipeline{Version: 1, ID: "orders", Name: "orders.yaml",
				FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at},
		},
		{
			golden: "managed-rule.golden.json",
			encode: func() ([]byte, error) {
				return EncodeRule(Rule{Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n",
					File: "rules.yaml", Line: 3, LoadedAt: at})
			},
			decode: func(b []byte) (any, error) { return DecodeRule(b) },
			want: Rule{Version: 1, Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n",
				File: "rules.yaml", Line: 3, LoadedAt: at},
		},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			encoded, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			want := golden.File(t, tt.golden, append(encoded, '\n'))
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
		{"api-pipeline.v0.golden.json", func(b []byte) (any, error) { return DecodePipeline(b) },
			Pipeline{Version: 1, ID: "orders", Name: "orders.yaml", FileHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AppliedAt: at}},
		{"managed-rule.v0.golden.json", func(b []byte) (any, error) { return DecodeRule(b) },
			Rule{Version: 1, Name: "rate-limits", YAML: "name: rate-limits\nmatch: {codes: [\"429\"]}\nstrategy: linear\n", File: "rules.yaml", Line: 3, LoadedAt: at}},
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

	if _, err := DecodePipeline([]byte(`{"version":2,"id":"orders"}`)); err == nil {
		t.Error("a stored pipeline of version 2 decoded")
	}
	if _, err := DecodeRule([]byte(`{"version":2,"name":"r"}`)); err == nil {
		t.Error("a stored rule of version 2 decoded")
	}
}

// TestLoadKeepsUnreadableRecordsVisible: a stored pipeline that does not
// decode is returned by its id as "(unreadable)" (listed as invalid, not
// gone), its file is read once per hash, and a rule that does not decode
// is handed to the caller with its key and error.
func TestLoadKeepsUnreadableRecordsVisible(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	file := []byte("version: 2.2\npipelines: []\n")
	hash := FileHash(file)
	a, err := EncodePipeline(Pipeline{ID: "a", Name: "a.yaml", FileHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodePipeline(Pipeline{ID: "b", Name: "a.yaml", FileHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := EncodeRule(Rule{Name: "r", YAML: "name: r\n"})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Commit(ctx, []store.Op{
		{Key: PipelineKey("a"), Value: a}, {Key: PipelineKey("b"), Value: b}, {Key: FileKey(hash), Value: file},
		{Key: PipelineKey("broken"), Value: []byte(`{"version":9}`)},
		{Key: RuleKey("r"), Value: rule}, {Key: RuleKey("x"), Value: []byte("not json")},
	})
	if err != nil {
		t.Fatal(err)
	}
	pipelines, files, err := LoadPipelines(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pipelines {
		names = append(names, p.ID+":"+p.Name)
	}
	if got := strings.Join(names, " "); got != "a:a.yaml b:a.yaml broken:(unreadable)" {
		t.Fatalf("pipelines: %s", got)
	}
	if len(files) != 1 || string(files[hash]) != string(file) {
		t.Fatalf("files: %q", files)
	}
	var ok, bad []string
	err = ScanRules(ctx, db, func(key []byte, r Rule, err error) {
		if err != nil {
			bad = append(bad, string(key))
			return
		}
		ok = append(ok, r.Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ok) != 1 || ok[0] != "r" || len(bad) != 1 || !strings.HasSuffix(bad[0], "x") {
		t.Fatalf("rules read %v, unreadable %v", ok, bad)
	}
}
