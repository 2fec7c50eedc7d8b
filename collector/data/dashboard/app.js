// agent-collector dashboard: reads /v1/usage (same origin, a dashboard token in a header) and draws it. No dependencies;
// every value goes in through textContent, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const int = (n) => (n ?? 0).toLocaleString("en-US");
function compact(n) {
  n = n ?? 0;
  for (const [size, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (Math.abs(n) >= size) return (n / size).toFixed(1) + suffix;
  }
  return String(n);
}
function money(row) {
  if (row.cost_usd === null || row.cost_usd === undefined) return "unpriced";
  const c = row.cost_usd;
  let text = "$" + (c < 1 ? c.toFixed(4) : c.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
  if (row.unpriced_calls) text += "*";
  if (row.cost_differs) text += "!";
  return text;
}
function ago(ns) {
  if (!ns) return "";
  const s = Math.max(0, Date.now() / 1000 - ns / 1e9);
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  if (s < 172800) return (s / 3600).toFixed(1) + " h ago";
  return Math.round(s / 86400) + " days ago";
}
const base = (path) => (path || "").replace(/\/+$/, "").split("/").pop() || "(none)";

// The daemon's budgets: one card when any is configured ("ok", or each one at its warning or over).
function budgetCards(budget) {
  if (!budget || !budget.limits) return [];
  const crossed = budget.crossed || [];
  const text = crossed.length ? crossed.map((c) => `${c.name} ${c.level === "over" ? "OVER" : "warn"} ` +
    `${Math.round((Number(c.fraction) || 0) * 100)}%`).join(", ") : "ok";
  const node = card(`budgets (${int(budget.limits)})`, text, "budget:state");
  node.classList.add(crossed.some((c) => c.level === "over") ? "over" : crossed.length ? "warn" : "ok");
  return [node];
}

function card(label, value, key) {
  return el("div", { class: "card" }, el("div", { class: "v", "data-k": key }, value), el("div", { class: "l" }, label));
}

// A report row's link to the sessions it sums (the Sessions view filtered by that agent, model, project, ...).
function rowLink(name, key, text) {
  if (!key || !["agent", "model", "project", "repo", "branch"].includes(name)) return text;
  const q = new URLSearchParams({ view: "sessions", [name]: key, days: $("days").value });
  const a = el("a", { href: "?" + q.toString() }, text);
  a.addEventListener("click", (e) => { e.preventDefault(); go({ view: "sessions", [name]: key, days: $("days").value }); });
  return a;
}

function usageTable(rows, label, name, keyOf) {
  if (!rows.length) return el("p", { class: "empty" }, "nothing recorded in this window");
  const head = el("tr", {}, ...[label, "Calls", "Input", "Cache read", "Cache write", "Output", "Reasoning",
    "Tools", "Failed", "Cost"].map((h) => el("th", {}, h)));
  const body = rows.map((r) => {
    const k = `${name}:${r.key}`;
    return el("tr", {},
      el("td", { class: "text", title: r.key }, rowLink(name, r.key,
        (keyOf ? keyOf(r.key) : r.key) || (name === "model" ? "unknown" : "(none)"))),
      el("td", { "data-k": `${k}:calls` }, int(r.calls)),
      el("td", { "data-k": `${k}:uncached_input_tokens` }, int(r.uncached_input_tokens)),
      el("td", { "data-k": `${k}:cache_read_tokens` }, int(r.cache_read_tokens)),
      el("td", { "data-k": `${k}:cache_write_tokens` }, int(r.cache_write_tokens)),
      el("td", { "data-k": `${k}:output_tokens` }, int(r.output_tokens)),
      el("td", { "data-k": `${k}:reasoning_tokens` }, int(r.reasoning_tokens)),
      el("td", { "data-k": `${k}:tool_calls` }, int(r.tool_calls)),
      el("td", { "data-k": `${k}:tool_failures`, class: r.tool_failures ? "bad" : "" }, int(r.tool_failures)),
      el("td", { "data-k": `${k}:cost_usd`, "data-v": r.cost_usd ?? "" }, money(r)));
  });
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

function barChart(target, days, series, format) {
  const width = 900, height = 190, left = 56, bottom = 22, top = 8;
  const totals = days.map((d) => series.reduce((s, [field]) => s + (d[field] || 0), 0));
  const max = Math.max(...totals, 0) || 1;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });
  const plotH = height - bottom - top, step = (width - left) / Math.max(days.length, 1);
  for (const f of [0, 0.5, 1]) {
    const y = top + plotH * (1 - f);
    root.append(svg("line", { x1: left, x2: width, y1: y, y2: y, class: "grid-line" }));
    root.append(svg("text", { x: left - 6, y: y + 3, "text-anchor": "end", class: "axis" }, format(max * f)));
  }
  days.forEach((d, i) => {
    let y = top + plotH;
    const x = left + i * step + step * 0.15, w = Math.max(step * 0.7, 1);
    const title = [d.key, ...series.map(([field, , label]) => `${label}: ${format(d[field] || 0)}`)].join("\n");
    const group = svg("g", { "data-day": d.key });
    group.append(svg("title", {}, title));
    for (const [field, cls] of series) {
      const h = ((d[field] || 0) / max) * plotH;
      y -= h;
      group.append(svg("rect", { x, y, width: w, height: h, class: cls }));
    }
    root.append(group);
    if (days.length <= 14 || i % Math.ceil(days.length / 10) === 0) {
      root.append(svg("text", { x: x + w / 2, y: height - 6, "text-anchor": "middle", class: "axis" }, d.key.slice(5)));
    }
  });
  target.replaceChildren(root);
}

function sessionsTable(sessions) {
  if (!sessions.length) return el("p", { class: "empty" }, "no live sessions (the daemon learns them from hooks)");
  const head = el("tr", {}, ...["Agent", "Session", "Status", "Project", "Model", "Input today", "Output today",
    "Tools today", "Errors today", "Last event"].map((h) => el("th", {}, h)));
  const rows = sessions.map((s) => el("tr", {},
    el("td", {}, s.agent), el("td", { title: s.session_id }, sessionLink(s.agent, s.session_id, s.label || s.session_id)),
    el("td", { class: "text" }, el("span", { class: `status ${s.status}`, "data-k": `session:${s.session_id}:status` },
      s.status + (s.waiting ? ` (${s.waiting} waiting)` : ""))),
    el("td", { class: "text", title: s.workspace || "" }, base(s.workspace)), el("td", { class: "text" }, s.model || ""),
    el("td", {}, int(s.input_tokens_today)), el("td", {}, int(s.output_tokens_today)),
    el("td", {}, int(s.tool_calls_today)), el("td", { class: s.errors_today ? "bad" : "" }, int(s.errors_today)),
    el("td", { class: "muted" }, ago(s.last_event_unix_nano))));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function failuresTable(failures) {
  if (!failures.length) return el("p", { class: "empty" }, "no tool failures or errors in this window");
  const head = el("tr", {}, ...["When", "Agent", "Session", "What", "Detail"].map((h) => el("th", {}, h)));
  const rows = failures.map((f) => el("tr", { "data-k": "failure" },
    el("td", { class: "muted" }, ago(f.time_unix_nano)), el("td", {}, f.agent), el("td", { title: f.session || "" },
      f.session ? sessionLink(f.agent, f.session, f.session_label || f.session) : ""),
    el("td", { class: "text bad" }, f.kind === "tool" ? `tool ${f.tool || "?"} failed` :
      `${f.error_type || "error"}${f.http_status ? " (HTTP " + f.http_status + ")" : ""}`),
    el("td", { class: "text muted" }, f.detail || "")));
  return el("table", { class: "left" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function healthTable(h) {
  const up = h.started ? ago(h.started * 1e9).replace(" ago", "") : "?";
  const rows = [
    ["version", h.version || "?"], ["pid", h.pid ?? "?"], ["uptime", up], ["sources", h.sources],
    ["records read", int(h.records)], ["entries", int(h.entries)], ["duplicates dropped", int(h.duplicates)],
    ["parse errors", int(h.parse_errors)],
    ["failing sources", Object.keys(h.failing_sources || {}).join(", ") || "none"],
    ...Object.entries(h.exporters || {}).map(([name, s]) => [`exporter ${name}`,
      Object.entries(s).map(([k, v]) => `${k} ${typeof v === "number" ? int(v) : v}`).join(", ")]),
    ["sessions by status", Object.entries(h.session_status || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "none"],
  ];
  return el("table", {}, el("tbody", {}, ...rows.map(([k, v]) => el("tr", {},
    el("td", {}, k), el("td", { class: "text", "data-k": `health:${k}` }, String(v))))));
}

// The repository and branch filters: every repository (and, for the one chosen, its branches; else all
// branches) with usage in the window; a choice the window lacks (from the address) stays selectable.
function fillSelect(select, values) {
  const chosen = select.value;
  const all = [...new Set(values.filter((v) => v))].sort();
  if (chosen && !all.includes(chosen)) all.push(chosen);
  select.replaceChildren(el("option", { value: "" }, "all"), ...all.map((v) => el("option", { value: v }, v)));
  select.value = chosen;
}

function gitChoices(pairs) {
  const repo = $("repo").value;
  fillSelect($("repo"), pairs.map((p) => p.repo));
  fillSelect($("branch"), pairs.filter((p) => !repo || p.repo === repo).map((p) => p.branch));
}

function render(data) {
  const t = data.total || {};
  const today = data.daily[data.daily.length - 1] || {};
  $("meta").textContent = `${data.since} – ${data.until} (${data.timezone}) · prices: ${data.price_table} · ` +
    `updated ${new Date(data.generated_unix * 1000).toLocaleTimeString()}`;
  $("cards").replaceChildren(
    card("cost today", money(today), "today:cost_usd"),
    card(`cost, ${data.days} days`, money(t), "total:cost_usd"),
    card("tokens today", compact(today.total_tokens), "today:total_tokens"),
    card(`model calls, ${data.days} days`, int(t.calls), "total:calls"),
    card(`tool calls, ${data.days} days`, int(t.tool_calls), "total:tool_calls"),
    card(`tool failures, ${data.days} days`, int(t.tool_failures), "total:tool_failures"),
    card("live sessions", int(data.sessions.length), "sessions:count"),
    ...budgetCards(data.budget));
  barChart($("chart-cost"), data.daily, [["cost_usd", "bar-cost", "cost"]], (v) => "$" + v.toFixed(v < 10 ? 2 : 0));
  barChart($("chart-tokens"), data.daily, [["uncached_input_tokens", "uncached", "input"],
    ["cache_read_tokens", "cache-read", "cache read"], ["cache_write_tokens", "cache-write", "cache write"],
    ["output_tokens", "output", "output"]], compact);
  $("by-agent").replaceChildren(usageTable(data.by_agent, "Agent", "agent"));
  $("by-model").replaceChildren(usageTable(data.by_model, "Model", "model"));
  $("by-project").replaceChildren(usageTable(data.by_project, "Project", "project", (p) => p || "(no workspace)"));
  $("by-repo").replaceChildren(usageTable(data.by_repo || [], "Repository", "repo", (r) => r || "(no repository)"));
  $("by-branch").replaceChildren(usageTable(data.by_branch || [], "Branch", "branch", (b) => b || "(no branch)"));
  gitChoices(data.git || []);
  $("sessions").replaceChildren(sessionsTable(data.sessions));
  $("failures").replaceChildren(failuresTable(data.recent_failures));
  $("health").replaceChildren(healthTable(data.health));
  $("footer").textContent = "Input is uncached input; cache reads and writes are apart. * leaves out calls of " +
    "models the price table does not know; ! the agent's own cost differs." +
    (data.content_capture ? " Content capture is on: error details are shown." : "");
  document.body.dataset.loaded = "1";
}

const SESSION_KEY = "agent-collector-dashboard";

// The link `agent-collector dashboard` prints carries a one-time code in the fragment (never sent to a
// server): it is exchanged once for a dashboard token, kept in this tab's sessionStorage and sent as a
// header to this origin only. No cookie is involved.
let pendingToken = null;  // one exchange at a time: the overview and the work views ask together at start
function dashboardToken() {
  pendingToken = pendingToken || exchangeToken().finally(() => { pendingToken = null; });
  return pendingToken;
}

async function exchangeToken() {
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  if (code) {
    history.replaceState(null, "", location.pathname + location.search);
    const answer = await fetch("/dashboard/session", {
      method: "POST", headers: { "X-Agent-Collector-Login": code }, credentials: "omit", cache: "no-store" });
    if (!answer.ok) throw new Error(`login refused: ${(await answer.json()).error || answer.status}`);
    sessionStorage.setItem(SESSION_KEY, (await answer.json()).token);
  }
  const token = sessionStorage.getItem(SESSION_KEY);
  if (!token) throw new Error("not logged in: open the link `agent-collector dashboard` prints");
  return token;
}

async function load() {
  if ((new URLSearchParams(location.search).get("view") || "overview") !== "overview") return;  // work.js's views
  const days = $("days").value;
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  try {
    const token = await dashboardToken();
    const git = ["repo", "branch"].map((k) => $(k).value ? `&${k}=${encodeURIComponent($(k).value)}` : "").join("");
    const answer = await fetch(`/v1/usage?days=${days}&tz=${encodeURIComponent(tz)}${git}`, {
      headers: { "X-Agent-Collector-Dashboard": token }, credentials: "omit", cache: "no-store" });
    if (answer.status === 401) sessionStorage.removeItem(SESSION_KEY);
    if (!answer.ok) throw new Error(`HTTP ${answer.status}: ${(await answer.json()).error || ""}`);
    render(await answer.json());
  } catch (err) {
    $("meta").textContent = `cannot load the numbers: ${err.message}`;
    document.body.dataset.loaded = "error";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const asked = new URLSearchParams(location.search).get("days");
  if (asked && /^\d+$/.test(asked)) {
    if (![...$("days").options].some((o) => o.value === asked)) $("days").append(el("option", {}, asked));
    $("days").value = asked;
  }
  for (const key of ["repo", "branch"]) {  // ?repo=…&branch=… pre-select, like ?days=
    const value = new URLSearchParams(location.search).get(key);
    if (value) {
      $(key).append(el("option", { value }, value));
      $(key).value = value;
    }
  }
  $("repo").addEventListener("change", () => { $("branch").value = ""; load(); });  // another repository's branches
  $("branch").addEventListener("change", load);
  $("days").addEventListener("change", load);
  // the first load: work.js shows the view the address names (the overview calls load)
  setInterval(load, 15000);
});
