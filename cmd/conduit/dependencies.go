package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

func newDependenciesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dependencies",
		Aliases: []string{"dependency"},
		Short:   "Show the dependency breakers of a running conduit",
		Long: `A connector names the external system it depends on (dependency: in its
pipeline file, or details.dependency in its errors). When several pipelines
fail on the same dependency, its breaker opens: one canary retries it and
the others wait, until the canary gets a record through (pipelines.breakers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the dependencies with an open breaker or recent failures",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.ListDependencies(cmd.Context(), connect.NewRequest(&conduitv1.ListDependenciesRequest{}))
			if err != nil {
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return newView().writeDependencies(humanOutput(cmd.OutOrStdout()), resp.Msg.GetDependencies())
		},
	}
	addOutputFlag(list, &output)
	cmd.AddCommand(list)
	return cmd
}

func (v view) writeDependencies(w io.Writer, deps []*conduitv1.Dependency) error {
	if len(deps) == 0 {
		_, err := fmt.Fprintln(w, "no dependency has failed recently")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPENDENCY\tBREAKER\tSINCE\tCANARY\tHELD\tRECENT FAILURES")
	for _, d := range deps {
		state, since, canary := "closed", "-", "-"
		if d.GetOpen() {
			state, since, canary = "open", v.timeAndRelative(d.GetOpenedAt()), d.GetCanary()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", oneLine(d.GetName()), state, since, oneLine(canary), len(d.GetHeld()),
			oneLine(strings.Join(d.GetRecentFailures(), ", ")))
	}
	return tw.Flush()
}

func newPipelinesSummaryCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Recovery figures: restarts waiting, pipelines held by breakers, recovery success rate, restarts by rule",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.GetRecoverySummary(cmd.Context(), connect.NewRequest(&conduitv1.GetRecoverySummaryRequest{}))
			if err != nil {
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return newView().writeSummary(humanOutput(cmd.OutOrStdout()), resp.Msg)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (v view) writeSummary(w io.Writer, s *conduitv1.GetRecoverySummaryResponse) error {
	field := func(key, value string) { fmt.Fprintf(w, "  %-23s %s\n", key+":", value) }
	fmt.Fprintf(w, "Since %s:\n", v.timeAndRelative(s.GetSince()))
	waiting := fmt.Sprint(s.GetPendingRestarts())
	if s.GetPendingRestarts() > 0 {
		waiting += fmt.Sprintf(" (next %s, last %s)", v.timeAndRelative(s.GetEarliestNextAttempt()), v.timeAndRelative(s.GetLatestNextAttempt()))
	}
	field("restarts waiting", waiting)
	field("held by breakers", fmt.Sprint(s.GetHeldByBreakers()))
	field("episodes recovered", fmt.Sprint(s.GetEpisodesRecovered()))
	field("episodes degraded", fmt.Sprint(s.GetEpisodesDegraded()))
	rate := "-"
	if s.RecoverySuccessRate != nil {
		rate = fmt.Sprintf("%.0f%%", s.GetRecoverySuccessRate()*100)
	}
	field("recovery success rate", rate)
	by := map[string]int32{}
	for k, n := range s.GetRestartsByRule() {
		by[k] = int32(n)
	}
	field("restarts by rule", countsText(by))
	return nil
}
