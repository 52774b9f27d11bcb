package conduitplugin

import (
	"errors"
	"slices"
	"strings"

	"github.com/conduitio/conduit-commons/config"

	"github.com/conduitry/conduit/pkg/plugin"
)

// ValidateSettings checks settings against a connector's parameters (its
// specification's SourceParams or DestinationParams) as the connector's own
// Configure would: types, required values, validations, and no unknown
// keys. The error names the first wrong setting (*plugin.SettingError),
// in a stable order: parameters by name, then unknown keys.
func ValidateSettings(params config.Parameters, settings map[string]string) error {
	cfg := config.Config(settings).Sanitize()
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		one := config.Parameters{name: params[name]}
		sub := config.Config{}
		for k, v := range cfg {
			if k == name || (strings.Contains(name, "*") && matchWildcard(k, name)) {
				sub[k] = v
			}
		}
		if err := sub.ApplyDefaults(one).Validate(one); err != nil {
			return &plugin.SettingError{Setting: name, Err: errors.New(validationText(name, err))}
		}
	}
	var unknown []string
	for k := range cfg {
		if !known(params, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	msg := "unknown setting"
	for _, name := range names {
		if strings.EqualFold(name, unknown[0]) {
			msg += ` (did you mean "` + name + `"?)`
			break
		}
	}
	return &plugin.SettingError{Setting: unknown[0], Err: errors.New(msg + "; known settings: " + strings.Join(names, ", "))}
}

func known(params config.Parameters, key string) bool {
	if _, ok := params[key]; ok {
		return true
	}
	for name := range params {
		if strings.Contains(name, "*") && matchWildcard(key, name) {
			return true
		}
	}
	return false
}

// matchWildcard reports whether key matches a parameter name with "*"
// segments, each standing for one dot-free part ("tables.*.columns").
func matchWildcard(key, pattern string) bool {
	ks, ps := strings.Split(key, "."), strings.Split(pattern, ".")
	if len(ks) != len(ps) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != ks[i] {
			return false
		}
	}
	return true
}

// validationText is a validation error without the "error validating
// "name": " that every line of it starts with: the caller names the
// setting already.
func validationText(name string, err error) string {
	prefix := `error validating "` + name + `": `
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "; ")
}
