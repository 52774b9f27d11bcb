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
			return newView().writeDependencies(cmd.OutOrStdout(), resp.Msg.GetDependencies())
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
