// The console: plain DOM, no framework, no build step. It talks to the
// Connect API of the server that serves it (JSON over HTTP; the Connect
// streaming protocol for live events) exactly as the CLI does.
"use strict";

const PIPELINES = "conduit.v1.PipelineService";
const RULES = "conduit.v1.RecoveryRuleService";
const TOKEN_KEY = "conduit-api-token";
const REFRESH_MS = 2000;

class AuthError extends Error {}
class ApiError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
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
  return data;
}

// watch follows a server stream (Connect protocol, JSON envelopes: one
// flag byte, a 4-byte big-endian length, the message) and calls onMessage
// for each message until signal aborts it or the stream ends.
async function watch(service, method, body, signal, onMessage) {
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

const statusName = (s) => (s || "PIPELINE_STATUS_UNSPECIFIED").replace("PIPELINE_STATUS_", "").toLowerCase();
const statusBadge = (s) => el("span", { class: "status status-" + statusName(s), text: statusName(s) });

function when(ts) {
  if (!ts) return "-";
  const d = new Date(ts);
  const secs = Math.round((d.getTime() - Date.now()) / 1000);
  const abs = Math.abs(secs);
  const rel = abs < 90 ? `${abs}s` : abs < 5400 ? `${Math.round(abs / 60)}m` : `${Math.round(abs / 3600)}h`;
  return `${d.toLocaleTimeString()} (${secs >= 0 ? "in " + rel : rel + " ago"})`;
}

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
  main().replaceChildren(el("h1", { text: "Token" }),
    el("form", {
      class: "token", onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, ev.target.elements.token.value.trim());
        route();
      },
    },
    el("p", { id: again ? "token-refused" : "token-asked", text: again ? "The API did not accept this token." : "This conduit asks for its API token (api.auth.token). It is kept for this browser tab only." }),
    el("label", { for: "token", text: "API token" }),
    el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
    el("button", { type: "submit", text: "Open the console" })));
  document.getElementById("token").focus();
}

function failed(err) {
  if (err instanceof AuthError) {
    const had = !!sessionStorage.getItem(TOKEN_KEY);
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenForm(had);
    return true;
  }
  return false;
}

function listPage() {
  let filter = sessionStorage.getItem("conduit-filter") || "";
  let timer;
  const select = el("select", { id: "filter", onchange: (ev) => { filter = ev.target.value; sessionStorage.setItem("conduit-filter", filter); refresh(); } },
    ["", "running", "recovering", "degraded", "stopped", "invalid"].map((s) => el("option", { value: s, text: s || "all", selected: s === filter })));
  const summary = el("span", { class: "muted", id: "summary" });
  const body = el("div", { class: "table-wrap" });
  main().replaceChildren(el("h1", { text: "Pipelines" }),
    el("div", { class: "toolbar" }, el("label", { for: "filter", text: "Status " }), select, summary), body);

  async function refresh() {
    clearTimeout(timer);
    try {
      const data = await call(PIPELINES, "ListPipelines", {});
      const all = data.pipelines || [];
      const shown = all.filter((p) => !filter || statusName(p.status) === filter);
      const cluster = all.some((p) => p.instance);
      summary.textContent = `${shown.length} of ${all.length}`;
      body.replaceChildren(el("table", { id: "pipelines" },
        el("thead", {}, el("tr", {}, el("th", { text: "ID" }), el("th", { text: "Status" }), cluster && el("th", { text: "Instance" }),
          el("th", { text: "Fails" }), el("th", { text: "Next attempt" }), el("th", { text: "Last error" }),
          el("th", { class: "hide-narrow", text: "Source" }))),
        el("tbody", {}, shown.map((p) => el("tr", { "data-id": p.id },
          el("td", {}, el("a", { href: "#/pipeline/" + encodeURIComponent(p.id), text: p.id })),
          el("td", {}, statusBadge(p.status)),
          cluster && el("td", { text: p.instance || "-" }),
          el("td", { class: "num", text: String(p.failCount || 0) }),
          el("td", { text: when(p.nextAttemptAt) }),
          el("td", {}, errorCell(p.lastError)),
          el("td", { class: "hide-narrow muted", text: p.origin === "api" ? "api" : (p.configFile || "-") }))))));
      document.getElementById("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
    } catch (err) {
      if (failed(err)) return;
      summary.textContent = "could not list the pipelines: " + err.message;
    }
    if (!document.hidden) timer = setTimeout(refresh, REFRESH_MS);
  }
  const onVisible = () => { if (!document.hidden) refresh(); };
  document.addEventListener("visibilitychange", onVisible);
  refresh();
  return () => { clearTimeout(timer); document.removeEventListener("visibilitychange", onVisible); };
}

function pipelinePage(id) {
  const stop = new AbortController();
  let timer;
  const head = el("div");
  const details = el("div");
  const events = el("tbody");
  main().replaceChildren(head, details, el("h2", { text: "Events" }),
    el("div", { class: "table-wrap" }, el("table", { id: "events" },
      el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "Time" }), el("th", { text: "Event" }),
        el("th", { text: "Status" }), el("th", { class: "hide-narrow", text: "By" }), el("th", { text: "Message" }))),
      events)));

  async function act(method, body, question) {
    if (question && !window.confirm(question)) return;
    try {
      await call(PIPELINES, method, { id, ...body });
      notice(`${id}: ${method === "StartPipeline" ? "started" : "stopped"}`);
    } catch (err) {
      if (!failed(err)) notice(`${id}: ${err.message}`);
    }
    refresh();
  }

  function render(p) {
    const status = statusName(p.status);
    head.replaceChildren(el("h1", {}, p.id + " ", statusBadge(p.status)),
      el("div", { class: "actions" },
        el("button", { type: "button", id: "start", disabled: !(status === "stopped" || status === "degraded"), onclick: () => act("StartPipeline", {}, null), text: "Start" }),
        el("button", { type: "button", id: "stop", disabled: !(status === "running" || status === "recovering"),
          onclick: () => act("StopPipeline", { force: false }, `Stop ${id}? In-flight records drain first.`), text: "Stop" }),
        el("button", { type: "button", id: "force-stop", class: "danger", disabled: !(status === "running" || status === "recovering"),
          onclick: () => act("StopPipeline", { force: true }, `Force-stop ${id}? In-flight records are dropped (read again later) and it becomes degraded.`), text: "Force stop" })));
    const e = p.lastError;
    const facts = [["Source", p.origin === "api" ? "created through the API" : (p.configFile || "-")],
      ["Instance", p.instance || null], ["Fail count", String(p.failCount || 0)], ["Next attempt", when(p.nextAttemptAt)],
      ["Degraded because", p.degradedReason || null], ["Probation", p.probation ? "yes: restarted, not proved yet" : null]]
      .filter(([, v]) => v !== null);
    const parts = [el("h2", { text: "State" }), el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]))];
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
          (ep.droppedAttempts ? `; ${ep.droppedAttempts} earlier attempts not kept` : "") }),
        el("ol", { class: "timeline", id: "timeline" }, ep.attempts.map((a) => el("li", {},
          el("strong", { text: `Attempt ${a.number}` }), " failed ", a.failedAt ? new Date(a.failedAt).toLocaleTimeString() : "", ": ",
          errorCell(a.error), el("br"),
          el("span", { class: "muted", text: `next after ${dur(a.delay)} (${a.strategy || "?"}), at ${a.nextAttemptAt ? new Date(a.nextAttemptAt).toLocaleTimeString() : "-"}` })))));
    }
    const policy = p.policy;
    if (policy) {
      parts.push(el("h2", { text: "Recovery policy" }), el("p", { class: "muted",
        text: `${policy.preset || "conduit"} preset, ${policy.strategy || "exponential"}, ${dur(policy.minDelay)} to ${dur(policy.maxDelay)}, max retries ${policy.maxRetries ?? "-"}` }));
    }
    details.replaceChildren(...parts);
  }

  function addEvent(ev) {
    if (events.querySelector(`tr[data-seq="${ev.sequence}"]`)) return;
    const before = statusName(ev.statusBefore), after = statusName(ev.statusAfter);
    events.prepend(el("tr", { "data-seq": String(ev.sequence), "data-kind": ev.kind },
      el("td", { class: "num", text: String(ev.sequence) }),
      el("td", { text: new Date(ev.time).toLocaleTimeString() }),
      el("td", { text: ev.kind }),
      el("td", { text: !ev.statusBefore || before === after ? after : `${before} \u2192 ${after}` }),
      el("td", { class: "hide-narrow", text: ev.actor || "" }),
      el("td", {}, ev.error && ev.error.code ? el("span", { class: "error-code", text: ev.error.code + " " }) : "", ev.message || "")));
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const data = await call(PIPELINES, "GetPipeline", { id });
      render(data.pipeline || {});
    } catch (err) {
      if (failed(err)) return;
      head.replaceChildren(el("h1", { text: id }), el("p", { text: err.message }));
    }
    if (!stop.signal.aborted) timer = setTimeout(refresh, REFRESH_MS);
  }

  async function follow() {
    try {
      const data = await call(PIPELINES, "ListPipelineEvents", { pipelineId: id, limit: 100, newestFirst: true });
      const list = data.events || [];
      list.slice().sort((a, b) => Number(a.sequence) - Number(b.sequence)).forEach(addEvent);
      const after = list.reduce((m, e) => Math.max(m, Number(e.sequence)), 0);
      await watch(PIPELINES, "WatchPipelineEvents", { pipelineId: id, afterSequence: String(after) }, stop.signal, (m) => {
        if (m.event) { addEvent(m.event); refresh(); }
      });
    } catch (err) {
      if (stop.signal.aborted || failed(err)) return;
      notice(`events of ${id}: ${err.message}; following again`);
      setTimeout(() => { if (!stop.signal.aborted) follow(); }, REFRESH_MS);
    }
  }
  refresh();
  follow();
  return () => { stop.abort(); clearTimeout(timer); };
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

function rulesPage() {
  const list = el("div", { class: "table-wrap" });
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
      result.replaceChildren(el("p", { class: "muted", text: "running..." }));
      try {
        const body = { files: [{ name: "console", content: yaml.value }] };
        if (since.value) body.since = since.value;
        const r = await call(RULES, "DryRunRecoveryRules", body);
        result.replaceChildren(
          el("p", { text: `${r.faults || 0} faults in the history${r.from ? ` from ${new Date(r.from).toLocaleString()}` : ""}; ${r.unmatched || 0} matched no rule.` }),
          el("table", { id: "dry-run-table" }, el("thead", {}, el("tr", {}, el("th", { text: "Rule" }), el("th", { text: "Action" }),
            el("th", { text: "Matched" }), el("th", { text: "Pipelines" }))),
          el("tbody", {}, (r.rules || []).map((x) => el("tr", { "data-rule": x.name }, el("td", { text: x.name }),
            el("td", { text: `${x.action || "retry"}${x.schedule ? " (" + x.schedule + ")" : ""}` }),
            el("td", { class: "num", text: String(x.matched || 0) }),
            el("td", { text: Object.entries(x.pipelines || {}).map(([k, v]) => `${k}: ${v}`).join(", ") || "-" }))))));
      } catch (err) {
        if (!failed(err)) result.replaceChildren(el("p", { id: "dry-run-error", class: "error-text", text: err.message }));
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
        el("table", { id: "rules" }, el("thead", {}, el("tr", {}, el("th", { text: "Name" }), el("th", { text: "Source" }),
          el("th", { text: "Priority" }), el("th", { text: "Action" }), el("th", { text: "Match" }))),
        el("tbody", {}, rules.map((m) => el("tr", { "data-rule": m.rule.name }, el("td", { text: m.rule.name }),
          el("td", { text: m.source || m.rule.definedAt || "-" }), el("td", { class: "num", text: String(m.rule.priority || 0) }),
          el("td", { text: m.rule.action || "retry" }), el("td", { text: matchText(m.rule) }))))));
    } catch (err) {
      if (!failed(err)) list.replaceChildren(el("p", { text: "could not list the rules: " + err.message }));
    }
  })();
  return () => {};
}

function dependenciesPage() {
  let timer;
  const body = el("div", { class: "table-wrap" });
  main().replaceChildren(el("h1", { text: "Dependencies" }),
    el("p", { class: "muted", text: "External systems the pipelines name (dependency: on a connector, or in their errors). When several pipelines fail on one, its breaker opens: one canary retries, the others wait." }), body);
  async function refresh() {
    clearTimeout(timer);
    try {
      const r = await call(PIPELINES, "ListDependencies", {});
      const deps = r.dependencies || [];
      body.replaceChildren(deps.length === 0 ? el("p", { class: "muted", text: "No dependency has failed recently." }) :
        el("table", { id: "dependencies" }, el("thead", {}, el("tr", {}, el("th", { text: "Dependency" }), el("th", { text: "Breaker" }),
          el("th", { text: "Canary" }), el("th", { text: "Held" }), el("th", { text: "Recent failures" }))),
        el("tbody", {}, deps.map((d) => el("tr", { "data-dependency": d.name }, el("td", { text: d.name }),
          el("td", {}, el("span", { class: "status " + (d.open ? "status-degraded" : "status-running"), text: d.open ? `open since ${new Date(d.openedAt).toLocaleTimeString()}` : "closed" })),
          el("td", { text: d.canary || "-" }), el("td", { text: (d.held || []).join(", ") || "-" }),
          el("td", { text: (d.recentFailures || []).join(", ") || "-" }))))));
    } catch (err) {
      if (failed(err)) return;
      body.replaceChildren(el("p", { text: "could not list the dependencies: " + err.message }));
    }
    if (!document.hidden) timer = setTimeout(refresh, REFRESH_MS);
  }
  refresh();
  return () => clearTimeout(timer);
}

let leave = () => {};
function route() {
  leave();
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/pipeline\/(.+)$/);
  if (m) leave = pipelinePage(decodeURIComponent(m[1]));
  else if (hash === "#/rules") leave = rulesPage();
  else if (hash === "#/dependencies") leave = dependenciesPage();
  else leave = listPage();
  main().focus({ preventScroll: true });
}

document.getElementById("forget-token").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/";
  route();
});
window.addEventListener("hashchange", route);
route();
