package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/conduitry/conduit/pkg/config"
)

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "conduit",
		Short: "Run data pipelines and keep them alive",
		Long: `conduit runs Conduit-format data pipelines (source -> processors -> destinations)
and supervises them. With no command it runs "conduit run".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          runCommand,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// The configuration flags belong to the root so that plain `conduit
	// --db.badger.path=x` (the default run) accepts them too.
	config.RegisterFlags(root.PersistentFlags())
	root.AddCommand(newRunCommand(), newInitCommand(), newVersionCommand(), newPipelinesCommand(), newRecoveryRulesCommand(),
		newDependenciesCommand(), newConnectorsCommand(), newProcessorsCommand(), newConnectorPluginsCommand(),
		newProcessorPluginsCommand(), newInspectCommand(), newConfigCommand(), newNotificationsCommand())
	return root
}
