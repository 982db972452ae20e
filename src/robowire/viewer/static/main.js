// The viewer app: connects to the server, keeps the store, and per animation frame applies the
// newest state frame, draws, and asks for the next one (flow control at display pace).
// `window.robowire` is a small debug handle (used by the browser tests and the benchmark).

import { Connection } from "./net.js";
import { Store } from "./store.js";
import { Scene } from "./scene.js";
import { DeviceList } from "./list.js";
import { Panel } from "./panel.js";
import { GeoView } from "./geo.js";
import { StatusTable } from "./status.js";
import { Control } from "./control.js";

const $ = (id) => document.getElementById(id);
const store = new Store();
let scene = null;
try {
  scene = new Scene($("scene"), $("overlay"), store);
} catch (e) {
  const el = $("webgl-error");
  el.hidden = false;
  el.textContent = `3-D view unavailable: ${e.message}`;
}

const panel = new Panel($("panel-title"), $("panel-body"));
const status = new StatusTable($("status-body"), $("counts"));
let selected = null;
let fitted = false, fittedSize = 0, fittedAt = [0, 0, 0], lastFit = 0;
const logs = [];

// The token printed at start (`/?token=…`, docs/security.md): kept for this tab in
// sessionStorage, taken out of the address bar (so it is not bookmarked, shared or shown),
// and sent on the WebSocket's URL, where the server checks it.
const TOKEN_KEY = "robowire.token";
const query = new URLSearchParams(location.search);
if (query.has("token")) {
  sessionStorage.setItem(TOKEN_KEY, query.get("token"));
  query.delete("token");
  const rest = query.toString();
  history.replaceState(null, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
}
const token = sessionStorage.getItem(TOKEN_KEY);
const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`
  + (token ? `?token=${encodeURIComponent(token)}` : "");
const conn = new Connection(wsUrl, {
  message: onMessage,
  frame: () => {},
  reconnected: () => location.reload(),   // a fresh page: a new server run numbers things anew
  state: (s) => { const c = $("conn"); c.dataset.state = s; c.textContent = s === "open" ? "live" : s; },
}, 60);

const list = new DeviceList($("list"), $("list-spacer"), $("search"), store, select);
list.onSource = (s) => { if (scene) scene.fit((d) => d.source === s); };
const geo = new GeoView($("geo"), $("geo-info"), store, select);
const control = new Control($("control"), $("control-body"), conn, geo);

function select(d) {
  selected = d;
  if (scene) { scene.selected = d; scene.needsDraw = true; }
  geo.selected = d;
  list.select(d);
  control.select(d);
  if (d) {
    panel.show(d);
    conn.send({ type: "select", source: d.source.name, slot: d.slot });
  } else {
    panel.clear();
    conn.send({ type: "select" });
  }
  geo.draw(true);
}

function onMessage(m) {
  switch (m.type) {
    case "hello": control.setHello(m); if (selected) select(null); break;
    case "catalog": store.catalog(m); break;
    case "status": status.update(m); break;
    case "links": store.setLinks(m); break;
    case "telemetry": panel.telemetry(m); break;
    case "command_status": control.status(m); break;
    case "commands": control.setCommands(m.commands); break;
    case "log": addLog(m); break;
    default: break;
  }
}

const LOG_LINES = 100;
let logTotal = 0;
function addLog(m) {
  logs.push(m);
  if (logs.length > LOG_LINES) logs.shift();
  logTotal++;
  const box = $("log");
  if (logTotal === 1) box.innerHTML = "";
  const line = document.createElement("div");
  const level = String(m.level ?? "info").toLowerCase();
  line.className = `line lv-${level}`;
  const t = document.createElement("span");
  t.className = "t";
  t.textContent = m.time ? new Date(m.time * 1000).toISOString().slice(11, 19) : "";
  const where = m.device ? `${m.source} ${m.device}` : m.source;
  line.append(t, `${where}: ${m.text}`);
  line.title = `${where}: ${m.text}`;
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  box.appendChild(line);
  while (box.childElementCount > LOG_LINES) box.firstElementChild.remove();
  if (atBottom) box.scrollTop = box.scrollHeight;
  $("log-count").textContent = `${logTotal}`;
}

if (scene) {
  scene.camera.onClick = (x, y) => {
    const d = scene.pick(x, y);
    if (d) select(d);
  };
}

$("fit").addEventListener("click", () => scene && scene.fitAll());
const toggle = (id, prop) => {
  const b = $(id);
  b.addEventListener("click", () => {
    if (!scene) return;
    scene[prop] = !scene[prop];
    b.setAttribute("aria-pressed", String(scene[prop]));
  });
};
toggle("toggle-trails", "showTrails");
toggle("toggle-links", "showLinks");
$("geo-fit").addEventListener("click", () => { geo.userMoved = false; geo.fit(); geo.draw(true); });
window.addEventListener("keydown", (e) => {
  const t = e.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA")) return;
  if (e.key === "f" || e.key === "F") scene && scene.fitAll();
  else if (e.key === "t" || e.key === "T") $("toggle-trails").click();
  else if (e.key === "l" || e.key === "L") $("toggle-links").click();
  else if (e.key === "Escape") select(null);
  else if ((e.key === "c" || e.key === "C") && selected && scene) scene.fit((d) => d === selected);
});

// -- the frame loop ------------------------------------------------------------------------------

const stats = { ms: { apply: 0, list: 0, scene: 0, other: 0 }, rendered: 0, applied: 0, fps: 0, windowStart: performance.now(), windowFrames: 0 };
let lastPlot = 0, lastHeader = 0;

function loop(now) {
  requestAnimationFrame(loop);
  const t0 = performance.now();
  const f = conn.take();
  if (f) {
    store.apply(f);
    stats.applied++;
  }
  const t1 = performance.now();
  list.tick();
  const t2 = performance.now();
  if (scene) {
    // frame everything until the user moves the camera (re-framed when the scene grows)
    if (!scene.camera.userMoved && f && store.devices.length && now - lastFit > (fitted ? 2000 : 200)) {
      lastFit = now;
      const [min, max] = scene.bounds();
      const r = Math.hypot(max[0] - min[0], max[1] - min[1], max[2] - min[2]);
      const c = [0, 1, 2].map((k) => (min[k] + max[k]) / 2);
      const moved = fitted && Math.hypot(c[0] - fittedAt[0], c[1] - fittedAt[1], c[2] - fittedAt[2]) > 0.15 * r;
      if (Number.isFinite(r) && (!fitted || moved || r > fittedSize * 1.3 || r < fittedSize / 1.3)) {
        scene.camera.fit(min, max); fitted = true; fittedSize = r; fittedAt = c;
      }
    }
    scene.draw(now);
  }
  const t3 = performance.now();
  stats.rendered++;
  stats.windowFrames++;
  conn.frameDone();
  geo.draw(false, now);
  if (now - lastPlot > 250) { panel.plot(); lastPlot = now; }
  const t4 = performance.now(), ms = stats.ms;
  ms.apply += t1 - t0; ms.list += t2 - t1; ms.scene += t3 - t2; ms.other += t4 - t3;
  if (now - stats.windowStart >= 1000) {
    stats.fps = stats.windowFrames * 1000 / (now - stats.windowStart);
    stats.windowStart = now; stats.windowFrames = 0;
  }
  if (now - lastHeader > 500) {
    lastHeader = now;
    $("fps").textContent = `${stats.fps.toFixed(0)} fps · frame ${store.frame}`;
    $("counts").textContent = `${store.devices.length} devices${status.summary ? ` · ${status.summary}` : ""}`;
    if (f || stats.applied) list.render();   // refresh swatch colours of the rows in view
  }
}
requestAnimationFrame(loop);

// -- debug handle --------------------------------------------------------------------------------

window.robowire = {
  store, conn, stats, logs,
  get scene() { return scene; },
  geo, list, panel, control,
  get selected() { return selected; },
  select,
  /** Devices as plain objects: {source, slot, id, name, kind, position, geodetic}. */
  devices() {
    return store.devices.map((d) => ({ source: d.source.name, slot: d.slot, id: d.id, name: d.name,
      kind: d.kind, position: store.position(d), geodetic: store.geodetic(d) }));
  },
  fitSource(prefix) { scene && scene.fit((d) => d.source.name.startsWith(prefix)); },
  find(name) { return store.devices.find((d) => d.name === name || d.id === name) ?? null; },
  status() { return status.last; },
};
