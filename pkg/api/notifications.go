package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
	"github.com/conduitry/conduit/pkg/notify"
)

// Notifications are the notification targets: the runtime's notifier.
type Notifications interface {
	Status() notify.Status
	// Test sends a target a sample: notify.ErrUnknownTarget for a name
	// no target has, any other error is the target's answer.
	Test(ctx context.Context, name string) error
}

// NotificationService serves NotificationService.
type NotificationService struct{ n Notifications }

var _ conduitv1connect.NotificationServiceHandler = (*NotificationService)(nil)

// NewNotificationService returns the service.
func NewNotificationService(n Notifications) *NotificationService { return &NotificationService{n: n} }

// ListNotificationTargets implements NotificationService.
func (s *NotificationService) ListNotificationTargets(context.Context, *connect.Request[conduitv1.ListNotificationTargetsRequest]) (*connect.Response[conduitv1.ListNotificationTargetsResponse], error) {
	st := s.n.Status()
	out := &conduitv1.ListNotificationTargetsResponse{}
	for _, t := range st.Targets {
		pt := &conduitv1.NotificationTarget{Name: t.Name, Kind: t.Kind, Events: t.Events, Pipelines: t.Pipelines,
			MinSeverity: t.MinSeverity, Pending: int64(t.Pending), Failures: int64(t.Failures), LastError: t.LastError}
		if !t.NextAttemptAt.IsZero() {
			pt.NextAttemptAt = timestamppb.New(t.NextAttemptAt)
		}
		if !t.LastDelivery.IsZero() {
			pt.LastDeliveryAt = timestamppb.New(t.LastDelivery)
		}
		out.Targets = append(out.Targets, pt)
	}
	for _, d := range st.Deliveries {
		out.Deliveries = append(out.Deliveries, &conduitv1.NotificationDelivery{Time: timestamppb.New(d.Time), Target: d.Target,
			Kind: string(d.Kind), Notifications: int64(d.Notifications), Pipelines: int64(d.Pipelines), Error: d.Error, Test: d.Test})
	}
	return connect.NewResponse(out), nil
}

// TestNotificationTarget implements NotificationService.
func (s *NotificationService) TestNotificationTarget(ctx context.Context, req *connect.Request[conduitv1.TestNotificationTargetRequest]) (*connect.Response[conduitv1.TestNotificationTargetResponse], error) {
	if req.Msg.GetName() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: required, the name of a target of notifications.targets"))
	}
	err := s.n.Test(ctx, req.Msg.GetName())
	switch {
	case errors.Is(err, notify.ErrUnknownTarget):
		return nil, connect.NewError(connect.CodeNotFound, err)
	case err != nil:
		return connect.NewResponse(&conduitv1.TestNotificationTargetResponse{Error: err.Error()}), nil
	}
	return connect.NewResponse(&conduitv1.TestNotificationTargetResponse{Ok: true}), nil
}
