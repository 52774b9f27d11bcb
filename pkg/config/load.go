package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

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
	// Environ lists the environment as KEY=value; pass os.Environ. Load
	// uses it only to find CONDUIT_ variables it does not know (see
	// Warning). Nil means none are looked for.
	Environ func() []string
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
	registerConduitFlags(fs)
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
	cfg      Config
	origins  map[string]origin
	warnings []Warning
	// conduitFile: the file is Conduit's conduit.yaml, whose unknown keys
	// are collected in ignored instead of refused.
	conduitFile bool
	ignored     []string
}

// Load builds the configuration: defaults, then the file, then environment
// variables, then flags (flag > env > file > default), and validates the
// result, cross-key rules included, so that a configuration the process
// would refuse later is refused before it touches anything. The first
// problem found is returned as a *KeyError naming the file and line, the
// variable or the flag, and the key.
//
// The warnings (unknown CONDUIT_ variables, see Warning) are returned
// whether or not there is an error: a misspelled variable is often the
// reason for the error.
func Load(opts LoadOptions) (Config, []Warning, error) {
	cfg, _, warnings, err := loadWithOrigins(opts)
	return cfg, warnings, err
}

// loadWithOrigins is Load, also saying where each key's value came from
// (a key that is not there has its default).
func loadWithOrigins(opts LoadOptions) (Config, map[string]origin, []Warning, error) {
	var warnings []Warning
	if opts.Environ != nil {
		warnings = unknownEnv(opts.Environ())
	}
	l := &loader{cfg: Default(), origins: make(map[string]origin, len(keyTable))}
	cfg, err := l.load(opts)
	warnings = append(warnings, l.warnings...)
	if err == nil {
		warnings = append(warnings, floorWarnings(cfg)...)
	}
	return cfg, l.origins, warnings, err
}

// floorWarnings says which delays of the global policy and rules are below
// RestartDelayFloor: they load, and their restarts wait the floor.
func floorWarnings(cfg Config) []Warning {
	source := cmp.Or(cfg.ConfigPath, "defaults")
	var out []Warning
	if w := FloorWarning(cfg.Pipelines.ErrorRecovery.BelowFloor()); w != "" {
		out = append(out, Warning{Source: source, Message: "pipelines.error-recovery: " + w})
	}
	for _, r := range cfg.Pipelines.ErrorRecovery.Rules {
		if w := FloorWarning(r.Policy.BelowFloor()); w != "" {
			out = append(out, Warning{Source: fmt.Sprintf("%s:%d", cmp.Or(r.File, source), r.Line), Message: fmt.Sprintf("recovery rule %q: %s", r.Name, w)})
		}
	}
	return out
}

func (l *loader) load(opts LoadOptions) (Config, error) {
	path, err := findConfigFile(opts)
	if err != nil {
		return Config{}, err
	}
	if path != "" {
		l.conduitFile = isConduitFile(path)
		if err := l.loadFile(path); err != nil {
			return Config{}, err
		}
		if len(l.ignored) > 0 {
			l.warnings = append(l.warnings, ignoredWarning(path, l.ignored))
		}
		l.cfg.ConfigPath = path
		l.warnShadowedFile(opts, path)
	}
	// Conduit's name of a key first, so ours wins when both are set.
	aliases := make([]string, 0, len(keyAliases))
	for from := range keyAliases {
		aliases = append(aliases, from)
	}
	sort.Strings(aliases)
	if opts.LookupEnv != nil {
		apply := func(name string, k *key) error {
			if s, ok := opts.LookupEnv(name); ok && s != "" {
				return l.applyText(k, s, origin{rank: rankEnv, source: "env " + name})
			}
			return nil
		}
		for _, from := range aliases {
			if err := apply(EnvVar(from), keyIndex[keyAliases[from]]); err != nil {
				return Config{}, err
			}
		}
		for _, k := range keyTable {
			if err := apply(EnvVar(k.name), &k); err != nil {
				return Config{}, err
			}
		}
	}
	if opts.Flags != nil {
		apply := func(name string, k *key) error {
			if f := opts.Flags.Lookup(name); f != nil && f.Changed {
				return l.applyText(k, f.Value.String(), origin{rank: rankFlag, source: "flag --" + name})
			}
			return nil
		}
		for _, from := range aliases {
			if err := apply(from, keyIndex[keyAliases[from]]); err != nil {
				return Config{}, err
			}
		}
		for _, k := range keyTable {
			if err := apply(k.name, &k); err != nil {
				return Config{}, err
			}
		}
		var ignored []string
		for name := range conduitOnlyKeys {
			if f := opts.Flags.Lookup(name); f != nil && f.Changed {
				ignored = append(ignored, "--"+name)
			}
		}
		if len(ignored) > 0 {
			l.warnings = append(l.warnings, ignoredWarning("flags", ignored))
		}
	}
	l.loopbackForConduitFile(apiAddressKey, func(c *Config) *string { return &c.API.HTTP.Address })
	l.loopbackForConduitFile("api.grpc.address", func(c *Config) *string { return &c.API.GRPC.Address })
	if err := l.crossCheck(); err != nil {
		return Config{}, err
	}
	return l.cfg, nil
}

// warnShadowedFile says that a conduit.yaml beside the conduit.yml that was
// read is not: conduit.yml, this product's own file, takes precedence.
func (l *loader) warnShadowedFile(opts LoadOptions, read string) {
	if filepath.Base(read) != defaultConfigFiles[0] || filepath.Dir(read) != filepath.Dir(filepath.Join(opts.WorkDir, defaultConfigFiles[0])) {
		return
	}
	other := filepath.Join(filepath.Dir(read), ConduitConfigFile)
	if _, err := os.Stat(other); err == nil {
		l.warnings = append(l.warnings, Warning{Source: other, Message: "not read: " + read + " beside it takes precedence (merge the two, or name one with --config.path)"})
	}
}

// loopbackForConduitFile keeps Conduit's default API addresses (":8080",
// ":8084": every interface) from refusing a Conduit workspace: read from a
// conduit.yaml with no api.auth.token, they listen on 127.0.0.1 instead,
// with a warning. Anywhere else, and with a token, the address is used as
// written (and refused without a token, see checkAPIAuth).
func (l *loader) loopbackForConduitFile(name string, field func(*Config) *string) {
	o := l.origins[name]
	addr := field(&l.cfg)
	if o.rank != rankFile || !isConduitFile(o.source) || l.cfg.API.Auth.Token != "" {
		return
	}
	port, ok := allInterfacesHost(*addr)
	if !ok {
		return
	}
	loopback := net.JoinHostPort("127.0.0.1", port)
	l.warnings = append(l.warnings, Warning{Source: o.String(), Message: fmt.Sprintf(
		"%s %s would listen on every interface, and api.auth.token is empty: listening on %s instead (set api.auth.token to listen on every interface)", name, *addr, loopback)})
	*addr = loopback
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
	data, err := readYAMLFile(path)
	if err != nil {
		return &KeyError{Source: path, Err: err}
	}
	roots, err := parseDocuments(data)
	if err != nil {
		var de *docError
		if errors.As(err, &de) {
			return &KeyError{Source: path, Line: de.line, Err: de.err}
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
		full = canonicalKey(full)
		if full == ConfigPathFlag && conduitScalar(p.value) {
			// Conduit's init writes the file's own path into it; the file
			// is already chosen when this is read.
			continue
		}
		if _, ok := conduitOnlyKeys[full]; ok && conduitScalar(p.value) {
			l.ignored = append(l.ignored, full)
			continue
		}
		if (conduitSections[full] || full == "config") && p.value.Kind == yaml.MappingNode {
			if err := l.walk(path, p.value, full, seen); err != nil {
				return err
			}
			continue
		}
		if full == globalRulesKey {
			if first, dup := seen[full]; dup {
				return &KeyError{Source: path, Line: p.key.Line, Key: full, Err: fmt.Errorf("set twice (first at line %d)", first)}
			}
			seen[full] = p.key.Line
			rules, fe := parseRules(p.value, full, path)
			if fe != nil {
				return &KeyError{Source: path, Line: fe.line, Key: fe.field, Err: fe.err}
			}
			l.cfg.Pipelines.ErrorRecovery.Rules = rules
			continue
		}
		if full == notificationTargetsKey {
			if first, dup := seen[full]; dup {
				return &KeyError{Source: path, Line: p.key.Line, Key: full, Err: fmt.Errorf("set twice (first at line %d)", first)}
			}
			seen[full] = p.key.Line
			targets, fe := parseNotificationTargets(p.value, path)
			if fe != nil {
				return &KeyError{Source: path, Line: fe.line, Key: fe.field, Err: fe.err}
			}
			l.cfg.Notifications.Targets = targets
			continue
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
		if l.conduitFile {
			// Conduit ignores keys it does not know; its file may carry
			// keys of a newer Conduit, or of this product's plans.
			l.ignored = append(l.ignored, full)
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
	switch {
	case k.name == "log.level" && v == LogLevelTrace:
		l.warnings = append(l.warnings, Warning{Source: o.String(), Message: "log.level trace is Conduit's; conduit's most verbose level is debug, used instead"})
		v = "debug"
	case k.name == "db.type" && v == DBTypeSQLite:
		return o.keyError(k.name, errors.New("sqlite is Conduit's SQLite store, which this product does not have (its state would not be found there either); use badger (the default, a directory at db.badger.path) or postgres"))
	}
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
	if l.cfg.DB.Type == DBTypePostgres && strings.TrimSpace(l.cfg.DB.Postgres.URL) == "" {
		return l.origins["db.type"].keyError("db.postgres.url", errors.New("required when db.type is postgres (e.g. postgres://conduit@127.0.0.1:5432/conduit)"))
	}
	if l.cfg.Cluster.Enabled && l.cfg.DB.Type != DBTypePostgres {
		return l.origins["cluster.enabled"].keyError("cluster.enabled", fmt.Errorf("needs db.type postgres (the instances share their state there), db.type is %s", l.cfg.DB.Type))
	}
	if t := l.cfg.Notifications.Targets; len(t) > 0 && l.cfg.Cluster.Enabled {
		// Each instance would deliver the whole shared outbox.
		return &KeyError{Source: t[0].File, Line: t[0].Line, Key: notificationTargetsKey, Err: errors.New("not supported with cluster.enabled yet; send notifications from Prometheus alerts (docs/operations.md) instead")}
	}
	er := l.cfg.Pipelines.ErrorRecovery
	if er.MinDelay > er.MaxDelay {
		minKey, maxKey := errorRecoveryPrefix+"min-delay", errorRecoveryPrefix+"max-delay"
		minO, maxO := l.origins[minKey], l.origins[maxKey]
		if maxO.rank > minO.rank {
			return maxO.keyError(maxKey, delayOrderErrorOnMax(er.MinDelay, er.MaxDelay, "is set by "+minO.String()))
		}
		return minO.keyError(minKey, delayOrderError(er.MinDelay, er.MaxDelay, "is set by "+maxO.String()))
	}
	if er.Strategy == StrategySchedule && len(er.Schedule) == 0 {
		key := errorRecoveryPrefix + "strategy"
		return l.origins[key].keyError(key, fmt.Errorf("schedule needs at least one delay in %sschedule", errorRecoveryPrefix))
	}
	for i, rule := range er.Rules {
		if _, err := er.ForRule(rule); err != nil {
			return &KeyError{Source: rule.File, Line: rule.Line, Key: fmt.Sprintf("%s[%d]", globalRulesKey, i), Err: err}
		}
	}
	if err := l.checkSchemaRegistry(); err != nil {
		return err
	}
	return l.checkAPIAuth()
}

// checkSchemaRegistry refuses a Confluent registry conduit could not reach
// or log in to: the avro processors would only fail once records flow.
func (l *loader) checkSchemaRegistry() error {
	const (
		typeKey = "schema-registry.type"
		urlKey  = "schema-registry.confluent.connection-string"
		authKey = "schema-registry.confluent.auth.type"
	)
	sr := l.cfg.SchemaRegistry
	if sr.Type != SchemaRegistryConfluent {
		return nil
	}
	if sr.Confluent.ConnectionString == "" {
		return l.origins[typeKey].keyError(typeKey, fmt.Errorf("is confluent, and %s is empty: set it to the registry's URL (%s)", urlKey, EnvVar(urlKey)))
	}
	if u, err := url.Parse(sr.Confluent.ConnectionString); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return l.origins[urlKey].keyError(urlKey, errors.New("is not an http:// or https:// URL"))
	}
	auth := sr.Confluent.Auth
	switch {
	case auth.Type == SchemaRegistryAuthBasic && auth.Basic.Username == "":
		return l.origins[authKey].keyError(authKey, errors.New("is basic, and schema-registry.confluent.auth.basic.username is empty"))
	case auth.Type == SchemaRegistryAuthBearer && auth.Bearer.Token == "":
		return l.origins[authKey].keyError(authKey, errors.New("is bearer, and schema-registry.confluent.auth.bearer.token is empty"))
	}
	return nil
}

// globalRulesKey holds the global recovery rules: a list, written in the
// file only (no environment variable or flag).
const globalRulesKey = errorRecoveryPrefix + "rules"

// Keys of the API's address and token, whose values are checked together.
const (
	apiAddressKey = "api.http.address"
	apiTokenKey   = "api.auth.token"
)

// minRemoteTokenLength is the shortest token accepted on an address other
// machines can reach: shorter ones are guessed by trying.
const minRemoteTokenLength = 16

// checkAPIAuth refuses an API that anyone on the network could use, and
// tokens that cannot work. The API server refuses the same on its own, but
// only after the store was opened and events were written; here the
// process stops before it touches anything. Errors never contain the
// token.
func (l *loader) checkAPIAuth() error {
	api := l.cfg.API
	token, tokenO := api.Auth.Token, l.origins[apiTokenKey]
	if err := checkTokenText(token); err != nil {
		return tokenO.keyError(apiTokenKey, err)
	}
	if !api.Enabled || isLoopbackAddress(api.HTTP.Address) {
		return nil
	}
	addrO := l.origins[apiAddressKey]
	if token == "" {
		return addrO.keyError(apiAddressKey, fmt.Errorf(
			"%s is not a loopback address and api.auth.token is empty, so anyone who can reach it could stop pipelines; set api.auth.token (%s), or listen on 127.0.0.1",
			api.HTTP.Address, EnvVar(apiTokenKey)))
	}
	if n := utf8.RuneCountInString(token); n < minRemoteTokenLength {
		return tokenO.keyError(apiTokenKey, fmt.Errorf(
			"is %d characters long; on the non-loopback address %s (api.http.address, %s) it must have at least %d",
			n, api.HTTP.Address, addrO, minRemoteTokenLength))
	}
	return nil
}

// checkTokenText refuses a token that no client could send as it is: HTTP
// trims white space around a header value and a bearer token has none
// inside. Surrounding white space is most often the newline at the end of
// the file the secret was read from.
func checkTokenText(token string) error {
	if token == "" {
		return nil
	}
	if strings.TrimFunc(token, unicode.IsSpace) != token {
		return errors.New("starts or ends with white space (often the newline of the file the secret came from); remove it")
	}
	if strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errors.New("contains white space or a control character, which a bearer token cannot carry")
	}
	return nil
}

// isLoopbackAddress reports whether host:port names an address only this
// machine can reach: an IP in 127.0.0.0/8, ::1, or the name localhost.
// Everything else, an empty host (all interfaces) included, is reachable
// from elsewhere.
func isLoopbackAddress(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	// As the API server reads it: any case of localhost.
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
