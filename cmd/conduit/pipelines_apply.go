package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/conduitry/conduit/pkg/api"
	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/conduit"
	"github.com/conduitry/conduit/pkg/config"
)

// maxPipelineFileBytes bounds what the commands read of one file; the
// server and the loader refuse more anyway.
const maxPipelineFileBytes = 4 << 20

func readPipelineFiles(paths []string) ([]config.FileContent, error) {
	files := make([]config.FileContent, 0, len(paths))
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(f, maxPipelineFileBytes+1))
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(data) > maxPipelineFileBytes {
			return nil, fmt.Errorf("%s: larger than %d MiB, not a pipeline file", path, maxPipelineFileBytes>>20)
		}
		files = append(files, config.FileContent{Name: path, Data: data})
	}
	return files, nil
}

func newPipelinesApplyCommand() *cobra.Command {
	var (
		dryRun, prune bool
		output        string
	)
	cmd := &cobra.Command{
		Use:   "apply FILE...",
		Short: "Create or update pipelines from pipeline files, through the API, with a plan",
		Long: `Apply sends pipeline files (Conduit's format) to the running conduit, which
shows what it will do with each pipeline - create, update (and which
fields), unchanged, invalid (and why) - and does it unless --dry-run.

Pipelines applied this way are kept in conduit's database and survive
restarts; "conduit pipelines delete" removes them. A pipeline defined in a
file under pipelines.path is changed by editing that file instead.
--prune also deletes the pipelines applied before that the files do not
have. An update drains the pipeline and starts it again from its position.`,
		Example: `  conduit pipelines apply orders.yml --dry-run
  conduit pipelines apply orders.yml billing.yml
  conduit pipelines apply team/*.yml --prune`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			files, err := readPipelineFiles(args)
			if err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			req := &conduitv1.ApplyPipelinesRequest{DryRun: dryRun, Prune: prune}
			for _, f := range files {
				req.Files = append(req.Files, &conduitv1.PipelineFile{Name: f.Name, Content: string(f.Data)})
			}
			if size := proto.Size(req); size > api.MaxRequestBytes {
				return fmt.Errorf("the files are %d KiB together, and one apply sends at most %d KiB (the API's request limit): apply them in several calls",
					size>>10, api.MaxRequestBytes>>10)
			}
			resp, err := client.ApplyPipelines(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				return client.explain(err, "")
			}
			if output != outputText {
				if err := writeStructured(cmd.OutOrStdout(), output, resp.Msg); err != nil {
					return err
				}
			} else if err := writePlan(humanOutput(cmd.OutOrStdout()), resp.Msg.GetChanges(), resp.Msg.GetApplied()); err != nil {
				return err
			}
			if n := countAction(resp.Msg.GetChanges(), conduitv1.PlanAction_PLAN_ACTION_INVALID); n > 0 {
				return fmt.Errorf("%d invalid; fix and apply again", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the plan, change nothing")
	cmd.Flags().BoolVar(&prune, "prune", false, "also delete the pipelines applied before that these files do not have")
	addOutputFlag(cmd, &output)
	return cmd
}

func countAction(changes []*conduitv1.PlannedChange, a conduitv1.PlanAction) int {
	n := 0
	for _, c := range changes {
		if c.GetAction() == a {
			n++
		}
	}
	return n
}

// planSymbols mark each action, as people know them from terraform.
var planSymbols = map[conduitv1.PlanAction]string{
	conduitv1.PlanAction_PLAN_ACTION_CREATE:    "+ create",
	conduitv1.PlanAction_PLAN_ACTION_UPDATE:    "~ update",
	conduitv1.PlanAction_PLAN_ACTION_DELETE:    "- delete",
	conduitv1.PlanAction_PLAN_ACTION_UNCHANGED: "  unchanged",
	conduitv1.PlanAction_PLAN_ACTION_INVALID:   "! invalid",
}

// writePlan prints one line per pipeline and a summary.
func writePlan(w io.Writer, changes []*conduitv1.PlannedChange, applied bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range changes {
		id := c.GetPipelineId()
		if id == "" {
			id = "-"
		}
		detail := ""
		switch c.GetAction() {
		case conduitv1.PlanAction_PLAN_ACTION_UPDATE:
			detail = strings.Join(c.GetChangedFields(), ", ")
		case conduitv1.PlanAction_PLAN_ACTION_INVALID:
			var msgs []string
			for _, e := range c.GetErrors() {
				msgs = append(msgs, oneLine(e.GetMessage()))
			}
			detail = strings.Join(msgs, "; ")
			if c.GetKept() {
				detail += " (the running version stays)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", planSymbols[c.GetAction()], oneLine(id), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range changes {
		for _, warning := range c.GetWarnings() {
			fmt.Fprintf(w, "warning: %s\n", oneLine(warning))
		}
	}
	summary := fmt.Sprintf("Plan: %d to create, %d to update, %d to delete, %d unchanged, %d invalid.",
		countAction(changes, conduitv1.PlanAction_PLAN_ACTION_CREATE), countAction(changes, conduitv1.PlanAction_PLAN_ACTION_UPDATE),
		countAction(changes, conduitv1.PlanAction_PLAN_ACTION_DELETE), countAction(changes, conduitv1.PlanAction_PLAN_ACTION_UNCHANGED),
		countAction(changes, conduitv1.PlanAction_PLAN_ACTION_INVALID))
	if applied {
		summary += " Applied."
	} else {
		summary += " Dry run: nothing changed."
	}
	_, err := fmt.Fprintln(w, "\n"+summary)
	return err
}

func newPipelinesValidateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check pipeline files without a running conduit",
		Long: `Validate reads pipeline files as "conduit run" would and checks every
pipeline against the built-in connectors and processors and those in
connectors.path. It needs no running conduit and changes nothing. Each
problem names the file, the line, the pipeline and the field; the exit
status is 1 when there is one.`,
		Example: `  conduit pipelines validate pipelines/*.yml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := readPipelineFiles(args)
			if err != nil {
				return err
			}
			cfg, _, err := config.Load(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv})
			if err != nil {
				return err
			}
			ids, problems := conduit.ValidateFiles(cfg, files)
			out := humanOutput(cmd.OutOrStdout())
			// Warnings do not fail validation: the pipelines run with them.
			valid, _ := config.ParsePipelines(files...)
			for _, p := range valid {
				for _, w := range p.Warnings {
					fmt.Fprintln(humanOutput(cmd.ErrOrStderr()), "warning: "+oneLine(w.String()))
				}
			}
			for _, p := range problems {
				fmt.Fprintln(out, oneLine(p.Err.Error()))
			}
			if len(problems) > 0 {
				return fmt.Errorf("%s; %s", count(len(problems), "problem"), count(len(ids), "valid pipeline"))
			}
			_, err = fmt.Fprintf(out, "%s: %s\n", count(len(ids), "valid pipeline"), strings.Join(ids, ", "))
			return err
		},
	}
	return cmd
}

func newPipelinesDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a pipeline created with apply",
		Long: `Delete stops a pipeline created with "conduit pipelines apply" (gracefully:
records in flight are written) and deletes it: its state and dedup entries
go; its audit log stays readable and its position is kept, so applying it
again resumes where it was. A pipeline of a file under pipelines.path is
deleted by removing it from its file.`,
		Args: onePipelineID,
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			if _, err := client.DeletePipeline(cmd.Context(), connect.NewRequest(&conduitv1.DeletePipelineRequest{Id: args[0]})); err != nil {
				var ce *connect.Error
				if errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition {
					return errors.New(ce.Message())
				}
				return client.explain(err, args[0])
			}
			_, err = fmt.Fprintf(humanOutput(cmd.OutOrStdout()), "pipeline %s deleted\n", args[0])
			return err
		},
	}
}
