// millrace console: polls /console/api/snapshot every 2 s, fills the tables
// and keeps a few minutes of rates in the page for the charts; polls
// /console/api/audit, which the server recomputes about once a minute, every
// 15 s. No library,
// no build step: the binary serves this file as is. Every value from the
// cluster (topic names, hosts) goes into the page as text, never as markup.
"use strict";

const POLL_MS = 2000;
const AUDIT_POLL_MS = 15000;
const WINDOW_MS = 5 * 60 * 1000; // chart history kept in the page
const COLORS = ["#2e90fa", "#f79009", "#12b76a", "#ee46bc", "#7a5af8", "#f04438", "#06aed4", "#667085", "#84cc16", "#a15c07"];
const SVGNS = "http://www.w3.org/2000/svg";

// history maps a chart to its series: name -> [[time ms, value], ...].
const history = { produce: new Map(), components: new Map() };
const colorOf = new Map();

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function num(v, digits) {
  if (v === null || v === undefined || v < 0) return "-";
  return digits === undefined ? Number(v).toLocaleString("en-US") : Number(v).toFixed(digits);
}

// bytes writes a size as `millrace top` does (monitor.IECBytes): 0B, 6.1KiB.
function bytes(n) {
  if (n === null || n === undefined || n < 0) return "-";
  if (n < 1024) return n + "B";
  const units = "KMGTPE";
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(1) + units[i] + "iB";
}

function td(v, cls) { return el("td", cls ? { class: cls } : {}, v); }

function fillBody(table, rows, emptyText) {
  const body = document.querySelector("#" + table + " tbody");
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    const cols = document.querySelectorAll("#" + table + " thead th").length;
    body.append(el("tr", {}, el("td", { colspan: cols, class: "empty" }, emptyText)));
  }
}

function color(name) {
  if (!colorOf.has(name)) colorOf.set(name, COLORS[colorOf.size % COLORS.length]);
  return colorOf.get(name);
}

function record(chart, name, t, v) {
  const points = history[chart].get(name) || [];
  points.push([t, v]);
  while (points.length && points[0][0] < t - WINDOW_MS) points.shift();
  history[chart].set(name, points);
}

function render(s) {
  const rates = s.interval_seconds > 0;
  document.getElementById("summary").textContent =
    `${(s.brokers || []).length} broker(s) · controller ${s.controller >= 0 ? s.controller : "-"} · ` +
    `${(s.topics || []).length} topic(s) · ${s.under_replicated} under-replicated · ${s.offline} offline · ` +
    `updated ${new Date(s.time).toLocaleTimeString()}`;
  document.getElementById("errors").replaceChildren(...(s.errors || []).map(e => el("div", {}, e)));
  // What keeps an agent's records from shipping, in the agent's own words.
  document.getElementById("problems").replaceChildren(...(s.problems || []).map(p =>
    el("div", { class: "problem", "data-topic": p.topic || "", "data-cause": p.cause }, `${p.source}: ${p.message}`)));

  fillBody("brokers", (s.brokers || []).map(b =>
    el("tr", {}, td(b.id), td(`${b.host}:${b.port}`), td(b.rack || "-"), td(b.id === s.controller ? "controller" : "broker"),
      td(b.disk ? bytes(b.disk.log_bytes) : "-", "num"),
      td(b.disk && b.disk.total_bytes >= 0 ? `${bytes(b.disk.usable_bytes)} of ${bytes(b.disk.total_bytes)}` : "-", "num"))),
    "no brokers");

  const topics = s.topics || [];
  fillBody("topics", topics.map(t =>
    el("tr", { class: t.offline || t.under_replicated ? "bad" : "", "data-topic": t.name },
      td(t.name), td(t.partitions.length, "num"), td(t.replication_factor, "num"), td(num(t.records), "num"),
      td(rates ? num(t.produce_rate, 1) : "-", "num"), td(t.under_replicated, "num"), td(t.offline, "num"))),
    "no topics");

  const partRows = [];
  for (const t of topics) for (const p of t.partitions) {
    partRows.push(el("tr", { class: p.leader < 0 || p.under_replicated ? "bad" : "" },
      td(t.name), td(p.partition, "num"), td(p.leader >= 0 ? p.leader : "offline"), td(p.replicas.join(",")),
      td(p.isr.join(",")), td(num(p.start_offset), "num"), td(num(p.end_offset), "num")));
  }
  fillBody("partitions", partRows, "no partitions");

  const groupRows = [];
  for (const g of s.groups || []) {
    const topicsOf = g.topics.length ? g.topics : [{ topic: "-", lag: 0, consume_rate: 0 }];
    for (const gt of topicsOf) {
      groupRows.push(el("tr", { "data-group": g.name },
        td(g.name), td(g.state || "-"), td(g.members, "num"), td(gt.topic),
        td(num(gt.lag), "num lag"), td(rates ? num(gt.consume_rate, 1) : "-", "num")));
    }
  }
  fillBody("groups", groupRows, "no consumer groups");

  const comps = s.components || [];
  fillBody("components", comps.map(c =>
    el("tr", { class: c.stale ? "stale" : "" },
      td(c.name), td(c.kind), td(c.source), td(c.stale ? "stale" : `${num(c.rate, 1)} ${c.unit}`),
      td(num(Math.round(c.total)), "num"), td(new Date(c.last_seen).toLocaleTimeString()))),
    `no samples on ${s.metrics_topic} yet`);

  if (rates) {
    const t = Date.parse(s.time);
    for (const tp of topics) record("produce", tp.name, t, tp.produce_rate);
    for (const c of comps) record("components", `${c.name} (${c.unit})`, t, c.rate);
  }
  drawChart("produce");
  drawChart("components");
}

// drawChart draws one chart's series as lines over the last WINDOW_MS.
function drawChart(chart) {
  const root = document.getElementById("chart-" + chart);
  const legend = document.getElementById("legend-" + chart);
  const W = 600, H = 220, L = 48, R = 8, T = 8, B = 22;
  const now = Date.now(), from = now - WINDOW_MS;
  let top = 0;
  for (const points of history[chart].values()) for (const [, v] of points) top = Math.max(top, v);
  top = niceCeil(top);
  const x = t => L + (W - L - R) * (t - from) / WINDOW_MS;
  const y = v => T + (H - T - B) * (1 - v / top);
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    parts.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    parts.push(svg("text", { class: "axis", x: L - 4, y: y(v) + 4, "text-anchor": "end" }, shortNum(v)));
  }
  for (let m = 0; m <= 5; m++) {
    const t = from + m * 60000;
    parts.push(svg("text", { class: "axis", x: x(t), y: H - 6, "text-anchor": "middle" }, m === 5 ? "now" : `-${5 - m}m`));
  }
  const keys = [];
  for (const [name, points] of history[chart]) {
    if (!points.length) continue;
    keys.push(name);
    const d = points.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join("");
    const path = svg("path", { class: "series", d, stroke: color(chart + name) });
    path.append(svg("title", {}, name));
    parts.push(path);
    // A dot on the newest value, so a series is visible from its first point.
    const [lt, lv] = points[points.length - 1];
    parts.push(svg("circle", { cx: x(lt).toFixed(1), cy: y(lv).toFixed(1), r: 3, fill: color(chart + name) }));
  }
  if (!keys.length) {
    parts.push(svg("text", { class: "axis", x: W / 2, y: H / 2, "text-anchor": "middle" }, "waiting for two readings…"));
  }
  root.replaceChildren(...parts);
  legend.replaceChildren(...keys.map(k => {
    const s = el("span", {}, k);
    s.style.setProperty("--swatch", color(chart + k));
    return s;
  }));
}

function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function shortNum(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

async function poll() {
  try {
    const r = await fetch("/console/api/snapshot", { cache: "no-store" });
    if (!r.ok) throw new Error(`snapshot: HTTP ${r.status}`);
    render(await r.json());
  } catch (e) {
    document.getElementById("errors").replaceChildren(el("div", {}, `console cannot reach its server: ${e.message}`));
  }
  setTimeout(poll, POLL_MS);
}

// renderAudit shows the last audit: one row per lake, topic, source and hour;
// an hour that does not reconcile is marked and followed by a row that says
// why.
function renderAudit(a) {
  const summary = document.getElementById("audit-summary");
  summary.className = "note";
  if (!a.configured) {
    summary.textContent = a.message;
    fillBody("audit", [], "no lake to audit");
    return;
  }
  if (!a.seq) {
    summary.textContent = "waiting for the first audit…";
    return;
  }
  const rows = [];
  let open = 0;
  for (const lake of a.lakes || []) for (const l of (lake.report && lake.report.lines) || []) {
    if (l.status === "open") open++;
    const bad = l.status === "MISMATCH";
    rows.push(el("tr", { class: bad ? "bad" : l.status === "open" ? "stale" : "", "data-status": l.status },
      td(lake.name), td(l.topic), td(l.source), td(l.hour), td(num(l.accepted), "num"), td(num(l.landed), "num"),
      td(num(l.dead_lettered), "num"), td(num(l.deduplicated), "num"), td(num(l.no_id), "num"),
      td(bad ? "not reconciled" : l.status)));
    if (bad) rows.push(el("tr", { class: "bad problem" }, el("td", { colspan: 10 }, l.problem)));
  }
  const hours = Object.values(a.unreconciled_hours || {}).reduce((s, n) => s + n, 0);
  let text = `${hours} hour(s) not reconciled · ${open} open · last ${Math.round(a.since_seconds / 3600)} h, ` +
    (a.computed_at ? `computed ${new Date(a.computed_at).toLocaleTimeString()}` : "no audit completed yet") +
    `, every ${Math.round(a.interval_seconds)} s`;
  if (a.error) text += ` · the last audit failed: ${a.error}`;
  summary.textContent = text;
  if (hours || a.error) summary.className = "note bad";
  fillBody("audit", rows, "nothing audited yet: no agent has published counts in this window");
}

async function pollAudit() {
  try {
    const r = await fetch("/console/api/audit", { cache: "no-store" });
    if (!r.ok) throw new Error(`audit: HTTP ${r.status}`);
    renderAudit(await r.json());
  } catch (e) {
    const summary = document.getElementById("audit-summary");
    summary.className = "note bad";
    summary.textContent = `console cannot reach its server: ${e.message}`;
  }
  setTimeout(pollAudit, AUDIT_POLL_MS);
}

poll();
pollAudit();
