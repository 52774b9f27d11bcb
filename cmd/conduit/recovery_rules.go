package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

func newRecoveryRulesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "recovery-rules",
		Aliases: []string{"recovery-rule", "rules"},
		Short:   "Manage the recovery rules of a running conduit",
		Long: `Recovery rules decide what happens to an error (docs/recovery.md). Besides
the rules of conduit.yml and of pipeline files, a running conduit keeps
managed rules in its database: they take effect at once for every pipeline
(tried after a pipeline's own rules, before the global rules of conduit.yml)
and survive restarts. "list" shows the rules of conduit.yml too, read-only.

A rules file is a list of rules, a map with a rules list, or a conduit.yml
with pipelines.error-recovery.rules (examples/rules/postgres.yml is one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRulesListCommand(), newRulesGetCommand(), newRulesLoadCommand(), newRulesExportCommand(),
		newRulesDeleteCommand(), newRulesClearCommand(), newRulesDryRunCommand(), newRulesApplyCommand())
	return cmd
}

func newRulesListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the managed rules and the global rules of conduit.yml, in the order they are tried",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.rules.ListRecoveryRules(cmd.Context(), connect.NewRequest(&conduitv1.ListRecoveryRulesRequest{}))
			if err != nil {
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return writeRulesTable(humanOutput(cmd.OutOrStdout()), resp.Msg.GetRules())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func writeRulesTable(w io.Writer, rules []*conduitv1.ManagedRecoveryRule) error {
	if len(rules) == 0 {
		_, err := fmt.Fprintln(w, "no recovery rules")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tPRIORITY\tACTION\tMATCH\tDEFINED AT")
	for _, m := range rules {
		r := m.GetRule()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", oneLine(r.GetName()), m.GetSource(), r.GetPriority(), r.GetAction(),
			oneLine(matchSummary(r)), oneLine(r.GetDefinedAt()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeRuleWarnings(w, rules)
}

// writeRuleWarnings prints what rules ask for that conduit does otherwise
// (delays below the restart delay floor), one line a rule.
func writeRuleWarnings(w io.Writer, rules []*conduitv1.ManagedRecoveryRule) error {
	for _, m := range rules {
		if warning := m.GetWarning(); warning != "" {
			if _, err := fmt.Fprintf(w, "warning: rule %s: %s\n", oneLine(m.GetRule().GetName()), oneLine(warning)); err != nil {
				return err
			}
		}
	}
	return nil
}

// matchSummary is what a rule matches, on one line.
func matchSummary(r *conduitv1.RecoveryRule) string {
	var parts []string
	if len(r.GetCodes()) > 0 {
		parts = append(parts, "codes "+strings.Join(r.GetCodes(), ","))
	}
	if r.GetClass() != "" {
		parts = append(parts, "class "+r.GetClass())
	}
	if r.GetMessage() != "" {
		parts = append(parts, fmt.Sprintf("message %q", r.GetMessage()))
	}
	for _, f := range []struct {
		name  string
		globs []string
	}{{"pipelines", r.GetPipelines()}, {"components", r.GetComponents()}, {"plugins", r.GetPlugins()}} {
		if len(f.globs) > 0 {
			parts = append(parts, f.name+" "+strings.Join(f.globs, ","))
		}
	}
	return strings.Join(parts, "; ")
}

func newRulesGetCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one rule: as written (yaml, the default) or as the API has it (json)",
		Args:  oneRuleName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == outputText {
				output = outputYAML
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.rules.GetRecoveryRule(cmd.Context(), connect.NewRequest(&conduitv1.GetRecoveryRuleRequest{Name: args[0]}))
			if err != nil {
				return client.explainRule(err, args[0])
			}
			rule := resp.Msg.GetRule()
			if output == outputYAML && rule.GetYaml() != "" {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "# %s rule, loaded from %s\n%s", escapeControls([]byte(oneLine(rule.GetSource()))),
					escapeControls([]byte(oneLine(rule.GetRule().GetDefinedAt()))), listItem(inertYAML(rule.GetYaml())))
				return err
			}
			return writeStructured(cmd.OutOrStdout(), output, rule)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputYAML, "output format: yaml or json")
	return cmd
}

// listItem makes one rule's YAML an item of a rules list, so that what
// get and export print can be loaded again.
func listItem(ruleYAML string) string {
	return "- " + strings.ReplaceAll(strings.TrimSuffix(ruleYAML, "\n"), "\n", "\n  ") + "\n"
}

func newRulesLoadCommand() *cobra.Command {
	var replaceAll bool
	cmd := &cobra.Command{
		Use:   "load FILE...",
		Short: "Add the rules of rules files to the managed rules (same name: replaced)",
		Long: `Load adds the rules of the files to the managed rules; a managed rule of the
same name is replaced. With --replace-all the files' rules become the only
managed rules. A file with one bad rule changes nothing, and the error names
the file, line, rule and key.`,
		Example: `  conduit recovery-rules load examples/rules/postgres.yml
  conduit recovery-rules load team-rules.yml --replace-all`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := readPipelineFiles(args)
			if err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			req := &conduitv1.LoadRecoveryRulesRequest{ReplaceAll: replaceAll}
			for _, f := range files {
				req.Files = append(req.Files, &conduitv1.RulesFile{Name: f.Name, Content: string(f.Data)})
			}
			resp, err := client.rules.LoadRecoveryRules(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				var ce *connect.Error
				if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
					return fmt.Errorf("nothing loaded: %s", ce.Message())
				}
				return client.explain(err, "")
			}
			out := humanOutput(cmd.OutOrStdout())
			fmt.Fprintf(out, "loaded %s: %s\n", count(len(resp.Msg.GetLoaded()), "rule"), strings.Join(resp.Msg.GetLoaded(), ", "))
			if r := resp.Msg.GetReplaced(); len(r) > 0 {
				fmt.Fprintf(out, "replaced: %s\n", strings.Join(r, ", "))
			}
			if r := resp.Msg.GetRemoved(); len(r) > 0 {
				fmt.Fprintf(out, "removed: %s\n", strings.Join(r, ", "))
			}
			for _, warning := range resp.Msg.GetWarnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", oneLine(warning))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&replaceAll, "replace-all", false, "make the files' rules the only managed rules")
	return cmd
}

func newRulesExportCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Print the managed rules as a rules file (yaml, loadable again) or as json",
		Example: `  conduit recovery-rules export > rules.yml
  conduit recovery-rules load rules.yml --replace-all   # on another conduit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == outputText {
				output = outputYAML
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.rules.ListRecoveryRules(cmd.Context(), connect.NewRequest(&conduitv1.ListRecoveryRulesRequest{}))
			if err != nil {
				return client.explain(err, "")
			}
			var managed []*conduitv1.ManagedRecoveryRule
			for _, r := range resp.Msg.GetRules() {
				if r.GetSource() == "managed" {
					managed = append(managed, r)
				}
			}
			if output == outputJSON {
				return writeStructured(cmd.OutOrStdout(), output, &conduitv1.ListRecoveryRulesResponse{Rules: managed})
			}
			b := &strings.Builder{}
			fmt.Fprintf(b, "# %d managed recovery rules, in the order they are tried\nrules:\n", len(managed))
			if len(managed) == 0 {
				b.Reset()
				b.WriteString("# no managed recovery rules\nrules: []\n")
			}
			for _, r := range managed {
				b.WriteString(listItem(inertYAML(r.GetYaml())))
			}
			_, err = io.WriteString(cmd.OutOrStdout(), b.String())
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputYAML, "output format: yaml or json")
	return cmd
}

func newRulesDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a managed rule",
		Args:  oneRuleName,
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			if _, err := client.rules.DeleteRecoveryRule(cmd.Context(), connect.NewRequest(&conduitv1.DeleteRecoveryRuleRequest{Name: args[0]})); err != nil {
				return client.explainRule(err, args[0])
			}
			_, err = fmt.Fprintf(humanOutput(cmd.OutOrStdout()), "recovery rule %s deleted\n", args[0])
			return err
		},
	}
}

func newRulesClearCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "Delete every managed rule (asks first unless -f)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			if !force {
				fmt.Fprint(cmd.OutOrStdout(), "Delete every managed recovery rule of the conduit at "+client.address+"? Type yes: ")
				line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if strings.TrimSpace(line) != "yes" {
					return errors.New("nothing deleted")
				}
			}
			resp, err := client.rules.ClearRecoveryRules(cmd.Context(), connect.NewRequest(&conduitv1.ClearRecoveryRulesRequest{}))
			if err != nil {
				return client.explain(err, "")
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d managed recovery rules deleted\n", resp.Msg.GetDeleted())
			return err
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "do not ask")
	return cmd
}

func oneRuleName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one rule name: %s", cmd.UseLine())
	}
	return nil
}

// explainRule is explain for a rule's name.
func (c *apiClient) explainRule(err error, name string) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return fmt.Errorf("recovery rule %q not found", name)
		case connect.CodeFailedPrecondition:
			return errors.New(ce.Message())
		}
	}
	return c.explain(err, "")
}

func newRulesDryRunCommand() *cobra.Command {
	var (
		since  time.Duration
		output string
	)
	cmd := &cobra.Command{
		Use:   "dry-run FILE...",
		Short: "What the rules of FILE would have done with the faults the audit log kept",
		Long: `Dry-run replays the fault events of the audit log - every pipeline's,
deleted ones too, as far as retention kept them, or those of the last
--since - against the rules of the files, tried in their order, and reports
for each rule the faults it would have decided, in which pipelines, what it
would have done (its action and schedule) and what happened instead; and the
faults that no rule matches. Nothing is stored or changed.`,
		Example: `  conduit recovery-rules dry-run new-rules.yml --since 168h`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if since < 0 {
				return fmt.Errorf("--since %s: want a positive duration", since)
			}
			files, err := readPipelineFiles(args)
			if err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			req := &conduitv1.DryRunRecoveryRulesRequest{}
			if since > 0 {
				req.Since = durationpb.New(since)
			}
			for _, f := range files {
				req.Files = append(req.Files, &conduitv1.RulesFile{Name: f.Name, Content: string(f.Data)})
			}
			resp, err := client.rules.DryRunRecoveryRules(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				var ce *connect.Error
				if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
					return errors.New(ce.Message())
				}
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return newView().writeDryRun(humanOutput(cmd.OutOrStdout()), resp.Msg)
		},
	}
	cmd.Flags().DurationVar(&since, "since", 0, "only faults of this last stretch of time, e.g. 24h or 168h (default: all the audit log kept)")
	addOutputFlag(cmd, &output)
	return cmd
}

// countsText is "a 3, b 1": the largest first.
func countsText(m map[string]int32) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func (v view) writeDryRun(w io.Writer, r *conduitv1.DryRunRecoveryRulesResponse) error {
	window := "the audit log holds none"
	if r.GetFaults() > 0 {
		window = fmt.Sprintf("from %s to %s", v.timeText(r.GetFrom()), v.timeText(r.GetTo()))
	}
	fmt.Fprintf(w, "Dry run of %s against %s (%s). Nothing was changed.\n\n", count(len(r.GetRules()), "rule"), count(int(r.GetFaults()), "fault"), window)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tACTION\tMATCHED\tPIPELINES\tWOULD\tACTUALLY")
	for _, rule := range r.GetRules() {
		would := rule.GetAction()
		if rule.GetSchedule() != "" {
			would += ": " + rule.GetSchedule()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", oneLine(rule.GetName()), rule.GetAction(), rule.GetMatched(),
			oneLine(countsText(rule.GetPipelines())), oneLine(would), oneLine(countsText(rule.GetActual())))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, rule := range r.GetRules() {
		if warning := rule.GetWarning(); warning != "" {
			fmt.Fprintf(w, "warning: rule %s: %s\n", oneLine(rule.GetName()), oneLine(warning))
		}
	}
	if r.GetUnmatched() == 0 {
		_, err := fmt.Fprintln(w, "\nEvery fault matches a rule.")
		return err
	}
	fmt.Fprintf(w, "\nNo rule matches %d faults:\n", r.GetUnmatched())
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "COUNT\tCODE/CLASS\tMESSAGE\tPIPELINES")
	for _, u := range r.GetUnmatchedKinds() {
		code := u.GetClass()
		if u.GetCode() != 0 {
			code = fmt.Sprintf("%d/%s", u.GetCode(), u.GetClass())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", u.GetCount(), code, oneLine(u.GetMessage()), oneLine(countsText(u.GetPipelines())))
	}
	return tw.Flush()
}

func newRulesApplyCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "apply NAME...",
		Short: "Restart the degraded pipelines whose last error managed rules match, on the rules' schedule",
		Long: `Apply hands the pipelines that are degraded now to managed rules, as if the
rules had existed when the pipelines failed: each degraded pipeline whose
last error one of the rules matches (tried in the order given) goes
recovering and restarts on that rule's schedule; its audit log names the
rule and the actor. Pipelines a user force-stopped, whose error no rule
matches, or that are not degraded, are left alone. Load the rules first
(and try them with dry-run).`,
		Example: `  conduit recovery-rules load missing-table.yml
  conduit recovery-rules apply missing-table`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			resp, err := client.rules.ApplyRecoveryRules(cmd.Context(), connect.NewRequest(&conduitv1.ApplyRecoveryRulesRequest{Names: args}))
			if err != nil {
				var ce *connect.Error
				if errors.As(err, &ce) && (ce.Code() == connect.CodeNotFound || ce.Code() == connect.CodeFailedPrecondition) {
					return errors.New(ce.Message())
				}
				return client.explain(err, "")
			}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, resp.Msg)
			}
			return newView().writeApplied(humanOutput(cmd.OutOrStdout()), resp.Msg.GetPipelines())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (v view) writeApplied(w io.Writer, pipelines []*conduitv1.AppliedRule) error {
	if len(pipelines) == 0 {
		_, err := fmt.Fprintln(w, "no pipeline is degraded: nothing to do")
		return err
	}
	restarted := 0
	for _, p := range pipelines {
		if p.GetRestarted() {
			restarted++
		}
	}
	fmt.Fprintf(w, "%d of %d degraded pipelines restarted\n\n", restarted, len(pipelines))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tRESULT\tRULE\tNEXT ATTEMPT\tWHY")
	for _, p := range pipelines {
		result, rule, next := "left alone", "-", "-"
		if p.GetRestarted() {
			result, rule, next = "recovering", p.GetRule(), v.timeAndRelative(p.GetNextAttemptAt())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(p.GetPipelineId()), result, oneLine(rule), next, oneLine(p.GetReason()))
	}
	return tw.Flush()
}
