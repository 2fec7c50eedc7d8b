// agent-collector dashboard, the views of work: the sessions list (/v1/usage/sessions, one page at a time, sorted and
// filtered by the daemon), a session's timeline (/v1/usage/timeline) and the activity (/v1/usage/activity). The view
// and its filters live in the address (?view=sessions&agent=codex...), so a view can be linked, reloaded and gone
// back to. Uses app.js's el, int, money, ago, base and dashboardToken; every value goes in through textContent.
"use strict";

const FILTERS = ["q", "agent", "project", "repo", "branch", "model", "from", "to"];
const PAGE = 50;

function params() { return new URLSearchParams(location.search); }

function go(changes, replace) {
  const next = params();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") next.delete(k); else next.set(k, v);
  }
  history[replace ? "replaceState" : "pushState"](null, "", location.pathname + "?" + next.toString());
  show();
}

async function getJson(path) {
  const token = await dashboardToken();
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  const answer = await fetch(`${path}${path.includes("?") ? "&" : "?"}tz=${encodeURIComponent(tz)}`, {
    headers: { "X-Agent-Collector-Dashboard": token }, credentials: "omit", cache: "no-store" });
  if (!answer.ok) throw new Error(`HTTP ${answer.status}: ${(await answer.json()).error || ""}`);
  return answer.json();
}

function query(extra) {
  const p = params(), out = new URLSearchParams();
  for (const k of FILTERS) if (p.get(k)) out.set(k, p.get(k));
  if (!p.get("from")) out.set("days", p.get("days") || "30");
  for (const [k, v] of Object.entries(extra || {})) out.set(k, v);
  return out.toString();
}

function duration(s) {
  if (s === null || s === undefined) return "";
  if (s < 90) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function when(ns) { return ns ? new Date(ns / 1e6).toLocaleString() : ""; }
function sessionLink(agent, session, text) {
  const q = new URLSearchParams({ view: "session", of: agent, session });
  const a = el("a", { href: "?" + q.toString(), "data-session": session }, text);
  a.addEventListener("click", (e) => { e.preventDefault(); go({ view: "session", of: agent, session }); });
  return a;
}

const COLUMNS = [  // header, sort key (or none), cell
  ["Session", null, (r) => sessionLink(r.agent, r.session, r.title)],
  ["Agent", "agent", (r) => r.agent], ["Project", null, (r) => base(r.project)], ["Repository", null, (r) => r.repo || ""],
  ["Branch", null, (r) => r.branch || ""], ["Model", null, (r) => r.model || ""],
  ["Start", "start", (r) => when(r.start_unix_nano)], ["Duration", "duration", (r) => duration(r.duration_s)],
  ["Calls", "calls", (r) => int(r.calls)], ["Tokens", "tokens", (r) => int(r.total_tokens)],
  ["Cost", "cost", (r) => money(r)], ["Tool failures", "tool_failures", (r) => int(r.tool_failures)],
  ["Status", null, (r) => el("span", { class: `status ${r.status}` }, r.status)],
];

function sessionList(rows, sort, order) {
  if (!rows.length) return el("p", { class: "empty" }, "no session matches");
  const head = el("tr", {}, ...COLUMNS.map(([label, key]) => {
    if (!key) return el("th", { scope: "col" }, label);
    const mark = key === sort ? (order === "asc" ? " ▲" : " ▼") : "";
    const button = el("button", { type: "button", class: "sort", "data-sort": key }, label + mark);
    button.addEventListener("click", () => go({ sort: key, order: key === sort && order === "desc" ? "asc" : "desc",
                                              offset: null }));
    return el("th", { scope: "col", "aria-sort": key === sort ? (order === "asc" ? "ascending" : "descending") : null }, button);
  }));
  const body = rows.map((r) => {
    const tr = el("tr", { tabindex: "0", class: "row", "data-key": r.key },
      ...COLUMNS.map(([label, , cell], i) => el("td", {
        class: i === 0 || (i > 1 && i < 6) ? "text" : (label === "Tool failures" && r.tool_failures ? "bad" : ""),
        title: i === 2 ? r.project || "" : null,
        "data-k": { Calls: `s:${r.session}:calls`, Tokens: `s:${r.session}:total_tokens`, Cost: `s:${r.session}:cost_usd`,
                    "Tool failures": `s:${r.session}:tool_failures`, Agent: `s:${r.session}:agent` }[label] || null,
      }, cell(r))));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") go({ view: "session", of: r.agent, session: r.session }); });
    return tr;
  });
  return el("table", { class: "sessions" }, el("thead", {}, head), el("tbody", {}, ...body));
}

async function showSessions() {
  const p = params(), sort = p.get("sort") || "start", order = p.get("order") || "desc";
  const offset = Number(p.get("offset") || 0);
  const data = await getJson(`/v1/usage/sessions?${query({ sort, order, offset, limit: PAGE })}`);
  $("s-count").textContent = `${int(data.total)} sessions` + (data.total > PAGE ?
    `, ${offset + 1}–${Math.min(offset + PAGE, data.total)} shown` : "");
  $("s-count").dataset.k = "sessions:total";
  $("s-table").replaceChildren(sessionList(data.rows, sort, order));
  $("s-prev").disabled = offset <= 0;
  $("s-next").disabled = offset + PAGE >= data.total;
  $("s-page").textContent = data.total ? `page ${Math.floor(offset / PAGE) + 1} of ${Math.ceil(data.total / PAGE)}` : "";
  $("s-prev").onclick = () => go({ offset: Math.max(0, offset - PAGE) || null });
  $("s-next").onclick = () => go({ offset: offset + PAGE });
  fillList("l-agent", data.rows.map((r) => r.agent));
  fillList("l-model", data.rows.map((r) => r.model));
}

function fillList(id, values) {
  $(id).replaceChildren(...[...new Set(values.filter((v) => v))].sort().map((v) => el("option", { value: v })));
}

function tokens(e) {
  return `in ${int(e.uncached_input_tokens)} · cache read ${int(e.cache_read_tokens)} · cache write ` +
    `${int(e.cache_write_tokens)} · out ${int(e.output_tokens)}`;
}

function eventItem(e) {
  if (e.kind === "model") {
    return el("li", { class: "ev model" }, el("span", { class: "what" }, `model ${e.model || "unknown"}`),
      el("span", {}, tokens(e)), el("span", {}, money(e)),
      el("span", { class: "muted" }, e.latency_ms === null ? "" : `${int(Math.round(e.latency_ms))} ms`));
  }
  if (e.kind === "tool") {
    const bad = e.outcome === "error";
    const li = el("li", { class: "ev tool" + (bad ? " failed" : "") }, el("span", { class: "what" }, `tool ${e.tool || "?"}`),
      el("span", { class: bad ? "bad" : "ok" }, e.outcome),
      el("span", { class: "muted" }, e.duration_ms === null ? "" : `${int(Math.round(e.duration_ms))} ms`),
      el("span", { class: "muted" }, e.result_bytes === null ? "" : `result ${int(e.result_bytes)} B`));
    for (const sub of e.subagents || []) li.append(subagent(sub));
    return li;
  }
  if (e.kind === "subagent") return el("li", { class: "ev" }, subagent(e));
  if (e.kind === "error") {
    return el("li", { class: "ev error" }, el("span", { class: "what bad" }, "error"), el("span", { class: "muted" }, e.detail || ""));
  }
  if (e.kind === "compaction") return el("li", { class: "ev compaction" }, el("span", { class: "what" }, "context compacted"));
  return el("li", { class: "ev prompt" }, el("span", { class: "what" }, "prompt"),
    el("span", { class: "muted" }, new Date(e.time_unix_nano / 1e6).toLocaleTimeString()));
}

function subagent(group) {
  return el("div", { class: "subagent" }, el("div", { class: "muted" }, `subagent ${group.id}`),
    el("ul", { class: "events" }, ...group.events.map(eventItem)));
}

function turnBlock(t, compactions) {
  const k = `tl:turn:${t.turn}`;
  const head = el("h3", {}, `Turn ${t.turn}`, " ",
    el("span", { class: "muted" }, `${int(t.calls)} calls · `),
    el("span", { "data-k": `${k}:total_tokens` }, int(t.total_tokens)), el("span", { class: "muted" }, " tokens · "),
    el("span", { "data-k": `${k}:cost_usd` }, money(t)), el("span", { class: "muted" }, ` · ${int(t.tool_calls)} tools`),
    t.tool_failures ? el("span", { class: "bad" }, ` · ${int(t.tool_failures)} failed`) : "");
  const marks = compactions.filter((c) => c.turn === t.turn).map(eventItem);
  return el("section", { class: "turn", tabindex: "0", "data-turn": t.turn }, head,
    el("ul", { class: "events" }, ...marks, ...t.events.map(eventItem)));
}

async function showTimeline() {
  const p = params();
  const data = await getJson(`/v1/usage/timeline?${new URLSearchParams({ agent: p.get("of") || "", session: p.get("session") || "" })}`);
  $("t-title").textContent = `${data.agent} session ${data.session}`;
  const sum = (f) => data.turns.reduce((s, t) => s + (t[f] || 0), 0);
  const cost = data.turns.some((t) => t.cost_usd === null) ? null : sum("cost_usd");
  $("t-summary").replaceChildren(
    card("turns", int(data.turns.length), "tl:turns"), card("model calls", int(sum("calls")), "tl:calls"),
    card("tokens", int(sum("total_tokens")), "tl:total_tokens"),
    card("cost", money({ cost_usd: cost, unpriced_calls: sum("unpriced_calls") }), "tl:cost_usd"),
    card("tool calls", int(sum("tool_calls")), "tl:tool_calls"),
    card("tool failures", int(sum("tool_failures")), "tl:tool_failures"),
    card("duration", duration((data.last_unix_nano - data.start_unix_nano) / 1e9), "tl:duration"));
  $("t-turns").replaceChildren(...data.turns.map((t) => turnBlock(t, data.compactions)));
}

function heatmap(grid) {
  const max = Math.max(1, ...grid.flat());
  const days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
  const head = el("tr", {}, el("th", {}, ""), ...[...Array(24).keys()].map((h) => el("th", {}, String(h))));
  const rows = grid.map((hours, d) => el("tr", {}, el("th", { scope: "row" }, days[d]),
    ...hours.map((n, h) => el("td", { class: `heat lv${n ? Math.ceil((n / max) * 4) : 0}`, title: `${days[d]} ${h}:00 — ${int(n)} calls`,
                                  "data-k": `heat:${d}:${h}` }, n ? "" : ""))));
  return el("table", { class: "heatmap" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function topList(rows, value) {
  if (!rows.length) return el("p", { class: "empty" }, "no sessions in this window");
  return el("ol", { class: "top" }, ...rows.map((r) => el("li", {}, sessionLink(r.agent, r.session, r.title), " ",
    el("span", { class: "muted" }, value(r)))));
}

async function showActivity() {
  const data = await getJson(`/v1/usage/activity?${query()}`);
  $("a-heat").replaceChildren(heatmap(data.by_hour));
  barChart($("a-days"), data.by_day.map((d) => ({ key: d.day, calls: d.calls })), [["calls", "uncached", "calls"]], compact);
  $("a-top-cost").replaceChildren(topList(data.top.cost || [], (r) => money(r)));
  $("a-top-tokens").replaceChildren(topList(data.top.tokens || [], (r) => int(r.total_tokens) + " tokens"));
  $("a-top-duration").replaceChildren(topList(data.top.duration || [], (r) => duration(r.duration_s)));
}

async function show() {
  const view = params().get("view") || "overview";
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.view === (view === "session" ? "sessions" : view)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  $("overview").hidden = view !== "overview";
  $("work").hidden = view === "overview";
  $("work-filters").hidden = view === "session";
  $("work-sessions").hidden = view !== "sessions";
  $("work-session").hidden = view !== "session";
  $("work-activity").hidden = view !== "activity";
  for (const k of FILTERS) $(`f-${k}`).value = params().get(k) || "";
  for (const id of ["days", "repo", "branch"]) $(id).parentElement.hidden = view !== "overview";
  if (view === "overview") { load(); return; }
  delete document.body.dataset.work;
  try {
    await ({ sessions: showSessions, session: showTimeline, activity: showActivity }[view] || showSessions)();
    $("meta").textContent = "whole sessions active in the window, from the usage store; keys: / filters, j/k rows, " +
      "Enter opens, Escape back";
    document.body.dataset.work = "1";
  } catch (err) {
    $("meta").textContent = `cannot load the view: ${err.message}`;
    document.body.dataset.work = "error";
  }
}

function applyFilters() {
  const changes = { offset: null };
  for (const k of FILTERS) changes[k] = $(`f-${k}`).value.trim();
  go(changes);
}

// Keys: Ctrl-K or "/" to the search, j/k or the arrows between rows and turns, Enter opens a session, Escape back.
function keys(e) {
  const target = e.target;
  if ((e.ctrlKey || e.metaKey) && e.key === "k") {  // search from anywhere, as in other session viewers
    e.preventDefault();
    if (params().get("view") !== "sessions") go({ view: "sessions", of: null, session: null });
    $("f-q").focus();
    return;
  }
  if (target.matches("input, select, textarea")) {
    if (e.key === "Enter") applyFilters();
    return;
  }
  if (e.key === "/") { e.preventDefault(); $("f-q").focus(); return; }
  if (e.key === "Escape" && params().get("view") === "session") { history.back(); return; }
  const down = e.key === "j" || e.key === "ArrowDown", up = e.key === "k" || e.key === "ArrowUp";
  if (!down && !up) return;
  const items = [...document.querySelectorAll("tr.row, section.turn")].filter((n) => n.offsetParent !== null);
  if (!items.length) return;
  e.preventDefault();
  const at = items.indexOf(document.activeElement);
  items[Math.max(0, Math.min(items.length - 1, at < 0 ? 0 : at + (down ? 1 : -1)))].focus();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const a of document.querySelectorAll("#nav a")) {
    a.addEventListener("click", (e) => { e.preventDefault(); go({ view: a.dataset.view, of: null, session: null }); });
  }
  $("f-apply").addEventListener("click", applyFilters);
  document.addEventListener("keydown", keys);
  window.addEventListener("popstate", show);
  show();
});
