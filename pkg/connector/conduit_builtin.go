package connector

import (
	"maps"
	"runtime/debug"
	"strings"

	"github.com/conduitio/conduit-commons/config"
	kafka "github.com/conduitio/conduit-connector-kafka"
	postgres "github.com/conduitio/conduit-connector-postgres"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	s3 "github.com/conduitio/conduit-connector-s3"
	sdk "github.com/conduitio/conduit-connector-sdk"

	"github.com/conduitry/conduit/pkg/conduitplugin"
)

// conduitBuiltin is a connector written with Conduit's connector SDK and
// compiled in, run through the adapter of pkg/conduitplugin. Its settings
// are checked against its own specification when the pipeline file is
// loaded, so a wrong one is an error naming the setting before anything
// runs.
//
// Records of a connector in this process reach the engine as the connector
// made them, so the SDK's schema extraction, which encodes them with Avro
// to keep their types across a process boundary, only costs time here: it
// is off unless the file turns it on. sourceDefaults are the connector's
// own such defaults.
func conduitBuiltin(name, module string, c sdk.Connector, sourceDefaults map[string]string) Plugin {
	spec := c.NewSpecification()
	if !strings.HasPrefix(spec.Version, "v") {
		// Compiled in, a connector knows no version of its own ("(devel)");
		// the module's is the one a Conduit user sees listed.
		if v := moduleVersion(module); strings.HasPrefix(v, "v") {
			spec.Version = v
		}
	}
	sourceDefaults = maps.Clone(sourceDefaults)
	if sourceDefaults == nil {
		sourceDefaults = map[string]string{}
	}
	sourceDefaults["sdk.schema.extract.payload.enabled"] = "false"
	sourceDefaults["sdk.schema.extract.key.enabled"] = "false"
	ref := "builtin:" + name
	p := Plugin{Name: name, Specification: func() pconnector.Specification { return spec }}
	if c.NewSource != nil {
		p.NewSource = func(cfg Config) (Source, error) {
			if err := conduitplugin.ValidateSettings(spec.SourceParams, cfg.Settings); err != nil {
				return nil, err
			}
			plug := conduitplugin.InProcessSDKSource(c.NewSource(), conduitPluginConfig(cfg), spec.SourceParams)
			return conduitplugin.NewSource(plug, conduitOptions(cfg, ref, spec.SourceParams, sourceDefaults)), nil
		}
	}
	if c.NewDestination != nil {
		p.NewDestination = func(cfg Config) (Destination, error) {
			if err := conduitplugin.ValidateSettings(spec.DestinationParams, cfg.Settings); err != nil {
				return nil, err
			}
			plug := conduitplugin.InProcessSDKDestination(c.NewDestination(), conduitPluginConfig(cfg), spec.DestinationParams)
			return conduitplugin.NewDestination(plug, conduitOptions(cfg, ref, spec.DestinationParams, nil)), nil
		}
	}
	return p
}

// moduleVersion is the version of module this binary was built with, ""
// when the binary does not say.
func moduleVersion(module string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path != module {
			continue
		}
		if d.Replace != nil {
			return d.Replace.Version
		}
		return d.Version
	}
	return ""
}

var (
	_ Deleter = (*conduitplugin.Source)(nil)
	_ Deleter = (*conduitplugin.Destination)(nil)
	_ Deleter = (*standaloneSource)(nil)
	_ Deleter = (*standaloneDestination)(nil)
)

func conduitPluginConfig(cfg Config) pconnector.PluginConfig {
	return pconnector.PluginConfig{ConnectorID: cfg.PipelineID + ":" + cfg.ConnectorID}
}

func conduitOptions(cfg Config, ref string, params config.Parameters, sourceDefaults map[string]string) conduitplugin.Options {
	o := conduitplugin.Options{
		PipelineID:     cfg.PipelineID,
		ConnectorID:    cfg.ConnectorID,
		Plugin:         ref,
		Settings:       cfg.Settings,
		Logger:         loggerOf(cfg),
		Params:         params,
		SourceDefaults: sourceDefaults,
	}
	if cfg.State != nil {
		o.State = cfg.State
	}
	return o
}

// postgresPlugin is Conduit's PostgreSQL connector. Its source attaches an
// Avro schema to the records of logical replication unless told not to;
// the runtime keeps records structured, and the schema fails on a row
// whose before image has NULLs, so it is off unless the file turns it on.
func postgresPlugin() Plugin {
	return conduitBuiltin("postgres", "github.com/conduitio/conduit-connector-postgres", postgres.Connector, map[string]string{"logrepl.withAvroSchema": "false"})
}

// kafkaPlugin is Conduit's Kafka connector, with Conduit's defaults: its
// destination writes each record as Conduit's OpenCDC JSON (the SDK's
// sdk.record.format), its source reads each message as a raw payload.
func kafkaPlugin() Plugin {
	return conduitBuiltin("kafka", "github.com/conduitio/conduit-connector-kafka", kafka.Connector, nil)
}

// s3Plugin is Conduit's S3 connector. It has no endpoint setting: like
// every client of the AWS SDK it takes one from AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, which is how it reaches an S3-compatible store.
func s3Plugin() Plugin {
	return conduitBuiltin("s3", "github.com/conduitio/conduit-connector-s3", s3.Connector, nil)
}
