// The console: plain DOM, no framework, no build step. It talks to the
// Connect API of the server that serves it (JSON over HTTP; the Connect
// streaming protocol for live events) exactly as the CLI does.
"use strict";

const PIPELINES = "conduit.v1.PipelineService";
const RULES = "conduit.v1.RecoveryRuleService";
const NOTIFICATIONS = "conduit.v1.NotificationService";
const TOKEN_KEY = "conduit-api-token";
const REFRESH_MS = 2000;

class AuthError extends Error {}
class ApiError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

// A token travels in an HTTP header: printable ASCII only.
const validToken = (t) => /^[\x20-\x7e]+$/.test(t);

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token && validToken(token) ? { Authorization: "Bearer " + token } : {};
}

// The "Forget token" button shows while a token is kept and the console
// shows pages, not the token form.
function syncForget() {
  document.getElementById("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY) || !!document.getElementById("token");
}

// call is one unary RPC with a JSON body.
async function call(service, method, body) {
  const res = await fetch(`/${service}/${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1", ...authHeaders() },
    body: JSON.stringify(body || {}),
  });
  if (res.status === 401) throw new AuthError("the API wants a token");
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(data.code || String(res.status), data.message || res.statusText);
  syncForget();
  return data;
}

// watch follows a server stream (Connect protocol, JSON envelopes: one
// flag byte, a 4-byte big-endian length, the message) and calls onMessage
// for each message until signal aborts it or the stream ends.
async function watch(service, method, body, signal, onMessage, onOpen) {
  const json = new TextEncoder().encode(JSON.stringify(body || {}));
  const envelope = new Uint8Array(5 + json.length);
  new DataView(envelope.buffer).setUint32(1, json.length);
  envelope.set(json, 5);
  const res = await fetch(`/${service}/${method}`, {
    method: "POST", signal, body: envelope,
    headers: { "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1", ...authHeaders() },
  });
  if (res.status === 401) throw new AuthError("the API wants a token");
  if (!res.ok || !res.body) throw new ApiError(String(res.status), res.statusText);
  const reader = res.body.getReader();
  // The server refuses a watch (too many open, say) in the stream's
  // first message: open is when data comes, or the stream stays quiet
  // for a moment.
  let opened = false;
  const open = () => { if (!opened && !signal.aborted) { opened = true; if (onOpen) onOpen(); } };
  const quiet = setTimeout(open, 1000);
  try {
    return await readStream(reader, (msg) => { open(); onMessage(msg); });
  } finally {
    clearTimeout(quiet);
  }
}

// readStream reads Connect envelopes from reader until the end of the
// stream.
async function readStream(reader, onMessage) {
  let buf = new Uint8Array(0);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    const joined = new Uint8Array(buf.length + value.length);
    joined.set(buf); joined.set(value, buf.length);
    buf = joined;
    while (buf.length >= 5) {
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const flags = view.getUint8(0), len = view.getUint32(1);
      if (buf.length < 5 + len) break;
      const msg = JSON.parse(new TextDecoder().decode(buf.subarray(5, 5 + len)));
      buf = buf.slice(5 + len);
      if (flags & 2) { // end of stream
        if (msg.error) throw new ApiError(msg.error.code, msg.error.message);
        return;
      }
      onMessage(msg);
    }
  }
}

// el builds an element; text is always set as text, never as HTML.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// cell is a table cell that says its column's name where a narrow window
// shows each row as a list (table.stack in app.css).
const cell = (label, attrs, ...children) => el("td", { ...attrs, "data-label": label }, ...children);

// short shortens a text that could fill the page (a pasted rule's name).
const short = (t, n = 120) => (t && t.length > n ? t.slice(0, n) + "\u2026" : t);

const statusName = (s) => (s || "PIPELINE_STATUS_UNSPECIFIED").replace("PIPELINE_STATUS_", "").toLowerCase();
const statusBadge = (s) => el("span", { class: "status status-" + statusName(s), text: statusName(s) });

function when(ts) {
  if (!ts) return "-";
  const d = new Date(ts);
  const secs = Math.round((d.getTime() - Date.now()) / 1000);
  const abs = Math.abs(secs);
  const rel = abs < 90 ? `${abs}s` : abs < 5400 ? `${Math.round(abs / 60)}m` : abs < 172800 ? `${Math.round(abs / 3600)}h` : `${Math.round(abs / 86400)}d`;
  return `${clock(ts)} (${secs >= 0 ? "in " + rel : rel + " ago"})`;
}

// clock is a time of day, with its date when that is not today: a next
// attempt a day or a week away (a [24h, 168h] schedule) must not read as
// a time of today.
function clock(ts) {
  const d = new Date(ts), today = new Date();
  if (d.toDateString() === today.toDateString()) return d.toLocaleTimeString();
  const date = d.toLocaleDateString(undefined, { weekday: "short", month: "short", day: "numeric",
    year: d.getFullYear() === today.getFullYear() ? undefined : "numeric" });
  return `${date} ${d.toLocaleTimeString()}`;
}

// failCount is what the Fails column says: the transient failures of the
// current episode; for a degraded pipeline, the failures that degraded it
// - the episodes in a row of one that flapped, or the one fatal error
// (or dead-letter queue overflow) that ended it at once - rather than a 0
// that reads as "nothing failed".
function failCount(p) {
  const n = Number(p.failCount || 0);
  if (n > 0 || statusName(p.status) !== "degraded") return String(n);
  if (p.degradedReason === "flapping" && p.flaps) return `${p.flaps} flaps`;
  return p.lastError && (p.lastError.code || p.lastError.message) ? "1" : "0";
}

// loading is what a page shows until its first answer.
const loading = () => el("p", { class: "muted loading", text: "Loading\u2026" });

// dur makes a protobuf JSON duration ("600s", "0.250s") readable: 10m,
// 250ms, 1h30m.
function dur(d) {
  if (!d) return "?";
  const total = parseFloat(d);
  if (Number.isNaN(total)) return d;
  if (total < 1) return `${Math.round(total * 1000)}ms`;
  const h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), sec = Math.round(total % 60);
  return [h && `${h}h`, m && `${m}m`, sec && `${sec}s`].filter(Boolean).join("") || "0s";
}

function errorCell(e) {
  if (!e || (!e.message && !e.code)) return "-";
  return el("span", {}, e.code ? el("span", { class: "error-code", text: String(e.code) + " " }) : "",
    el("span", { class: "error-text", text: e.message || "" }));
}

// lastProblem is what the list shows of a pipeline's trouble: its last
// error, or for an invalid pipeline its configuration's.
function lastProblem(p) {
  if (p.lastError && (p.lastError.message || p.lastError.code)) return errorCell(p.lastError);
  const c = (p.configErrors || [])[0];
  return c ? el("span", { class: "error-text", text: configProblem(c) }) : "-";
}

// nextAttempt is when a recovering pipeline restarts: at its time, or,
// held by a dependency's open breaker, when the breaker's canary gets
// through.
function nextAttempt(p) {
  if (p.heldBy) return el("a", { href: "#/dependencies", class: "held", text: `held by ${p.heldBy}` });
  return p.nextAttemptAt ? el("span", { "data-at": p.nextAttemptAt, text: when(p.nextAttemptAt) }) : "-";
}

// configProblem names the file of a configuration error once.
const configProblem = (c) => (c.configFile && !(c.message || "").startsWith(c.configFile) ? `${c.configFile}: ${c.message}` : c.message || "");

function notice(text) {
  const n = document.getElementById("notice");
  n.textContent = text;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => { n.textContent = ""; }, 6000);
}

// Pages. Each returns a function that stops what it started (refresh
// timers, watch streams).
const main = () => document.getElementById("main");

function showTokenForm(again) {
  document.title = "Token - conduit";
  const says = el("p", again ? { id: "token-refused", role: "alert", text: "The API did not accept this token." } :
    { id: "token-asked", text: "This conduit asks for its API token (api.auth.token). It is kept for this browser tab only." });
  main().replaceChildren(el("h1", { text: "Token" }),
    el("form", {
      class: "token", onsubmit: (ev) => {
        ev.preventDefault();
        const token = ev.target.elements.token.value.trim();
        if (!validToken(token)) {
          says.replaceWith(el("p", { id: "token-invalid", role: "alert", text: "A token is printable ASCII: letters, digits and punctuation." }));
          return;
        }
        sessionStorage.setItem(TOKEN_KEY, token);
        route();
      },
    },
    says,
    el("label", { for: "token", text: "API token" }),
    el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
    el("button", { type: "submit", text: "Open the console" })));
  syncForget();
  document.getElementById("token").focus();
}

function failed(err) {
  if (err instanceof AuthError) {
    // Several calls of a page may be refused at once; the first one
    // says why.
    if (document.getElementById("token")) return true;
    const had = !!sessionStorage.getItem(TOKEN_KEY);
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenForm(had);
    return true;
  }
  return false;
}

// follower keeps a watch stream open for as long as its page lives: it
// calls onEvent for every event, onOpen when the stream is open (events
// follow as they happen), onDown when it drops (a server restart, a
// network fault, a refusal), and onBack - awaited, before the stream is
// opened again - when it watches again, a little later.
// A watch of a pipeline that does not exist (any more) is not tried
// again: onGone is called instead.
// A hidden tab lets go of its stream, and opens it again (after onBack,
// which catches up) once it is shown: a browser gives a server only six
// connections at a time, shared by all its tabs, and a stream holds one
// for as long as it lasts - six tabs left open in the background would
// leave none for the tab in front.
function follower(signal, body, { onEvent, onDown, onBack, onOpen, onGone }) {
  let pause = null;
  const onVisibility = () => { if (document.hidden && pause) pause.abort(); };
  document.addEventListener("visibilitychange", onVisibility);
  signal.addEventListener("abort", () => document.removeEventListener("visibilitychange", onVisibility), { once: true });
  (async function follow(again) {
    await shown(signal);
    if (signal.aborted) return;
    if (again && onBack) await onBack();
    if (signal.aborted) return;
    pause = new AbortController();
    const paused = pause.signal;
    if (document.hidden) pause.abort();
    try {
      await watch(PIPELINES, "WatchPipelineEvents", body(), AbortSignal.any([signal, paused]), onEvent, onOpen);
      if (!signal.aborted && !paused.aborted) onDown(new Error("the server ended the stream"));
    } catch (err) {
      if (signal.aborted || failed(err)) return;
      if (onGone && !paused.aborted && err instanceof ApiError && err.code === "not_found") { onGone(err); return; }
      if (!paused.aborted) onDown(err);
    }
    if (!signal.aborted) setTimeout(() => follow(true), paused.aborted ? 0 : REFRESH_MS);
  })(false);
}

// shown resolves once the tab is shown (at once when it is), or signal
// aborts.
function shown(signal) {
  return new Promise((resolve) => {
    const check = () => {
      if (document.hidden && !signal.aborted) return;
      document.removeEventListener("visibilitychange", check);
      signal.removeEventListener("abort", check);
      resolve();
    };
    document.addEventListener("visibilitychange", check);
    signal.addEventListener("abort", check);
    check();
  });
}

// ticker rewrites every element with a data-at time ("in 5s", "2m ago")
// each second, without touching anything else on the page (a focused link
// or button stays focused).
function ticker(root) {
  const id = setInterval(() => {
    for (const node of root.querySelectorAll("[data-at]")) node.textContent = when(node.dataset.at);
  }, 1000);
  return () => clearInterval(id);
}

// A watch is followed; the list is read again when an event says that
// something changed, and every SAFETY_MS in case an event was missed
// (every REFRESH_MS while the watch is down).
const SAFETY_MS = 30000;
const CLUSTER_SAFETY_MS = 5000;
// A page of a pipeline that does not exist looks for it this often.
const GONE_MS = 5000;
// A burst of events reads the list (or the pipeline) again once, and a
// storm of them at most once a second.
const BURST_MS = 250, STORM_MS = 1000;

// nextReading is when a reading asked for now should happen: after the
// burst, and not sooner than STORM_MS after the last one.
const nextReading = (last) => Math.max(BURST_MS, STORM_MS - (Date.now() - last));

// instanceText is the instance that runs a pipeline in a cluster; a
// running or recovering one that no instance holds is moving, or runs
// nowhere (no live instance has its pipeline file).
function instanceText(p) {
  if (p.instance) return p.instance;
  const s = statusName(p.status);
  return s === "running" || s === "recovering" ? el("span", { class: "error-text", text: "- (no instance runs it now)" }) : "-";
}

function listPage() {
  document.title = "Pipelines - conduit";
  const stop = new AbortController();
  let filter = sessionStorage.getItem("conduit-filter") || "";
  let pipelines = null, timer, soon, live = true;
  const select = el("select", { id: "filter", onchange: (ev) => { filter = ev.target.value; sessionStorage.setItem("conduit-filter", filter); render(); } },
    ["", "running", "recovering", "degraded", "stopped", "invalid"].map((s) => el("option", { value: s, text: s || "all", selected: s === filter })));
  const summary = el("span", { class: "muted", id: "summary", "aria-live": "polite" });
  const stale = el("p", { class: "stale-note", id: "stale", role: "alert", hidden: true });
  let readAt = null;
  const body = el("div", { class: "table-wrap" }, loading());
  // Files and pipelines that are invalid, as the CLI lists them under the
  // table: a file that does not parse has no pipeline to show.
  const configErrors = el("section", { id: "config-errors", hidden: true });
  main().replaceChildren(el("h1", { text: "Pipelines" }),
    el("div", { class: "toolbar" }, el("label", { for: "filter", text: "Status " }), select, summary), stale, body, configErrors);

  // Rows are kept by id and their cells changed in place, so that a
  // focused link keeps its focus while the list updates.
  let table = null, cluster = null;
  const rows = new Map();
  const columns = () => [
    { head: "ID", sig: (p) => p.id, make: (p) => el("a", { href: "#/pipeline/" + encodeURIComponent(p.id), text: p.id }) },
    { head: "Status", sig: (p) => p.status, make: (p) => statusBadge(p.status) },
    cluster && { head: "Instance", sig: (p) => p.instance + p.status, make: instanceText },
    { head: "Fails", cls: "num", sig: (p) => failCount(p), make: failCount },
    { head: "Next attempt", sig: (p) => p.nextAttemptAt + (p.heldBy || ""), make: nextAttempt },
    { head: "Last error", sig: (p) => JSON.stringify([p.lastError || null, p.configErrors || null]), make: (p) => lastProblem(p) },
    { head: "Source", cls: "hide-narrow muted", sig: (p) => p.origin + p.configFile, make: (p) => p.origin === "api" ? "api" : (p.configFile || "-") },
  ].filter(Boolean);

  function render() {
    if (!pipelines) return;
    const shown = pipelines.filter((p) => !filter || statusName(p.status) === filter);
    // Only when it changed: it is a live region.
    const said = `${shown.length} of ${pipelines.length}` + (live ? "" : " (live updates interrupted; reading every few seconds)");
    if (summary.textContent !== said) summary.textContent = said;
    const inCluster = pipelines.some((p) => p.instance);
    if (!table || inCluster !== cluster) {
      cluster = inCluster;
      rows.clear();
      table = el("table", { id: "pipelines", class: "stack" },
        el("thead", {}, el("tr", {}, columns().map((c) => el("th", { class: c.cls, text: c.head })))), el("tbody"));
      body.replaceChildren(table);
    }
    const tbody = table.tBodies[0], cols = columns(), seen = new Set();
    shown.forEach((p, i) => {
      let row = rows.get(p.id);
      if (!row) {
        row = { tr: el("tr", { "data-id": p.id }, cols.map((c) => cell(c.head, { class: c.cls }))), sigs: [] };
        rows.set(p.id, row);
      }
      cols.forEach((c, j) => {
        const sig = String(c.sig(p));
        if (row.sigs[j] !== sig) {
          row.tr.cells[j].replaceChildren(c.make(p));
          row.sigs[j] = sig;
        }
      });
      if (tbody.rows[i] !== row.tr) tbody.insertBefore(row.tr, tbody.rows[i] || null);
      seen.add(p.id);
    });
    for (const [id, row] of rows) {
      if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
    }
  }

  let shownConfigErrors = "";
  function renderConfigErrors(list) {
    const sig = JSON.stringify(list);
    if (sig === shownConfigErrors) return;
    shownConfigErrors = sig;
    configErrors.hidden = list.length === 0;
    configErrors.replaceChildren(el("h2", { text: `Configuration errors (${list.length})` }),
      el("p", { class: "muted", text: "Not applied until fixed; a pipeline that runs keeps running as it was." }),
      el("ul", {}, list.map((c) => el("li", {},
        c.pipelineId ? [el("a", { href: "#/pipeline/" + encodeURIComponent(c.pipelineId), text: c.pipelineId }), ": "] : "",
        el("span", { class: "error-text", text: configProblem(c) })))));
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const data = await call(PIPELINES, "ListPipelines", {});
      pipelines = data.pipelines || [];
      render();
      renderConfigErrors(data.configErrors || []);
      stale.hidden = true;
      body.classList.remove("stale");
    } catch (err) {
      if (failed(err)) { stop.abort(); return; }
      summary.textContent = "";
      if (!pipelines) body.replaceChildren(); // nothing to show but the note below
      const text = `conduit does not answer (${err.message})` + (pipelines ? `: the list below is as it was at ${(readAt || new Date()).toLocaleTimeString()}` : "");
      if (stale.textContent !== text) stale.textContent = text; // read out once, not at every try
      stale.hidden = false;
      body.classList.add("stale");
    }
    if (!body.classList.contains("stale")) readAt = new Date();
    // In a cluster, a pipeline whose instance died shows no event until
    // another instance takes it up, if one does: read more often.
    if (!stop.signal.aborted) timer = setTimeout(refresh, !live ? REFRESH_MS : cluster ? CLUSTER_SAFETY_MS : SAFETY_MS);
  }
  // Events come in bursts (a restart writes several): one read for each
  // burst.
  let lastRead = 0;
  function changed() {
    live = true;
    if (soon) return;
    soon = setTimeout(() => { soon = null; lastRead = Date.now(); if (!stop.signal.aborted) refresh(); }, nextReading(lastRead));
  }
  // While the stream is down the list is read every few seconds; when it
  // is back, once more for what happened in between.
  follower(stop.signal, () => ({}), {
    onEvent: changed,
    onDown: () => { if (live) { live = false; refresh(); } },
    onBack: () => { if (!live) refresh(); },
    onOpen: () => { if (!live) { live = true; refresh(); } },
  });
  const untick = ticker(body);
  refresh();
  return () => { stop.abort(); clearTimeout(timer); clearTimeout(soon); untick(); };
}

function pipelinePage(id) {
  document.title = `${id} - conduit`;
  const stop = new AbortController();
  let timer, soon;
  const badge = el("span");
  // Every action asks first: a start of a degraded pipeline ends the
  // hold a person or a rule put on it, and starts its fail count over.
  let shownStatus = "";
  const startButton = el("button", { type: "button", id: "start", disabled: true, text: "Start",
    onclick: () => act("StartPipeline", {}, shownStatus === "degraded" ? `Start ${id}? It is degraded; its fail count starts over.` : `Start ${id}?`, "started") });
  const stopButton = el("button", { type: "button", id: "stop", disabled: true,
    onclick: () => act("StopPipeline", { force: false }, `Stop ${id}? In-flight records drain first.`, "stopped"), text: "Stop" });
  const forceButton = el("button", { type: "button", id: "force-stop", class: "danger", disabled: true,
    onclick: () => act("StopPipeline", { force: true }, `Force-stop ${id}? In-flight records are dropped (read again later) and it becomes degraded.`, "force-stopped: degraded"), text: "Force stop" });
  const title = el("h1", { tabindex: "-1" }, id + " ", badge);
  const actions = el("div", { class: "actions" }, startButton, stopButton, forceButton);
  const head = el("div", {}, title, actions);
  const problem = el("p", { class: "error-text" });
  const details = el("div", {}, loading());
  const definition = el("pre", { id: "definition", class: "definition", tabindex: "0" });
  const definitionAt = el("p", { class: "muted" });
  const configuration = el("section", { hidden: true }, el("h2", { text: "Configuration" }), definitionAt, definition);
  const events = el("tbody");
  // older says where the events not shown are.
  let skipped = false;
  const older = el("p", { class: "muted", id: "events-older", hidden: true,
    text: `The newest 500 events are shown; every event kept: conduit pipelines events ${id} --limit 1000` });
  const eventsSection = el("section", {}, el("h2", { text: "Events" }), older,
    el("div", { class: "table-wrap" }, el("table", { id: "events", class: "stack" },
      el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "Time" }), el("th", { text: "Event" }),
        el("th", { text: "Status" }), el("th", { class: "hide-narrow", text: "By" }), el("th", { text: "Message" }))),
      events)));
  main().replaceChildren(head, problem, details, configuration, eventsSection);

  async function act(method, body, question, done) {
    if (question && !window.confirm(question)) return;
    // A stop waits for the drain; a browser whose connections to this
    // server are all taken waits too: either way the person is told.
    const slow = setTimeout(() => notice(`${id}: still waiting for conduit's answer`), 5000);
    try {
      await call(PIPELINES, method, { id, ...body });
      notice(`${id}: ${done}`);
    } catch (err) {
      if (!failed(err)) notice(`${id}: ${err.message}`);
    } finally {
      clearTimeout(slow);
    }
    refresh();
  }

  // inCluster: the pipeline was seen with an instance, so the conduit is
  // one of a cluster's (the row stays when no instance holds it).
  let inCluster = false;
  function render(p) {
    const status = statusName(p.status);
    shownStatus = status;
    inCluster = inCluster || !!p.instance;
    badge.replaceChildren(statusBadge(p.status));
    // A focused button that is disabled now (after its action, or a
    // change made elsewhere) hands the focus to the action that makes
    // sense next, not to the start of the page.
    const buttons = [startButton, stopButton, forceButton];
    const focused = buttons.find((b) => b === document.activeElement);
    startButton.disabled = !(status === "stopped" || status === "degraded");
    stopButton.disabled = forceButton.disabled = !(status === "running" || status === "recovering");
    if (focused && focused.disabled) {
      const next = buttons.find((b) => !b.disabled);
      (next || title).focus();
    }
    problem.textContent = (p.configErrors || []).map(configProblem).join("\n");
    const e = p.lastError;
    const facts = [["Source", p.origin === "api" ? "created through the API" : (p.configFile || "-")],
      ["Instance", p.instance || (inCluster ? instanceText(p) : null)], ["Fail count", failCount(p)],
      ["Next attempt", nextAttempt(p)],
      ["Degraded because", p.degradedReason || null], ["Probation", p.probation ? "yes: restarted, not proved yet" : null],
      ["Stopping", p.stopping ? "yes: its last run has not ended yet; a start waits for it" : null]]
      .filter(([, v]) => v !== null);
    const parts = [el("h2", { text: "State" }), el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]))];
    if (e && (e.message || e.code)) {
      parts.push(el("h2", { text: "Last error" }), el("dl", { class: "facts", id: "last-error" },
        [["Code", e.code ? String(e.code) : "-"], ["Class", (e.class || "").replace("ERROR_CLASS_", "").toLowerCase() || "-"],
          ["Classified by", e.classifiedBy || "-"], ["Rule", e.rule || "-"], ["Component", e.component ? `${e.component} (${e.componentKind || "?"})` : "-"],
          ["Message", e.message || "-"], ["At", e.time ? new Date(e.time).toLocaleString() : "-"]]
          .map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])));
    }
    const ep = p.episode;
    if (ep && (ep.attempts || []).length) {
      parts.push(el("h2", { text: "Recovery episode" }),
        el("p", { class: "muted", text: `started ${new Date(ep.startedAt).toLocaleString()}` + (ep.endedAt ? `, ended ${new Date(ep.endedAt).toLocaleString()} (${ep.outcome || "?"})` : ", under way") +
          (ep.duration ? `, ${dur(ep.duration)} in all` : "") }),
        el("ol", { class: "timeline", id: "timeline" }, ep.attempts.map((a, i) => [
          // The episode keeps its first attempts and its latest ones:
          // where they part, the attempts between are said, not shown.
          i > 0 && Number(a.number) > Number(ep.attempts[i - 1].number) + 1 ? el("li", { class: "gap",
            text: `${Number(a.number) - Number(ep.attempts[i - 1].number) - 1} attempts between #${ep.attempts[i - 1].number} and #${a.number} not kept` }) : null,
          el("li", {},
          el("strong", { text: `Attempt ${a.number}` }), " failed ", a.failedAt ? clock(a.failedAt) : "", ": ",
          errorCell(a.error), a.error && a.error.rule ? el("span", { class: "muted", text: ` (rule ${a.error.rule})` }) : "", el("br"),
          el("span", { class: "muted", text: p.heldBy && a === ep.attempts[ep.attempts.length - 1] ?
            `held by the breaker of ${p.heldBy}: restarts when its canary gets through` :
            a.delay ? `next after ${dur(a.delay)} (${a.strategy || "?"}), at ${a.nextAttemptAt ? clock(a.nextAttemptAt) : "-"}` : "no restart scheduled" }))])));
    }
    const policy = p.policy;
    if (policy) {
      parts.push(el("h2", { text: "Recovery policy" }), el("p", { class: "muted",
        text: `${policy.preset || "conduit"} preset, ${policy.strategy || "exponential"}, ${dur(policy.minDelay)} to ${dur(policy.maxDelay)}, ${policy.maxRetries === -1 ? "retries without limit" : `max retries ${policy.maxRetries ?? 0}`}` +
          ((policy.rules || []).length ? `; rules tried in order: ${policy.rules.map((r) => r.name).join(", ")}` : "") }));
    }
    // The block is built anew; a link focused in it (the breaker that
    // holds the pipeline) keeps the focus.
    const focusedLink = details.contains(document.activeElement) && document.activeElement.getAttribute("href");
    details.replaceChildren(...parts);
    if (focusedLink) {
      const again = [...details.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === focusedLink);
      if (again) again.focus();
    }
    // Only when it changed: a reader may be scrolling through it.
    const text = p.definition || "";
    configuration.hidden = !text;
    if (definition.textContent !== text) definition.textContent = text;
    definitionAt.textContent = (p.origin === "api" ? "Created through the API" : `From ${p.configFile || "?"}`) +
      "; values of settings that look like credentials are shown as *****.";
  }

  // The newest MAX_EVENTS events are shown, without a gap; older ones are
  // in the CLI. Events are added in batches, one change of the table per
  // batch: a pipeline in a restart storm writes hundreds a second.
  const MAX_EVENTS = 500;
  const shownSeqs = new Set();
  function eventRow(ev) {
    const before = statusName(ev.statusBefore), after = ev.statusAfter ? statusName(ev.statusAfter) : "";
    const status = !ev.statusBefore ? after : !after ? before : before === after ? after : `${before} \u2192 ${after}`;
    return el("tr", { "data-seq": String(ev.sequence), "data-kind": ev.kind },
      cell("#", { class: "num", text: String(ev.sequence) }),
      cell("Time", { class: "nowrap", text: new Date(ev.time).toLocaleTimeString(), title: new Date(ev.time).toLocaleString() }),
      cell("Event", { text: ev.kind }),
      cell("Status", { text: status || "-" }),
      cell("By", { class: "hide-narrow", text: ev.actor || "" }),
      cell("Message", { class: "error-text" }, ev.error && ev.error.code ? el("span", { class: "error-code", text: ev.error.code + " " }) : "", ev.message || ""));
  }
  // addEvents shows events (in sequence order), newest at the top.
  function addEvents(list) {
    const fresh = list.filter((ev) => !shownSeqs.has(String(ev.sequence))).slice(-MAX_EVENTS);
    if (!fresh.length) return;
    const batch = document.createDocumentFragment();
    for (let i = fresh.length - 1; i >= 0; i--) {
      batch.append(eventRow(fresh[i]));
      shownSeqs.add(String(fresh[i].sequence));
    }
    events.prepend(batch);
    while (events.rows.length > MAX_EVENTS) {
      shownSeqs.delete(events.lastElementChild.dataset.seq);
      events.lastElementChild.remove();
    }
    older.hidden = events.rows.length < MAX_EVENTS && !skipped;
  }
  function clearEvents() {
    events.replaceChildren();
    shownSeqs.clear();
  }
  let queued = [], flushing = null;
  function flushQueued() {
    clearTimeout(flushing);
    flushing = null;
    const list = queued;
    queued = [];
    addEvents(list);
  }
  function queueEvent(ev) {
    queued.push(ev);
    if (!flushing) flushing = setTimeout(flushQueued, 50);
  }

  // gone: the pipeline does not exist (any more): nothing to act on or
  // follow.
  // lookAgain: a gone pipeline is looked for every GONE_MS; null once
  // the page is left.
  let lookAgain;
  function gone() {
    stop.abort();
    clearTimeout(timer);
    badge.replaceChildren(el("span", { class: "status status-invalid", text: "not found" }));
    for (const b of [startButton, stopButton, forceButton]) b.disabled = true;
    actions.hidden = true;
    if (!events.rows.length) eventsSection.hidden = true;
    details.replaceChildren();
    configuration.hidden = true;
    problem.replaceChildren(`No pipeline ${id}: it does not exist, or was deleted. `, el("a", { href: "#/", text: "All pipelines" }));
    // A pipeline of this id created (again) shows, without a reload.
    clearTimeout(lookAgain);
    lookAgain = setTimeout(async function again() {
      try {
        await call(PIPELINES, "GetPipeline", { id });
        if (lookAgain !== null) route();
      } catch (err) {
        if (!failed(err) && lookAgain !== null) lookAgain = setTimeout(again, GONE_MS);
      }
    }, GONE_MS);
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const data = await call(PIPELINES, "GetPipeline", { id });
      render(data.pipeline || {});
      details.classList.remove("stale");
    } catch (err) {
      if (failed(err)) { stop.abort(); return; }
      if (err instanceof ApiError && err.code === "not_found") { gone(); return; }
      problem.textContent = `conduit does not answer (${err.message}): what is shown is as it was`;
      details.classList.add("stale");
    }
    if (!stop.signal.aborted) timer = setTimeout(refresh, SAFETY_MS);
  }

  // The events written since the last one shown, read at the start and
  // whenever the stream was down: page after page while they fit the
  // table, else only the newest (the table then starts over, without a
  // gap). A log that started over (a conduit with its state in memory,
  // restarted) replaces the table. true once read.
  let after = 0;
  async function catchUp() {
    flushQueued(); // what the stream gave, before what is read
    try {
      const head = await call(PIPELINES, "ListPipelineEvents", { pipelineId: id, limit: 1, newestFirst: true });
      const newest = (head.events || []).length ? Number(head.events[0].sequence) : 0;
      if (newest < after || newest - after > MAX_EVENTS) {
        skipped = skipped || newest - after > MAX_EVENTS;
        clearEvents();
        after = Math.max(0, newest - MAX_EVENTS);
      }
      for (;;) {
        const data = await call(PIPELINES, "ListPipelineEvents", { pipelineId: id, afterSequence: String(after), limit: 1000 });
        const list = (data.events || []).slice().sort((a, b) => Number(a.sequence) - Number(b.sequence));
        addEvents(list);
        if (list.length) after = Math.max(after, Number(list[list.length - 1].sequence));
        if (list.length < 1000 || stop.signal.aborted) return true;
      }
    } catch (err) {
      if (failed(err)) { stop.abort(); return false; }
      if (err instanceof ApiError && err.code === "not_found") gone();
      return false;
    }
  }
  // While the stream is down (conduit restarting, or refusing another
  // watcher), the pipeline and its events are read every few seconds.
  let live = true, pollTimer;
  async function poll() {
    clearTimeout(pollTimer);
    if (live || stop.signal.aborted) return;
    await catchUp();
    await refresh();
    if (!live && !stop.signal.aborted) pollTimer = setTimeout(poll, REFRESH_MS);
  }

  (async () => {
    // The pipeline first: one that does not exist needs no events.
    await refresh();
    if (stop.signal.aborted) return;
    await catchUp();
    if (stop.signal.aborted) return;
    let lastRead = 0;
    follower(stop.signal, () => ({ pipelineId: id, afterSequence: String(after) }), {
      onEvent: (m) => {
        if (!m.event) return;
        queueEvent(m.event);
        after = Math.max(after, Number(m.event.sequence));
        if (!soon) soon = setTimeout(() => { soon = null; lastRead = Date.now(); if (!stop.signal.aborted) refresh(); }, nextReading(lastRead));
      },
      onDown: (err) => {
        // Said once, not at every try.
        if (!live) return;
        notice(`events of ${id}: ${err.message}; reading every few seconds until they can be followed again`);
        live = false;
        poll();
      },
      // The events missed meanwhile are read before the stream opens again.
      onBack: catchUp,
      onOpen: () => { if (!live) { live = true; clearTimeout(pollTimer); refresh(); } },
      onGone: gone,
    });
  })();
  const untick = ticker(main());
  return () => { stop.abort(); clearTimeout(timer); clearTimeout(soon); clearTimeout(pollTimer); clearTimeout(flushing); clearTimeout(lookAgain); lookAgain = null; untick(); };
}

function matchText(r) {
  const parts = [];
  if ((r.codes || []).length) parts.push("codes " + r.codes.join(","));
  if (r.class) parts.push("class " + r.class);
  if (r.message) parts.push(`message "${r.message}"`);
  if ((r.pipelines || []).length) parts.push("pipelines " + r.pipelines.join(","));
  if ((r.components || []).length) parts.push("components " + r.components.join(","));
  if ((r.plugins || []).length) parts.push("plugins " + r.plugins.join(","));
  return parts.join("; ") || "-";
}

// ruleAction says what a rule does: its action, and for a retry the
// schedule it sets.
function ruleAction(r) {
  const action = r.action || "retry";
  const p = r.policy;
  if (action !== "retry" || !p) return action;
  const parts = [];
  const strategy = p.strategy || "exponential";
  if ((p.schedule || []).length) parts.push("schedule " + p.schedule.map(dur).join(", "));
  else if (strategy === "fixed") parts.push(`fixed ${dur(p.minDelay)}`);
  else if (strategy === "random") parts.push(`random between ${dur(p.minDelay)} and ${dur(p.maxDelay)}`);
  else parts.push(`${strategy} from ${dur(p.minDelay)} to ${dur(p.maxDelay)}`);
  if (p.maxRetries) parts.push(p.maxRetries === -1 ? "no retry limit" : `at most ${p.maxRetries} retries`);
  return parts.length ? `retry (${parts.join(", ")})` : action;
}

// ruleSource says where a rule comes from, and where it is defined
// there, once.
function ruleSource(m) {
  const at = m.rule.definedAt || "";
  if (!m.source) return at || "-";
  return at && !at.startsWith(m.source) ? `${m.source}, ${at}` : at || m.source;
}

// MAX_RULES_BYTES bounds what the dry run sends: the API takes requests
// of up to 1 MiB.
const MAX_RULES_BYTES = 512 * 1024;

function rulesPage() {
  document.title = "Recovery rules - conduit";
  const list = el("div", { class: "table-wrap" }, loading());
  const yaml = el("textarea", { id: "dry-run-rules", rows: "10", spellcheck: "false",
    placeholder: "- name: rate-limits\n  match:\n    codes: [\"429\"]\n  action: retry\n  strategy: fixed\n  min-delay: 2s" });
  const since = el("select", { id: "dry-run-since" },
    [["3600s", "last hour"], ["86400s", "last day"], ["604800s", "last week"], ["", "all kept history"]].map(([v, t]) => el("option", { value: v, text: t, selected: v === "86400s" })));
  const result = el("div", { id: "dry-run-result", "aria-live": "polite" });
  main().replaceChildren(el("h1", { text: "Recovery rules" }), list,
    el("h2", { text: "Dry run" }),
    el("p", { class: "muted", text: "Paste rules (a YAML list, as in a rules file) to see which faults of the audit history they would have matched, and what they would have done. Nothing is changed." }),
    el("form", { class: "dry-run", onsubmit: async (ev) => {
      ev.preventDefault();
      const refuse = (text) => result.replaceChildren(el("p", { id: "dry-run-error", class: "error-text", role: "alert", text }));
      if (!yaml.value.trim()) { refuse("Paste at least one rule first: a YAML list, as in a rules file."); return; }
      if (new TextEncoder().encode(yaml.value).length > MAX_RULES_BYTES) {
        refuse("The rules are larger than 512 KiB; dry-run them from a file with the CLI: conduit recovery-rules dry-run FILE.");
        return;
      }
      result.replaceChildren(el("p", { class: "muted", text: "running..." }));
      try {
        const body = { files: [{ name: "console", content: yaml.value }] };
        if (since.value) body.since = since.value;
        const r = await call(RULES, "DryRunRecoveryRules", body);
        if (!(r.rules || []).length) { refuse("No rules in what was pasted: a YAML list of rules, as in a rules file."); return; }
        result.replaceChildren(
          el("p", { text: `${r.faults || 0} faults in the history${r.from ? ` from ${new Date(r.from).toLocaleString()}` : ""}; ${r.unmatched || 0} matched no rule.` }),
          el("div", { class: "table-wrap" }, el("table", { id: "dry-run-table", class: "stack" }, el("thead", {}, el("tr", {}, el("th", { text: "Rule" }), el("th", { text: "Action" }),
            el("th", { text: "Matched" }), el("th", { text: "Pipelines" }))),
          el("tbody", {}, (r.rules || []).map((x) => el("tr", { "data-rule": x.name }, cell("Rule", { class: "error-text", text: short(x.name), title: x.name.length > 120 ? x.name : null }),
            cell("Action", { text: `${x.action || "retry"}${x.schedule ? " (" + x.schedule + ")" : ""}` }),
            cell("Matched", { class: "num", text: String(x.matched || 0) }),
            cell("Pipelines", { class: "error-text", text: Object.entries(x.pipelines || {}).map(([k, v]) => `${k}: ${v}`).join(", ") || "-" })))))));
      } catch (err) {
        if (!failed(err)) refuse(short(err.message, 600));
      }
    } },
    el("label", { for: "dry-run-rules", text: "Rules" }), yaml,
    el("div", { class: "toolbar" }, el("label", { for: "dry-run-since", text: "Against " }), since,
      el("button", { type: "submit", text: "Dry run" }))),
    result);
  (async () => {
    try {
      const r = await call(RULES, "ListRecoveryRules", {});
      const rules = r.rules || [];
      list.replaceChildren(rules.length === 0 ? el("p", { class: "muted", text: "No recovery rules: every fault is decided by its code's class and the pipeline's policy." }) :
        el("table", { id: "rules", class: "stack" }, el("thead", {}, el("tr", {}, el("th", { text: "Name" }), el("th", { text: "Source" }),
          el("th", { text: "Priority" }), el("th", { text: "Action" }), el("th", { text: "Match" }))),
        el("tbody", {}, rules.map((m) => el("tr", { "data-rule": m.rule.name }, cell("Name", { class: "error-text", text: m.rule.name }),
          cell("Source", { text: ruleSource(m) }), cell("Priority", { class: "num", text: String(m.rule.priority || 0) }),
          cell("Action", { text: ruleAction(m.rule) }), cell("Match", { class: "error-text", text: matchText(m.rule) }))))));
    } catch (err) {
      if (!failed(err)) list.replaceChildren(el("p", { text: "could not list the rules: " + err.message }));
    }
  })();
  return () => {};
}

function dependenciesPage() {
  document.title = "Dependencies - conduit";
  // left: the page was left; a reading under way then sets no timer.
  // reading: one reading at a time, so that one loop of them runs.
  let timer, left = false, reading = false;
  const body = el("div", { class: "table-wrap" }, loading());
  main().replaceChildren(el("h1", { text: "Dependencies" }),
    el("p", { class: "muted", text: "External systems the pipelines name (dependency: on a connector, or in their errors). When several pipelines fail on one, its breaker opens: one canary retries, the others wait." }), body);
  async function refresh() {
    if (reading) return;
    clearTimeout(timer);
    reading = true;
    try {
      const r = await call(PIPELINES, "ListDependencies", {});
      if (left) return;
      const deps = r.dependencies || [];
      body.replaceChildren(deps.length === 0 ? el("p", { class: "muted", text: "No dependency has failed recently." }) :
        el("table", { id: "dependencies", class: "stack" }, el("thead", {}, el("tr", {}, el("th", { text: "Dependency" }), el("th", { text: "Breaker" }),
          el("th", { text: "Canary" }), el("th", { text: "Held" }), el("th", { text: "Recent failures" }))),
        el("tbody", {}, deps.map((d) => el("tr", { "data-dependency": d.name }, cell("Dependency", { class: "error-text", text: d.name }),
          cell("Breaker", {}, el("span", { class: "status " + (d.open ? "status-degraded" : "status-running"), text: d.open ? `open since ${clock(d.openedAt)}` : "closed" })),
          cell("Canary", { text: d.canary || "-" }), cell("Held", { class: "error-text", text: (d.held || []).join(", ") || "-" }),
          cell("Recent failures", { class: "error-text", text: (d.recentFailures || []).join(", ") || "-" }))))));
    } catch (err) {
      if (left || failed(err)) return;
      body.replaceChildren(el("p", { text: "could not list the dependencies: " + err.message }));
    } finally {
      reading = false;
    }
    // A hidden tab reads nothing; shown again, it reads at once.
    if (!left && !document.hidden) timer = setTimeout(refresh, REFRESH_MS);
  }
  const onVisibility = () => { if (!document.hidden && !left) refresh(); };
  document.addEventListener("visibilitychange", onVisibility);
  refresh();
  return () => { left = true; clearTimeout(timer); document.removeEventListener("visibilitychange", onVisibility); };
}

// notificationsPage shows the notification targets (never their URLs or
// keys: the API has none), what waits for each, and the recent
// deliveries; a button sends a target a test notification.
function notificationsPage() {
  document.title = "Notifications - conduit";
  let timer, left = false, reading = false;
  const body = el("div", { class: "table-wrap" }, loading());
  const recent = el("div", { class: "table-wrap" });
  const result = el("div", { id: "notification-test-result", "aria-live": "polite" });
  main().replaceChildren(el("h1", { text: "Notifications" }),
    el("p", { class: "muted", text: "Targets of notifications.targets in conduit.yml: what a pipeline's trouble is sent to. Their URLs and keys stay in conduit's environment." }),
    body, result, el("h2", { text: "Recent deliveries" }), recent);
  async function test(name) {
    result.replaceChildren(el("p", { class: "muted", text: `sending a test to ${name}...` }));
    try {
      const r = await call(NOTIFICATIONS, "TestNotificationTarget", { name });
      result.replaceChildren(r.ok ? el("p", { text: `${name} took the test notification.` }) :
        el("p", { class: "error-text", role: "alert", text: `${name} did not take it: ${short(r.error, 600)}` }));
    } catch (err) {
      if (!failed(err)) result.replaceChildren(el("p", { class: "error-text", role: "alert", text: short(err.message, 600) }));
    }
    refresh();
  }
  async function refresh() {
    if (reading) return;
    clearTimeout(timer);
    reading = true;
    try {
      const r = await call(NOTIFICATIONS, "ListNotificationTargets", {});
      if (left) return;
      const targets = r.targets || [], deliveries = r.deliveries || [];
      body.replaceChildren(el("table", { id: "notification-targets", class: "stack" }, el("thead", {}, el("tr", {}, el("th", { text: "Target" }),
        el("th", { text: "Kind" }), el("th", { text: "Events" }), el("th", { text: "Pipelines" }), el("th", { text: "Waiting" }),
        el("th", { text: "State" }), el("th", { text: "" }))),
      el("tbody", {}, targets.map((t) => el("tr", { "data-target": t.name }, cell("Target", { class: "error-text", text: t.name }),
        cell("Kind", { text: t.kind }), cell("Events", { class: "error-text", text: (t.events || []).join(", ") || "all" }),
        cell("Pipelines", { class: "error-text", text: (t.pipelines || []).join(", ") || "all" }),
        cell("Waiting", { class: "num", text: String(t.pending || 0) }),
        cell("State", {}, Number(t.failures || 0) > 0 ?
          el("span", { class: "error-text" }, el("span", { class: "status status-degraded", text: `failing, ${t.failures} in a row` }), " next ",
            el("span", { "data-at": t.nextAttemptAt, text: when(t.nextAttemptAt) }), ": " + short(t.lastError || "")) :
          el("span", { class: "status status-running", text: t.lastDeliveryAt ? `ok, last ${clock(t.lastDeliveryAt)}` : "ok" })),
        cell("", {}, el("button", { type: "button", text: "Send test", onclick: () => test(t.name) })))))));
      recent.replaceChildren(deliveries.length === 0 ? el("p", { class: "muted", text: "No deliveries since conduit started (the audit log keeps them: events of kind notified)." }) :
        el("table", { id: "notification-deliveries", class: "stack" }, el("thead", {}, el("tr", {}, el("th", { text: "Time" }), el("th", { text: "Target" }),
          el("th", { text: "Kind" }), el("th", { text: "Pipelines" }), el("th", { text: "Result" }))),
        el("tbody", {}, deliveries.map((d) => el("tr", {}, cell("Time", { text: clock(d.time) }), cell("Target", { class: "error-text", text: d.target }),
          cell("Kind", { text: d.kind + (d.test ? " (test)" : "") }), cell("Pipelines", { class: "num", text: String(d.pipelines || 0) }),
          cell("Result", { class: d.error ? "error-text" : "", text: d.error ? "failed: " + short(d.error) : "delivered" }))))));
    } catch (err) {
      if (left || failed(err)) return;
      body.replaceChildren(el("p", { text: err.code === "unimplemented" ?
        "No notification targets are configured: add notifications.targets to conduit.yml (docs/operations.md, Notifications)." :
        "could not list the notification targets: " + err.message }));
      return;
    } finally {
      reading = false;
    }
    if (!left && !document.hidden) timer = setTimeout(refresh, REFRESH_MS);
  }
  const onVisibility = () => { if (!document.hidden && !left) refresh(); };
  document.addEventListener("visibilitychange", onVisibility);
  const stopTicker = ticker(body);
  refresh();
  return () => { left = true; clearTimeout(timer); stopTicker(); document.removeEventListener("visibilitychange", onVisibility); };
}

// notFoundPage answers an address the console does not have.
function notFoundPage(hash) {
  document.title = "Not found - conduit";
  main().replaceChildren(el("h1", { text: "Not found" }),
    el("p", {}, `The console has no page at ${short(hash)}. `, el("a", { href: "#/", text: "All pipelines" })));
  return () => {};
}

// settings are the server's (settings.json): whether the API wants a
// token.
let settings = {};
const needToken = () => settings.tokenRequired && !validToken(sessionStorage.getItem(TOKEN_KEY) || "");

let leave = () => {};
function route() {
  leave();
  leave = () => {};
  notice(""); // a notice belongs to the page it was given on
  if (needToken()) {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenForm(false);
    return;
  }
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/pipeline\/(.+)$/);
  let id = null;
  if (m) {
    try { id = decodeURIComponent(m[1]); } catch { id = null; }
  }
  if (m && id === null) leave = notFoundPage(hash);
  else if (m) leave = pipelinePage(id);
  else if (hash === "#/rules") leave = rulesPage();
  else if (hash === "#/dependencies") leave = dependenciesPage();
  else if (hash === "#/notifications") leave = notificationsPage();
  else if (hash === "#/" || hash === "#") leave = listPage();
  else leave = notFoundPage(hash);
  syncForget();
  main().focus({ preventScroll: true });
}

document.getElementById("forget-token").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  history.replaceState(null, "", "#/");
  route();
});
window.addEventListener("hashchange", route);

// settings.json says whether the API wants a token: without one kept, the
// form comes first, rather than a refused call.
(async () => {
  settings = await fetch("settings.json").then((r) => r.json()).catch(() => ({}));
  route();
})();
