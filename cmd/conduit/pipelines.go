package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"github.com/spf13/cobra"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// describeEvents is how many recent events describe shows.
const describeEvents = 10

func newPipelinesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pipelines",
		Aliases: []string{"pipeline"},
		Short:   "Show, start, stop, apply and delete the pipelines of a running conduit",
		Long: `The pipelines commands talk to the API of a running "conduit run" at
api.http.address (default 127.0.0.1:8080), or at api.grpc.address when it is
set (Conduit's --api.grpc.address), sending api.auth.token if set. Each comes
from its flag (--api.http.address, --api.grpc.address, --api.auth.token), its
CONDUIT_ variable or conduit.yml, like for "conduit run". "validate" and
"init" need no running conduit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPipelinesListCommand(), newPipelinesDescribeCommand(),
		newPipelinesStartCommand(), newPipelinesStopCommand(), newPipelinesEventsCommand(),
		newPipelinesApplyCommand(), newPipelinesValidateCommand(), newPipelinesDeleteCommand(), newPipelinesSummaryCommand(),
		newPipelinesInitCommand())
	return cmd
}

func newPipelinesListCommand() *cobra.Command {
	var (
		statuses []string
		output   string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the pipelines with their status, fail count, next attempt and last error",
		Long: `List shows the pipelines with their status, fail count, next attempt and
last error. "ls" is Conduit's name of it; --json prints what Conduit's
"pipelines ls --json" prints (its API v1's pipelines, statuses as
STATUS_RUNNING), -o json this product's fuller shape.`,
		Example: `  conduit pipelines list
  conduit pipelines list --status degraded,recovering
  conduit pipelines list -o json | jq -r '.pipelines[] | select(.status == "PIPELINE_STATUS_DEGRADED") | .id'
  conduit pipelines ls --json | jq -r '.pipelines[] | .id + " " + .state.status'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if asJSON {
				if len(statuses) > 0 || output != outputText {
					return errors.New("--json prints Conduit's shape of every pipeline: it does not go with --status or --output")
				}
				return listPipelinesV1(cmd)
			}
			req := &conduitv1.ListPipelinesRequest{}
			for _, s := range statuses {
				st, ok := statusNames[strings.ToLower(s)]
				if !ok {
					return fmt.Errorf("--status %q: want running, recovering, degraded, stopped or invalid", s)
				}
				req.Statuses = append(req.Statuses, st)
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.ListPipelines(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return newView().writePipelineTable(humanOutput(cmd.OutOrStdout()), resp.Msg.GetPipelines(), resp.Msg.GetConfigErrors())
		},
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only pipelines in these statuses: running, recovering, degraded, stopped, invalid (repeat or separate with commas)")
	addOutputFlag(cmd, &output)
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// listPipelinesV1 prints the pipelines as Conduit's `pipelines ls --json`
// does, from Conduit's API v1, sorted by id.
func listPipelinesV1(cmd *cobra.Command) error {
	client, err := newV1Client(cmd)
	if err != nil {
		return err
	}
	resp, err := callV1[apiv1.ListPipelinesRequest, apiv1.ListPipelinesResponse](cmd.Context(), client,
		apiv1.PipelineService_ListPipelines_FullMethodName, &apiv1.ListPipelinesRequest{})
	if err != nil {
		return client.explain(err, v1Subject{})
	}
	slices.SortFunc(resp.Pipelines, func(a, b *apiv1.Pipeline) int { return strings.Compare(a.GetId(), b.GetId()) })
	return writeV1JSON(cmd.OutOrStdout(), resp)
}

func newPipelinesDescribeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe <id>",
		Short: "Show a pipeline's status, last error, recovery episode and recent events",
		Args:  onePipelineID,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			id := args[0]
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.GetPipeline(cmd.Context(), connect.NewRequest(&conduitv1.GetPipelineRequest{Id: id}))
			if err != nil {
				return client.explain(err, id)
			}
			evResp, err := client.ListPipelineEvents(cmd.Context(), connect.NewRequest(&conduitv1.ListPipelineEventsRequest{
				PipelineId: id, Limit: describeEvents, NewestFirst: true,
			}))
			if err != nil {
				return client.explain(err, id)
			}
			events := slices.Clone(evResp.Msg.GetEvents())
			slices.Reverse(events) // show oldest to newest, like a log
			if output != outputText {
				out, err := newDescribeOutput(resp.Msg.GetPipeline(), events)
				if err != nil {
					return err
				}
				return writeStructured(cmd.OutOrStdout(), output, out)
			}
			return newView().writeDescription(humanOutput(cmd.OutOrStdout()), resp.Msg.GetPipeline(), events)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newPipelinesStartCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "start <id>",
		Short: "Start a stopped or degraded pipeline (its fail count starts from 0)",
		Args:  onePipelineID,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.StartPipeline(cmd.Context(), connect.NewRequest(&conduitv1.StartPipelineRequest{Id: args[0]}))
			if err != nil {
				return client.explain(err, args[0])
			}
			return writeResult(cmd, output, resp.Msg.GetPipeline())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newPipelinesStopCommand() *cobra.Command {
	var (
		force  bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "stop <id>",
		Short: "Stop a running or recovering pipeline",
		Long: `Stop stops a running or recovering pipeline and waits until its run has ended.

A graceful stop lets the source stop reading and the records in flight be
written and acknowledged; the pipeline becomes stopped. --force stops at
once: records in flight are dropped (and read again on the next start) and
the pipeline becomes degraded. A graceful stop that has not finished within
pipelines.graceful-stop-timeout is forced the same way, and the answer says
so; while a run is still ending, list and describe show "stopping".`,
		Args: onePipelineID,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.StopPipeline(cmd.Context(), connect.NewRequest(&conduitv1.StopPipelineRequest{Id: args[0], Force: force}))
			if err != nil {
				return client.explain(err, args[0])
			}
			return writeResult(cmd, output, resp.Msg.GetPipeline())
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "stop at once, dropping records in flight; the pipeline becomes degraded")
	addOutputFlag(cmd, &output)
	return cmd
}

// writeResult prints the pipeline after a start or stop.
func writeResult(cmd *cobra.Command, output string, p *conduitv1.Pipeline) error {
	if output != outputText {
		return writeStructured(cmd.OutOrStdout(), output, p)
	}
	status := pipelineStatus(p)
	if p.GetDegradedReason() != "" && !p.GetStopping() {
		status += " (" + p.GetDegradedReason() + ")"
	}
	out := humanOutput(cmd.OutOrStdout())
	if _, err := fmt.Fprintf(out, "pipeline %s is %s\n", p.GetId(), status); err != nil {
		return err
	}
	if p.GetStatus() == conduitv1.PipelineStatus_PIPELINE_STATUS_DEGRADED && p.GetLastError() != nil {
		// Why: a stop that had to be forced, the crash-loop guard, a
		// fatal error.
		_, err := fmt.Fprintf(out, "  last error: %s\n", oneLine(p.GetLastError().GetMessage()))
		return err
	}
	return nil
}

// onePipelineID accepts exactly one argument, the pipeline id.
func onePipelineID(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one pipeline id: %s", cmd.UseLine())
	}
	return nil
}
