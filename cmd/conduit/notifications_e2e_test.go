package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// notificationReceiver is a webhook on 127.0.0.1 that records what it
// gets; it answers 500 until accept is set.
type notificationReceiver struct {
	*httptest.Server
	accept atomic.Bool
	mu     sync.Mutex
	// tried are every body received; taken those answered 200.
	tried, taken []notifiedMessage
}

type notifiedMessage struct {
	Kind          string `json:"kind"`
	Count         int    `json:"count"`
	Notifications []struct {
		Pipeline string `json:"pipeline"`
		Hint     string `json:"hint"`
		Event    struct {
			Sequence uint64 `json:"sequence"`
			Kind     string `json:"kind"`
		} `json:"event"`
	} `json:"notifications"`
}

func newNotificationReceiver(t *testing.T) *notificationReceiver {
	rc := &notificationReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m notifiedMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.tried = append(rc.tried, m)
		if !rc.accept.Load() {
			http.Error(w, "receiver down", http.StatusInternalServerError)
			return
		}
		rc.taken = append(rc.taken, m)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// seen says whether a message of kind about pipeline (and, unless 0, its
// event of that sequence) was received - taken: answered 200 - and
// returns the event's sequence.
func (rc *notificationReceiver) seen(taken bool, kind, pipeline string, sequence uint64) (uint64, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	list := rc.tried
	if taken {
		list = rc.taken
	}
	for _, m := range list {
		for _, n := range m.Notifications {
			if m.Kind == kind && n.Pipeline == pipeline && (sequence == 0 || n.Event.Sequence == sequence) {
				return n.Event.Sequence, true
			}
		}
	}
	return 0, false
}

// A pipeline degrades and another recovers while the webhook is down;
// conduit is SIGKILLed with both notifications in its outbox; after the
// restart, with the webhook back, each is delivered (at least once), the
// same events (their sequences) as before the kill.
func TestNotificationsSurviveSIGKILL(t *testing.T) {
	rc := newNotificationReceiver(t)
	t.Setenv("NOTIFY_E2E_URL", rc.URL+"/hook")
	w := newWorkspace(t, "")
	w.write("pipelines/broken.yml", chaosPipeline("broken", "fail.on: read\nfail.after: 3\nfail.code: 400", "", "min-delay: 50ms"))
	w.write("pipelines/blip.yml", chaosPipeline("blip", "fail.on: read\nfail.after: 20\nfail.count: 1\nfail.code: 503", "",
		"min-delay: 50ms\nmax-delay: 100ms\nprobation: 100ms"))
	w.write("conduit.yml", `log:
  format: json
notifications:
  group-window: 100ms
  retry-max-delay: 1s
  targets:
    - name: hook
      kind: webhook
      url-env: NOTIFY_E2E_URL
      events: [degraded, recovered]
`)
	p := w.start("run")
	waitForEvent(t, p, "broken", "degraded", 1)
	recovered := waitForEvent(t, p, "blip", "recovered", 1)
	var degradedSeq uint64
	eventually(t, pollInterval, func() bool {
		var ok bool
		degradedSeq, ok = rc.seen(false, "degraded", "broken", 0)
		return ok && failedDeliveryAfter(p, recovered.Time)
	}, func() string {
		return "no failed delivery after blip recovered (each pass flushes the writes before it, so its entry is then stored); output:\n" + p.stderr.String()
	})
	// The target is down: it is tried with the oldest kind first and
	// nothing after it, so blip's recovered was never sent.
	if _, ok := rc.seen(false, "recovered", "blip", 0); ok {
		t.Fatal("recovered was sent while the degraded before it failed")
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	rc.accept.Store(true)
	p = w.start("run")
	eventually(t, pollInterval, func() bool {
		_, ok1 := rc.seen(true, "degraded", "broken", degradedSeq)
		_, ok2 := rc.seen(true, "recovered", "blip", 0)
		return ok1 && ok2
	}, func() string {
		return fmt.Sprintf("after the restart, degraded #%d of broken and recovered of blip were not both delivered; output:\n%s",
			degradedSeq, p.stderr.String())
	})
	rc.mu.Lock()
	for _, m := range rc.taken {
		for _, n := range m.Notifications {
			if m.Kind == "degraded" && !strings.Contains(n.Hint, "conduit pipelines start broken") {
				t.Errorf("the degraded notification does not say what to do: %q", n.Hint)
			}
		}
	}
	rc.mu.Unlock()

	// Every delivery and failed delivery is in the audit log.
	address := apiAddress(t, p)
	eventually(t, pollInterval, func() bool {
		return strings.Contains(w.mustPipelines(address, "events", "broken", "--kind", "notified", "-o", "json"), "target hook")
	}, func() string { return "no notified event for broken" })
	if out := w.mustPipelines(address, "events", "broken", "--kind", "notification-failed", "-o", "json"); !strings.Contains(out, "HTTP 500: receiver down") {
		t.Errorf("no notification-failed event for broken:\n%s", out)
	}

	// The CLI lists the target without its URL, and tests it.
	env := cliEnv("CONDUIT_API_HTTP_ADDRESS=" + address)
	list := conduitCLI(t, w.dir, env, "notifications", "list")
	if list.code != 0 || !strings.Contains(list.stdout, "hook") || !strings.Contains(list.stdout, "delivered") ||
		strings.Contains(list.stdout, rc.URL) {
		t.Errorf("conduit notifications list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	// Other notifications may arrive meanwhile (a redelivery, at least
	// once): the test one is told by its pipeline.
	tests := func() int {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		n := 0
		for _, m := range rc.taken {
			for _, x := range m.Notifications {
				if x.Pipeline == "conduit-notification-test" {
					n++
				}
			}
		}
		return n
	}
	before := tests()
	test := conduitCLI(t, w.dir, env, "notifications", "test", "hook")
	if test.code != 0 || !strings.Contains(test.stdout, "target hook took the test notification") {
		t.Errorf("conduit notifications test hook: exit %d\n%s%s", test.code, test.stdout, test.stderr)
	}
	if got := tests(); got != before+1 {
		t.Errorf("the webhook got %d test notifications, want %d", got-before, 1)
	}
	if res := conduitCLI(t, w.dir, env, "notifications", "test", "nope"); res.code == 0 || !strings.Contains(res.stderr, `"nope"`) {
		t.Errorf("testing an unknown target: exit %d\n%s", res.code, res.stderr)
	}
	stopProcess(t, p)
}

// failedDeliveryAfter says whether the process logged a failed delivery
// after at.
func failedDeliveryAfter(p *process, at time.Time) bool {
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "notification not delivered; retrying later" && l.Time.After(at) {
			return true
		}
	}
	return false
}

// The console's notifications page lists the target without its URL, a
// test notification sent from it reaches the webhook, and it reads at
// 375 px.
func TestConsoleShowsNotificationTargets(t *testing.T) {
	rc := newNotificationReceiver(t)
	rc.accept.Store(true)
	t.Setenv("NOTIFY_CONSOLE_URL", rc.URL+"/secret-path")
	w := newWorkspace(t, "")
	w.write("conduit.yml", `log:
  format: json
notifications:
  targets:
    - name: team-hook
      kind: webhook
      url-env: NOTIFY_CONSOLE_URL
      events: [degraded]
`)
	p := w.start("run")
	address := apiAddress(t, p)
	b := newBrowser(t)
	row := `tr[data-target="team-hook"]`
	b.do(t, "the notifications page", chromedp.Navigate("http://"+address+"/ui/#/notifications"),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if text := b.text(t, row); !strings.Contains(text, "webhook") || !strings.Contains(text, "degraded") {
		t.Errorf("the target's row says %q", text)
	}
	b.do(t, "send a test", chromedp.Click(chromedp.CSS(row+" button")),
		chromedp.WaitVisible(chromedp.CSS("#notification-deliveries")))
	if text := b.text(t, "#notification-test-result"); !strings.Contains(text, "team-hook took the test notification") {
		t.Errorf("the test's result says %q", text)
	}
	rc.mu.Lock()
	if len(rc.taken) != 1 {
		t.Errorf("the webhook got %d messages, want the test", len(rc.taken))
	}
	rc.mu.Unlock()
	if page := b.text(t, "main"); strings.Contains(page, "secret-path") || strings.Contains(page, rc.URL) {
		t.Errorf("the page shows the target's URL:\n%s", page)
	}
	b.do(t, "narrow", chromedp.EmulateViewport(375, 800), chromedp.WaitVisible(chromedp.CSS(row)))
	wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || wide {
		t.Errorf("at 375 px the page is wider than the window (%v)", err)
	}
	b.fits(t, "#notification-targets")
	b.noErrors(t)
	stopProcess(t, p)
}

// A target whose variable is not set stops conduit before it runs
// anything, naming the file, line, target and variable.
func TestNotificationTargetWithoutItsSecretRefusesToStart(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("conduit.yml", `log:
  format: json
notifications:
  targets:
    - name: hook
      kind: webhook
      url-env: NOTIFY_E2E_UNSET_VARIABLE
`)
	p := w.start("run")
	if code := p.wait(t); code == 0 {
		t.Fatal("conduit ran without the target's URL")
	}
	if out := p.stderr.String(); !strings.Contains(out, "conduit.yml:5: notifications.targets[hook].url-env: environment variable NOTIFY_E2E_UNSET_VARIABLE is not set") {
		t.Errorf("the error does not name the file, line, target and variable:\n%s", out)
	}
}

// A pipeline's notifications block may only name targets conduit.yml
// defines: one that names another is invalid, with file, line and field,
// and the others run.
func TestPipelineNamingAnUnknownNotificationTargetIsInvalid(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("conduit.yml", "log:\n  format: json\nnotifications:\n  targets:\n    - name: ops\n      kind: webhook\n      url-env: NOTIFY_E2E_TARGET_URL\n")
	pipeline := func(id, target string) string {
		return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: %s
    connectors:
      - {id: src, type: source, plugin: builtin:generator, settings: {format.options.id: int, rate: 10}}
      - {id: dst, type: destination, plugin: builtin:log}
    notifications:
      targets: [%s]
`, id, target)
	}
	w.write("pipelines/good.yml", pipeline("good", "ops"))
	w.write("pipelines/bad.yml", pipeline("bad", "pager"))
	p := w.startWithEnv([]string{"NOTIFY_E2E_TARGET_URL=http://127.0.0.1:9/hook"}, "run")
	address := apiAddress(t, p)
	var out string
	eventually(t, pollInterval, func() bool {
		out = w.mustPipelines(address, "list")
		return strings.Contains(out, "good") && strings.Contains(out, "running")
	}, func() string { return "good never ran:\n" + out + p.stderr.String() })
	if !strings.Contains(out, "invalid") {
		t.Errorf("bad is not listed as invalid:\n%s", out)
	}
	if log := p.stderr.String(); !strings.Contains(log, `bad.yml:7`) || !strings.Contains(log, `notifications.targets[0]: no notification target \"pager\" in conduit.yml (it defines ops)`) {
		t.Errorf("the error does not name file, line, field and targets:\n%s", log)
	}
}
