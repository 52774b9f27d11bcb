package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
)

// TestLargeBatchesAreSplitToFitAMessage: a batch whose records do not fit
// in one message to the runtime goes out as several, in order, with Read
// and with ReadStream, none above the bound; the source's buffer may be
// reused as soon as its Read returned.
func TestLargeBatchesAreSplitToFitAMessage(t *testing.T) {
	const maxData = 4000
	for _, stream := range []bool{false, true} {
		name := "Read"
		if stream {
			name = "ReadStream"
		}
		t.Run(name, func(t *testing.T) {
			var next, calls atomic.Int32
			payload := make([]byte, 900) // reused by every Read, like a real source's buffer
			src := &fakeSource{readFn: func(_ context.Context, max int) ([]Record, error) {
				if max != 10 {
					return nil, fmt.Errorf("asked for %d records, want 10", max)
				}
				for i := range payload {
					payload[i] = byte(calls.Load() + 1)
				}
				calls.Add(1)
				recs := nextRecords(&next, max)
				for i := range recs {
					recs[i].Payload.After = RawData(payload)
				}
				return recs, nil
			}}
			h := newHarness(t, sourcePlugin(src))
			h.srv.maxData = maxData
			if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
				t.Fatal(err)
			}
			var got []string
			check := func(b *connectorv1.RecordBatch) {
				t.Helper()
				if len(b.GetData()) > maxData {
					t.Fatalf("a message carries %d bytes of records, more than %d", len(b.GetData()), maxData)
				}
				recs, err := decodeBatch(b)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					// Read k returned positions 10k+1 to 10k+10, with k+1 in
					// every byte of the payload.
					pos, _ := strconv.Atoi(string(r.Position))
					if want := bytes.Repeat([]byte{byte((pos-1)/10 + 1)}, 900); !bytes.Equal(r.Payload.After.Bytes(), want) {
						t.Fatalf("record %s: payload changed after the source reused its buffer", r.Position)
					}
					got = append(got, string(r.Position))
				}
			}
			if stream {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				st, err := h.src.ReadStream(ctx, connect.NewRequest(&connectorv1.ReadStreamRequest{MaxRecords: 10}))
				if err != nil {
					t.Fatal(err)
				}
				for len(got) < 25 && st.Receive() {
					check(st.Msg().GetBatch())
				}
				cancel()
				_ = st.Close()
			} else {
				for len(got) < 25 {
					resp, err := h.src.Read(context.Background(), connect.NewRequest(&connectorv1.ReadRequest{MaxRecords: 10}))
					if err != nil {
						t.Fatal(err)
					}
					check(resp.Msg.GetBatch())
				}
			}
			wantInOrder(t, got)
			if len(got) < 25 {
				t.Fatalf("got %d records, want at least 25", len(got))
			}
		})
	}
}

func TestARecordLargerThanAMessageIsFatal(t *testing.T) {
	src := &fakeSource{readFn: func(context.Context, int) ([]Record, error) {
		r := testRecord(7)
		r.Payload.After = RawData(strings.Repeat("x", 5000))
		return []Record{r}, nil
	}}
	h := newHarness(t, sourcePlugin(src))
	h.srv.maxData = 4000
	if err := errors.Join(h.configureSource(t, nil), h.openSource("")); err != nil {
		t.Fatal(err)
	}
	_, err := h.read(context.Background(), 10)
	c := cerrors.Classify(cerrors.FromWire(connectMessage(err)))
	if c.Class != cerrors.ClassFatal || !strings.Contains(c.Message, `record (position "7")`) ||
		!strings.Contains(c.Message, "more than the 4000") {
		t.Fatalf("Read = %v (%+v), want a fatal error naming the record", err, c)
	}
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return ""
}
