package config

import (
	"cmp"
	"fmt"
	"strings"
)

// Setting is a global key's effective value and where it came from, as
// `conduit config` shows them.
type Setting struct {
	// Key is the dotted key, e.g. "log.level".
	Key string
	// Value is the value as a user would write it (durations as 1m), with
	// credentials masked as a pipeline's Definition masks them.
	Value string
	// Source is where the value came from: "default", the file and line
	// ("conduit.yml:12"), "env CONDUIT_LOG_LEVEL" or "flag --log.level".
	Source string
}

// configPathSource says how the configuration file was chosen.
func configPathSource(opts LoadOptions, path string) string {
	if opts.Flags != nil {
		if f := opts.Flags.Lookup(ConfigPathFlag); f != nil && f.Changed && f.Value.String() != "" {
			return "flag --" + ConfigPathFlag
		}
	}
	if opts.LookupEnv != nil {
		if s, ok := opts.LookupEnv(ConfigPathEnv); ok && s != "" {
			return "env " + ConfigPathEnv
		}
	}
	if path != "" {
		return "default (found in the working directory)"
	}
	return "default (no file found)"
}

// Settings loads the configuration as Load does (same inputs, same
// errors and warnings) and returns every key's effective value with where
// it came from: config.path first, the keys in the key table's order,
// then the global recovery rules when there are any.
func Settings(opts LoadOptions) ([]Setting, Config, []Warning, error) {
	cfg, origins, warnings, err := loadWithOrigins(opts)
	if err != nil {
		return nil, cfg, warnings, err
	}
	out := make([]Setting, 0, len(keyTable)+2)
	out = append(out, Setting{Key: ConfigPathFlag, Value: cfg.ConfigPath, Source: configPathSource(opts, cfg.ConfigPath)})
	for _, k := range keyTable {
		out = append(out, Setting{
			Key:    k.name,
			Value:  MaskSetting(k.name, formatValue(k.get(&cfg))),
			Source: origins[k.name].String(),
		})
	}
	if rules := cfg.Pipelines.ErrorRecovery.Rules; len(rules) > 0 {
		names := make([]string, len(rules))
		for i, r := range rules {
			names[i] = r.Name
		}
		first := rules[0]
		out = append(out, Setting{
			Key:    globalRulesKey,
			Value:  "[" + strings.Join(names, ", ") + "]",
			Source: fmt.Sprintf("%s:%d", cmp.Or(first.File, cfg.ConfigPath), first.Line),
		})
	}
	if targets := cfg.Notifications.Targets; len(targets) > 0 {
		// Names and kinds only: the URLs and keys are in the environment.
		names := make([]string, len(targets))
		for i, t := range targets {
			names[i] = t.Name + " (" + t.Kind + ")"
		}
		out = append(out, Setting{
			Key:    notificationTargetsKey,
			Value:  "[" + strings.Join(names, ", ") + "]",
			Source: fmt.Sprintf("%s:%d", cmp.Or(targets[0].File, cfg.ConfigPath), targets[0].Line),
		})
	}
	return out, cfg, warnings, nil
}
