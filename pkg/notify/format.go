package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/conduitry/conduit/pkg/config"
)

// group is the entries of one kind to one target that one message covers.
type group struct {
	kind    Kind
	entries []entry
}

// subjects returns the distinct pipelines (or dependencies) of the group,
// in order.
func (g group) subjects() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range g.entries {
		if s := e.subject(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// severity is the highest of the group's.
func (g group) severity() Severity {
	s := SeverityInfo
	for _, e := range g.entries {
		s = max(s, parseSeverity(e.Severity))
	}
	return s
}

// summary is the group's one line: the entry's own when it is alone.
func (g group) summary() string {
	if len(g.entries) == 1 {
		return g.entries[0].Summary
	}
	n := len(g.subjects())
	what := "pipelines"
	if g.kind == KindBreakerOpened || g.kind == KindBreakerClosed {
		what = "dependencies"
	}
	switch g.kind {
	case KindDegraded:
		return fmt.Sprintf("%d %s degraded", n, what)
	case KindRecoveringLong:
		return fmt.Sprintf("%d %s recovering for long", n, what)
	case KindFlapping:
		return fmt.Sprintf("%d %s flapping", n, what)
	case KindBreakerOpened:
		return fmt.Sprintf("%d dependency breakers opened", n)
	case KindBreakerClosed:
		return fmt.Sprintf("%d dependency breakers closed", n)
	case KindDeadLettered:
		return fmt.Sprintf("records dead-lettered in %d pipelines (%d events)", n, len(g.entries))
	case KindRecovered:
		return fmt.Sprintf("%d %s recovered", n, what)
	}
	return fmt.Sprintf("%d %s: %s", n, what, g.kind)
}

// request is one HTTP POST to a target.
type request struct {
	body []byte
}

// webhookBody is the generic JSON webhook's body: the group with its
// first entries, each with its audit event.
type webhookBody struct {
	Source   string `json:"source"`
	Kind     Kind   `json:"kind"`
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	// Count is how many notifications the message covers; Pipelines the
	// first max-listed pipelines (or dependencies) and Omitted how many
	// more there are.
	Count         int         `json:"count"`
	Pipelines     []string    `json:"pipelines"`
	Omitted       int         `json:"omitted,omitempty"`
	Notifications []entryJSON `json:"notifications"`
	Test          bool        `json:"test,omitempty"`
}

type entryJSON struct {
	Time       time.Time `json:"time"`
	Pipeline   string    `json:"pipeline,omitempty"`
	Dependency string    `json:"dependency,omitempty"`
	Canary     string    `json:"canary,omitempty"`
	Summary    string    `json:"summary"`
	Hint       string    `json:"hint,omitempty"`
	Event      *Event    `json:"event,omitempty"`
}

// messages builds what target t is sent for g; maxListed bounds the
// pipelines named (and PagerDuty's events one by one).
func messages(t config.ResolvedTarget, g group, maxListed int, test bool) ([]request, error) {
	subjects := g.subjects()
	listed := subjects[:min(len(subjects), maxListed)]
	omitted := len(subjects) - len(listed)
	switch t.Kind {
	case config.NotifySlack:
		return one(slackBody(g, listed, omitted, test))
	case config.NotifyPagerDuty:
		return pagerDutyBodies(t, g, maxListed, test)
	}
	b := webhookBody{Source: "conduit", Kind: g.kind, Severity: g.severity().String(), Summary: g.summary(),
		Count: len(g.entries), Pipelines: listed, Omitted: omitted, Test: test}
	for _, e := range g.entries[:min(len(g.entries), maxListed)] {
		b.Notifications = append(b.Notifications, entryJSON{Time: e.Time, Pipeline: e.Pipeline, Dependency: e.Dependency,
			Canary: e.Canary, Summary: e.Summary, Hint: e.Hint, Event: e.Event})
	}
	return one(b)
}

func one(v any) ([]request, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return []request{{body: body}}, nil
}

// slackBody is an incoming webhook's message: mrkdwn text, one line per
// listed pipeline with what to do.
func slackBody(g group, listed []string, omitted int, test bool) any {
	var b strings.Builder
	icon := map[Severity]string{SeverityInfo: ":white_check_mark:", SeverityWarning: ":warning:", SeverityCritical: ":rotating_light:"}[g.severity()]
	if test {
		b.WriteString("[test] ")
	}
	fmt.Fprintf(&b, "%s *conduit: %s*", icon, slackEscape(g.summary()))
	bySubject := map[string]entry{}
	for _, e := range g.entries {
		if _, ok := bySubject[e.subject()]; !ok {
			bySubject[e.subject()] = e
		}
	}
	if len(g.entries) == 1 {
		if h := g.entries[0].Hint; h != "" {
			fmt.Fprintf(&b, "\nWhat to do: %s", slackEscape(h))
		}
	} else {
		for _, s := range listed {
			fmt.Fprintf(&b, "\n• `%s`: %s", slackEscape(s), slackEscape(bySubject[s].Summary))
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "\n…and %d more", omitted)
		}
		if h := g.entries[0].Hint; h != "" {
			fmt.Fprintf(&b, "\nWhat to do (first): %s", slackEscape(h))
		}
	}
	return map[string]string{"text": b.String()}
}

// slackEscape escapes what Slack's mrkdwn gives a meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// pagerDutyEvent is an Events API v2 event.
type pagerDutyEvent struct {
	RoutingKey  string            `json:"routing_key"`
	EventAction string            `json:"event_action"`
	DedupKey    string            `json:"dedup_key"`
	Payload     *pagerDutyPayload `json:"payload,omitempty"`
}

type pagerDutyPayload struct {
	Summary       string `json:"summary"`
	Source        string `json:"source"`
	Severity      string `json:"severity"`
	Timestamp     string `json:"timestamp,omitempty"`
	Component     string `json:"component,omitempty"`
	Group         string `json:"group,omitempty"`
	Class         string `json:"class,omitempty"`
	CustomDetails any    `json:"custom_details,omitempty"`
}

// pagerDutyMaxSummary is the Events API's limit on a summary.
const pagerDutyMaxSummary = 1024

// dedupKey is the incident an entry opens or resolves: one per pipeline
// (degraded, flapping and recovering for long are the same incident,
// which recovered resolves), one per dependency's breaker, and one per
// pipeline's dead-lettered records, which nothing resolves by itself.
func dedupKey(e entry) string {
	switch {
	case e.Dependency != "":
		return "conduit/breaker/" + e.Dependency
	case e.Kind == KindDeadLettered:
		return "conduit/dead-lettered/" + e.Pipeline
	}
	return "conduit/pipeline/" + e.Pipeline
}

// stormKey is the one incident of a group's pipelines beyond maxListed.
func stormKey(k Kind) string {
	switch k {
	case KindRecovered, KindDegraded, KindFlapping, KindRecoveringLong:
		return "conduit/storm/pipelines"
	case KindBreakerOpened, KindBreakerClosed:
		return "conduit/storm/breakers"
	}
	return "conduit/storm/" + string(k)
}

// pagerDutyBodies opens (or resolves) one incident per pipeline for the
// first maxListed of the group, and one more for the rest, so that a storm
// is a handful of incidents.
func pagerDutyBodies(t config.ResolvedTarget, g group, maxListed int, test bool) ([]request, error) {
	action := "trigger"
	if g.kind.resolves() {
		action = "resolve"
	}
	severity := map[Severity]string{SeverityInfo: "info", SeverityWarning: "warning", SeverityCritical: "critical"}
	var out []request
	add := func(ev pagerDutyEvent) error {
		if ev.Payload != nil && len(ev.Payload.Summary) > pagerDutyMaxSummary {
			ev.Payload.Summary = ev.Payload.Summary[:pagerDutyMaxSummary-3] + "..."
		}
		body, err := json.Marshal(ev)
		out = append(out, request{body: body})
		return err
	}
	seen := map[string]bool{}
	var rest []entry
	for _, e := range g.entries {
		key := dedupKey(e)
		if seen[key] {
			continue
		}
		if len(seen) == maxListed {
			rest = append(rest, e)
			continue
		}
		seen[key] = true
		ev := pagerDutyEvent{RoutingKey: t.RoutingKey.Reveal(), EventAction: action, DedupKey: key}
		if action == "trigger" {
			summary := e.Summary
			if test {
				summary = "[test] " + summary
			}
			ev.Payload = &pagerDutyPayload{Summary: summary, Source: "conduit", Severity: severity[parseSeverity(e.Severity)],
				Timestamp: e.Time.Format(time.RFC3339Nano), Component: e.subject(), Group: string(e.Kind), Class: string(e.Kind),
				CustomDetails: entryJSON{Time: e.Time, Pipeline: e.Pipeline, Dependency: e.Dependency, Canary: e.Canary,
					Summary: e.Summary, Hint: e.Hint, Event: e.Event}}
		}
		if err := add(ev); err != nil {
			return nil, err
		}
	}
	if len(rest) > 0 {
		rg := group{kind: g.kind, entries: rest}
		ev := pagerDutyEvent{RoutingKey: t.RoutingKey.Reveal(), EventAction: action, DedupKey: stormKey(g.kind)}
		if action == "trigger" {
			subjects := rg.subjects()
			ev.Payload = &pagerDutyPayload{Summary: "and " + rg.summary(), Source: "conduit", Severity: severity[rg.severity()],
				Group: string(g.kind), Class: string(g.kind),
				CustomDetails: map[string]any{"count": len(subjects), "first": subjects[:min(len(subjects), maxListed)]}}
		}
		if err := add(ev); err != nil {
			return nil, err
		}
	}
	return out, nil
}
