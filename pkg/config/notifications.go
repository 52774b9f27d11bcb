package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Notification target kinds (notifications.targets[].kind).
const (
	NotifyWebhook   = "webhook"
	NotifySlack     = "slack"
	NotifyPagerDuty = "pagerduty"
)

// Notification severities, lowest first (notifications.targets[].min-severity).
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// NotificationEvents are the events a target may choose
// (notifications.targets[].events), in the order of a pipeline's trouble.
var NotificationEvents = []string{"degraded", "recovering-long", "flapping", "breaker-opened", "breaker-closed",
	"dead-lettered", "recovered"}

// PagerDutyEventsURL is where pagerduty targets send unless url-env names
// another endpoint (PagerDuty's EU service region, a relay).
const PagerDutyEventsURL = "https://events.pagerduty.com/v2/enqueue"

// notificationTargetsKey holds the targets: a list, written in the file
// only (no environment variable or flag); their secrets come from the
// environment variables they name.
const notificationTargetsKey = "notifications.targets"

// NotificationTarget is one place notifications go. Its secrets (the
// webhook URL, PagerDuty's routing key) are not in the configuration: it
// names the environment variables that hold them, read by Resolve when
// conduit starts, so that the file can be shared and shown.
type NotificationTarget struct {
	Name string
	// Kind is NotifyWebhook, NotifySlack or NotifyPagerDuty.
	Kind string
	// URLEnv names the variable holding the URL to POST to (required
	// except for pagerduty, where it replaces PagerDutyEventsURL).
	URLEnv string
	// RoutingKeyEnv names the variable holding PagerDuty's integration
	// (routing) key; pagerduty only.
	RoutingKeyEnv string
	// Events are the events sent (NotificationEvents); empty: all.
	Events []string
	// Pipelines are globs (path.Match) on pipeline ids; empty: all.
	Pipelines []string
	// MinSeverity drops what is less severe; empty: info (everything).
	MinSeverity string
	// File and Line say where the target is written, for errors.
	File string
	Line int
}

// ResolvedTarget is a target with its secrets read from the environment.
// Its String and GoString hide them, so that printing it by mistake leaks
// nothing.
type ResolvedTarget struct {
	NotificationTarget
	URL        Secret
	RoutingKey Secret
}

// Secret is text that is never printed: String, GoString and the JSON and
// YAML forms are Masked. Reveal gives the text to the one place that sends
// it.
type Secret struct{ s string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{s} }

// Reveal returns the text.
func (s Secret) Reveal() string { return s.s }

func (s Secret) String() string                { return Masked }
func (s Secret) GoString() string              { return Masked }
func (s Secret) MarshalJSON() ([]byte, error)  { return []byte(`"` + Masked + `"`), nil }
func (s Secret) MarshalYAML() (any, error)     { return Masked, nil }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(Masked), nil }
func (s Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(Masked)) }

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Resolve reads the target's secrets from the environment (pass
// os.LookupEnv). The error names the file, line and key of the target.
func (t NotificationTarget) Resolve(lookupEnv func(string) (string, bool)) (ResolvedTarget, error) {
	r := ResolvedTarget{NotificationTarget: t}
	read := func(field, name string) (string, error) {
		v, ok := "", false
		if lookupEnv != nil {
			v, ok = lookupEnv(name)
		}
		if !ok || strings.TrimSpace(v) == "" {
			return "", t.keyError(field, fmt.Errorf("environment variable %s is not set (it holds the target's secret, which the file does not)", name))
		}
		return strings.TrimSpace(v), nil
	}
	u := PagerDutyEventsURL
	if t.URLEnv != "" {
		v, err := read("url-env", t.URLEnv)
		if err != nil {
			return r, err
		}
		if err := checkNotifyURL(v); err != nil {
			return r, t.keyError("url-env", fmt.Errorf("environment variable %s: %w", t.URLEnv, err))
		}
		u = v
	}
	r.URL = NewSecret(u)
	if t.Kind == NotifyPagerDuty {
		v, err := read("routing-key-env", t.RoutingKeyEnv)
		if err != nil {
			return r, err
		}
		r.RoutingKey = NewSecret(v)
	}
	return r, nil
}

func (t NotificationTarget) keyError(field string, err error) *KeyError {
	return &KeyError{Source: t.File, Line: t.Line, Key: fmt.Sprintf("%s[%s].%s", notificationTargetsKey, t.Name, field), Err: err}
}

// checkNotifyURL accepts any https URL (the operator's webhook, wherever
// it is) and http only to a loopback address (a relay on the same host):
// a webhook URL is a credential, and plain http would send it in clear
// across the network. The URL itself is never quoted back: it is a secret.
func checkNotifyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return errors.New("is not a URL (https://...)")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return errors.New("is an http:// URL to another host; use https:// (http is allowed to loopback only)")
	}
	return errors.New("is not an http:// or https:// URL")
}

// notificationTargetKeys are the fields of a target.
var notificationTargetKeys = []string{"name", "kind", "url-env", "routing-key-env", "events", "pipelines", "min-severity"}

// parseNotificationTargets reads notifications.targets; file is the file
// it is in.
func parseNotificationTargets(n *yaml.Node, file string) ([]NotificationTarget, *fieldErr) {
	n = unalias(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n.Line, notificationTargetsKey, "expected a list of targets, got %s", describe(n))
	}
	out := make([]NotificationTarget, 0, len(n.Content))
	names := map[string]int{}
	for i, item := range n.Content {
		field := fmt.Sprintf("%s[%d]", notificationTargetsKey, i)
		t, fe := parseNotificationTarget(unalias(item), field, file)
		if fe != nil {
			return nil, fe
		}
		if first, dup := names[t.Name]; dup {
			return nil, errAt(t.Line, field+".name", "%q is used twice (first at line %d); names must be unique", t.Name, first)
		}
		names[t.Name] = t.Line
		out = append(out, t)
	}
	return out, nil
}

var targetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func parseNotificationTarget(n *yaml.Node, field, file string) (NotificationTarget, *fieldErr) {
	t := NotificationTarget{File: file, Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return t, errAt(n.Line, field, "expected a target (a map with name, kind and url-env), got %s", describe(n))
	}
	str := func(v *yaml.Node, f string) (string, *fieldErr) {
		x, err := parseNode(KindString, v)
		if err != nil {
			return "", &fieldErr{line: v.Line, field: f, err: err}
		}
		return x.(string), nil
	}
	envName := func(v *yaml.Node, f string) (string, *fieldErr) {
		s, fe := str(v, f)
		if fe == nil && !envNameRE.MatchString(s) {
			fe = errAt(v.Line, f, "%q is not an environment variable name; write the variable's name (SLACK_WEBHOOK_URL), never the secret itself", s)
		}
		return s, fe
	}
	var fe *fieldErr
	for _, p := range pairs(n) {
		name, v, f := p.key.Value, p.value, field+"."+p.key.Value
		switch name {
		case "name":
			t.Name, fe = str(v, f)
			if fe == nil && !targetNameRE.MatchString(t.Name) {
				fe = errAt(v.Line, f, "%q: use lowercase letters, digits, '.', '_' and '-' (at most 63)", t.Name)
			}
		case "kind":
			t.Kind, fe = str(v, f)
			if fe == nil {
				if err := oneOf(NotifyWebhook, NotifySlack, NotifyPagerDuty)(t.Kind); err != nil {
					fe = &fieldErr{line: v.Line, field: f, err: err}
				}
			}
		case "url-env":
			t.URLEnv, fe = envName(v, f)
		case "routing-key-env":
			t.RoutingKeyEnv, fe = envName(v, f)
		case "events":
			t.Events, fe = parseNames(v, f, NotificationEvents)
		case "pipelines":
			t.Pipelines, fe = parseGlobs(v, f)
		case "min-severity":
			t.MinSeverity, fe = str(v, f)
			if fe == nil {
				if err := oneOf(SeverityInfo, SeverityWarning, SeverityCritical)(t.MinSeverity); err != nil {
					fe = &fieldErr{line: v.Line, field: f, err: err}
				}
			}
		case "url", "routing-key":
			fe = errAt(p.key.Line, f, "secrets are not written in the file: put it in an environment variable and name that in %s-env", name)
		default:
			fe = &fieldErr{line: p.key.Line, field: f, err: unknownNameError("field", name, notificationTargetKeys)}
		}
		if fe != nil {
			return t, fe
		}
	}
	switch {
	case t.Name == "":
		return t, errAt(n.Line, field+".name", "required: a name for the target, used by `conduit notifications test NAME`")
	case t.Kind == "":
		return t, errAt(n.Line, field+".kind", "required: webhook, slack or pagerduty")
	case t.URLEnv == "" && t.Kind != NotifyPagerDuty:
		return t, errAt(n.Line, field+".url-env", "required: the environment variable holding the %s URL", t.Kind)
	case t.Kind == NotifyPagerDuty && t.RoutingKeyEnv == "":
		return t, errAt(n.Line, field+".routing-key-env", "required for pagerduty: the environment variable holding the integration's routing key")
	case t.Kind != NotifyPagerDuty && t.RoutingKeyEnv != "":
		return t, errAt(n.Line, field+".routing-key-env", "only pagerduty targets have a routing key")
	}
	return t, nil
}

// parseNames reads a list of names from known (a single name may be
// written without brackets).
func parseNames(n *yaml.Node, field string, known []string) ([]string, *fieldErr) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		n = &yaml.Node{Kind: yaml.SequenceNode, Line: n.Line, Content: []*yaml.Node{n}}
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, errAt(n.Line, field, "expected a list such as [%s], got %s", strings.Join(known[:2], ", "), describe(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = unalias(item)
		f := fmt.Sprintf("%s[%d]", field, i)
		if item.Kind != yaml.ScalarNode || !contains(known, item.Value) {
			return nil, &fieldErr{line: item.Line, field: f, err: unknownNameError("event", item.Value, known)}
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// PipelineNotifications is a pipeline file's notifications block: which
// of conduit.yml's targets hear of the pipeline (Targets; empty: all) and
// of which events (Events; empty: those each target asks for). It only
// narrows: a target's own events, pipelines and min-severity still apply.
type PipelineNotifications struct {
	Targets []string `json:"targets,omitempty"`
	Events  []string `json:"events,omitempty"`
	// Line is the line of the block, for errors about its targets.
	Line int `json:"-"`
}

// CheckTargets says which of n's targets conduit.yml does not define.
func (n PipelineNotifications) CheckTargets(defined []NotificationTarget) error {
	names := make([]string, len(defined))
	for i, t := range defined {
		names[i] = t.Name
	}
	for i, name := range n.Targets {
		if !contains(names, name) {
			if len(names) == 0 {
				return &FieldError{Field: fmt.Sprintf("notifications.targets[%d]", i), Err: fmt.Errorf("no notification target %q: conduit.yml defines none (notifications.targets)", name)}
			}
			return &FieldError{Field: fmt.Sprintf("notifications.targets[%d]", i), Err: fmt.Errorf("no notification target %q in conduit.yml (it defines %s)", name, strings.Join(names, ", "))}
		}
	}
	return nil
}

func parsePipelineNotifications(n *yaml.Node, field string) (PipelineNotifications, *fieldErr) {
	var out PipelineNotifications
	if isNull(n) {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		return out, errAt(n.Line, field, "expected a map (targets, events), got %s", describe(n))
	}
	out.Line = n.Line
	for _, kv := range pairs(n) {
		key, v := kv.key.Value, unalias(kv.value)
		f := field + "." + key
		switch key {
		case "targets":
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
				v = &yaml.Node{Kind: yaml.SequenceNode, Line: v.Line, Content: []*yaml.Node{v}}
			}
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				return out, errAt(v.Line, f, "expected a list of target names such as [oncall], got %s", describe(v))
			}
			for i, item := range v.Content {
				item = unalias(item)
				if item.Kind != yaml.ScalarNode || !targetNameRE.MatchString(item.Value) {
					return out, errAt(item.Line, fmt.Sprintf("%s[%d]", f, i), "expected the name of a target of conduit.yml's notifications.targets, got %s", describe(item))
				}
				out.Targets = append(out.Targets, item.Value)
			}
		case "events":
			events, fe := parseNames(v, f, NotificationEvents)
			if fe != nil {
				return out, fe
			}
			out.Events = events
		default:
			return out, errAt(kv.key.Line, f, "unknown key (the keys are targets and events)")
		}
	}
	return out, nil
}
