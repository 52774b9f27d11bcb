package connector

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
)

// BuiltinVersion is the version the built-in connectors and processors of
// this package report in their specifications: they have exactly one.
const BuiltinVersion = "v0.1.0"

// Specifications describes the registry's built-in plugins, sorted by
// name, as Conduit's connectors describe themselves. Each Name is the
// plugin's full reference, builtin:name@version, as Conduit lists its
// plugins.
func (r *Registry) Specifications() []pconnector.Specification {
	var out []pconnector.Specification
	for _, p := range r.set.All() {
		var spec pconnector.Specification
		if p.Specification != nil {
			spec = p.Specification()
		} else {
			spec = builtinSpecs[p.Name]
		}
		if !strings.HasPrefix(spec.Version, "v") {
			// A connector compiled in reports "(devel)" or nothing.
			spec.Version = BuiltinVersion
		}
		if spec.Author == "" {
			spec.Author = "conduit"
		}
		if p.NewSource == nil {
			spec.SourceParams = nil
		}
		if p.NewDestination == nil {
			spec.DestinationParams = nil
		}
		spec.Name = "builtin:" + p.Name + "@" + spec.Version
		out = append(out, spec)
	}
	if r.standalone != nil {
		out = append(out, r.standalone.specifications(context.Background())...)
	}
	return out
}

// specifications lists the executables of connectors.path as Conduit
// lists its standalone connectors: standalone:name@version, with the name
// and version of a Conduit connector's specification, or the file's name.
// Asking a connector runs it once; the answer is kept until the file
// changes.
func (h *StandaloneHost) specifications(ctx context.Context) []pconnector.Specification {
	entries, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		return nil
	}
	var out []pconnector.Specification
	for _, e := range entries {
		path, err := filepath.Abs(filepath.Join(h.cfg.Dir, e.Name()))
		if err != nil {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		spec := pconnector.Specification{Name: e.Name(), Version: "unknown"}
		if entry, err := h.conduitName(ctx, path, fi); err == nil && entry.name != "" {
			spec.Name, spec.Version = entry.name, entry.version
			spec.Summary = "Conduit connector " + entry.name + " in " + path
		} else {
			spec.Summary = "standalone connector " + path
		}
		spec.Name = "standalone:" + spec.Name + "@" + spec.Version
		out = append(out, spec)
	}
	return out
}

func param(typ config.ParameterType, def, desc string, required bool) config.Parameter {
	p := config.Parameter{Type: typ, Default: def, Description: desc}
	if required {
		p.Validations = []config.Validation{config.ValidationRequired{}}
	}
	return p
}

var (
	generatorParams = config.Parameters{
		"format.type":         param(config.ParameterTypeString, "structured", "structured (an object with one value per field), raw (the same object as JSON bytes) or file (the content of format.options.path).", false),
		"format.options.*":    param(config.ParameterTypeString, "", "A payload field and its type: int, string, bool, time or duration (an int field named id carries the sequence number).", false),
		"format.options.path": param(config.ParameterTypeFile, "", "format.type file: the file whose content becomes every payload.", false),
		"operations":          param(config.ParameterTypeString, "create", "Comma-separated operations the records cycle through: create, update, delete, snapshot.", false),
		"rate":                param(config.ParameterTypeFloat, "0", "Records per second; 0 is as fast as possible.", false),
		"recordCount":         param(config.ParameterTypeInt, "0", "Stop after this many records in total, across restarts; 0 or -1 is unlimited.", false),
		"readTime":            param(config.ParameterTypeDuration, "", "Deprecated: time to read one record (rate = 1/readTime).", false),
		"burst.sleepTime":     param(config.ParameterTypeDuration, "0", "Pause between bursts; 0 means no bursts.", false),
		"burst.generateTime":  param(config.ParameterTypeDuration, "1s", "Length of a burst (with burst.sleepTime).", false),
	}
	fileDestinationParams = config.Parameters{
		"path":            param(config.ParameterTypeString, "", "The file to append OpenCDC JSON lines to; created if missing.", true),
		"sync":            param(config.ParameterTypeBool, "false", "fsync after every batch.", false),
		"follow-symlinks": param(config.ParameterTypeBool, "false", "Write through a symbolic link at path.", false),
	}
	chaosParams = config.Parameters{
		"fail.on":       param(config.ParameterTypeString, "", "The operation that fails: open, read or ack (source); open or write (destination). Empty: never.", false),
		"fail.after":    param(config.ParameterTypeInt, "0", "Records (or opens) that pass before the first failure.", false),
		"fail.every":    param(config.ParameterTypeInt, "0", "Fail again after this many more; 0 fails every call from then on.", false),
		"fail.duration": param(config.ParameterTypeDuration, "0", "Stop failing this long after the first failure; 0 is no limit.", false),
		"fail.count":    param(config.ParameterTypeInt, "0", "Stop failing after this many failures; 0 is no limit.", false),
		"fail.code":     param(config.ParameterTypeInt, "503", "The error's code, 100-599 (503 is transient, 400 fatal).", false),
		"fail.format":   param(config.ParameterTypeString, "typed", "typed, json or text.", false),
		"fail.message":  param(config.ParameterTypeString, "chaos: injected failure", "The error message.", false),
		"fail.partial":  param(config.ParameterTypeBool, "false", "Destination: a failing write still writes half of its batch.", false),
		"fail.record":   param(config.ParameterTypeBool, "false", "Destination: the error names the record the write stopped at.", false),
	}
)

// builtinSpecs describe the connectors of this package (see the package
// documentation for the details of each setting).
var builtinSpecs = map[string]pconnector.Specification{
	"generator": {
		Summary:      "Generates records, for trying pipelines out and for load tests.",
		SourceParams: generatorParams,
	},
	"file": {
		Summary: "Reads a file line by line and follows it as it grows; appends records to a file as OpenCDC JSON lines.",
		SourceParams: config.Parameters{
			"path": param(config.ParameterTypeString, "", "The file to read.", true),
		},
		DestinationParams: fileDestinationParams,
	},
	"log": {
		Summary: "Logs every record through conduit's logger.",
		DestinationParams: config.Parameters{
			"level":   param(config.ParameterTypeString, "info", "trace, debug, info, warn or error.", false),
			"message": param(config.ParameterTypeString, "record received", "The log message of each entry.", false),
		},
	},
	"chaos": {
		Summary:      "Fails on purpose, to test alerting and recovery: a generator source and a discarding (or file) destination that fail as fail.* says.",
		SourceParams: merged(generatorParams, chaosParams),
		DestinationParams: merged(fileDestinationParams, chaosParams, config.Parameters{
			"path": param(config.ParameterTypeString, "", "Append records to this file as builtin:file does; empty discards them.", false),
		}),
	},
}

// merged is the parameters of all, a later one's taking a key's place.
func merged(all ...config.Parameters) config.Parameters {
	out := config.Parameters{}
	for _, ps := range all {
		maps.Copy(out, ps)
	}
	return out
}
