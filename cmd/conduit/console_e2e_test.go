package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The web console in a real browser: headless Chromium (Debian's chromium
// package, which `make test` installs) driven by chromedp against the real
// binary. CONDUIT_TEST_CONSOLE_SCREENSHOTS=<dir> also saves screenshots of the
// pages there (docs/images is where the README's come from).

const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium tab; errors collects what the page's
// JavaScript threw or logged as an error, and the browser's own errors
// (a request that failed, a policy that refused something).
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the console tests need Chromium at %s (Debian's chromium package; make test installs it): %v", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()),
		// Chromium's own connections would go to a network this machine
		// does not reach.
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.record(e.ExceptionDetails.Text + " " + e.ExceptionDetails.URL)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				b.record(e.Entry.Text + " " + e.Entry.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value))
				}
				b.record(strings.Join(parts, " "))
			}
		}
	}))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first action starts the browser, with no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	b.ctx = ctx
	return b
}

func (b *browser) record(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, s)
}

// do runs the steps, within e2eTimeout; on failure the test shows the
// page.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, e2eTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage:\n%s", what, err, b.text(t, "main"))
	}
}

// doWithin is do with a shorter limit, for a step that must not wait
// for a slower path to the same result.
func (b *browser) doWithin(t *testing.T, what string, limit time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage:\n%s", what, err, b.text(t, "main"))
	}
}

// text is the text of the first element sel selects.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, e2eTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

func (b *browser) noErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Errorf("errors in the console log:\n%s", strings.Join(b.errors, "\n"))
	}
}

// forgetErrors drops the errors logged so far, after a step that is
// meant to log one (a refused token).
func (b *browser) forgetErrors() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = nil
}

// fits fails the test when the table sel is wider than its box (the
// window is narrow: each row must show as a list, not be cut off).
func (b *browser) fits(t *testing.T, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, e2eTimeout)
	defer cancel()
	over, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(
		`(() => { const t = document.querySelector(%q); return t.scrollWidth - t.parentElement.clientWidth; })()`, sel)))
	if err != nil || over > 1 {
		t.Errorf("%s is %d px wider than its box (%v)", sel, over, err)
	}
}

// screenshot saves the page when CONDUIT_TEST_CONSOLE_SCREENSHOTS names a
// directory.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("CONDUIT_TEST_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A recovering pipeline shows in the list with its status and code, its
// page shows the classified error and the episode's attempts, and a stop
// from the page stops it.
func TestConsoleShowsRecoveryAndStops(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 50))
	w.write("pipelines/flaky.yml", strings.Replace(chaosPipeline("flaky",
		"fail.on: read\nfail.after: 5\nfail.count: 1000\nfail.code: 503", "", "min-delay: 10m\nmax-delay: 10m"),
		"./out.jsonl", "./flaky.jsonl", 1))
	w.write("pipelines/twice.yml", strings.Replace(chaosPipeline("twice",
		"fail.on: read\nfail.after: 5\nfail.count: 2\nfail.code: 429", "", "strategy: fixed\nmin-delay: 100ms"),
		"./out.jsonl", "./twice.jsonl", 1))
	// A file that does not parse: it has no pipeline to list, and the
	// list says so below the table, as the CLI does.
	w.write("pipelines/broken.yml", "version: \"2.2\"\npipelines: [\n")
	p := w.start("run")
	address := apiAddress(t, p)
	b := newBrowser(t)

	b.do(t, "the list", chromedp.Navigate("http://"+address+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="flaky"] .status-recovering`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"] .status-running`)),
		chromedp.WaitVisible(chromedp.CSS(`#config-errors`)))
	if text := b.text(t, "#config-errors"); !strings.Contains(text, "Configuration errors (1)") || !strings.Contains(text, "pipelines/broken.yml") {
		t.Errorf("the list's configuration errors say:\n%s", text)
	}
	row := b.text(t, `tr[data-id="flaky"]`)
	for _, want := range []string{"recovering", "503", "injected failure", "1"} {
		if !strings.Contains(row, want) {
			t.Errorf("the list's row of flaky %q does not say %q", row, want)
		}
	}
	b.screenshot(t, "console-pipelines")

	// The list follows the watch of every pipeline: a stop from the CLI
	// shows without a reload, well before the list's reading every 30 s
	// (its fallback for a missed event) could show it.
	w.mustPipelines(address, "stop", "seq")
	b.doWithin(t, "the list follows a stop made elsewhere", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"] .status-stopped`)))
	if summary := b.text(t, "#summary"); strings.Contains(summary, "interrupted") {
		t.Errorf("the list's watch failed: %q", summary)
	}

	b.do(t, "the pipeline's page", chromedp.Click(chromedp.CSS(`tr[data-id="flaky"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="recovering"]`)))
	lastError, timeline := b.text(t, "#last-error"), b.text(t, "#timeline")
	for _, want := range []string{"503", "transient", "typed", "src (source)"} {
		if !strings.Contains(lastError, want) {
			t.Errorf("the last error %q does not say %q", lastError, want)
		}
	}
	if !strings.Contains(timeline, "Attempt 1") || !strings.Contains(timeline, "10m") {
		t.Errorf("the timeline %q does not show attempt 1 and its delay", timeline)
	}
	// Its configuration as written, a pipeline file of its own.
	if def := b.text(t, "#definition"); !strings.Contains(def, "- id: flaky") || !strings.Contains(def, "fail.code: 503") {
		t.Errorf("the configuration shown is not flaky's:\n%s", def)
	}
	b.screenshot(t, "console-pipeline")

	// An episode of two attempts, recovered: the timeline shows both.
	b.do(t, "an episode of two attempts", chromedp.Navigate("http://"+address+"/ui/#/pipeline/twice"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="recovered"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li:nth-child(2)`)))
	if tl := b.text(t, "#timeline"); !strings.Contains(tl, "Attempt 1") || !strings.Contains(tl, "Attempt 2") || !strings.Contains(tl, "429") {
		t.Errorf("the timeline of twice %q does not show its two attempts with their code", tl)
	}
	// The person answers every confirmation with yes.
	answerYes := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("window.confirm = () => true, true")(ctx, tg)
		return err
	})
	// A click on stop stops it.
	b.do(t, "stop twice with a click", answerYes, chromedp.WaitEnabled(chromedp.CSS(`#stop`)), chromedp.Click(chromedp.CSS(`#stop`)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-stopped`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="stopped"]`)))
	// A start asks too: answered no, nothing happens; yes, it runs.
	var asked string
	b.do(t, "start twice, answering no", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("window.confirm = (q) => (window.asked = q, false), true")(ctx, tg)
		return err
	}), chromedp.WaitEnabled(chromedp.CSS(`#start`)), chromedp.Click(chromedp.CSS(`#start`)))
	if err := chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
		asked, err = chromedp.Evaluate[string]("window.asked || ''")(ctx, tg)
		return err
	})); err != nil || asked != "Start twice?" {
		t.Errorf("the start asked %q (%v)", asked, err)
	}
	if out := w.mustPipelines(address, "list"); !strings.Contains(tableRows(out)["twice"][1], "stopped") {
		t.Errorf("a start answered no started twice:\n%s", out)
	}
	b.do(t, "start twice, answering yes", answerYes, chromedp.Click(chromedp.CSS(`#start`)),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-running`)))
	b.do(t, "back to flaky", chromedp.Navigate("http://"+address+"/ui/#/pipeline/flaky"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li`)))

	// From the keyboard: Enter on the focused button.
	// The focus moves to Start, which is what can be done next, rather
	// than to the start of the page.
	b.do(t, "stop", answerYes, chromedp.SendKeys(chromedp.CSS(`#stop`), "\r"),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-stopped`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="stopped"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#start:focus`)))
	if out := w.mustPipelines(address, "list"); !strings.Contains(tableRows(out)["flaky"][1], "stopped") {
		t.Errorf("after the stop in the console, the CLI lists:\n%s", out)
	}

	// A rule pasted on the rules page is tried against the history: it
	// would have matched flaky's 503.
	b.do(t, "a dry run", chromedp.Navigate("http://"+address+"/ui/#/rules"),
		chromedp.WaitVisible(chromedp.CSS(`#dry-run-rules`)),
		chromedp.SendKeys(chromedp.CSS(`#dry-run-rules`), "- name: unavailable\n  match:\n    codes: [\"503\"]\n  action: degrade\n"),
		chromedp.Click(chromedp.CSS(`form.dry-run button`)),
		chromedp.WaitVisible(chromedp.CSS(`#dry-run-table tr[data-rule="unavailable"]`)))
	if row := b.text(t, `#dry-run-table tr[data-rule="unavailable"]`); !strings.Contains(row, "flaky: 1") || !strings.Contains(row, "degrade") {
		t.Errorf("the dry run's row %q does not say the rule would have degraded flaky once", row)
	}
	b.screenshot(t, "console-rules")
	b.do(t, "a dry run of an empty list", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.getElementById("dry-run-rules").value = "[]", true`)(ctx, tg)
		return err
	}), chromedp.Click(chromedp.CSS(`form.dry-run button`)), chromedp.WaitVisible(chromedp.CSS(`#dry-run-error`)))
	if text := b.text(t, "#dry-run-error"); !strings.Contains(text, "No rules in what was pasted") {
		t.Errorf("a dry run of [] says %q", text)
	}
	b.do(t, "the dependencies", chromedp.Navigate("http://"+address+"/ui/#/dependencies"),
		chromedp.WaitVisible(chromedp.CSS(`main p.muted`)))

	// A pipeline that does not exist, and an address that is not one: the
	// console says so, offers nothing to act on, and throws nothing. (The
	// browser logs the API's not_found answers, HTTP 404.)
	b.noErrors(t)
	b.do(t, "an unknown pipeline", chromedp.Navigate("http://"+address+"/ui/#/pipeline/nope"),
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-invalid`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#stop`)), chromedp.WaitNotVisible(chromedp.CSS(`#events`)))
	if text := b.text(t, "main"); !strings.Contains(text, "No pipeline nope: it does not exist") {
		t.Errorf("the page of an unknown pipeline says:\n%s", text)
	}
	// Created meanwhile, it shows without a reload.
	w.write("nope.yml", "version: \"2.2\"\npipelines:\n  - id: nope\n    connectors:\n"+
		"      - {id: src, type: source, plugin: builtin:generator, settings: {rate: 1, format.options.id: int}}\n"+
		"      - {id: dst, type: destination, plugin: builtin:log}\n")
	w.mustPipelines(address, "apply", "nope.yml")
	b.doWithin(t, "the page of a pipeline created meanwhile", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-running`)), chromedp.WaitVisible(chromedp.CSS(`#stop`)))
	w.mustPipelines(address, "delete", "nope")
	b.do(t, "a malformed address", chromedp.Navigate("http://"+address+"/ui/#/pipeline/%E0%A4%A"),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	if text := b.text(t, "main h1"); text != "Not found" {
		t.Errorf("a malformed address shows %q", text)
	}
	b.forgetErrors()

	// A narrow window: the list still reads, its table scrolls inside
	// its box instead of widening the page.
	b.do(t, "narrow", chromedp.EmulateViewport(375, 800), chromedp.Navigate("http://"+address+"/ui/#/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="flaky"] .status-stopped`)))
	wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || wide {
		t.Errorf("at 375 px the page is wider than the window (%v)", err)
	}
	b.fits(t, "#pipelines")
	// Each cell on a line of its own, after its column's name.
	label, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => {
		const td = document.querySelector('tr[data-id="flaky"] td[data-label="Last error"]');
		return getComputedStyle(td, "::before").content + (td.getBoundingClientRect().width >= 300 ? " full width" : " squeezed");
	})()`))
	if err != nil || label != `"Last error" full width` {
		t.Errorf("at 375 px flaky's last error is not a line of its own with its name: %q %v", label, err)
	}
	b.screenshot(t, "console-pipelines-narrow")
	b.do(t, "narrow pipeline page", chromedp.Navigate("http://"+address+"/ui/#/pipeline/flaky"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="stopped"]`)))
	b.fits(t, "#events")
	b.noErrors(t)
}

// With api.auth.token the console shows nothing until it is given the
// token: a wrong one is refused, the right one opens the list.
func TestConsoleAsksForTheToken(t *testing.T) {
	t.Parallel()
	const token = "console-test-token-0123"
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 50))
	p := w.start("run", "--api.auth.token", token)
	address := apiAddress(t, p)
	b := newBrowser(t)

	// The form comes first, without a refused call.
	b.do(t, "without a token", chromedp.Navigate("http://"+address+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#token-asked`)))
	b.noErrors(t)
	// A token an HTTP header cannot carry is refused by the form.
	b.do(t, "a token with other characters", chromedp.SendKeys(chromedp.CSS(`#token`), "t\u00f6k\u20acn"),
		chromedp.Click(chromedp.CSS(`form.token button`)),
		chromedp.WaitVisible(chromedp.CSS(`#token-invalid`)))
	clear := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.getElementById("token").value = "", true`)(ctx, tg)
		return err
	})
	b.do(t, "a wrong token", clear,
		chromedp.SendKeys(chromedp.CSS(`#token`), "wrong-token-0123456"),
		chromedp.Click(chromedp.CSS(`form.token button`)),
		chromedp.WaitVisible(chromedp.CSS(`#token-refused`)))
	b.forgetErrors() // the browser logs the refused call
	text := b.text(t, "main")
	if strings.Contains(text, "seq") {
		t.Fatalf("with a wrong token the console shows a pipeline:\n%s", text)
	}
	b.do(t, "with the token",
		chromedp.SendKeys(chromedp.CSS(`#token`), token+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"]`)))
	// The token lives in the tab only: nothing in a cookie.
	cookies, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if cookies != "" {
		t.Errorf("the console set cookies: %q", cookies)
	}
	// Forgetting the token shows the form again.
	b.do(t, "forget the token", chromedp.WaitVisible(chromedp.CSS(`#forget-token`)),
		chromedp.Navigate("http://"+address+"/ui/#/rules"), chromedp.WaitVisible(chromedp.CSS(`#forget-token`)),
		chromedp.Click(chromedp.CSS(`#forget-token`)), chromedp.WaitVisible(chromedp.CSS(`#token-asked`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#forget-token`)))
	b.noErrors(t)
}

// conduit stopped while the list is open: the list says it does not
// answer and that what it shows is old; started again, the list is live
// again, without a reload.
func TestConsoleSaysWhenConduitDoesNotAnswer(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 50))
	address := freeAddress(t)
	p := w.start("run", "--api.http.address", address)
	apiAddress(t, p)
	b := newBrowser(t)
	b.do(t, "the list", chromedp.Navigate("http://"+address+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"] .status-running`)))

	stopProcess(t, p)
	b.do(t, "conduit stopped", chromedp.WaitVisible(chromedp.CSS(`#stale`)),
		chromedp.WaitVisible(chromedp.CSS(`.table-wrap.stale`)))
	if text := b.text(t, "#stale"); !strings.Contains(text, "conduit does not answer") || !strings.Contains(text, "the list below is as it was at") {
		t.Errorf("the list says %q while conduit is stopped", text)
	}
	b.forgetErrors() // the browser logs the refused connections

	p = w.start("run", "--api.http.address", address)
	apiAddress(t, p)
	b.do(t, "conduit started again", chromedp.WaitNotVisible(chromedp.CSS(`#stale`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"] .status-running`)))
	w.mustPipelines(address, "stop", "seq")
	b.doWithin(t, "the list follows again", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="seq"] .status-stopped`)))
	stopProcess(t, p)
}

// A hidden tab lets go of its event watch (a browser has six connections
// to a server for all its tabs; watches left open in background tabs
// would leave none for the one in front) and follows again when shown; a
// page whose watch the server refuses reads every few seconds instead;
// and a page open while conduit restarts with a new audit log (its state
// in memory) shows the new log, not a mix of both.
func TestConsoleFollowsWithoutHoldingConnections(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, fmt.Sprintf(generatorToFile, 50))
	address := freeAddress(t)
	args := []string{"run", "--api.http.address", address, "--api.max-watchers", "1", "--db.type", "inmemory"}
	p := w.start(args...)
	apiAddress(t, p)
	env := cliEnv("CONDUIT_API_HTTP_ADDRESS=" + address)
	b := newBrowser(t)
	b.do(t, "the pipeline's page", chromedp.Navigate("http://"+address+"/ui/#/pipeline/seq"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="running"]`)))
	// The page holds the server's only watch: the CLI's is refused.
	refused := w.follow(env, "seq")
	eventually(t, 50*time.Millisecond, func() bool { return strings.Contains(refused.stderr.String(), "event watches are open") },
		func() string {
			return "the CLI's watch was not refused while the page watches: " + refused.stderr.String()
		})
	_ = refused.cmd.Process.Kill()

	// Hidden, the page lets go of it: the CLI gets it, and follows.
	b.do(t, "hide the tab", setTabHidden(true))
	cli := w.follow(env, "seq")
	w.mustPipelines(address, "stop", "seq")
	cli.waitForLine(t, `#[0-9]+ +stopped +stopped -> stopped +by user`)

	// Shown again while the CLI holds the only watch: the page is refused
	// and reads every few seconds - a start made elsewhere shows well
	// before the page's reading every 30 s could show it.
	countNotices := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`performance.setResourceTimingBufferSize(100000), window.notices = 0, new MutationObserver(() => {
			if (document.getElementById("notice").textContent) window.notices++;
		}).observe(document.getElementById("notice"), {childList: true, characterData: true, subtree: true}), true`)(ctx, tg)
		return err
	})
	b.do(t, "show the tab", countNotices, setTabHidden(false))
	w.mustPipelines(address, "start", "seq")
	b.doWithin(t, "the page reads while it cannot follow", 15*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-running`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="running"]:first-child`)))
	// The page tries to follow again every 2 s, and says that it cannot
	// once, not at every try.
	watches := func() int {
		n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](
			`performance.getEntriesByType("resource").filter((e) => e.name.includes("WatchPipelineEvents")).length`))
		return n
	}
	tried := watches()
	eventually(t, 100*time.Millisecond, func() bool { return watches() >= tried+2 },
		func() string { return "the page does not try to follow again" })
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`window.notices`)); err != nil || n != 1 {
		t.Errorf("the page said %d times that it cannot follow (%v), want once", n, err)
	}
	// The CLI lets go: the page follows again.
	_ = cli.cmd.Process.Kill()
	w.mustPipelines(address, "stop", "seq")
	b.doWithin(t, "the page follows again", 15*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-stopped`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="stopped"]:first-child`)))

	// conduit restarts with its state in memory: its audit log starts
	// over, and the page shows that log alone.
	stopProcess(t, p)
	p = w.start(args...)
	apiAddress(t, p)
	// The new log, one JSON object per line.
	listed := strings.Split(strings.TrimSpace(w.mustPipelines(address, "events", "seq", "-o", "json")), "\n")
	var newest struct {
		Sequence string `json:"sequence"`
	}
	if err := json.Unmarshal([]byte(listed[len(listed)-1]), &newest); err != nil || newest.Sequence == "" {
		t.Fatalf("the events after the restart: %v\n%s", err, strings.Join(listed, "\n"))
	}
	b.doWithin(t, "the page after the restart", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`h1 .status-running`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-seq="`+newest.Sequence+`"]`)))
	eventually(t, 100*time.Millisecond, func() bool {
		rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events tbody tr").length`))
		return err == nil && rows <= len(listed)+1 // +1: an event written since the CLI read them
	}, func() string { return "the page shows events of the log before the restart:\n" + b.text(t, "#events") })
	b.forgetErrors() // the browser logs the refused watches and connections
	stopProcess(t, p)
}

// The dependencies page shows a breaker that several pipelines' failures
// opened, with its canary and the pipelines it holds, and reads at 375 px.
func TestConsoleShowsBreakers(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, sharedDependencyPipelines(4, "10m"))
	p := w.start("run")
	address := apiAddress(t, p)
	b := newBrowser(t)
	b.do(t, "the dependencies", chromedp.Navigate("http://"+address+"/ui/#/dependencies"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-dependency="orders-db"] .status-degraded`)))
	row := b.text(t, `tr[data-dependency="orders-db"]`)
	for _, want := range []string{"open since", "p0"} {
		if !strings.Contains(row, want) {
			t.Errorf("the breaker's row %q does not say %q", row, want)
		}
	}
	b.do(t, "narrow", chromedp.EmulateViewport(375, 800),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-dependency="orders-db"] .status-degraded`)))
	b.fits(t, "#dependencies")
	b.noErrors(t)
	stopProcess(t, p)
}

// A pipeline in a restart storm, whose page was hidden while hundreds of
// events were written: shown again, the page's events follow each other
// without a gap, the newest at the top.
func TestConsoleEventsHaveNoGaps(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, chaosPipeline("storm", "fail.on: read\nfail.after: 1\nfail.count: 1000000\nfail.code: 503", "",
		"strategy: fixed\nmin-delay: 20ms\nmax-retries: -1"))
	p := w.start("run")
	address := apiAddress(t, p)
	b := newBrowser(t)
	b.do(t, "the storm's page", chromedp.Navigate("http://"+address+"/ui/#/pipeline/storm"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="restarted"]`)))
	newest := func() int {
		line := strings.TrimSpace(w.mustPipelines(address, "events", "storm", "--limit", "1", "-o", "json"))
		var e struct {
			Sequence int `json:"sequence,string"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("the newest event: %v\n%s", err, line)
		}
		return e.Sequence
	}
	b.do(t, "hide the tab", setTabHidden(true))
	from := newest()
	eventually(t, 50*time.Millisecond, func() bool { return newest() > from+150 },
		func() string { return "the storm wrote fewer than 150 events" })
	target := newest()
	b.do(t, "show the tab", setTabHidden(false))
	eventually(t, 100*time.Millisecond, func() bool {
		top, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`Number(document.querySelector("#events tbody tr").dataset.seq)`))
		return err == nil && top >= target
	}, func() string { return "the page did not catch up" })
	gaps, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => {
		const seqs = [...document.querySelectorAll("#events tbody tr")].map((tr) => Number(tr.dataset.seq));
		const gaps = [];
		for (let i = 1; i < seqs.length; i++) if (seqs[i] !== seqs[i - 1] - 1) gaps.push(seqs[i - 1] + " then " + seqs[i]);
		return gaps.join(", ");
	})()`))
	if err != nil || gaps != "" {
		t.Errorf("the events shown have gaps: %s (%v)", gaps, err)
	}
	b.noErrors(t)
	stopProcess(t, p)
}

// setTabHidden makes the page believe its tab was hidden or shown again,
// as a switch of tabs does.
func setTabHidden(hidden bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`Object.defineProperty(document, "hidden", {value: %t, configurable: true}),
			document.dispatchEvent(new Event("visibilitychange")), true`, hidden))(ctx, tg)
		return err
	})
}

// The list says it is loading until its first answer; a next attempt a
// day away shows its date; a pipeline degraded by flapping or by one fatal
// error does not show 0 fails.
func TestConsoleShowsLoadingDatesAndFailsOfDegradedPipelines(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "")
	w.write("pipelines/weekly.yml", strings.Replace(chaosPipeline("weekly",
		"fail.on: read\nfail.after: 5\nfail.count: 1000\nfail.code: 503", "", "strategy: schedule\nschedule: [24h, 168h]"),
		"./out.jsonl", "./weekly.jsonl", 1))
	w.write("pipelines/flappy.yml", strings.Replace(chaosPipeline("flappy",
		"fail.on: read\nfail.after: 50\nfail.every: 50\nfail.count: 1000", "", "min-delay: 50ms\nmax-flaps: 2\nflap-window: 1m"),
		"./out.jsonl", "./flappy.jsonl", 1))
	w.write("pipelines/fatal.yml", strings.Replace(chaosPipeline("fatal", "",
		"fail.on: write\nfail.count: 1000\nfail.code: 400", "min-delay: 50ms"),
		"./out.jsonl", "./fatal.jsonl", 1))
	p := w.start("run")
	address := apiAddress(t, p)
	waitForEvent(t, p, "weekly", "recovering", 1)
	waitForEvent(t, p, "flappy", "degraded", 1)
	waitForEvent(t, p, "fatal", "degraded", 1)
	b := newBrowser(t)

	// The list's reading is held until the test lets it go: what the page
	// shows meanwhile is what a slow answer shows.
	hold := `(() => {
		const original = window.fetch;
		let release;
		const held = new Promise((resolve) => { release = resolve; });
		window.releaseList = () => { release(); return true; };
		window.fetch = (input, init) => String(input && input.url || input).includes("ListPipelines") ?
			held.then(() => original(input, init)) : original(input, init);
	})()`
	b.do(t, "hold the list's reading", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hold})
		return err
	}))
	b.do(t, "the list while it loads", chromedp.Navigate("http://"+address+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#main .loading`)))
	if text := b.text(t, "#main"); !strings.Contains(text, "Loading") {
		t.Errorf("the list shows %q while its reading is under way, want it to say it is loading", text)
	}
	b.do(t, "the list once it answers", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("window.releaseList()")(ctx, tg)
		return err
	}), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="weekly"] .status-recovering`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="flappy"] .status-degraded`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="fatal"] .status-degraded`)))
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#main .loading").length`)); err != nil || n != 0 {
		t.Errorf("the list still says it is loading (%d, %v)", n, err)
	}

	// Tomorrow's date, as this browser writes it.
	tomorrow, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		`new Date(Date.now() + 86400e3).toLocaleDateString(undefined, {weekday: "short", month: "short", day: "numeric"})`))
	if err != nil {
		t.Fatal(err)
	}
	if next := b.text(t, `tr[data-id="weekly"] td[data-label="Next attempt"]`); !strings.Contains(next, tomorrow) {
		t.Errorf("the next attempt of weekly, a day away, reads %q: no date %q", next, tomorrow)
	}
	if fails := b.text(t, `tr[data-id="flappy"] td[data-label="Fails"]`); fails != "3 flaps" {
		t.Errorf("flappy, degraded after 3 flaps, shows %q fails", fails)
	}
	if fails := b.text(t, `tr[data-id="fatal"] td[data-label="Fails"]`); fails != "1" {
		t.Errorf("fatal, degraded by one fatal error, shows %q fails", fails)
	}

	b.do(t, "weekly's page", chromedp.Navigate("http://"+address+"/ui/#/pipeline/weekly"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li`)))
	if tl := b.text(t, "#timeline"); !strings.Contains(tl, tomorrow) {
		t.Errorf("the timeline %q does not say the date of the next attempt %q", tl, tomorrow)
	}
	b.noErrors(t)
	stopProcess(t, p)
}
