package main

import (
	"context"
	"fmt"
	"io"

	"github.com/conduitio/conduit-commons/opencdc"
	opencdcv1 "github.com/conduitio/conduit-commons/proto/opencdc/v1"
	apiv1 "github.com/conduitio/conduit/proto/api/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

// inspectOptions are the flags of the inspect commands.
type inspectOptions struct {
	count  int
	asJSON bool
}

func newInspectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Stream the records passing a connector or a processor of a running conduit, live",
		Long: `Inspect prints copies of the records that pass a connector (what a source
reads, what a destination is given) or a processor (what it is given, or with
--out what it returns) while the pipeline runs, one JSON object per line:
the record as Conduit writes it (OpenCDC: position and raw data base64,
structured data as JSON), or with --json Conduit's API v1 message
({"record": ...}). It runs until interrupted or --count records were
printed. A reader that falls behind misses records; the pipeline never
waits for it.

` + v1CommandLong,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newInspectConnectorCommand(), newInspectProcessorCommand())
	return cmd
}

func addInspectFlags(cmd *cobra.Command, o *inspectOptions) {
	cmd.Flags().IntVarP(&o.count, "count", "n", 0, "stop after this many records (0: until interrupted)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, `print Conduit's API v1 message ({"record": ...}) per record`)
}

func newInspectConnectorCommand() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:     "connector <connector-id>",
		Aliases: []string{"connectors"},
		Short:   "Stream the records a source reads or a destination is given",
		Example: `  conduit inspect connector orders:source
  conduit inspect connector orders:source -n 10 | jq .payload.after`,
		Args: oneArg("connector id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.count < 0 {
				return fmt.Errorf("--count %d: want 0 or more", o.count)
			}
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			err = inspectStream(cmd.Context(), client, apiv1.ConnectorService_InspectConnector_FullMethodName,
				&apiv1.InspectConnectorRequest{Id: args[0]}, o, cmd.OutOrStdout(),
				func(r *apiv1.InspectConnectorResponse) *opencdcv1.Record { return r.GetRecord() })
			return client.explain(err, v1Subject{"connector", args[0]})
		},
	}
	addInspectFlags(cmd, &o)
	return cmd
}

func newInspectProcessorCommand() *cobra.Command {
	var (
		o   inspectOptions
		out bool
	)
	cmd := &cobra.Command{
		Use:     "processor <processor-id>",
		Aliases: []string{"processors"},
		Short:   "Stream the records a processor is given (or, with --out, returns)",
		Example: `  conduit inspect processor orders:source:tag
  conduit inspect processor orders:source:tag --out -n 1`,
		Args: oneArg("processor id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.count < 0 {
				return fmt.Errorf("--count %d: want 0 or more", o.count)
			}
			client, err := newV1Client(cmd)
			if err != nil {
				return err
			}
			if out {
				err = inspectStream(cmd.Context(), client, apiv1.ProcessorService_InspectProcessorOut_FullMethodName,
					&apiv1.InspectProcessorOutRequest{Id: args[0]}, o, cmd.OutOrStdout(),
					func(r *apiv1.InspectProcessorOutResponse) *opencdcv1.Record { return r.GetRecord() })
			} else {
				err = inspectStream(cmd.Context(), client, apiv1.ProcessorService_InspectProcessorIn_FullMethodName,
					&apiv1.InspectProcessorInRequest{Id: args[0]}, o, cmd.OutOrStdout(),
					func(r *apiv1.InspectProcessorInResponse) *opencdcv1.Record { return r.GetRecord() })
			}
			return client.explain(err, v1Subject{"processor", args[0]})
		},
	}
	cmd.Flags().BoolVar(&out, "out", false, "the records the processor returns instead of those it is given")
	addInspectFlags(cmd, &o)
	return cmd
}

// inspectStream prints the records of one inspect stream, a line each,
// until it ends or o.count were printed.
func inspectStream[Req any, Res any, PRes interface {
	*Res
	proto.Message
}](ctx context.Context, client *v1Client, procedure string, req *Req, o inspectOptions, w io.Writer, record func(PRes) *opencdcv1.Record) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	printed := 0
	var writeErr error
	err := streamV1(ctx, client, procedure, req, func(msg *Res) bool {
		line, err := inspectLine(PRes(msg), record(PRes(msg)), o.asJSON)
		if err == nil {
			_, err = w.Write(line)
		}
		if err != nil {
			writeErr = err
			return false
		}
		printed++
		return o.count == 0 || printed < o.count
	})
	if writeErr != nil {
		return writeErr
	}
	return err
}

// inspectLine is one record's line: Conduit's OpenCDC JSON, or with
// asJSON the API message itself.
func inspectLine(msg proto.Message, rec *opencdcv1.Record, asJSON bool) ([]byte, error) {
	if asJSON {
		raw, err := v1JSON(msg)
		if err != nil {
			return nil, err
		}
		return append(escapeJSONControls(raw), '\n'), nil
	}
	var r opencdc.Record
	if err := r.FromProto(rec); err != nil {
		return nil, fmt.Errorf("record from the API: %w", err)
	}
	// A record's payload is anyone's data: its terminal controls are
	// escaped, as in every JSON output of the CLI.
	return append(escapeJSONControls(r.Bytes()), '\n'), nil
}
