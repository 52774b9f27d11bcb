package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// TestPositionFormatGolden pins the persisted position format: a change that
// makes this fail makes every existing database unreadable.
func TestPositionFormatGolden(t *testing.T) {
	savedAt := time.Date(2026, 11, 20, 12, 30, 0, 0, time.UTC)
	encoded, err := encodePosition(record.Position("offset:4096"), savedAt)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.File(t, "position.golden.json", append(encoded, '\n'))
	pos, err := decodePosition(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(pos) != "offset:4096" {
		t.Fatalf("decoded %q from the golden file", pos)
	}
}

func TestPositionStoreRoundTripAndErrors(t *testing.T) {
	ctx := context.Background()
	db := store.NewInMemory()
	w := store.NewBatcher(db, nil)
	t.Cleanup(w.Close)
	ps := NewPositionStore(db, w, nil)

	pos, err := ps.Load(ctx, "p", "src")
	if err != nil || pos != nil {
		t.Fatalf("Load of a fresh pipeline = %q, %v; want nil, nil", pos, err)
	}
	saved := make(chan error, 1)
	if err := ps.SaveLater("p", "src", record.Position("42"), nil, func(err error) { saved <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if pos, err = ps.Load(ctx, "p", "src"); err != nil || string(pos) != "42" {
		t.Fatalf("Load = %q, %v; want 42", pos, err)
	}
	if pos, _ = ps.Load(ctx, "p", "other"); pos != nil {
		t.Fatalf("another connector's position leaked: %q", pos)
	}

	tests := []struct {
		name, value, wantErr string
	}{
		{name: "not json", value: "garbage", wantErr: "corrupt"},
		{name: "future version", value: `{"version":9,"position":"NDI="}`, wantErr: "format version 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.Commit(ctx, []store.Op{{Key: positionKey("p", "bad"), Value: []byte(tt.value)}}); err != nil {
				t.Fatal(err)
			}
			_, err := ps.Load(ctx, "p", "bad")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "p/bad") {
				t.Fatalf("got %v, want an error naming p/bad and %q", err, tt.wantErr)
			}
		})
	}
}

// TestPositionEncoderMatchesJSON holds the position encoder to the bytes
// json.Marshal writes (the golden file pins those), including positions
// that are nil, empty or binary and times in other zones.
func TestPositionEncoderMatchesJSON(t *testing.T) {
	positions := []record.Position{nil, {}, record.Position("offset:4096"), {0, 0xff, '"', '<'}, record.Position(strings.Repeat("p", 300))}
	times := []time.Time{{}, time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC),
		time.Date(2026, 11, 27, 10, 0, 0, 5, time.FixedZone("CET", 3600)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, pos := range positions {
		for _, at := range times {
			want, wantErr := json.Marshal(persistedPosition{Version: positionFormatVersion, Position: pos, SavedAt: at.UTC()})
			got, err := appendPosition([]byte("prefix"), pos, at)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%q at %v: error %v, json.Marshal's %v", pos, at, err, wantErr)
			}
			if err == nil && string(got) != "prefix"+string(want) {
				t.Fatalf("%q at %v:\n got %s\nwant prefix%s", pos, at, got, want)
			}
		}
	}
}
