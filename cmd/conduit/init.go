package main

import (
	_ "embed"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/conduitry/conduit/pkg/config"
)

// examplePipeline is what `conduit init` writes to pipelines/example.yml. The
// repository's pipelines/example.yml (the one `make run` runs) is a copy; a
// test keeps the two identical.
//
//go:embed example.yml
var examplePipeline []byte

func newInitCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init [dir]",
		Short: "Write a commented conduit.yml and an example pipeline",
		Long: `Init writes <dir>/conduit.yml (every configuration key, explained) and
<dir>/pipelines/example.yml (a generator -> file pipeline). dir defaults to the
current directory. Existing files are left alone unless --force is given.
A symbolic link where a file goes is never written through, even with
--force.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			files := []initFile{
				{filepath.Join(dir, "conduit.yml"), config.DefaultConfigFile},
				{filepath.Join(dir, "pipelines", "example.yml"), examplePipeline},
			}
			if err := writeInitFiles(files, force, func(path string) { fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", path) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nNext: cd %s && conduit run\n", dir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}
