//go:build unix

package connector

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/sdk"
)

func TestStandaloneMaxMessageDefault(t *testing.T) {
	if got := NewStandaloneHost(StandaloneConfig{}).cfg.MaxMessageBytes; got != DefaultStandaloneMaxMessageBytes {
		t.Errorf("default MaxMessageBytes = %d, want %d", got, DefaultStandaloneMaxMessageBytes)
	}
	// The SDK splits its batches to fit what the host accepts.
	if DefaultStandaloneMaxMessageBytes != sdk.MaxMessageBytes {
		t.Errorf("host bound %d, SDK bound %d: they must be equal", DefaultStandaloneMaxMessageBytes, sdk.MaxMessageBytes)
	}
}

// TestStandaloneOversizedMessage: a plugin that answers with a message
// above the bound fails the call with a fatal 413 naming the connector;
// the runtime reads no more than the bound and goes on.
func TestStandaloneOversizedMessage(t *testing.T) {
	const limit = 1 << 20
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		size    int
		wantErr bool
	}{
		{name: "below the bound", size: limit / 2},
		{name: "above the bound", size: 2 * limit, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newStandaloneHarness(t, StandaloneConfig{MaxMessageBytes: limit})
			src := h.source("testplugin", map[string]string{"records": "1", "read.size": strconv.Itoa(tt.size)})
			if err := src.Open(ctx, nil); err != nil {
				t.Fatalf("Open: %v", err)
			}
			batch := make([]record.Record, 4)
			read := result(t, func() error { _, err := src.Read(ctx, batch); return err })
			err := wait(t, read, "Read")
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if got := len(batch[0].Payload.After.Bytes()); got != tt.size {
					t.Errorf("payload of %d bytes, want %d", got, tt.size)
				}
			} else {
				c := cerrors.Classify(err)
				if c.Class != cerrors.ClassFatal || c.Code != 413 {
					t.Errorf("Read error %v classified %+v, want fatal 413", err, c)
				}
				for _, want := range []string{`standalone connector "testplugin": read:`, "larger than 1048576 bytes"} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Read error %v, want it to contain %q", err, want)
					}
				}
				if src.p.hasExited() {
					t.Error("the plugin process exited; only the call should fail")
				}
			}
			if err := src.Teardown(ctx); err != nil {
				t.Errorf("Teardown: %v", err)
			}
			assertGone(t, src.p)
		})
	}
}

// TestStandaloneRefusesCompressedMessages: the runtime does not accept
// compression from plugins, so a compressed answer (here 1 GiB of zeros)
// is refused without being decompressed.
func TestStandaloneRefusesCompressedMessages(t *testing.T) {
	ctx := context.Background()
	h := newStandaloneHarness(t, StandaloneConfig{})
	src := h.source("testplugin", map[string]string{"records": "1", "read.gzip": strconv.Itoa(1 << 30)})
	if err := src.Open(ctx, nil); err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer src.Teardown(ctx)
	start := time.Now()
	read := result(t, func() error { _, err := src.Read(ctx, make([]record.Record, 4)); return err })
	err := wait(t, read, "Read")
	if err == nil || !strings.Contains(err.Error(), `standalone connector "testplugin": read:`) ||
		!strings.Contains(err.Error(), `unknown encoding "gzip"`) {
		t.Fatalf("Read = %v, want the compressed answer refused", err)
	}
	// Decompressing 1 GiB takes seconds; refusing it takes no time.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Read took %s to refuse the message", d)
	}
}
