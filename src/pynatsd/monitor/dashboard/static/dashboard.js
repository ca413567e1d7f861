// The pynatsd dashboard: renders the updates the monitoring port sends over Server-Sent Events.
// The server sends counters; rates are the difference between two updates, computed here.
// Read-only: the page only ever makes GET requests to its own origin.
"use strict";

const HISTORY = 300; // updates kept for the charts: five minutes at one a second
const MAX_EVENTS = 100;

// ---- formatting for people ------------------------------------------------------------------

function fmtCount(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return "–";
  const abs = Math.abs(n);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) {
    if (abs >= size) return (n / size).toFixed(abs / size >= 100 ? 0 : 1) + unit;
  }
  return Number.isInteger(n) ? String(n) : n.toFixed(abs >= 10 ? 0 : 1);
}

function fmtBytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  const text = i === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 0 : 1);
  return (n < 0 ? "-" : "") + text + " " + units[i];
}

const fmtRate = (n) => fmtCount(n) + "/s";
const fmtByteRate = (n) => fmtBytes(n) + "/s";
const fmtPercent = (n) => (n === undefined || n === null ? "–" : n.toFixed(1) + "%");

function fmtTime(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

// ---- small DOM helpers ----------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function setText(id, text) {
  const el = $(id);
  if (el && el.textContent !== text) el.textContent = text;
}

function show(id, visible) {
  const el = $(id);
  if (el) el.hidden = !visible;
}

// ---- sortable tables ------------------------------------------------------------------------
// A table is described by its columns: key (the row field sorted on), label, and how to show
// the value (fmt) and whether it is a number (right-aligned, sorted largest first).

const tables = new Map();

function table(id, columns, initialSort) {
  const el = $(id);
  const state = { el, columns, sort: initialSort || columns[0].key, desc: false, rows: [] };
  const head = document.createElement("thead");
  const tr = document.createElement("tr");
  for (const col of columns) {
    const th = document.createElement("th");
    th.textContent = col.label;
    th.dataset.key = col.key;
    th.scope = "col";
    if (col.num) th.className = "num";
    th.addEventListener("click", () => {
      if (state.sort === col.key) state.desc = !state.desc;
      else { state.sort = col.key; state.desc = Boolean(col.num); }
      renderRows(state);
    });
    tr.appendChild(th);
  }
  head.appendChild(tr);
  el.appendChild(head);
  el.appendChild(document.createElement("tbody"));
  tables.set(id, state);
  return state;
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === undefined || a === null) return 1;
  if (b === undefined || b === null) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function renderRows(state) {
  const { el, columns, sort, desc } = state;
  const rows = state.rows.slice().sort((a, b) => (desc ? -1 : 1) * compare(a[sort], b[sort]));
  for (const th of el.tHead.rows[0].cells) {
    if (th.dataset.key === sort) th.setAttribute("aria-sort", desc ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
  }
  const body = document.createElement("tbody");
  if (rows.length === 0) {
    const tr = body.insertRow();
    const td = tr.insertCell();
    td.colSpan = columns.length;
    td.className = "empty";
    td.textContent = "none";
  }
  for (const row of rows) {
    const tr = body.insertRow();
    for (const col of columns) {
      const td = tr.insertCell();
      const value = row[col.key];
      td.textContent = col.fmt ? col.fmt(value, row) : (value === undefined || value === null ? "" : String(value));
      if (col.num) td.className = "num";
      if (col.flag && col.flag(row)) td.classList.add("flag");
    }
  }
  el.replaceChild(body, el.tBodies[0]);
}

function fill(id, rows) {
  const state = tables.get(id);
  state.rows = rows;
  renderRows(state);
}

// ---- charts on <canvas> ---------------------------------------------------------------------

function drawChart(canvas, series, fmt) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (width === 0 || height === 0) return;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const style = getComputedStyle(document.documentElement);
  const line = style.getPropertyValue("--line").trim();
  const muted = style.getPropertyValue("--muted").trim();
  let max = 0;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  max = max > 0 ? max * 1.1 : 1;
  const left = 64;
  const plotW = Math.max(width - left - 4, 1);
  const top = 10;
  const plotH = height - top - 18;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = muted;
  ctx.strokeStyle = line;
  ctx.lineWidth = 1;
  ctx.textBaseline = "middle";
  for (let i = 0; i <= 4; i += 1) {
    const y = top + plotH - (plotH * i) / 4;
    ctx.beginPath();
    ctx.moveTo(left, Math.round(y) + 0.5);
    ctx.lineTo(width, Math.round(y) + 0.5);
    ctx.stroke();
    ctx.textAlign = "right";
    ctx.fillText(fmt((max * i) / 4), left - 6, y);
  }
  ctx.textAlign = "left";
  ctx.fillText("−5 min", left, height - 6);
  ctx.textAlign = "right";
  ctx.fillText("now", width - 2, height - 6);
  for (const s of series) {
    ctx.strokeStyle = style.getPropertyValue(s.color).trim();
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    const n = s.values.length;
    s.values.forEach((v, i) => {
      const x = left + plotW * ((HISTORY - n + i) / (HISTORY - 1));
      const y = top + plotH - (plotH * v) / max;
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
}

// ---- state between updates ------------------------------------------------------------------

const rateHistory = { inMsgs: [], outMsgs: [], inBytes: [], outBytes: [] };
let previous = null; // the last update, for rates
const seenClosed = new Set();
const eventLog = [];

function rate(now, before, dt) {
  if (before === undefined || dt <= 0) return undefined;
  return Math.max(now - before, 0) / dt;
}

function keep(list, value) {
  list.push(value);
  if (list.length > HISTORY) list.shift();
}

function addEvent(time, level, text) {
  eventLog.unshift({ time, level, text });
  if (eventLog.length > MAX_EVENTS) eventLog.length = MAX_EVENTS;
}

function renderEvents() {
  const list = document.createElement("ol");
  list.id = "events";
  list.className = "events";
  if (eventLog.length === 0) {
    const li = document.createElement("li");
    li.className = "muted";
    li.textContent = "none yet";
    list.appendChild(li);
  }
  for (const e of eventLog) {
    const li = document.createElement("li");
    const time = document.createElement("time");
    time.textContent = fmtTime(e.time);
    const text = document.createElement("span");
    text.className = e.level;
    text.textContent = e.text;
    li.append(time, text);
    list.appendChild(li);
  }
  $("events").replaceWith(list);
}

// ---- one update ------------------------------------------------------------------------------

function byKey(list, key) {
  const map = new Map();
  for (const item of list || []) map.set(key(item), item);
  return map;
}

function render(snap) {
  const v = snap.varz;
  const dt = previous ? snap.time - previous.time : 0;
  const pv = previous ? previous.varz : {};

  setText("server-id", v.server_id);
  setText("server-name", v.server_name && v.server_name !== v.server_id ? v.server_name : "");
  setText("version", v.version);
  setText("uptime", v.uptime);
  const cpuNow = previous ? (100 * rate(snap.cpu_seconds, previous.cpu_seconds, dt)) : v.cpu;
  setText("cpu", fmtPercent(cpuNow));
  setText("mem", fmtBytes(v.mem));
  setText("connections-count", String(v.connections));
  setText("subscriptions", fmtCount(v.subscriptions));
  setText("cache-hit", fmtPercent(100 * (snap.subsz.cache_hit_rate || 0)));
  setText("slow-consumers", fmtCount(v.slow_consumers));

  const rates = {
    inMsgs: rate(v.in_msgs, pv.in_msgs, dt),
    outMsgs: rate(v.out_msgs, pv.out_msgs, dt),
    inBytes: rate(v.in_bytes, pv.in_bytes, dt),
    outBytes: rate(v.out_bytes, pv.out_bytes, dt),
  };
  setText("in-msgs-rate", previous ? fmtRate(rates.inMsgs) : "–");
  setText("out-msgs-rate", previous ? fmtRate(rates.outMsgs) : "–");
  setText("in-bytes-rate", previous ? fmtByteRate(rates.inBytes) : "–");
  setText("out-bytes-rate", previous ? fmtByteRate(rates.outBytes) : "–");
  setText("in-msgs-total", fmtCount(v.in_msgs) + " total");
  setText("out-msgs-total", fmtCount(v.out_msgs) + " total");
  setText("in-bytes-total", fmtBytes(v.in_bytes) + " total");
  setText("out-bytes-total", fmtBytes(v.out_bytes) + " total");
  if (previous) for (const k of Object.keys(rateHistory)) keep(rateHistory[k], rates[k] || 0);
  drawCharts();

  renderConnections(snap, dt);
  renderJetStream(snap, dt);
  renderRoutes(snap);
  renderLeafs(snap);
  renderGateways(snap);
  renderMqtt(snap);
  fill("accounts", snap.accounts);
  noteEvents(snap);
  renderEvents();
  previous = snap;
}

function drawCharts() {
  drawChart($("chart-msgs"), [
    { values: rateHistory.inMsgs, color: "--in" },
    { values: rateHistory.outMsgs, color: "--out" },
  ], fmtCount);
  drawChart($("chart-bytes"), [
    { values: rateHistory.inBytes, color: "--in" },
    { values: rateHistory.outBytes, color: "--out" },
  ], fmtBytes);
}

function renderConnections(snap, dt) {
  const connz = snap.connz;
  const before = byKey(previous && previous.connz.connections, (c) => c.cid);
  const maxPending = snap.varz.max_pending || Infinity;
  const rows = connz.connections.map((c) => {
    const p = before.get(c.cid) || {};
    return {
      cid: c.cid,
      name: c.name || "",
      account: c.account || "",
      address: c.ip.includes(":") ? `[${c.ip}]:${c.port}` : `${c.ip}:${c.port}`,
      subscriptions: c.subscriptions,
      pending_bytes: c.pending_bytes,
      in_rate: rate(c.in_msgs, p.in_msgs, dt),
      out_rate: rate(c.out_msgs, p.out_msgs, dt),
      in_msgs: c.in_msgs,
      out_msgs: c.out_msgs,
      // At risk of being closed as a slow consumer: over half its pending budget.
      slow: c.pending_bytes * 2 >= maxPending ? "slow" : "",
    };
  });
  fill("connections", rows);
  setText("connections-shown", connz.total > connz.connections.length
    ? `(${connz.connections.length} of ${connz.total} shown)` : `(${connz.total})`);
}

function renderJetStream(snap, dt) {
  const jsz = snap.jsz;
  show("jetstream-section", Boolean(jsz));
  if (!jsz) return;
  setText("jetstream-summary", `(${jsz.streams} streams, ${jsz.consumers} consumers, ` +
    `${fmtCount(jsz.messages)} msgs, ${fmtBytes(jsz.bytes)})`);
  const before = new Map();
  for (const a of (previous && previous.jsz && previous.jsz.account_details) || []) {
    for (const s of a.stream_detail || []) before.set(a.name + "\u0000" + s.name, s.state);
  }
  const streams = [];
  const consumers = [];
  for (const a of jsz.account_details || []) {
    for (const s of a.stream_detail || []) {
      const p = before.get(a.name + "\u0000" + s.name) || {};
      streams.push({
        account: a.name,
        name: s.name,
        messages: s.state.messages,
        bytes: s.state.bytes,
        growth: rate(s.state.messages, p.messages, dt),
        consumers: s.state.consumer_count,
      });
      for (const c of s.consumer_detail || []) {
        consumers.push({
          stream: s.name,
          name: c.name,
          pending: c.num_pending,
          ack_pending: c.num_ack_pending,
          redelivered: c.num_redelivered,
          waiting: c.num_waiting,
        });
      }
    }
  }
  fill("streams", streams);
  fill("consumers", consumers);
}

function renderRoutes(snap) {
  show("routes-section", Boolean(snap.routez));
  if (!snap.routez) return;
  setText("routes-summary", `(${snap.routez.num_routes})`);
  fill("routes", snap.routez.routes.map((r) => ({
    rid: r.rid,
    remote: r.remote_name || r.remote_id,
    address: `${r.ip}:${r.port}`,
    state: "up",
    direction: r.did_solicit ? "out" : "in",
    account: r.account || "",
    in_msgs: r.in_msgs,
    out_msgs: r.out_msgs,
    pending: r.pending_size,
    uptime: r.uptime,
  })));
}

function renderLeafs(snap) {
  show("leafs-section", Boolean(snap.leafz));
  if (!snap.leafz) return;
  const leafs = snap.leafz.leafs || [];
  setText("leafs-summary", `(${snap.leafz.leafnodes !== undefined ? snap.leafz.leafnodes : leafs.length})`);
  fill("leafs", leafs.map((l) => ({
    name: l.name || "",
    account: l.account || "",
    address: `${l.ip}:${l.port}`,
    state: "up",
    direction: l.is_spoke ? "spoke" : (l.is_solicited ? "out" : "in"),
    rtt: l.rtt || "",
    in_msgs: l.in_msgs,
    out_msgs: l.out_msgs,
    subscriptions: l.subscriptions,
  })));
}

function renderGateways(snap) {
  const g = snap.gatewayz;
  show("gateways-section", Boolean(g));
  if (!g) return;
  const rows = [];
  const add = (direction, map) => {
    for (const [name, value] of Object.entries(map || {})) {
      for (const conn of Array.isArray(value) ? value : [value]) {
        const c = conn.connection || {};
        rows.push({
          name,
          direction,
          state: c.cid !== undefined ? "up" : "down",
          address: c.ip ? `${c.ip}:${c.port}` : "",
          in_msgs: c.in_msgs,
          out_msgs: c.out_msgs,
          uptime: c.uptime || "",
        });
      }
    }
  };
  add("out", g.outbound_gateways);
  add("in", g.inbound_gateways);
  setText("gateways-summary", g.name ? `(this gateway: ${g.name})` : "");
  fill("gateways", rows);
}

function renderMqtt(snap) {
  show("mqtt-section", Boolean(snap.mqtt));
  if (!snap.mqtt) return;
  const clients = snap.mqtt.clients || [];
  setText("mqtt-summary", `(${clients.length})`);
  fill("mqtt", clients.map((c) => ({
    client_id: c.mqtt_client,
    cid: c.cid,
    account: c.account || "",
    address: `${c.ip}:${c.port}`,
    subscriptions: c.subscriptions,
    in_msgs: c.in_msgs,
    out_msgs: c.out_msgs,
  })));
}

function noteEvents(snap) {
  const v = snap.varz;
  for (const c of snap.closed.slice().reverse()) {
    if (seenClosed.has(c.cid)) continue;
    const who = c.name ? `${c.cid} (${c.name})` : String(c.cid);
    const level = c.reason === "Client Closed" ? "info" : (/Slow Consumer/.test(c.reason) ? "error" : "warn");
    addEvent(Date.parse(c.stop) / 1000 || snap.time, level, `connection ${who} closed: ${c.reason}`);
  }
  // The update lists the newest closed connections; one that left the list never returns.
  seenClosed.clear();
  for (const c of snap.closed) seenClosed.add(c.cid);
  if (!previous) return;
  const pv = previous.varz;
  const grew = (key, level, text) => {
    const d = (v[key] || 0) - (pv[key] || 0);
    if (d > 0) addEvent(snap.time, level, `${d} ${text}`);
  };
  grew("slow_consumers", "error", "slow consumer(s)");
  grew("stale_connections", "warn", "stale connection(s)");
  grew("stalled_clients", "warn", "fast producer stall(s)");
  if (snap.jsz && previous.jsz) {
    const d = snap.jsz.api.errors - previous.jsz.api.errors;
    if (d > 0) addEvent(snap.time, "warn", `${d} JetStream API error(s)`);
  }
  const peers = (z) => new Set(((z && z.routes) || []).map((r) => r.remote_name || r.remote_id));
  const was = peers(previous.routez);
  const now = peers(snap.routez);
  for (const p of now) if (!was.has(p)) addEvent(snap.time, "info", `route to ${p} up`);
  for (const p of was) if (!now.has(p)) addEvent(snap.time, "warn", `route to ${p} down`);
}

// ---- start ----------------------------------------------------------------------------------

const num = true;
// Columns that several tables share.
const COL = {
  account: { key: "account", label: "account" },
  address: { key: "address", label: "address" },
  state: { key: "state", label: "state" },
  dialled: { key: "direction", label: "dialled" },
  inMsgs: { key: "in_msgs", label: "in msgs", num, fmt: fmtCount },
  outMsgs: { key: "out_msgs", label: "out msgs", num, fmt: fmtCount },
  subs: { key: "subscriptions", label: "subs", num, fmt: fmtCount },
  uptime: { key: "uptime", label: "uptime" },
};
table("connections", [
  { key: "cid", label: "cid", num },
  { key: "name", label: "name" },
  COL.account,
  COL.address,
  COL.subs,
  { key: "pending_bytes", label: "pending", num, fmt: fmtBytes },
  { key: "in_rate", label: "in msgs/s", num, fmt: fmtCount },
  { key: "out_rate", label: "out msgs/s", num, fmt: fmtCount },
  COL.inMsgs,
  COL.outMsgs,
  { key: "slow", label: "slow", flag: (r) => r.slow !== "" },
]);
table("streams", [
  COL.account,
  { key: "name", label: "stream" },
  { key: "messages", label: "messages", num, fmt: fmtCount },
  { key: "bytes", label: "bytes", num, fmt: fmtBytes },
  { key: "growth", label: "msgs/s", num, fmt: fmtCount },
  { key: "consumers", label: "consumers", num },
], "name");
table("consumers", [
  { key: "stream", label: "stream" },
  { key: "name", label: "consumer" },
  { key: "pending", label: "pending", num, fmt: fmtCount },
  { key: "ack_pending", label: "ack pending", num, fmt: fmtCount },
  { key: "redelivered", label: "redelivered", num, fmt: fmtCount },
  { key: "waiting", label: "waiting", num, fmt: fmtCount },
], "stream");
table("routes", [
  { key: "rid", label: "rid", num },
  { key: "remote", label: "remote server" },
  COL.address,
  COL.state,
  COL.dialled,
  { key: "account", label: "pinned account" },
  COL.inMsgs,
  COL.outMsgs,
  { key: "pending", label: "pending", num, fmt: fmtBytes },
  COL.uptime,
]);
table("leafs", [
  { key: "name", label: "server" },
  COL.account,
  COL.address,
  COL.state,
  COL.dialled,
  { key: "rtt", label: "rtt" },
  COL.inMsgs,
  COL.outMsgs,
  COL.subs,
]);
table("gateways", [
  { key: "name", label: "gateway" },
  { key: "direction", label: "direction" },
  COL.state,
  COL.address,
  COL.inMsgs,
  COL.outMsgs,
  COL.uptime,
]);
table("mqtt", [
  { key: "client_id", label: "client id" },
  { key: "cid", label: "cid", num },
  COL.account,
  COL.address,
  COL.subs,
  COL.inMsgs,
  COL.outMsgs,
]);
table("accounts", [
  { key: "name", label: "account" },
  { key: "connections", label: "connections", num },
  { key: "leafnodes", label: "leaf nodes", num },
  { key: "subscriptions", label: "subscriptions", num, fmt: fmtCount },
  { key: "jetstream", label: "JetStream", fmt: (v) => (v ? "enabled" : "") },
]);

window.addEventListener("resize", drawCharts);

const source = new EventSource(document.body.dataset.events);
source.addEventListener("open", () => {
  $("status").textContent = "live";
  $("status").className = "status live";
});
source.addEventListener("error", () => {
  $("status").textContent = "reconnecting";
  $("status").className = "status down";
});
source.addEventListener("message", (e) => render(JSON.parse(e.data)));
