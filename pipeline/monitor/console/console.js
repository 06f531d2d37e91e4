// millrace console: polls /console/api/snapshot every 2 s, fills the tables
// and keeps a few minutes of rates in the page for the charts; polls
// /console/api/audit, which the server recomputes about once a minute, every
// 15 s. The metrics tab (#metrics) lists the metric series the server keeps
// (/console/api/metrics) and charts the chosen one's last hour
// (/console/api/metrics/points), redrawn every 2 s. The lake tab (#lake)
// shows the lakes' Iceberg tables (/console/api/lake) every 15 s. No library,
// no build step: the binary serves this file as is. Every value from the
// cluster (topic names, hosts, metric names and labels, which anyone who can
// post a metric chooses) goes into the page as text, never as markup.
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

  // One row per input and publishing process: what it takes per second
  // and its errors (failed requests, or lost syslog messages).
  fillBody("inputs", (s.inputs || []).map(i =>
    el("tr", { class: i.stale ? "stale" : (i.error_rate > 0 ? "bad" : ""), "data-input": i.name, "data-source": i.source },
      td(i.name), td(i.source), td(i.stale ? "stale" : `${num(i.rate, 1)} ${i.unit}`, "num rate"),
      td(num(Math.round(i.total)), "num total"), td(i.stale ? "stale" : `${num(i.error_rate, 1)} ${i.error_unit}`, "num error-rate"),
      td(num(Math.round(i.errors)), "num errors"), td(new Date(i.last_seen).toLocaleTimeString()))),
    `no input has published on ${s.metrics_topic} yet`);

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
  let open = 0, unknown = 0;
  for (const lake of a.lakes || []) for (const l of (lake.report && lake.report.lines) || []) {
    if (l.status === "open") open++;
    if (l.status === "unknown") unknown++;
    const bad = l.status === "MISMATCH";
    rows.push(el("tr", { class: bad ? "bad" : l.status === "open" || l.status === "unknown" ? "stale" : "", "data-status": l.status },
      td(lake.name), td(l.topic), td(l.source), td(l.hour), td(num(l.accepted), "num"), td(num(l.landed), "num"),
      td(num(l.dead_lettered), "num"), td(num(l.deduplicated), "num"), td(num(l.no_id), "num"),
      td(bad ? "not reconciled" : l.status)));
    if (bad || l.status === "unknown") rows.push(el("tr", { class: bad ? "bad problem" : "stale problem" }, el("td", { colspan: 10 }, l.problem)));
  }
  for (const lake of a.lakes || []) if (lake.omitted_lines) {
    rows.push(el("tr", { class: "stale problem" }, el("td", { colspan: 10 },
      `${num(lake.omitted_lines)} more ok line(s) of ${lake.name} not shown: millrace audit lists every line`)));
  }
  // A topic agents feed that no sink lands reaches no lake: say so first.
  const notLanded = a.not_landed || [];
  for (const topic of notLanded.slice().reverse()) {
    rows.unshift(el("tr", { class: "bad problem", "data-status": "not-landed" },
      el("td", { colspan: 10 }, `topic ${topic}: agents feed it, but no sink lands it in any lake`)));
  }
  const hours = Object.values(a.unreconciled_hours || {}).reduce((s, n) => s + n, 0);
  let text = `${hours} hour(s) not reconciled · ${notLanded.length} topic(s) not landed · ${open} open · ${unknown} unknown · ` +
    `last ${Math.round(a.since_seconds / 3600)} h, ` +
    (a.computed_at ? `computed ${new Date(a.computed_at).toLocaleTimeString()}` : "no audit completed yet") +
    `, every ${Math.round(a.interval_seconds)} s`;
  if (a.error) text += ` · the last audit failed: ${a.error}`;
  summary.textContent = text;
  if (hours || notLanded.length || a.error) summary.className = "note bad";
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

// ---- lake tab ----

const LAKE_POLL_MS = 15000;

// lakeTable builds a table element with a header row and rows of cells.
function lakeTable(cls, heads, rows, emptyText) {
  const body = el("tbody", {}, ...rows);
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: heads.length, class: "empty" }, emptyText)));
  return el("table", { class: cls }, el("thead", {}, el("tr", {}, ...heads.map(h => el("th", {}, h)))), body);
}

// offsetsOf is the millrace summary properties of a snapshot: the groups'
// offsets, "group: 0:1200,1:988".
function offsetsOf(summary) {
  const out = [];
  for (const [k, v] of Object.entries(summary || {}).sort()) {
    if (k.startsWith("millrace.offsets.")) out.push(`${k.slice("millrace.offsets.".length)} = ${v}`);
  }
  return out.join("; ");
}

// renderLake shows each lake's tables: totals, snapshots newest first,
// partitions, and the current snapshot's files.
function renderLake(v) {
  const summary = document.getElementById("lake-summary");
  summary.className = "note";
  const parts = [];
  let tables = 0;
  for (const lake of v.lakes || []) {
    if (lake.error) parts.push(el("div", { class: "note bad" }, `${lake.name}: ${lake.error}`));
    for (const t of lake.tables || []) {
      tables++;
      const snaps = (t.snapshots || []).slice().reverse();
      const box = el("div", { class: "lake-table", "data-table": t.identifier },
        el("h3", {}, t.identifier),
        el("div", { class: "note" }, `${num(t.rows)} rows · ${num((t.files || []).length + (t.omitted_files || 0))} files · ` +
          `${num((t.partitions || []).length)} partitions · ${bytes(t.bytes)} · ` +
          `current snapshot ${t.current_snapshot_id || "none"} · ${t.spec} · lake ${lake.name}`),
        el("h4", {}, "Snapshots (newest first)"),
        lakeTable("lake-snapshots", ["Snapshot", "Time", "Operation", "Added rows", "Total rows", "Offsets"],
          snaps.map(s => el("tr", { class: s.current ? "" : "stale", "data-snapshot": s.id },
            td(s.id), td(new Date(s.time).toLocaleString()), td(s.operation + (s.current ? " (current)" : "")),
            td(num(Number((s.summary || {})["added-records"] || 0)), "num"),
            td(num(Number((s.summary || {})["total-records"] || 0)), "num"),
            el("td", { class: "wrap" }, offsetsOf(s.summary)))), "no snapshot yet"),
        el("h4", {}, "Partitions of the current snapshot"),
        lakeTable("lake-partitions", ["Partition", "Files", "Rows", "Size"],
          (t.partitions || []).map(p => el("tr", {}, td(p.name || "(unpartitioned)"), td(num(p.files), "num"),
            td(num(p.rows), "num"), td(bytes(p.bytes), "num"))), "no rows yet"),
        el("h4", {}, "Data files of the current snapshot"),
        lakeTable("lake-files", ["File", "Partition", "Rows", "Size"],
          (t.files || []).map(f => el("tr", {}, el("td", { class: "wrap" }, f.location), td(f.partition),
            td(num(f.rows), "num"), td(bytes(f.bytes), "num"))), "no files yet"));
      if (t.omitted_snapshots || t.omitted_files) {
        box.append(el("div", { class: "note" }, `${num(t.omitted_snapshots || 0)} older snapshot(s) and ` +
          `${num(t.omitted_files || 0)} file(s) not shown: millrace lake inspect lists them all`));
      }
      parts.push(box);
    }
  }
  document.getElementById("lake-tables").replaceChildren(...parts);
  summary.textContent = v.message || `${tables} table(s) · read ${new Date(v.at).toLocaleTimeString()}, every ${LAKE_POLL_MS / 1000} s`;
}

async function pollLake() {
  if (document.getElementById("lake-page").hidden) return;
  try {
    const r = await fetch("/console/api/lake", { cache: "no-store" });
    if (!r.ok) throw new Error(`lake: HTTP ${r.status}`);
    renderLake(await r.json());
  } catch (e) {
    const summary = document.getElementById("lake-summary");
    summary.className = "note bad";
    summary.textContent = `console cannot reach its server: ${e.message}`;
  }
}

function lakePoller() {
  pollLake();
  setTimeout(lakePoller, LAKE_POLL_MS);
}

// ---- metrics tab ----

const SERIES_POLL_MS = 5000;
const metricsState = { selected: "", match: "", series: [] };

function labelText(labels) {
  const keys = Object.keys(labels || {}).sort();
  if (!keys.length) return "";
  return "{" + keys.map(k => `${k}=${JSON.stringify(labels[k])}`).join(",") + "}";
}

function seriesText(s) {
  return `${s.name}${labelText(s.labels)}  · ${s.source || "-"}`;
}

// fmtValue writes a value with up to 6 significant digits, as top does.
function fmtValue(v) {
  if (v === null || v === undefined) return "NaN";
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return Number(v.toPrecision(6)).toString();
}

function showTab() {
  const tab = location.hash.startsWith("#metrics") ? "metrics" : location.hash.startsWith("#lake") ? "lake" : "overview";
  document.getElementById("overview").hidden = tab !== "overview";
  document.getElementById("metrics-page").hidden = tab !== "metrics";
  document.getElementById("lake-page").hidden = tab !== "lake";
  for (const t of ["overview", "metrics", "lake"]) document.getElementById("tab-" + t).className = t === tab ? "active" : "";
  if (tab === "metrics") pollSeries();
  if (tab === "lake") pollLake();
}

async function pollSeries() {
  if (document.getElementById("metrics-page").hidden) return;
  try {
    const q = new URLSearchParams({ match: metricsState.match, limit: "500" });
    const r = await fetch("/console/api/metrics?" + q, { cache: "no-store" });
    if (!r.ok) throw new Error(`metrics: HTTP ${r.status}`);
    renderSeriesList(await r.json());
  } catch (e) {
    document.getElementById("metric-count").textContent = `console cannot reach its server: ${e.message}`;
  }
}

function renderSeriesList(list) {
  metricsState.series = list.series || [];
  const select = document.getElementById("metric-series");
  const options = metricsState.series.map(s => {
    const o = el("option", { value: s.id }, seriesText(s));
    o.title = seriesText(s);
    return o;
  });
  select.replaceChildren(...options);
  if (metricsState.selected) select.value = metricsState.selected;
  let text = `${list.matched} of ${list.total} series`;
  if (list.series.length < list.matched) text += ` (first ${list.series.length}; filter to narrow)`;
  if (list.dropped) text += ` · ${list.dropped} samples of new series dropped at the limit of ${list.limit}`;
  document.getElementById("metric-count").textContent = text;
}

async function pollPoints() {
  const id = metricsState.selected;
  if (id && !document.getElementById("metrics-page").hidden) {
    try {
      const r = await fetch("/console/api/metrics/points?" + new URLSearchParams({ id }), { cache: "no-store" });
      if (r.status === 404) throw new Error("this series is no longer kept");
      if (!r.ok) throw new Error(`points: HTTP ${r.status}`);
      const p = await r.json();
      if (id === metricsState.selected) drawMetric(p);
    } catch (e) {
      document.getElementById("metric-last").textContent = e.message;
    }
  }
  setTimeout(pollPoints, POLL_MS);
}

function selectSeries(id) {
  metricsState.selected = id;
  window.history.replaceState(null, "", "#metrics=" + encodeURIComponent(id));
  document.getElementById("chart-metric").replaceChildren();
  document.getElementById("metric-last").textContent = "loading…";
}

// drawMetric charts one series' points over their time span; a null value
// (NaN) breaks the line.
function drawMetric(p) {
  document.getElementById("metric-title").textContent = p.name;
  document.getElementById("metric-labels").textContent =
    `${labelText(p.labels) || "no labels"} · source ${p.source || "-"} · ${p.kind || "untyped"}`;
  const root = document.getElementById("chart-metric");
  const W = 720, H = 300, L = 64, R = 12, T = 10, B = 24;
  const pts = p.points || [];
  const vals = pts.map(([, v]) => v).filter(v => v !== null);
  if (!pts.length || !vals.length) {
    root.replaceChildren(svg("text", { class: "axis", x: W / 2, y: H / 2, "text-anchor": "middle" }, "no values yet"));
    document.getElementById("metric-last").textContent = "";
    return;
  }
  let lo = Math.min(...vals), hi = Math.max(...vals);
  if (lo > 0 && lo <= hi / 2) lo = 0;
  if (lo === hi) { const d = Math.abs(hi) * 0.1 || 1; lo -= d; hi += d; }
  // Round the range out to four steps of 1, 2, 2.5 or 5 times a power of ten.
  const step = niceCeil((hi - lo) / 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.max(Math.ceil(hi / step) * step, lo + 4 * step);
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1000);
  const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = v => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  const parts = [];
  for (let v = lo; v <= hi + step / 2; v += step) {
    parts.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    parts.push(svg("text", { class: "axis", x: L - 4, y: y(v) + 4, "text-anchor": "end" }, axisNum(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + (t1 - t0) * i / 4;
    parts.push(svg("text", { class: "axis", x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" },
      new Date(t).toLocaleTimeString()));
  }
  let d = "", pen = false;
  for (const [t, v] of pts) {
    if (v === null) { pen = false; continue; }
    d += `${pen ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  }
  const path = svg("path", { class: "series metric-line", d });
  path.append(svg("title", {}, p.name));
  parts.push(path);
  const [lt, lv] = pts[pts.length - 1];
  if (lv !== null) parts.push(svg("circle", { cx: x(lt).toFixed(1), cy: y(lv).toFixed(1), r: 3.5, fill: "#2e90fa" }));
  root.replaceChildren(...parts);
  const last = document.getElementById("metric-last");
  last.replaceChildren("last value ", el("b", { id: "metric-last-value" }, fmtValue(lv)),
    ` at ${new Date(lt).toLocaleTimeString()} · ${pts.length} point(s) over ${Math.round((t1 - t0) / 1000)} s`);
}

function axisNum(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  return Number(v.toPrecision(4)).toString();
}

let matchTimer;
document.getElementById("metric-match").addEventListener("input", e => {
  clearTimeout(matchTimer);
  matchTimer = setTimeout(() => { metricsState.match = e.target.value; pollSeries(); }, 200);
});
document.getElementById("metric-series").addEventListener("change", e => {
  selectSeries(e.target.value);
  pollPointsNow();
});
window.addEventListener("hashchange", showTab);

// pollPointsNow draws the chosen series at once instead of at the next poll.
async function pollPointsNow() {
  const id = metricsState.selected;
  try {
    const r = await fetch("/console/api/metrics/points?" + new URLSearchParams({ id }), { cache: "no-store" });
    if (r.ok && id === metricsState.selected) drawMetric(await r.json());
  } catch (e) { /* the regular poll reports it */ }
}

function seriesPoller() {
  pollSeries();
  setTimeout(seriesPoller, SERIES_POLL_MS);
}

if (location.hash.startsWith("#metrics=")) metricsState.selected = decodeURIComponent(location.hash.slice("#metrics=".length));
showTab();
poll();
pollAudit();
seriesPoller();
pollPoints();
setTimeout(lakePoller, LAKE_POLL_MS);
