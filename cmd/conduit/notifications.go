package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

func newNotificationsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "notifications",
		Aliases: []string{"notification"},
		Short:   "Show the notification targets of a running conduit and test them",
		Long: `Notifications (notifications.targets in conduit.yml, docs/operations.md) tell
a webhook, Slack or PagerDuty when a pipeline degrades, recovers, flaps or
stays recovering. These commands ask the running conduit: it sends with the
URLs and keys of its own environment, which is what a test must try.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newNotificationsListCommand(), newNotificationsTestCommand())
	return cmd
}

// explainNotifications adds to the API's errors what is particular to
// notifications: a conduit without targets does not serve the service.
func (c *apiClient) explainNotifications(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeUnimplemented {
		return fmt.Errorf("the conduit at %s has no notification targets (notifications.targets in conduit.yml)", c.address)
	}
	if errors.As(err, &ce) && ce.Code() == connect.CodeNotFound {
		return errors.New(ce.Message())
	}
	return c.explain(err, "")
}

func newNotificationsListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the targets (never their URLs or keys), what waits for them, and the recent deliveries and failures",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.notes.ListNotificationTargets(cmd.Context(), connect.NewRequest(&conduitv1.ListNotificationTargetsRequest{}))
			if err != nil {
				return client.explainNotifications(err)
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return writeNotifications(humanOutput(cmd.OutOrStdout()), resp.Msg, time.Now())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func writeNotifications(w io.Writer, msg *conduitv1.ListNotificationTargetsResponse, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tKIND\tEVENTS\tPIPELINES\tMIN SEVERITY\tPENDING\tLAST DELIVERY\tSTATE")
	for _, t := range msg.GetTargets() {
		state := "ok"
		if t.GetFailures() > 0 {
			state = fmt.Sprintf("failing (%d in a row, next attempt in %s): %s", t.GetFailures(),
				t.GetNextAttemptAt().AsTime().Sub(now).Round(time.Second), t.GetLastError())
		}
		last := "-"
		if t.GetLastDeliveryAt() != nil {
			last = t.GetLastDeliveryAt().AsTime().UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", oneLine(t.GetName()), t.GetKind(), orAll(t.GetEvents()),
			orAll(t.GetPipelines()), t.GetMinSeverity(), t.GetPending(), last, oneLine(state))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(msg.GetDeliveries()) == 0 {
		_, err := fmt.Fprintln(w, "\nno deliveries since conduit started (the audit log keeps them: conduit pipelines events ID --kind notified)")
		return err
	}
	fmt.Fprintln(w, "\nRECENT DELIVERIES")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTARGET\tKIND\tNOTIFICATIONS\tPIPELINES\tRESULT")
	for _, d := range msg.GetDeliveries() {
		result := "delivered"
		if d.GetError() != "" {
			result = "failed: " + d.GetError()
		}
		if d.GetTest() {
			result += " (test)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", d.GetTime().AsTime().UTC().Format(time.RFC3339), oneLine(d.GetTarget()),
			d.GetKind(), d.GetNotifications(), d.GetPipelines(), oneLine(result))
	}
	return tw.Flush()
}

func orAll(list []string) string {
	if len(list) == 0 {
		return "all"
	}
	return oneLine(strings.Join(list, ","))
}

func newNotificationsTestCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Send a sample notification to one target through the running conduit",
		Long: `Sends one sample notification - a degraded pipeline named
conduit-notification-test, marked as a test - to the target now, with the
URL and key of the running conduit's environment, and says how the target
answered. It is not kept in the outbox and not retried.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.notes.TestNotificationTarget(cmd.Context(), connect.NewRequest(&conduitv1.TestNotificationTargetRequest{Name: args[0]}))
			if err != nil {
				return client.explainNotifications(err)
			}
			if !resp.Msg.GetOk() {
				return fmt.Errorf("target %s did not take the test notification: %s", args[0], resp.Msg.GetError())
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "target %s took the test notification\n", args[0])
			return err
		},
	}
}
