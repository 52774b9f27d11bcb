package auditlog

import (
	"reflect"
	"testing"
	"time"

	"github.com/conduitry/conduit/pkg/golden"
	"github.com/conduitry/conduit/pkg/store"
)

// TestEventFormatGolden pins the persisted event format: if this fails,
// existing audit logs can no longer be read.
func TestEventFormatGolden(t *testing.T) {
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	e := Event{
		Sequence:      42,
		Time:          at,
		PipelineID:    "orders-to-s3",
		Kind:          KindRecovering,
		StatusBefore:  "running",
		StatusAfter:   "recovering",
		Message:       "restarting in 2s",
		Actor:         "system",
		ErrorCode:     503,
		ErrorClass:    "transient",
		ErrorSource:   "json",
		ErrorMessage:  "dial tcp 127.0.0.1:5432: connect: connection refused",
		Component:     "pg",
		ComponentKind: "source",
		Attempt:       2,
		Delay:         2 * time.Second,
		NextAttemptAt: at.Add(2 * time.Second),
		Reason:        "window",
		Count:         7,
	}
	encoded, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.File(t, "event.golden.json", append(encoded, '\n'))
	decoded, err := decodeEvent(want, escapeID(e.PipelineID), e.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded, e) {
		t.Fatalf("golden file decodes to\n%+v\nwant\n%+v", decoded, e)
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name  string
		value string
		seq   uint64
	}{
		{"not json", `{"version":1,`, 1},
		{"newer version", `{"version":2,"sequence":1,"pipelineId":"p","kind":"running"}`, 1},
		{"no version", `{"sequence":1,"pipelineId":"p","kind":"running"}`, 1},
		{"other sequence", `{"version":1,"sequence":2,"pipelineId":"p","kind":"running"}`, 1},
		{"other pipeline", `{"version":1,"sequence":1,"pipelineId":"q","kind":"running"}`, 1},
		{"no kind", `{"version":1,"sequence":1,"pipelineId":"p"}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if e, err := decodeEvent([]byte(tt.value), "p", tt.seq); err == nil {
				t.Fatalf("decoded %+v, want an error", e)
			}
		})
	}
}

func TestKeyFormat(t *testing.T) {
	tests := []struct {
		name string
		id   string
		seq  uint64
		key  string
	}{
		{"plain id", "orders-to-s3", 42, store.PrefixAuditLog + "orders-to-s3/000000000000002a"},
		{"first", "p", 1, store.PrefixAuditLog + "p/0000000000000001"},
		{"largest", "p", 1<<64 - 1, store.PrefixAuditLog + "p/ffffffffffffffff"},
		{"slash in id", "team/orders", 1, store.PrefixAuditLog + "team%2Forders/0000000000000001"},
		{"percent in id", "100%", 1, store.PrefixAuditLog + "100%25/0000000000000001"},
		{"escape lookalike", "a%2Fb", 1, store.PrefixAuditLog + "a%252Fb/0000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := eventKey(pipelinePrefix(tt.id), tt.seq)
			if string(key) != tt.key {
				t.Fatalf("key %q, want %q", key, tt.key)
			}
			escID, seq, ok := parseKey(key)
			if !ok || seq != tt.seq {
				t.Fatalf("parseKey: %q %d %v", escID, seq, ok)
			}
			id, ok := unescapeID(escID)
			if !ok || id != tt.id {
				t.Fatalf("unescapeID(%q) = %q, %v; want %q", escID, id, ok, tt.id)
			}
		})
	}

	t.Run("keys sort by sequence", func(t *testing.T) {
		prefix := pipelinePrefix("p")
		prev := eventKey(prefix, 0)
		for _, seq := range []uint64{1, 9, 10, 15, 16, 255, 256, 1 << 32, 1<<64 - 1} {
			k := eventKey(prefix, seq)
			if string(k) <= string(prev) {
				t.Fatalf("key of %d (%q) does not sort after %q", seq, k, prev)
			}
			prev = k
		}
	})

	t.Run("foreign keys", func(t *testing.T) {
		for _, k := range []string{
			"conduit/position/p/0000000000000001",
			store.PrefixAuditLog + "p",
			store.PrefixAuditLog + "/0000000000000001",
			store.PrefixAuditLog + "p/000000000000001",
			store.PrefixAuditLog + "p/00000000000000001",
			store.PrefixAuditLog + "p/000000000000000A",
			store.PrefixAuditLog + "p/000000000000000g",
			store.PrefixAuditLog + "a/b/0000000000000001",
		} {
			if id, seq, ok := parseKey([]byte(k)); ok {
				t.Errorf("parseKey(%q) = %q, %d; want it rejected", k, id, seq)
			}
		}
		for _, esc := range []string{"a%", "a%2", "a%2f", "a%41"} {
			if id, ok := unescapeID(esc); ok {
				t.Errorf("unescapeID(%q) = %q; want it rejected", esc, id)
			}
		}
	})
}
