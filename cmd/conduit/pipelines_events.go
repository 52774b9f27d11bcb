package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
)

// followBacklog is how many past events --follow prints before the live
// ones when neither --after nor --limit is given, like tail -f.
const followBacklog = 10

// Reconnect backoff of --follow.
const (
	followMinDelay = 100 * time.Millisecond
	followMaxDelay = 5 * time.Second
)

func newPipelinesEventsCommand() *cobra.Command {
	var (
		follow bool
		every  bool
		kinds  []string
		after  uint64
		limit  int32
		output string
	)
	cmd := &cobra.Command{
		Use:   "events (<id> | --all --follow)",
		Short: "Show a pipeline's audit log, or follow it live (or every pipeline's)",
		Long: `Events prints a pipeline's audit log, one event per line: time, sequence,
kind, status change, attempt/delay/next attempt, error code/class and the
message. -o json prints one JSON object per line (NDJSON), -o yaml one
document per event.

Without --after it prints the most recent events (--limit, default 100),
oldest first. With --after N it prints the events after sequence N.

--follow keeps printing new events until Ctrl-C. Without --after it first
prints the last 10 events (or --limit). If the connection drops (the server
restarts, or this reader fell too far behind) it reconnects and continues
after the last event it printed: no event is printed twice or skipped.

--all --follow prints the events of every pipeline from now on, each line
starting with the pipeline's id. Nothing earlier is printed (sequences are
per pipeline), and events written while the connection is down are not
printed after it comes back (the notice says so; the events of one
pipeline show them).`,
		Example: `  conduit pipelines events orders
  conduit pipelines events orders --follow
  conduit pipelines events orders --kind degraded --kind recovering
  conduit pipelines events orders -f -o json | jq -c 'select(.kind == "degraded")'
  conduit pipelines events --all -f --kind degraded`,
		Args: func(cmd *cobra.Command, args []string) error {
			if !every {
				return onePipelineID(cmd, args)
			}
			switch {
			case len(args) > 0:
				return fmt.Errorf("--all follows every pipeline: give no pipeline id (%s)", cmd.UseLine())
			case !follow:
				return errors.New("--all needs --follow: it prints the events of every pipeline from now on")
			case cmd.Flags().Changed("after") || cmd.Flags().Changed("limit"):
				return errors.New("--all prints live events only: --after and --limit name events of one pipeline")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if follow {
				// Ctrl-C is how a follow ends; it is not an error.
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			printEvent := eventPrinter{w: cmd.OutOrStdout(), output: output, view: newView(), withPipeline: every}.print
			if every {
				f := &follower{
					client: client, kinds: kinds, print: printEvent, notices: humanOutput(cmd.ErrOrStderr()),
					minDelay: followMinDelay, maxDelay: followMaxDelay, sleep: sleepContext,
				}
				return f.run(ctx, 0)
			}
			id := args[0]

			last := after
			afterGiven := cmd.Flags().Changed("after")
			if !follow || !afterGiven {
				req := &conduitv1.ListPipelineEventsRequest{
					PipelineId: id, AfterSequence: after, Limit: limit, Kinds: kinds,
					// The latest events, unless the user asked for those
					// after a sequence.
					NewestFirst: !afterGiven,
				}
				if follow && limit == 0 {
					req.Limit = followBacklog
				}
				resp, err := client.ListPipelineEvents(ctx, connect.NewRequest(req))
				if err != nil {
					if follow && ctx.Err() != nil {
						return nil
					}
					return client.explain(err, id)
				}
				events := slices.Clone(resp.Msg.GetEvents())
				if req.NewestFirst {
					slices.Reverse(events)
				}
				for _, e := range events {
					if err := printEvent(e); err != nil {
						return err
					}
					last = max(last, e.GetSequence())
				}
			}
			if !follow {
				return nil
			}
			f := &follower{
				client: client, pipelineID: id, kinds: kinds, print: printEvent, notices: humanOutput(cmd.ErrOrStderr()),
				minDelay: followMinDelay, maxDelay: followMaxDelay, sleep: sleepContext,
			}
			return f.run(ctx, last)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until Ctrl-C")
	cmd.Flags().BoolVar(&every, "all", false, "with --follow: the events of every pipeline, from now on")
	cmd.Flags().StringSliceVar(&kinds, "kind", nil, "only events of these kinds, e.g. fault, recovering, degraded, stopped (repeat or separate with commas)")
	cmd.Flags().Uint64Var(&after, "after", 0, "only events with a sequence greater than this")
	cmd.Flags().Int32Var(&limit, "limit", 0, "at most this many events, 1-1000 (default 100; with --follow, 10 before the live ones)")
	addOutputFlag(cmd, &output)
	return cmd
}

// eventPrinter prints events one by one, so that a follow can be piped.
type eventPrinter struct {
	w      io.Writer
	output string
	view   view
	// withPipeline starts each line with the pipeline id (the JSON and
	// YAML forms always hold it).
	withPipeline bool
}

func (p eventPrinter) print(e *conduitv1.PipelineEvent) error {
	var line []byte
	switch p.output {
	case outputJSON, outputYAML:
		raw, err := compactJSON(e)
		if err != nil {
			return err
		}
		line = append(escapeJSONControls(raw), '\n')
		if p.output == outputYAML {
			y, err := jsonToYAML(raw)
			if err != nil {
				return err
			}
			line = append([]byte("---\n"), y...)
		}
	default:
		text := p.view.eventLine(e)
		if p.withPipeline {
			text = fmt.Sprintf("%-20s %s", oneLine(e.GetPipelineId()), text)
		}
		line = escapeControls([]byte(text + "\n"))
	}
	_, err := p.w.Write(line)
	return err
}

// follower prints a pipeline's events live. When the stream drops, it
// reconnects with backoff and watches again after the last sequence it
// printed, so that nothing is printed twice and nothing is skipped. With
// no pipeline id it follows every pipeline, live only: what was written
// while the stream was down is not printed.
type follower struct {
	client     *apiClient
	pipelineID string
	kinds      []string
	print      func(*conduitv1.PipelineEvent) error
	// notices receives what happens to the connection; the events stay
	// alone on their writer so that it can be piped.
	notices            io.Writer
	minDelay, maxDelay time.Duration
	sleep              func(ctx context.Context, d time.Duration) error
}

// run follows until ctx is done (nil) or the server refuses in a way that
// retrying cannot fix (the error).
func (f *follower) run(ctx context.Context, after uint64) error {
	delay := f.minDelay
	reconnecting := false
	lastNotice := ""
	notice := func(msg string) {
		if msg != lastNotice {
			fmt.Fprintf(f.notices, "conduit: %s\n", msg)
			lastNotice = msg
		}
	}
	for {
		if reconnecting {
			if f.sleep(ctx, delay) != nil {
				return nil
			}
			delay = min(2*delay, f.maxDelay)
			// A unary call tells whether the server is back; a watch
			// stream says nothing until the next event.
			var err error
			if f.pipelineID == "" {
				_, err = f.client.ListPipelines(ctx, connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
			} else {
				_, err = f.client.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: f.pipelineID}))
			}
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil && permanent(err):
				return f.client.explain(err, f.pipelineID)
			case err != nil:
				notice(f.client.explain(err, f.pipelineID).Error() + "; retrying")
				continue
			}
			if f.pipelineID == "" {
				notice("reconnected; events written while disconnected are not shown here (conduit pipelines events <id> lists them)")
			} else {
				notice(fmt.Sprintf("reconnected; following after event #%d", after))
			}
		}

		received, err := f.watch(ctx, &after)
		var out *outputError
		switch {
		case errors.As(err, &out):
			return out.err
		case ctx.Err() != nil:
			return nil
		case err != nil && permanent(err):
			return f.client.explain(err, f.pipelineID)
		case err != nil:
			notice(fmt.Sprintf("lost the event stream (%s); reconnecting", streamProblem(err)))
		default:
			notice("the server ended the event stream; reconnecting")
		}
		if received {
			delay = f.minDelay
		}
		reconnecting = true
	}
}

// watch prints the events of one stream, advancing after, until the
// stream ends. received tells whether any event came.
func (f *follower) watch(ctx context.Context, after *uint64) (received bool, err error) {
	stream, err := f.client.WatchPipelineEvents(ctx, connect.NewRequest(&conduitv1.WatchPipelineEventsRequest{
		PipelineId: f.pipelineID, AfterSequence: *after, Kinds: f.kinds,
	}))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	for stream.Receive() {
		e := stream.Msg().GetEvent()
		received = true
		if f.pipelineID != "" && e.GetSequence() <= *after {
			continue // the server promises none; make sure
		}
		if err := f.print(e); err != nil {
			return received, &outputError{err}
		}
		if f.pipelineID != "" {
			*after = e.GetSequence()
		}
	}
	return received, stream.Err()
}

// outputError is a failure to print, as opposed to one of the stream.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }

// permanent reports whether retrying cannot help.
func permanent(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeUnauthenticated, connect.CodePermissionDenied,
		connect.CodeInvalidArgument, connect.CodeUnimplemented:
		return true
	}
	return false
}

func streamProblem(err error) string {
	switch connect.CodeOf(err) {
	case connect.CodeResourceExhausted:
		// Fell behind while following, or refused at the start because
		// the server has as many watches open as it allows: its message
		// tells which.
		var ce *connect.Error
		if errors.As(err, &ce) && strings.Contains(ce.Message(), "fell too far behind") {
			return "this reader fell too far behind"
		}
	case connect.CodeUnavailable:
		if unreachable(err) {
			return "the server went away"
		}
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
