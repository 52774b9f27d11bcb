package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/conduitry/conduit/pkg/config"
)

func newConfigCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration `conduit run` would use, and where each value comes from",
		Long: `Config reads the configuration as "conduit run" does - the defaults, then the
configuration file (conduit.yml, else Conduit's conduit.yaml, or --config.path),
then CONDUIT_ variables, then flags - and prints every key's value, as
Conduit's "conduit config" does ("key: value" lines), followed by where the
value came from: default, file:line, env VARIABLE or flag --key.
Credentials are masked. It refuses what "conduit run" would refuse, with the
same error; it needs no running conduit.`,
		Example: `  conduit config
  conduit config --log.level debug | grep '^log\.'
  conduit config --json | jq -r '."api.http.address".source'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, _, warnings, err := config.Settings(config.LoadOptions{Flags: cmd.Flags(), LookupEnv: os.LookupEnv, Environ: os.Environ})
			for _, w := range warnings {
				fmt.Fprintf(humanOutput(cmd.ErrOrStderr()), "warning: %s\n", w)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeSettingsJSON(cmd.OutOrStdout(), settings)
			}
			return writeSettings(humanOutput(cmd.OutOrStdout()), settings)
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// writeSettings writes "key: value" lines, as Conduit's `conduit config`
// does, with the source of each value as a comment aligned after it: the
// output stays YAML (the comments aside, a mapping of the keys to their
// values) and a line still splits into key and value at ": ".
func writeSettings(w io.Writer, settings []config.Setting) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range settings {
		fmt.Fprintf(tw, "%s: %s\t# %s\n", s.Key, yamlScalar(s.Value), oneLine(s.Source))
	}
	return tw.Flush()
}

// yamlScalar is s as a YAML value that reads back as s: as it is when
// that is so, quoted otherwise ("" for empty). A list of durations
// ([1m, 1h]) is left as YAML's list.
func yamlScalar(s string) string {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return s
	}
	var back string
	if s != "" && !strings.ContainsAny(s, "#\n\t") && yaml.Unmarshal([]byte("v: "+s), &struct {
		V *string `yaml:"v"`
	}{&back}) == nil && back == s {
		return s
	}
	q, _ := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
	return string(q)
}

// settingJSON is one key of `config --json`.
type settingJSON struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

// writeSettingsJSON writes {"key": {"value": ..., "source": ...}} for
// every key, so that a script reads one with ."log.level".value.
func writeSettingsJSON(w io.Writer, settings []config.Setting) error {
	m := make(map[string]settingJSON, len(settings))
	for _, s := range settings {
		m[s.Key] = settingJSON{Value: s.Value, Source: s.Source}
	}
	return writeIndentedJSON(w, m)
}
