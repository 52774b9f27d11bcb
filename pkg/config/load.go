package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// LoadOptions are the inputs of Load. Everything the loader reads from the
// process is passed in, so tests need no real environment or directory.
type LoadOptions struct {
	// Flags are parsed command-line flags, registered with RegisterFlags.
	// Only flags the user set (pflag's Changed) override. Nil means none.
	Flags *pflag.FlagSet
	// LookupEnv reads environment variables; pass os.LookupEnv. Nil means
	// no environment. A variable that is set but empty counts as unset, so
	// `CONDUIT_LOG_LEVEL=` in a compose file does not break startup.
	LookupEnv func(string) (string, bool)
	// WorkDir is where conduit.yml / conduit.yaml are looked for and what a
	// relative --config.path is relative to. "" means the process's working
	// directory.
	WorkDir string
}

// Candidate file names, in the order they are tried when --config.path is
// not given. Only the first one that exists is read.
var defaultConfigFiles = []string{"conduit.yml", "conduit.yaml"}

// RegisterFlags adds a flag for every key (named like the key, e.g.
// --pipelines.error-recovery.min-delay) and --config.path to fs.
//
// The flags keep the text the user typed; Load parses and validates it, so a
// bad flag value gets the same kind of error as a bad file value.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String(ConfigPathFlag, "",
		fmt.Sprintf("configuration file (default: ./conduit.yml, else ./conduit.yaml, else none) (env %s)", ConfigPathEnv))
	for _, k := range keyTable {
		def := formatValue(k.def)
		f := fs.VarPF(&textValue{text: def, kind: k.kind}, k.name, "", fmt.Sprintf("%s (env %s)", k.doc, EnvVar(k.name)))
		f.DefValue = def
		if k.kind == KindBool {
			f.NoOptDefVal = "true" // --api.enabled alone means true
		}
	}
}

// textValue is a pflag.Value that stores the raw text.
type textValue struct {
	text string
	kind Kind
}

func (v *textValue) String() string     { return v.text }
func (v *textValue) Set(s string) error { v.text = s; return nil }
func (v *textValue) Type() string       { return v.kind.String() }

// rank orders the sources of a value; a higher rank wins.
type rank int

const (
	rankDefault rank = iota
	rankFile
	rankEnv
	rankFlag
)

// origin records where a key's current value came from, so a cross-field
// error can point at the value the user actually wrote.
type origin struct {
	rank   rank
	source string
	line   int
}

func (o origin) String() string {
	switch {
	case o.rank == rankDefault:
		return "default"
	case o.line > 0:
		return fmt.Sprintf("%s:%d", o.source, o.line)
	default:
		return o.source
	}
}

func (o origin) keyError(key string, err error) *KeyError {
	src := o.source
	if o.rank == rankDefault {
		src = "default"
	}
	return &KeyError{Source: src, Line: o.line, Key: key, Err: err}
}

type loader struct {
	cfg     Config
	origins map[string]origin
}

// Load builds the configuration: defaults, then the file, then environment
// variables, then flags (flag > env > file > default), and validates the
// result. The first problem found is returned as a *KeyError naming the
// file and line, the variable or the flag, and the key.
func Load(opts LoadOptions) (Config, error) {
	l := &loader{cfg: Default(), origins: make(map[string]origin, len(keyTable))}

	path, err := findConfigFile(opts)
	if err != nil {
		return Config{}, err
	}
	if path != "" {
		if err := l.loadFile(path); err != nil {
			return Config{}, err
		}
		l.cfg.ConfigPath = path
	}
	if opts.LookupEnv != nil {
		for _, k := range keyTable {
			name := EnvVar(k.name)
			if s, ok := opts.LookupEnv(name); ok && s != "" {
				if err := l.applyText(&k, s, origin{rank: rankEnv, source: "env " + name}); err != nil {
					return Config{}, err
				}
			}
		}
	}
	if opts.Flags != nil {
		for _, k := range keyTable {
			if f := opts.Flags.Lookup(k.name); f != nil && f.Changed {
				if err := l.applyText(&k, f.Value.String(), origin{rank: rankFlag, source: "flag --" + k.name}); err != nil {
					return Config{}, err
				}
			}
		}
	}
	if err := l.crossCheck(); err != nil {
		return Config{}, err
	}
	return l.cfg, nil
}

// findConfigFile returns the file to read: --config.path, else
// CONDUIT_CONFIG_PATH, else the first of defaultConfigFiles in WorkDir that
// exists, else "". A file named explicitly must exist; a missing default
// file just means defaults.
func findConfigFile(opts LoadOptions) (string, error) {
	var explicit, source string
	if opts.Flags != nil {
		if f := opts.Flags.Lookup(ConfigPathFlag); f != nil && f.Changed && f.Value.String() != "" {
			explicit, source = f.Value.String(), "flag --"+ConfigPathFlag
		}
	}
	if explicit == "" && opts.LookupEnv != nil {
		if s, ok := opts.LookupEnv(ConfigPathEnv); ok && s != "" {
			explicit, source = s, "env "+ConfigPathEnv
		}
	}
	if explicit != "" {
		path := explicit
		if !filepath.IsAbs(path) && opts.WorkDir != "" {
			path = filepath.Join(opts.WorkDir, path)
		}
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", &KeyError{Source: source, Key: ConfigPathFlag, Err: fmt.Errorf("configuration file %q does not exist", path)}
		case err != nil:
			return "", &KeyError{Source: source, Key: ConfigPathFlag, Err: err}
		case st.IsDir():
			return "", &KeyError{Source: source, Key: ConfigPathFlag, Err: fmt.Errorf("%q is a directory, not a configuration file", path)}
		}
		return path, nil
	}
	for _, name := range defaultConfigFiles {
		path := name
		if opts.WorkDir != "" {
			path = filepath.Join(opts.WorkDir, name)
		}
		_, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// Exists but cannot be inspected: ignoring it would silently
			// run with defaults the user did not choose.
			return "", &KeyError{Source: path, Err: err}
		}
		return path, nil
	}
	return "", nil
}

func (l *loader) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &KeyError{Source: path, Err: err}
	}
	roots, err := parseDocuments(data)
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			return &KeyError{Source: path, Line: se.line, Err: se}
		}
		return &KeyError{Source: path, Err: err}
	}
	switch {
	case len(roots) == 0:
		return nil // empty, or only comments
	case len(roots) > 1:
		return &KeyError{Source: path, Line: roots[1].Line, Err: errors.New("more than one YAML document; the configuration file holds one")}
	}
	root := roots[0]
	if root.Kind != yaml.MappingNode {
		return &KeyError{Source: path, Line: root.Line, Err: fmt.Errorf("expected a map of keys at the top level, got %s", describe(root))}
	}
	return l.walk(path, root, "", map[string]int{})
}

// walk applies the keys of mapping m, whose dotted prefix is prefix. Nested
// maps and dotted names (`log.level: debug` at the top) both work, because
// each is resolved to its full dotted name before the lookup.
func (l *loader) walk(path string, m *yaml.Node, prefix string, seen map[string]int) error {
	for _, p := range pairs(m) {
		if p.key.Kind != yaml.ScalarNode {
			return &KeyError{Source: path, Line: p.key.Line, Key: prefix, Err: fmt.Errorf("expected a key name, got %s", describe(p.key))}
		}
		full := p.key.Value
		if prefix != "" {
			full = prefix + "." + full
		}
		if k, ok := keyIndex[full]; ok {
			if first, dup := seen[full]; dup {
				return &KeyError{Source: path, Line: p.key.Line, Key: full, Err: fmt.Errorf("set twice (first at line %d)", first)}
			}
			seen[full] = p.key.Line
			v, err := parseNode(k.kind, p.value)
			if err != nil {
				return &KeyError{Source: path, Line: p.value.Line, Key: full, Err: err}
			}
			if err := l.apply(k, v, origin{rank: rankFile, source: path, line: p.value.Line}); err != nil {
				return err
			}
			continue
		}
		if children, ok := sections[full]; ok {
			switch {
			case p.value.Kind == yaml.MappingNode:
				if err := l.walk(path, p.value, full, seen); err != nil {
					return err
				}
			case isNull(p.value):
				// "db:" with everything below commented out: nothing set.
			default:
				return &KeyError{Source: path, Line: p.value.Line, Key: full,
					Err: fmt.Errorf("expected a map of keys (%s), got %s", strings.Join(children, ", "), describe(p.value))}
			}
			continue
		}
		return &KeyError{Source: path, Line: p.key.Line, Key: full, Err: unknownNameError("key", full, knownNames())}
	}
	return nil
}

func (l *loader) applyText(k *key, s string, o origin) error {
	v, err := parseText(k.kind, s)
	if err != nil {
		return o.keyError(k.name, err)
	}
	return l.apply(k, v, o)
}

func (l *loader) apply(k *key, v any, o origin) error {
	if k.check != nil {
		if err := k.check(v); err != nil {
			return o.keyError(k.name, err)
		}
	}
	k.set(&l.cfg, v)
	l.origins[k.name] = o
	return nil
}

// crossCheck validates rules that involve more than one key. The error
// names the key whose value came from the highest-precedence source (the
// one most recently written by the user), and says where the other came
// from.
func (l *loader) crossCheck() error {
	er := l.cfg.Pipelines.ErrorRecovery
	if er.MinDelay > er.MaxDelay {
		minKey, maxKey := errorRecoveryPrefix+"min-delay", errorRecoveryPrefix+"max-delay"
		minO, maxO := l.origins[minKey], l.origins[maxKey]
		if maxO.rank > minO.rank {
			return maxO.keyError(maxKey, delayOrderErrorOnMax(er.MinDelay, er.MaxDelay, "is set by "+minO.String()))
		}
		return minO.keyError(minKey, delayOrderError(er.MinDelay, er.MaxDelay, "is set by "+maxO.String()))
	}
	return nil
}
