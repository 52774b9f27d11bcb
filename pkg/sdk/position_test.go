package sdk

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
)

// reportingDestination is a fakeDestination that reports what it holds.
type reportingDestination struct {
	*fakeDestination
	last  Position
	known bool
	err   error
}

func (r *reportingDestination) LastPosition(context.Context) (Position, bool, error) {
	return r.last, r.known, r.err
}

func lastPosition(t *testing.T, dst Destination) (*connectorv1.LastPositionResponse, error) {
	t.Helper()
	h := newHarness(t, destinationPlugin(dst))
	if err := h.configureDestination(t); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dst.Open(context.Background(), connect.NewRequest(&connectorv1.DestinationServiceOpenRequest{})); err != nil {
		t.Fatal(err)
	}
	resp, err := h.dst.LastPosition(context.Background(), connect.NewRequest(&connectorv1.LastPositionRequest{}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func TestLastPositionRoundTrip(t *testing.T) {
	t.Run("a destination without the ability does not report", func(t *testing.T) {
		resp, err := lastPosition(t, &fakeDestination{})
		if err != nil || resp.GetKnown() || resp.Position != nil {
			t.Fatalf("got %v, %v; want not known", resp, err)
		}
	})
	t.Run("a position", func(t *testing.T) {
		resp, err := lastPosition(t, &reportingDestination{fakeDestination: &fakeDestination{}, last: Position("offset:42"), known: true})
		if err != nil || !resp.GetKnown() || string(resp.GetPosition()) != "offset:42" {
			t.Fatalf("got %v, %v; want offset:42", resp, err)
		}
	})
	t.Run("holds nothing", func(t *testing.T) {
		resp, err := lastPosition(t, &reportingDestination{fakeDestination: &fakeDestination{}, known: true})
		if err != nil || !resp.GetKnown() || resp.Position != nil {
			t.Fatalf("got %v, %v; want known and no position", resp, err)
		}
	})
	t.Run("cannot tell", func(t *testing.T) {
		resp, err := lastPosition(t, &reportingDestination{fakeDestination: &fakeDestination{}, last: Position("x")})
		if err != nil || resp.GetKnown() || resp.Position != nil {
			t.Fatalf("got %v, %v; want not known", resp, err)
		}
	})
	t.Run("an error keeps its code", func(t *testing.T) {
		_, err := lastPosition(t, &reportingDestination{fakeDestination: &fakeDestination{},
			err: WithCode(errors.New("table is gone"), 503)})
		var ce *connect.Error
		if !errors.As(err, &ce) || cerrors.Classify(errors.New(ce.Message())).Code != 503 {
			t.Fatalf("got %v, want the wire error with code 503", err)
		}
	})
}
