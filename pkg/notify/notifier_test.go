package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

func TestDegradedThenRecoveredWebhook(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL+"/hook")}})

	e.append("orders", auditlog.KindRecovering, nil) // not a notification by itself
	e.append("orders", auditlog.KindDegraded, nil)
	if got := e.outbox(); got != 1 {
		t.Fatalf("outbox holds %d entries, want 1 (the degraded event's)", got)
	}
	if next := e.deliver(); !next.IsZero() {
		t.Errorf("deliver wants to run again at %v after a success", next)
	}
	got := rc.webhooks(t)
	if len(got) != 1 {
		t.Fatalf("receiver got %d messages, want 1", len(got))
	}
	m := got[0]
	if m.Kind != KindDegraded || m.Severity != "critical" || m.Count != 1 || len(m.Pipelines) != 1 || m.Pipelines[0] != "orders" {
		t.Errorf("message = %+v", m)
	}
	n := m.Notifications[0]
	if !strings.Contains(n.Summary, "password authentication failed") || !strings.Contains(n.Hint, "conduit pipelines start orders") {
		t.Errorf("the message does not say the cause and what to do: %+v", n)
	}
	if n.Event == nil || n.Event.Kind != "degraded" || n.Event.ErrorCode != 401 || n.Event.Sequence != 2 {
		t.Errorf("the message does not carry the audit event: %+v", n.Event)
	}
	if e.outbox() != 0 {
		t.Error("the delivered notification is still in the outbox")
	}
	if evs := e.events("orders", auditlog.KindNotified); len(evs) != 1 || !strings.Contains(evs[0].Message, "target hook") ||
		evs[0].StatusAfter != "" && evs[0].StatusAfter != "degraded" {
		t.Errorf("notified events = %+v", evs)
	}

	e.append("orders", auditlog.KindRecovered, nil)
	e.deliver()
	got = rc.webhooks(t)
	if len(got) != 2 || got[1].Kind != KindRecovered || got[1].Severity != "info" {
		t.Fatalf("after recovered, receiver got %+v", got)
	}
}

func TestStormIsAFewGroupedMessages(t *testing.T) {
	hook, slack, pd := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	e := newEnv(t, nil, Options{MaxListed: 20, Targets: []config.ResolvedTarget{
		newTarget("hook", config.NotifyWebhook, hook.URL),
		newTarget("slack", config.NotifySlack, slack.URL),
		newTarget("pd", config.NotifyPagerDuty, pd.URL),
	}})
	const pipelines = 1000
	for i := range pipelines {
		e.append(fmt.Sprintf("p-%04d", i), auditlog.KindDegraded, nil)
	}
	if got := e.outbox(); got != 3*pipelines {
		t.Fatalf("outbox = %d, want %d", got, 3*pipelines)
	}
	e.deliver()

	msgs := hook.webhooks(t)
	if len(msgs) != 1 {
		t.Fatalf("webhook got %d messages for %d pipelines degrading together, want 1", len(msgs), pipelines)
	}
	m := msgs[0]
	if m.Count != pipelines || len(m.Pipelines) != 20 || m.Omitted != pipelines-20 || m.Pipelines[0] != "p-0000" ||
		m.Summary != "1000 pipelines degraded" || len(m.Notifications) != 20 {
		t.Errorf("grouped message: count %d, listed %d, omitted %d, first %q, summary %q, %d notifications",
			m.Count, len(m.Pipelines), m.Omitted, m.Pipelines[0], m.Summary, len(m.Notifications))
	}
	if s := slack.got(); len(s) != 1 || !strings.Contains(string(s[0]), "1000 pipelines degraded") || !strings.Contains(string(s[0]), "and 980 more") {
		t.Errorf("slack got %d messages: %s", len(s), s)
	}
	// PagerDuty: one incident per pipeline for the first 20, one for the rest.
	pdBodies := pd.got()
	if len(pdBodies) != 21 {
		t.Fatalf("pagerduty got %d events, want 21", len(pdBodies))
	}
	var last pagerDutyEvent
	if err := json.Unmarshal(pdBodies[20], &last); err != nil {
		t.Fatal(err)
	}
	if last.DedupKey != "conduit/storm/pipelines" || last.EventAction != "trigger" || !strings.Contains(last.Payload.Summary, "980 pipelines degraded") {
		t.Errorf("storm event = %+v %+v", last, last.Payload)
	}
	if e.outbox() != 0 {
		t.Errorf("outbox holds %d after the storm was delivered", e.outbox())
	}
	if evs := e.events("p-0999", auditlog.KindNotified); len(evs) != 3 {
		t.Errorf("p-0999 has %d notified events, want 3 (one per target)", len(evs))
	}
}

func TestPagerDutyTriggerAndResolve(t *testing.T) {
	pd := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("pd", config.NotifyPagerDuty, pd.URL)}})
	e.append("orders", auditlog.KindDegraded, nil)
	e.append("orders", auditlog.KindRecovered, nil)
	e.deliver()
	var evs []pagerDutyEvent
	for _, b := range pd.got() {
		var ev pagerDutyEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 2 {
		t.Fatalf("pagerduty got %d events, want 2", len(evs))
	}
	trigger, resolve := evs[0], evs[1]
	if trigger.EventAction != "trigger" || trigger.DedupKey != "conduit/pipeline/orders" || trigger.RoutingKey != "test-routing-key" ||
		trigger.Payload == nil || trigger.Payload.Severity != "critical" || trigger.Payload.Source != "conduit" {
		t.Errorf("trigger = %+v", trigger)
	}
	if resolve.EventAction != "resolve" || resolve.DedupKey != trigger.DedupKey || resolve.Payload != nil {
		t.Errorf("resolve = %+v", resolve)
	}
}

// A degraded pipeline waits for a human: when one starts it again, the
// incident is over - PagerDuty's is resolved - while a start of a stopped
// pipeline tells nobody anything.
func TestStartingADegradedPipelineResolves(t *testing.T) {
	pd := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("pd", config.NotifyPagerDuty, pd.URL)}})
	e.append("orders", auditlog.KindDegraded, nil)
	e.append("orders", auditlog.KindStarting, func(ev *auditlog.Event) {
		ev.StatusBefore, ev.StatusAfter, ev.Actor = "degraded", "running", lifecycle.ActorUser
	})
	e.append("billing", auditlog.KindStarting, func(ev *auditlog.Event) {
		ev.StatusBefore, ev.StatusAfter, ev.Actor = "stopped", "running", lifecycle.ActorUser
	})
	e.deliver()
	var actions []string
	for _, b := range pd.got() {
		var ev pagerDutyEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, ev.EventAction+" "+ev.DedupKey)
	}
	if want := []string{"trigger conduit/pipeline/orders", "resolve conduit/pipeline/orders"}; !slices.Equal(actions, want) {
		t.Errorf("pagerduty got %q, want %q", actions, want)
	}
}

// A pipeline file's notifications block narrows who hears of that
// pipeline, and of what; other pipelines are untouched, and removing the
// block (or the pipeline) lifts it.
func TestPipelineNarrowsItsNotifications(t *testing.T) {
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{
		newTarget("a", config.NotifyWebhook, a.URL), newTarget("b", config.NotifyWebhook, b.URL)}})
	e.n.SetPipeline("orders", config.PipelineNotifications{Targets: []string{"a"}, Events: []string{"degraded"}})
	e.append("orders", auditlog.KindDegraded, nil)
	e.append("orders", auditlog.KindRecovered, nil) // not an event orders asks for
	e.append("billing", auditlog.KindDegraded, nil)
	e.deliver()
	pipelinesOf := func(rc *receiver) []string {
		var out []string
		for _, m := range rc.webhooks(t) {
			out = append(out, string(m.Kind)+":"+strings.Join(m.Pipelines, ","))
		}
		slices.Sort(out)
		return out
	}
	if got := pipelinesOf(a); !slices.Equal(got, []string{"degraded:billing,orders"}) && !slices.Equal(got, []string{"degraded:orders,billing"}) {
		t.Errorf("target a got %q, want orders' and billing's degraded", got)
	}
	if got := pipelinesOf(b); !slices.Equal(got, []string{"degraded:billing"}) {
		t.Errorf("target b got %q, want only billing's degraded (orders names a alone)", got)
	}

	e.n.SetPipeline("orders", config.PipelineNotifications{})
	e.append("orders", auditlog.KindRecovered, nil)
	e.deliver()
	if got := pipelinesOf(b); !slices.Contains(got, "recovered:orders") {
		t.Errorf("after the block was lifted, target b got %q, want orders' recovered", got)
	}
}

func TestFailingTargetIsRetriedOnABackoff(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			http.Error(w, "upstream broke", http.StatusInternalServerError)
		}
	})
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL)}})
	e.append("orders", auditlog.KindDegraded, nil)

	start := e.clock.Now()
	if next := e.deliver(); !next.Equal(start.Add(time.Second)) {
		t.Fatalf("after the first failure, next attempt at %v, want +1s", next.Sub(start))
	}
	failed := e.events("orders", auditlog.KindNotificationFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].ErrorMessage, "HTTP 500: upstream broke") || failed[0].Attempt != 1 {
		t.Fatalf("notification-failed events = %+v", failed)
	}
	// Before the backoff ends, a pass sends nothing.
	e.clock.Advance(999 * time.Millisecond)
	e.deliver()
	if n := len(rc.got()); n != 1 {
		t.Fatalf("target tried %d times before its backoff ended", n)
	}
	e.clock.Advance(time.Millisecond)
	if next := e.deliver(); !next.Equal(e.clock.Now().Add(2 * time.Second)) {
		t.Fatalf("after the second failure, next attempt in %v, want 2s", next.Sub(e.clock.Now()))
	}
	st := e.n.Status().Targets[0]
	if st.Pending != 1 || st.Failures != 2 || !strings.Contains(st.LastError, "HTTP 500") {
		t.Errorf("status = %+v", st)
	}
	e.clock.Advance(2 * time.Second)
	if next := e.deliver(); !next.IsZero() {
		t.Errorf("next = %v after the delivery", next)
	}
	if n := len(rc.got()); n != 3 || e.outbox() != 0 {
		t.Fatalf("attempts %d, outbox %d; want 3 and 0", n, e.outbox())
	}
	if len(e.events("orders", auditlog.KindNotified)) != 1 || len(e.events("orders", auditlog.KindNotificationFailed)) != 2 {
		t.Error("want one notified and two notification-failed events")
	}
	st = e.n.Status().Targets[0]
	if st.Pending != 0 || st.Failures != 0 || st.LastError != "" || st.LastDelivery.IsZero() {
		t.Errorf("status after delivery = %+v", st)
	}
	if d := e.n.Status().Deliveries; len(d) != 3 || d[0].Error != "" || d[1].Error == "" {
		t.Errorf("recent deliveries = %+v", d)
	}
	reg := prometheus.NewRegistry()
	if err := e.n.Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"conduit_notification_failures_total": 2, "conduit_notifications_sent_total": 1, "conduit_notifications_pending": 0}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (exported: %v), want %v", name, g, ok, v)
		}
	}
}

func TestRetryAfterOf429IsHonoured(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("slack", config.NotifySlack, rc.URL)}})
	e.append("orders", auditlog.KindDegraded, nil)
	if next := e.deliver(); next.Sub(e.clock.Now()) != 30*time.Second {
		t.Fatalf("next attempt in %v, want the 30s the 429 asked for", next.Sub(e.clock.Now()))
	}
	e.clock.Advance(29 * time.Second)
	e.deliver()
	if len(rc.got()) != 1 {
		t.Fatal("tried again before Retry-After")
	}
	e.clock.Advance(time.Second)
	e.deliver()
	if len(rc.got()) != 2 || e.outbox() != 0 {
		t.Fatalf("after Retry-After: %d attempts, outbox %d", len(rc.got()), e.outbox())
	}
}

func TestTargetThatDoesNotAnswerTimesOut(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	secretURL := rc.URL + "/services/T000/B000/very-secret-token"
	e := newEnv(t, nil, Options{Client: NewClient(50 * time.Millisecond),
		Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, secretURL)}})
	e.append("orders", auditlog.KindDegraded, nil)
	if next := e.deliver(); next.IsZero() {
		t.Fatal("a target that timed out is not retried")
	}
	failed := e.events("orders", auditlog.KindNotificationFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].ErrorMessage, "timeout") {
		t.Fatalf("failed events = %+v", failed)
	}
	for _, text := range []string{failed[0].ErrorMessage, failed[0].Message, e.n.Status().Targets[0].LastError} {
		if strings.Contains(text, "very-secret-token") || strings.Contains(text, rc.URL) {
			t.Errorf("the target's URL leaks into %q", text)
		}
	}
	if e.outbox() != 1 {
		t.Error("the notification left the outbox without being delivered")
	}
}

func TestOutboxSurvivesANewNotifier(t *testing.T) {
	rc := newReceiver(t, nil)
	db := store.NewInMemory()
	targets := []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL)}
	first := newEnv(t, db, Options{Targets: targets})
	first.append("orders", auditlog.KindDegraded, nil)
	first.append("billing", auditlog.KindDegraded, nil)
	if first.outbox() != 2 {
		t.Fatal("not in the outbox")
	}
	// The process ends before the window does: nothing was sent.
	_ = first.log.Close()
	first.w.Close()

	second := newEnv(t, db, Options{Targets: targets})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		second.n.Run(ctx)
	}()
	// Run delivers what the outbox holds at once, without a new event,
	// and then empties it.
	clocktest.Eventually(t, func() bool { return second.outbox() == 0 }, nil)
	cancel()
	<-done
	if got := rc.webhooks(t); len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("after the restart: %+v", got)
	}
}

func TestRunGroupsAWindow(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, nil, Options{GroupWindow: 10 * time.Second, Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL)}})
	passes := make(chan struct{}, 10)
	e.n.afterDeliver = func() { passes <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.n.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	<-passes // the pass at start, over an empty outbox
	for i := range 50 {
		e.append(fmt.Sprintf("p-%d", i), auditlog.KindDegraded, nil)
	}
	clocktest.Eventually(t, func() bool { return e.clock.Pending() > 0 }, nil)
	if len(rc.got()) != 0 {
		t.Fatal("sent before the window ended")
	}
	e.clock.Advance(10 * time.Second)
	clocktest.Eventually(t, func() bool { return len(rc.got()) > 0 }, nil)
	if got := rc.webhooks(t); len(got) != 1 || got[0].Count != 50 {
		t.Fatalf("got %d messages (first count %d), want 1 of 50", len(got), got[0].Count)
	}
}

func TestFilters(t *testing.T) {
	rc := newReceiver(t, nil)
	only := func(events []string, pipelines []string, sev string) config.ResolvedTarget {
		tg := newTarget("hook", config.NotifyWebhook, rc.URL)
		tg.Events, tg.Pipelines, tg.MinSeverity = events, pipelines, sev
		return tg
	}
	tests := []struct {
		name   string
		target config.ResolvedTarget
		want   []string // pipeline:kind that reach the outbox
	}{
		// Entries of one instant sort by pipeline.
		{"all", only(nil, nil, ""), []string{"billing:degraded", "orders:degraded", "orders:recovered", "orders:dead-lettered"}},
		{"kinds", only([]string{"recovered"}, nil, ""), []string{"orders:recovered"}},
		{"pipelines", only(nil, []string{"bill*"}, ""), []string{"billing:degraded"}},
		{"severity", only(nil, nil, "warning"), []string{"billing:degraded", "orders:degraded", "orders:dead-lettered"}},
		{"critical", only(nil, nil, "critical"), []string{"billing:degraded", "orders:degraded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{tc.target}})
			e.append("orders", auditlog.KindDegraded, nil)
			e.append("billing", auditlog.KindDegraded, nil)
			e.append("orders", auditlog.KindStopped, nil)
			e.append("orders", auditlog.KindRecovered, nil)
			e.append("orders", auditlog.KindDeadLettered, func(ev *auditlog.Event) { ev.Count, ev.Message = 3, "3 records sent to the dead-letter queue" })
			var got []string
			_ = e.w.Flush(context.Background())
			_ = e.db.Scan(context.Background(), []byte(store.PrefixNotifyOutbox), func(k, v []byte) error {
				en, err := decodeEntry(k, v)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, en.Pipeline+":"+string(en.Kind))
				return nil
			})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("outbox = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFlappingAndRecoveringLong(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, nil, Options{RecoveringAfter: 15 * time.Minute, Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL)}})
	e.append("orders", auditlog.KindRecovering, func(ev *auditlog.Event) {
		ev.Message = "pipeline recovering: restart 3 scheduled in 4s (strategy exponential); flapping: the backoff continues where the last episode ended"
		ev.Reason = "flapping"
		ev.ErrorMessage = "connection refused"
	})
	e.clock.Advance(time.Second)
	e.append("billing", auditlog.KindRecovering, nil)
	e.append("billing", auditlog.KindRecovered, nil) // back before the threshold: nothing
	if next := e.n.recoveringDue(e.clock.Now()); next.Sub(e.clock.Now()) != 15*time.Minute-time.Second {
		t.Fatalf("recovering-long due in %v, want 15m after orders began recovering", next.Sub(e.clock.Now()))
	}
	e.clock.Advance(15*time.Minute - time.Second)
	if next := e.n.recoveringDue(e.clock.Now()); !next.IsZero() {
		t.Errorf("another recovering-long due at %v", next)
	}
	e.deliver()
	var kinds []string
	for _, m := range rc.webhooks(t) {
		kinds = append(kinds, fmt.Sprintf("%s:%v", m.Kind, m.Pipelines))
	}
	if fmt.Sprint(kinds) != "[flapping:[orders] recovered:[billing] recovering-long:[orders]]" {
		t.Errorf("messages = %v", kinds)
	}
	// Notified once per episode.
	e.clock.Advance(time.Hour)
	if e.n.recoveringDue(e.clock.Now()); e.outbox() != 0 {
		t.Error("recovering-long sent twice in one episode")
	}
}

func TestBreakerNotifications(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("hook", config.NotifyWebhook, rc.URL)}})
	e.append("a", auditlog.KindStarting, nil) // the canary has a log to be audited in
	e.n.Breaker(lifecycle.BreakerChange{Dependency: "orders-db", Open: true, Canary: "a", Failed: []string{"a", "b", "c"}})
	e.n.Breaker(lifecycle.BreakerChange{Dependency: "orders-db", Open: false, Canary: "a", Released: []string{"b", "c"}})
	e.deliver()
	got := rc.webhooks(t)
	if len(got) != 2 || got[0].Kind != KindBreakerOpened || got[1].Kind != KindBreakerClosed ||
		got[0].Notifications[0].Dependency != "orders-db" || !strings.Contains(got[0].Summary, "3 pipelines failed on it") {
		t.Fatalf("breaker messages = %+v", got)
	}
	if len(e.events("a", auditlog.KindNotified)) != 2 {
		t.Error("the canary has no notified events")
	}
}

func TestTestSendsASample(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, nil, Options{Targets: []config.ResolvedTarget{newTarget("slack", config.NotifySlack, rc.URL)}})
	if err := e.n.Test(context.Background(), "slack"); err != nil {
		t.Fatal(err)
	}
	if got := rc.got(); len(got) != 1 || !strings.Contains(string(got[0]), "[test]") {
		t.Fatalf("got %s", got)
	}
	if err := e.n.Test(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `"nope" (configured: slack)`) {
		t.Errorf("err = %v", err)
	}
	if d := e.n.Status().Deliveries; len(d) != 1 || !d[0].Test {
		t.Errorf("deliveries = %+v", d)
	}
	if e.outbox() != 0 {
		t.Error("a test went through the outbox")
	}
}

func TestRemovedTargetsEntriesAreDropped(t *testing.T) {
	db := store.NewInMemory()
	rc := newReceiver(t, nil)
	first := newEnv(t, db, Options{Targets: []config.ResolvedTarget{newTarget("old", config.NotifyWebhook, rc.URL)}})
	first.append("orders", auditlog.KindDegraded, nil)
	_ = first.log.Close()
	first.w.Close()
	second := newEnv(t, db, Options{Targets: []config.ResolvedTarget{newTarget("new", config.NotifyWebhook, rc.URL)}})
	second.deliver()
	if second.outbox() != 0 || len(rc.got()) != 0 {
		t.Errorf("outbox %d, sent %d", second.outbox(), len(rc.got()))
	}
}

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		n     int
		asked time.Duration
		want  time.Duration
	}{
		{1, 0, time.Second}, {2, 0, 2 * time.Second}, {4, 0, 8 * time.Second}, {10, 0, 5 * time.Minute},
		{100, 0, 5 * time.Minute}, {1, 30 * time.Second, 30 * time.Second}, {1, 48 * time.Hour, time.Hour},
	}
	for _, tc := range tests {
		if got := retryDelay(tc.n, 5*time.Minute, tc.asked); got != tc.want {
			t.Errorf("retryDelay(%d, 5m, %v) = %v, want %v", tc.n, tc.asked, got, tc.want)
		}
	}
}
