package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
current directory. Existing files are left alone unless --force is given.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			files := []struct {
				path    string
				content []byte
			}{
				{filepath.Join(dir, "conduit.yml"), config.DefaultConfigFile},
				{filepath.Join(dir, "pipelines", "example.yml"), examplePipeline},
			}
			if !force {
				// Check everything first so that a refusal writes nothing.
				for _, f := range files {
					if _, err := os.Stat(f.path); err == nil {
						return fmt.Errorf("%s already exists; use --force to overwrite it", f.path)
					} else if !errors.Is(err, fs.ErrNotExist) {
						return fmt.Errorf("check %s: %w", f.path, err)
					}
				}
			}
			for _, f := range files {
				if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
					return fmt.Errorf("create %s: %w", filepath.Dir(f.path), err)
				}
				if err := os.WriteFile(f.path, f.content, 0o644); err != nil {
					return fmt.Errorf("write %s: %w", f.path, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f.path)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nNext: cd %s && conduit run\n", dir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}
