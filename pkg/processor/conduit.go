package processor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit-processor-sdk/pprocutils"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/avro"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/base64"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/field"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/json"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/ollama"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/unwrap"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/webhook"
	"github.com/conduitio/conduit/pkg/schemaregistry"
	"github.com/rs/zerolog"

	"github.com/conduitry/conduit/pkg/plugin"
	"github.com/conduitry/conduit/pkg/record"
)

// ConduitOptions are what Conduit's processors need from the runtime.
type ConduitOptions struct {
	// SchemaRegistry serves avro.encode and avro.decode (Conduit gives them
	// its schema registry). Without one they are refused when the pipeline
	// file is loaded: a registry that forgot its schemas at every restart
	// would make Avro written in one run unreadable, or read with another
	// schema, in the next.
	SchemaRegistry schemaregistry.Registry
	// JavaScript bounds custom.javascript's scripts (conduit.yml's
	// processors.javascript.*); the zero value has the defaults and
	// refuses require().
	JavaScript JavaScriptLimits
}

// conduitConstructors are Conduit's built-in processors that this runtime
// runs with Conduit's own code, by name. custom.javascript, error,
// field.exclude, field.set and filter are this package's own. Of the AI processors only ollama is
// here: it talks to the server its url setting names, where openai.* and
// cohere.* only talk to their vendors' services.
var conduitConstructors = []struct {
	name        string
	newProc     func(log.CtxLogger) sdk.Processor
	needsSchema bool
	// splits marks a processor that turns one record into several: it is
	// adapted to Splitter.
	splits bool
}{
	{"avro.decode", func(l log.CtxLogger) sdk.Processor { return avro.NewDecodeProcessor(l) }, true, false},
	{"avro.encode", func(l log.CtxLogger) sdk.Processor { return avro.NewEncodeProcessor(l) }, true, false},
	{"base64.decode", func(l log.CtxLogger) sdk.Processor { return base64.NewDecodeProcessor(l) }, false, false},
	{"base64.encode", func(l log.CtxLogger) sdk.Processor { return base64.NewEncodeProcessor(l) }, false, false},
	{"clone", func(l log.CtxLogger) sdk.Processor { return impl.NewCloneProcessor(l) }, false, true},
	{"field.convert", func(l log.CtxLogger) sdk.Processor { return field.NewConvertProcessor(l) }, false, false},
	{"field.rename", func(l log.CtxLogger) sdk.Processor { return field.NewRenameProcessor(l) }, false, false},
	{"json.decode", func(l log.CtxLogger) sdk.Processor { return json.NewDecodeProcessor(l) }, false, false},
	{"json.encode", func(l log.CtxLogger) sdk.Processor { return json.NewEncodeProcessor(l) }, false, false},
	{"ollama", ollama.NewOllamaProcessor, false, false},
	{"split", func(l log.CtxLogger) sdk.Processor { return impl.NewSplitProcessor(l) }, false, true},
	{"unwrap.debezium", func(l log.CtxLogger) sdk.Processor { return unwrap.NewDebeziumProcessor(l) }, false, false},
	{"unwrap.kafkaconnect", func(l log.CtxLogger) sdk.Processor { return unwrap.NewKafkaConnectProcessor(l) }, false, false},
	{"unwrap.opencdc", func(l log.CtxLogger) sdk.Processor { return unwrap.NewOpenCDCProcessor(l) }, false, false},
	{"webhook.http", func(l log.CtxLogger) sdk.Processor { return webhook.NewHTTPProcessor(l) }, false, false},
}

// Conduit returns Conduit's built-in processors that run here with
// Conduit's own code (see conduitConstructors), adapted to Processor (and
// to Splitter for clone and split).
func Conduit(opts ConduitOptions) []Plugin {
	out := make([]Plugin, 0, len(conduitConstructors))
	for _, c := range conduitConstructors {
		out = append(out, Plugin{Name: c.name, New: func(cfg Config) (Processor, error) {
			if c.needsSchema && opts.SchemaRegistry == nil {
				return nil, fmt.Errorf("%s needs a schema registry to find its Avro schemas, and none was given", c.name)
			}
			proc, err := newConduitProcessor(c.name, c.newProc, opts, cfg)
			if err != nil {
				return nil, err
			}
			if c.splits {
				return &conduitSplitter{proc}, nil
			}
			return proc, nil
		}})
	}
	return out
}

// schemaRegistryUser is implemented by Conduit's avro processors.
type schemaRegistryUser interface {
	SetSchemaRegistry(schemaregistry.Registry)
}

// quietSDKLogs silences the processor SDK's own logger, a variable of the
// SDK that Conduit's processors log through (it would print a debug line to
// stderr for every configuration parsed). The processors' errors reach the
// engine as errors, so nothing the operator needs goes through it.
var quietSDKLogs = sync.OnceFunc(func() { pprocutils.Logger = zerolog.Nop() })

// conduitProcessor adapts one of Conduit's processors (sdk.Processor, which
// takes batches of opencdc.Record) to Processor. The record types share
// their representation, so a record is converted without copying its maps
// or bytes: the Conduit processor changes the engine's record in place, or
// returns a new one that replaces it.
type conduitProcessor struct {
	name string
	proc sdk.Processor
	// in is the one-record batch handed to the processor, kept to save an
	// allocation per record; it is cleared after each call so that the
	// adapter keeps nothing of the engine's record.
	in [1]opencdc.Record
}

// newConduitProcessor builds, configures and opens a Conduit processor.
// None of those does I/O for the processors here, so it is also how their
// settings are validated.
func newConduitProcessor(name string, newProc func(log.CtxLogger) sdk.Processor, opts ConduitOptions, cfg Config) (*conduitProcessor, error) {
	quietSDKLogs()
	proc := newProc(log.Nop())
	if u, ok := proc.(schemaRegistryUser); ok {
		u.SetSchemaRegistry(opts.SchemaRegistry)
	}
	spec, err := proc.Specification()
	if err != nil {
		return nil, fmt.Errorf("%s: specification: %w", name, err)
	}
	settings, err := conduitSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	if err := proc.Configure(context.Background(), settings); err != nil {
		return nil, conduitSettingError(spec.Parameters, err)
	}
	// Open finishes the settings' checks and, for the processors here,
	// does no I/O.
	if err := proc.Open(context.Background()); err != nil {
		if len(settings) == 1 {
			for k := range settings {
				return nil, &SettingError{Setting: k, Err: err}
			}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &conduitProcessor{name: name, proc: proc}, nil
}

// conduitSettings checks the processor-SDK schema settings as every
// processor here does and leaves them out: under Conduit its schema
// middleware takes them before the processor sees its settings, and here
// records are decoded as they are read (see sdkSchemaSettings).
func conduitSettings(in map[string]string) (config.Config, error) {
	out := make(config.Config, len(in))
	sdkKeys := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, "sdk.schema.") {
			sdkKeys[k] = v
			continue
		}
		out[k] = v
	}
	s := plugin.NewSettings(sdkKeys)
	sdkSchemaSettings(s)
	return out, s.Done()
}

var (
	conduitParamInvalid      = regexp.MustCompile(`error validating "([^"]+)": `)
	conduitParamUnrecognized = regexp.MustCompile(`"([^"]+)": unrecognized parameter`)
)

// conduitSettingError turns the error of a Conduit processor's Configure
// into a *SettingError naming the setting. Conduit's configuration errors
// quote the parameter; errors raised after parsing (a field reference or
// template that does not parse) name it in words, so a parameter of the
// specification quoted or named in the message is taken. An error that
// names none is returned as it is, to point at the processor as a whole.
func conduitSettingError(params config.Parameters, err error) error {
	msg := err.Error()
	if m := conduitParamInvalid.FindStringSubmatchIndex(msg); m != nil {
		return &SettingError{Setting: msg[m[2]:m[3]], Err: errors.New(msg[m[1]:])}
	}
	if m := conduitParamUnrecognized.FindStringSubmatch(msg); m != nil {
		return &SettingError{Setting: m[1], Err: errors.New("unknown setting")}
	}
	for name := range params {
		if strings.Contains(msg, `"`+name+`"`) {
			return &SettingError{Setting: name, Err: err}
		}
	}
	if len(params) == 1 {
		for name := range params {
			return &SettingError{Setting: name, Err: err}
		}
	}
	return err
}

// Process runs the Conduit processor on rec and takes its result back. A
// panic in the processor rejects the record (fatal, as a processor's error
// without a code is) instead of ending the process with every other
// pipeline in it.
func (p *conduitProcessor) Process(ctx context.Context, rec *record.Record) (err error) {
	p.in[0] = record.ToOpenCDC(rec)
	defer func() {
		p.in[0] = opencdc.Record{}
		if v := recover(); v != nil {
			err = fmt.Errorf("%s panicked: %v", p.name, v)
		}
	}()
	return p.result(p.proc.Process(ctx, p.in[:]), rec)
}

// result takes back what the processor made of rec, which must be one
// record (or none).
func (p *conduitProcessor) result(out []sdk.ProcessedRecord, rec *record.Record) error {
	several, err := p.results(out, rec, nil)
	if err == nil && len(several) > 0 {
		return fmt.Errorf("%s turned the record into %d records where one was expected (it is run as a processor that returns one record)", p.name, len(several))
	}
	return err
}

// results takes back what the processor made of rec: one record in rec, or
// several appended to several. A MultiRecord is what Conduit's engine makes
// of it: none is a filtered record, one replaces rec, more are several.
func (p *conduitProcessor) results(out []sdk.ProcessedRecord, rec *record.Record, several []record.Record) ([]record.Record, error) {
	if len(out) != 1 {
		return several, fmt.Errorf("%s returned %d results for one record", p.name, len(out))
	}
	switch r := out[0].(type) {
	case sdk.SingleRecord:
		record.FromOpenCDC((*opencdc.Record)(&r), rec)
		return several, nil
	case sdk.FilterRecord:
		return several, ErrFiltered
	case sdk.ErrorRecord:
		if r.Error == nil {
			return several, fmt.Errorf("%s rejected the record without an error", p.name)
		}
		return several, r.Error
	case sdk.MultiRecord:
		switch len(r) {
		case 0:
			return several, ErrFiltered
		case 1:
			record.FromOpenCDC(&r[0], rec)
			return several, nil
		}
		for i := range r {
			several = append(several, record.Record{})
			record.FromOpenCDC(&r[i], &several[len(several)-1])
		}
		return several, nil
	default:
		return several, fmt.Errorf("%s returned an unknown result %T", p.name, out[0])
	}
}

// conduitSplitter is a Conduit processor that turns one record into
// several (clone, split), adapted to Splitter.
type conduitSplitter struct{ *conduitProcessor }

// ProcessMulti runs the processor on rec, as Splitter says. Conduit's clone
// and split copy the record for each result, so the records appended share
// nothing with rec.
func (p *conduitSplitter) ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) (several []record.Record, err error) {
	p.in[0] = record.ToOpenCDC(rec)
	defer func() {
		p.in[0] = opencdc.Record{}
		if v := recover(); v != nil {
			several, err = out, fmt.Errorf("%s panicked: %v", p.name, v)
		}
	}()
	return p.results(p.proc.Process(ctx, p.in[:]), rec, out)
}
