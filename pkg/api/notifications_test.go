package api

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/notify"
)

// fakeNotifications has one target, "hook", which refuses tests.
type fakeNotifications struct{}

func (fakeNotifications) Status() notify.Status {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	return notify.Status{
		Targets: []notify.TargetStatus{{Name: "hook", Kind: "webhook", MinSeverity: "info", Pending: 3, Failures: 2,
			NextAttemptAt: at.Add(2 * time.Second), LastError: "HTTP 500: down"}},
		Deliveries: []notify.Delivery{{Time: at, Target: "hook", Kind: notify.KindDegraded, Notifications: 3, Pipelines: 3, Error: "HTTP 500: down"}},
	}
}

func (fakeNotifications) Test(_ context.Context, name string) error {
	if name != "hook" {
		return errors.Join(notify.ErrUnknownTarget, errors.New(name))
	}
	return errors.New("HTTP 404: no such hook")
}

func TestNotificationService(t *testing.T) {
	srv := startServerWith(t, Options{Notifications: fakeNotifications{}}, ServerOptions{})
	c := conduitv1connect.NewNotificationServiceClient(http.DefaultClient, srv.url)
	ctx := context.Background()

	list, err := c.ListNotificationTargets(ctx, connect.NewRequest(&conduitv1.ListNotificationTargetsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	tg := list.Msg.GetTargets()
	if len(tg) != 1 || tg[0].GetName() != "hook" || tg[0].GetPending() != 3 || tg[0].GetFailures() != 2 ||
		tg[0].GetNextAttemptAt() == nil || tg[0].GetLastDeliveryAt() != nil || tg[0].GetLastError() != "HTTP 500: down" {
		t.Errorf("targets = %v", tg)
	}
	if d := list.Msg.GetDeliveries(); len(d) != 1 || d[0].GetKind() != "degraded" || d[0].GetNotifications() != 3 {
		t.Errorf("deliveries = %v", d)
	}

	res, err := c.TestNotificationTarget(ctx, connect.NewRequest(&conduitv1.TestNotificationTargetRequest{Name: "hook"}))
	if err != nil || res.Msg.GetOk() || res.Msg.GetError() != "HTTP 404: no such hook" {
		t.Errorf("test of a refusing target = %v, %v; want ok false with its answer", res, err)
	}
	for name, code := range map[string]connect.Code{"nope": connect.CodeNotFound, "": connect.CodeInvalidArgument} {
		_, err := c.TestNotificationTarget(ctx, connect.NewRequest(&conduitv1.TestNotificationTargetRequest{Name: name}))
		if connect.CodeOf(err) != code {
			t.Errorf("test %q: %v, want %v", name, err, code)
		}
	}
}

func TestNotificationServiceAbsentWithoutTargets(t *testing.T) {
	srv := startServerWith(t, Options{}, ServerOptions{})
	c := conduitv1connect.NewNotificationServiceClient(http.DefaultClient, srv.url)
	_, err := c.ListNotificationTargets(context.Background(), connect.NewRequest(&conduitv1.ListNotificationTargetsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("err = %v, want unimplemented", err)
	}
}
