package supervision

import (
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// TestPositionText checks how audit events and logs show a position: as
// text, a record split off another as its original's position and its
// index, and bytes that are no text as hex.
func TestPositionText(t *testing.T) {
	for _, tt := range []struct {
		name string
		pos  []byte
		want string
	}{
		{"text", []byte("42"), `"42"`},
		{"derived", record.DerivedPosition(record.Position("42"), 1), `"42#1"`},
		{"derived twice", record.DerivedPosition(record.DerivedPosition(record.Position(`{"lsn":7}`), 0), 3), `"{\"lsn\":7}#0#3"`},
		{"binary", []byte{0xff, 0x01}, `"ff01"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := positionText(tt.pos); got != tt.want {
				t.Fatalf("positionText = %s, want %s", got, tt.want)
			}
		})
	}
}
