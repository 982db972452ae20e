// The selected device's panel: every telemetry field with its unit, position, geodetic
// position, times and attributes, with a sparkline (last ~30 s) beside each numeric field.
// The table is rebuilt only when the set of fields changes; otherwise values are updated in place.

const WINDOW_S = 30;
// the world's unit codes (robowire.units) as shown to people
const UNIT_TEXT = { deg: "°", "deg/s": "°/s", Cel: "°C", "1": "", ratio: "", bool: "" };
export function unitText(u) { return u in UNIT_TEXT ? UNIT_TEXT[u] : u; }
const HISTORY = 512;

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return String(v);
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a >= 1e5 || (a > 0 && a < 1e-3) ? v.toExponential(3) : v.toFixed(a >= 100 ? 1 : 3);
  }
  if (typeof v === "boolean") return v ? "true" : "false";
  if (Array.isArray(v)) return v.map(fmt).join(", ");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function deg(x) { return typeof x === "number" ? x.toFixed(7) : x; }
// a vector's components to 3 decimals; null is a value JSON could not carry (inf, NaN)
function short(v) { return v.map((x) => (typeof x === "number" ? +x.toFixed(3) : "—")).join(", "); }

class Series {
  constructor() { this.t = new Float64Array(HISTORY); this.v = new Float64Array(HISTORY); this.n = 0; this.head = 0; }
  push(t, v) {
    this.t[this.head] = t; this.v[this.head] = v;
    this.head = (this.head + 1) % HISTORY; this.n = Math.min(HISTORY, this.n + 1);
  }
}

export class Panel {
  constructor(title, body) {
    this.title = title;
    this.body = body;
    this.key = null;        // "source/slot" of the device shown
    this.layout = "";       // the field names the table was built for
    this.cells = new Map(); // row key -> {v, u, canvas}
    this.series = new Map();
    this.last = null;
  }

  clear() {
    this.key = null; this.layout = ""; this.cells.clear(); this.series.clear(); this.last = null;
    this.title.textContent = "none";
    this.body.innerHTML = '<p class="dim">Click a device in the view, the map or the list.</p>';
  }

  /** A device was selected (before its first telemetry arrives). */
  show(d) {
    this.clear();
    this.key = `${d.source.name}/${d.slot}`;
    this.title.textContent = `${d.name} (${d.kind})`;
    this.body.innerHTML = `<p class="dim">${d.source.name} · id ${escapeHtml(d.id)} · waiting for telemetry…</p>`;
  }

  telemetry(m) {
    if (`${m.source}/${m.slot}` !== this.key) return;
    this.last = m;
    const rows = [];
    rows.push(["sect", "device"]);
    rows.push(["id", m.id, ""], ["kind", m.kind, ""], ["source", m.source, ""]);
    rows.push(["received", m.time ? new Date(m.time * 1000).toISOString().slice(11, 23) : null, "UTC"]);
    const st = m.source_time;
    if (typeof st === "number" && st > 1e9 && st < 1e11) {
      rows.push(["source time", new Date(st * 1000).toISOString().slice(11, 23), "UTC"]);
    } else {
      rows.push(["source time", st, "s"]);
    }
    rows.push(["sect", "pose"]);
    if (m.position) rows.push(["east", m.position[0], "m"], ["north", m.position[1], "m"], ["up", m.position[2], "m"]);
    if (m.geodetic) {
      rows.push(["latitude", deg(m.geodetic[0]), "deg"], ["longitude", deg(m.geodetic[1]), "deg"],
        ["altitude", m.geodetic[2], "m"]);
    }
    if (m.orientation) rows.push(["orientation wxyz", short(m.orientation), ""]);
    if (m.velocity) rows.push(["velocity", short(m.velocity), "m/s"]);
    const fields = Object.entries(m.fields ?? {});
    if (fields.length) rows.push(["sect", "telemetry"]);
    for (const [name, val] of fields) {
      const [v, unit] = Array.isArray(val) && val.length === 2 && (typeof val[1] === "string" || val[1] === null)
        ? val : [val, ""];
      rows.push([name, v, unit ?? "", "field"]);
    }
    const attrs = Object.entries(m.attributes ?? {});
    if (attrs.length) rows.push(["sect", "attributes"]);
    for (const [name, v] of attrs) rows.push([`attr:${name}`, v, ""]);

    const layout = rows.map((r) => r[0]).join("|");
    if (layout !== this.layout) this.build(rows, layout);
    const t = m.time ?? Date.now() / 1000;
    for (const r of rows) {
      if (r[0] === "sect") continue;
      const cell = this.cells.get(r[0]);
      cell.v.textContent = fmt(r[1]);
      const unit = r[2] ?? "";
      if (cell.unit !== unit) {
        cell.unit = unit;
        cell.u.textContent = unitText(unit);
        cell.u.parentElement.dataset.unit = unit;
      }
      if (typeof r[1] === "number" && Number.isFinite(r[1]) && cell.canvas) {
        let s = this.series.get(r[0]);
        if (!s) { s = new Series(); this.series.set(r[0], s); }
        s.push(t, r[1]);
      }
    }
  }

  build(rows, layout) {
    this.layout = layout;
    this.cells.clear();
    const table = document.createElement("table");
    table.className = "fields";
    const cols = document.createElement("colgroup");
    for (const w of ["36%", "38%", "10%", "16%"]) {
      const c = document.createElement("col"); c.style.width = w; cols.appendChild(c);
    }
    table.appendChild(cols);
    for (const r of rows) {
      const tr = table.insertRow();
      if (r[0] === "sect") {
        tr.className = "sect";
        const td = tr.insertCell(); td.colSpan = 4; td.textContent = r[1];
        continue;
      }
      tr.dataset.field = r[0].startsWith("attr:") ? r[0].slice(5) : r[0];
      const n = tr.insertCell(); n.className = "n"; n.textContent = tr.dataset.field;
      n.title = tr.dataset.field;
      const v = tr.insertCell(); v.className = "v";
      const u = tr.insertCell(); u.className = "u";
      const p = tr.insertCell(); p.className = "p";
      let canvas = null;
      if (typeof r[1] === "number" && !["id", "source time"].includes(r[0])) {
        canvas = document.createElement("canvas");
        canvas.width = 140; canvas.height = 32;
        p.appendChild(canvas);
      }
      this.cells.set(r[0], { v, u, canvas, unit: null });
    }
    this.body.replaceChildren(table);
  }

  /** Redraw the sparklines (called a few times a second). */
  plot() {
    if (!this.last) return;
    const now = this.last.time ?? Date.now() / 1000;
    for (const [key, s] of this.series) {
      const cell = this.cells.get(key);
      if (!cell || !cell.canvas) continue;
      const c = cell.canvas.getContext("2d"), W = cell.canvas.width, H = cell.canvas.height;
      c.clearRect(0, 0, W, H);
      let lo = Infinity, hi = -Infinity;
      for (let k = 0; k < s.n; k++) {
        const i = (s.head - 1 - k + HISTORY) % HISTORY;
        if (now - s.t[i] > WINDOW_S) break;
        lo = Math.min(lo, s.v[i]); hi = Math.max(hi, s.v[i]);
      }
      if (!(hi >= lo)) continue;
      if (hi - lo < 1e-9) { hi += 0.5; lo -= 0.5; }
      c.strokeStyle = "#4fb3ff"; c.lineWidth = 2; c.beginPath();
      for (let k = 0; k < s.n; k++) {
        const i = (s.head - 1 - k + HISTORY) % HISTORY;
        const age = now - s.t[i];
        if (age > WINDOW_S) break;
        const x = W - (age / WINDOW_S) * W, y = H - 2 - ((s.v[i] - lo) / (hi - lo)) * (H - 4);
        if (k === 0) c.moveTo(x, y); else c.lineTo(x, y);
      }
      c.stroke();
    }
  }
}

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
