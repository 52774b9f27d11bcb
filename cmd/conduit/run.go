package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/conduit"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/gctuning"
	"github.com/conduitry/conduit/pkg/logging"
)

func newRunCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the pipelines in pipelines.path until interrupted",
		Long: `Run loads conduit.yml (or Conduit's conduit.yaml) and the pipeline files and
runs the pipelines. Conduit's run flags are accepted too (docs/operations.md).

The first SIGINT or SIGTERM (Ctrl-C) stops them gracefully: sources stop
reading, in-flight records are written and acknowledged, positions are saved.
A second signal, or pipelines.graceful-stop-timeout, forces the stop.

Changes to the pipeline files take effect while it runs (pipelines.watch);
SIGHUP reads them again at once.`,
		Args: cobra.NoArgs,
		RunE: runCommand,
	}
}

func runCommand(cmd *cobra.Command, _ []string) error {
	cfg, warnings, err := config.Load(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv, Environ: os.Environ})
	if err != nil {
		// No logger yet (its level and format are configuration), and a
		// misspelled variable is often why the configuration is refused.
		for _, w := range warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
		}
		return err
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	for _, w := range warnings {
		log.Warn(w.String())
	}
	if cfg.ConfigPath != "" {
		log.Info("configuration loaded", zap.String("config.path", cfg.ConfigPath))
	}
	collector, err := gctuning.Apply(gctuning.Settings{GCPercent: cfg.Runtime.GCPercent, MemoryLimit: cfg.Runtime.MemoryLimit,
		Headroom: cfg.Runtime.GCHeadroom}, log)
	if err != nil {
		return err
	}
	defer collector.Stop()

	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	force := make(chan struct{})
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	runDone := make(chan struct{})
	defer close(runDone)
	// SIGHUP would end the process by default; it reads the pipeline files
	// again instead, once the runtime is up (one received while starting
	// waits in the channel).
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	go func() {
		// The first signal asks for a graceful stop, the second forces it.
		select {
		case <-signals:
			stop()
		case <-runDone:
			return
		}
		select {
		case <-signals:
			close(force)
		case <-runDone:
		}
	}()

	rt, err := conduit.New(ctx, cfg, log, conduit.Options{})
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C while starting up is a stop, not a failure.
			log.Info("interrupted while starting; nothing was started")
			return nil
		}
		return err
	}
	go func() {
		for {
			select {
			case <-hangups:
				log.Info("SIGHUP received: reading the pipeline files again")
				rt.Reload()
			case <-runDone:
				return
			}
		}
	}()
	if err := rt.Run(ctx, force); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	log.Info("conduit stopped")
	return nil
}
