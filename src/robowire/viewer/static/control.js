// Control panel, shown only when the server says control is allowed (`hello.control`, set by
// `--allow-control`, for a page that sent the token; `hello.token_needed`: a note instead). For the selected device's source: a button per command the server lists
// (with inputs for its parameters), keyboard driving when the source has a `drive` command
// (WASD / arrows -> left/right efforts at 10 Hz while held; a stop on release or blur), a
// mission drawn on the map for a command with a waypoints parameter, and every command's
// status as the server reports it.

import { escapeHtml } from "./panel.js";

const DRIVE_HZ = 10;
const KEYS = {
  w: "fwd", arrowup: "fwd", s: "back", arrowdown: "back",
  a: "left", arrowleft: "left", d: "right", arrowright: "right",
};

function isMissionParam(p) { return p.type === "waypoints"; }

export class Control {
  constructor(box, body, conn, geo) {
    this.box = box;
    this.body = body;
    this.conn = conn;
    this.geo = geo;
    this.enabled = false;
    this.commands = {};
    this.device = null;
    this.nextId = 1;
    this.sent = new Map();     // id -> {row, name}
    this.held = new Set();
    this.timer = null;
    this.effort = 0.6;
    window.addEventListener("keydown", (e) => this.key(e, true));
    window.addEventListener("keyup", (e) => this.key(e, false));
    window.addEventListener("blur", () => this.release());
    document.addEventListener("visibilitychange", () => { if (document.hidden) this.release(); });
  }

  setHello(h) {
    this.enabled = !!h.control;
    this.commands = h.commands ?? {};
    this.box.hidden = !this.enabled && !h.token_needed;
    if (h.token_needed) {   // control is on, but this page was not opened with the token
      this.body.innerHTML = '<p class="dim">Control needs the token printed at start: '
        + "open the viewer's URL as the gateway printed it.</p>";
    }
    this.render();
  }

  /** A `commands` message: the catalog changed (e.g. a UgCS vehicle registered). */
  setCommands(commands) {
    const before = JSON.stringify(this.specs());
    this.commands = commands ?? {};
    if (JSON.stringify(this.specs()) !== before) this.render();
  }

  select(d) {
    this.release();
    this.device = d;
    this.render();
  }

  specs() { return this.device ? this.commands[this.device.source.name] ?? [] : []; }

  render() {
    if (!this.enabled) return;
    const b = this.body;
    b.innerHTML = "";
    const d = this.device;
    if (!d) { b.innerHTML = '<p class="dim">Select a device to control it.</p>'; this.renderLog(); return; }
    const specs = this.specs();
    if (!specs.length) {
      b.innerHTML = `<p class="dim">No commands for ${escapeHtml(d.source.name)}.</p>`;
      this.renderLog();
      return;
    }
    const drive = specs.find((s) => s.name === "drive");
    if (drive) {
      const box = document.createElement("div");
      box.className = "drive";
      box.innerHTML = `<b>Drive ${escapeHtml(d.name)}</b>: hold W A S D or the arrow keys.
        Effort <input type="range" min="0.1" max="1" step="0.05" value="${this.effort}" id="effort">
        <span id="drive-state" class="dim">stopped</span>`;
      box.querySelector("#effort").addEventListener("input", (e) => { this.effort = +e.target.value; });
      b.appendChild(box);
      this.driveBox = box;
    } else {
      this.driveBox = null;
    }
    const buttons = document.createElement("div");
    buttons.className = "cmds";
    const paramsBox = document.createElement("div");
    for (const spec of specs) {
      if (spec.name === "drive") continue;
      const btn = document.createElement("button");
      btn.textContent = spec.label ?? spec.name;
      btn.dataset.command = spec.name;
      const params = spec.params ?? [];
      if (!params.length) {
        btn.addEventListener("click", () => this.send(spec.name, {}));
      } else {
        btn.addEventListener("click", () => this.showParams(paramsBox, spec));
      }
      buttons.appendChild(btn);
    }
    b.append(buttons, paramsBox);
    this.renderLog();
  }

  showParams(box, spec) {
    box.innerHTML = `<div><b>${escapeHtml(spec.label ?? spec.name)}</b></div>`;
    const grid = document.createElement("div");
    grid.className = "params";
    const inputs = [];
    for (const p of spec.params) {
      const label = document.createElement("label");
      label.textContent = `${p.name}${p.unit ? ` (${p.unit})` : ""}${p.required ? " *" : ""}`;
      let input;
      if (isMissionParam(p)) {
        input = document.createElement("span");
        const draw = document.createElement("button");
        const clear = document.createElement("button");
        const height = document.createElement("input");
        height.type = "number"; height.step = "any"; height.value = "30"; height.title = "height above home (m)";
        height.style.width = "5em";
        const count = document.createElement("span");
        const update = () => {
          const n = this.mission ? this.mission.length : 0;
          count.textContent = ` ${n} waypoint${n === 1 ? "" : "s"}`;
          draw.textContent = this.geo.waypoints ? "Stop drawing" : "Draw on map";
        };
        draw.addEventListener("click", () => {
          if (!this.mission) this.mission = [];
          this.geo.waypoints = this.geo.waypoints ? null : this.mission;
          if (this.geo.waypoints) this.geo.canvas.scrollIntoView({ block: "nearest" });
          update(); this.geo.draw(true);
        });
        clear.textContent = "Clear";
        clear.addEventListener("click", () => {
          this.mission = []; if (this.geo.waypoints) this.geo.waypoints = this.mission;
          update(); this.geo.draw(true);
        });
        this.geo.onWaypoint = update;
        input.append(draw, clear, " height ", height, " m", count);
        update();
        inputs.push([p, () => (this.mission ?? []).map(([lat, lon]) => [lat, lon, Number(height.value)])]);
      } else if (p.type === "bool") {
        input = document.createElement("input");
        input.type = "checkbox";
        input.checked = !!p.default;
        inputs.push([p, () => input.checked]);
      } else if (Array.isArray(p.choices) && p.choices.length) {
        input = document.createElement("select");
        if (!p.required) input.append(new Option("—", ""));
        for (const c of p.choices) input.append(new Option(c, c));
        input.value = p.default ?? "";
        inputs.push([p, () => (input.value === "" ? null : input.value)]);
      } else {
        input = document.createElement("input");
        input.type = p.type === "number" ? "number" : "text";
        if (p.type === "number") {
          input.step = "any";
          if (p.min !== undefined && p.min !== null) input.min = p.min;
          if (p.max !== undefined && p.max !== null) input.max = p.max;
        }
        input.value = p.default ?? "";
        input.placeholder = p.required ? "required" : "default";
        inputs.push([p, () => (input.value === "" ? null : p.type === "number" ? Number(input.value) : input.value)]);
      }
      input.name = p.name;
      grid.append(label, input);
    }
    const go = document.createElement("button");
    go.textContent = `Send ${spec.label ?? spec.name}`;
    go.addEventListener("click", () => {
      const params = {};
      for (const [p, get] of inputs) {
        const v = get();
        if (v !== null) params[p.name] = v;      // left out: the command's default
      }
      this.send(spec.name, params);
      if (this.geo.waypoints) { this.geo.waypoints = null; this.geo.draw(true); }
    });
    box.append(grid, go);
    this.paramInputs = inputs;
  }

  send(command, params) {
    const d = this.device;
    if (!d) return null;
    const id = this.nextId++;
    const ok = this.conn.send({ type: "command", id, source: d.source.name, device: d.id, command, params });
    if (command !== "drive") {
      this.sent.set(id, { name: `${command} → ${d.name}`, state: ok ? "sent" : "failed", message: ok ? "" : "not connected" });
      this.renderLog();
    }
    return id;
  }

  status(msg) {
    const e = this.sent.get(msg.id);
    if (!e) {
      if (msg.state !== "ok" && msg.state !== "sent" && msg.state !== "in_progress") {
        this.sent.set(msg.id, { name: "drive", state: msg.state, message: msg.message });
        this.renderLog();
      }
      return;
    }
    e.state = msg.state;
    e.message = msg.message ?? "";
    this.renderLog();
  }

  renderLog() {
    if (!this.enabled) return;
    let log = this.body.querySelector(".log");
    if (!log) {
      log = document.createElement("div");
      log.className = "log";
      this.body.appendChild(log);
    }
    const items = [...this.sent.entries()].slice(-30).reverse();
    log.innerHTML = items.map(([id, e]) =>
      `<div data-id="${id}">#${id} ${escapeHtml(e.name)}: <span class="state-${escapeHtml(e.state)}">${escapeHtml(e.state)}</span>`
      + `${e.message ? ` <span class="dim">${escapeHtml(e.message)}</span>` : ""}</div>`).join("");
  }

  // -- keyboard driving -------------------------------------------------------------------------

  canDrive() { return this.enabled && this.specs().some((s) => s.name === "drive"); }

  key(e, down) {
    const k = KEYS[e.key.toLowerCase()];
    if (!k || !this.canDrive()) return;
    const t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT") && t.type !== "range") return;
    if (t && t.closest && t.closest("#list") && down) return;   // arrows there move the selection
    e.preventDefault();
    if (down) this.held.add(k); else this.held.delete(k);
    if (this.held.size && !this.timer) {
      this.tick();
      this.timer = setInterval(() => this.tick(), 1000 / DRIVE_HZ);
    } else if (!this.held.size) {
      this.release();
    }
  }

  efforts() {
    const h = this.held, e = this.effort;
    const fwd = (h.has("fwd") ? 1 : 0) - (h.has("back") ? 1 : 0);
    const turn = (h.has("right") ? 1 : 0) - (h.has("left") ? 1 : 0);
    let left = fwd + turn * 0.6, right = fwd - turn * 0.6;
    const m = Math.max(1, Math.abs(left), Math.abs(right));
    left = +(left / m * e).toFixed(3); right = +(right / m * e).toFixed(3);
    return { left, right };
  }

  tick() {
    const p = this.efforts();
    this.send("drive", p);
    if (this.driveBox) {
      this.driveBox.classList.add("active");
      this.driveBox.querySelector("#drive-state").textContent = `left ${p.left} · right ${p.right}`;
    }
  }

  release() {
    this.held.clear();
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.send("drive", { left: 0, right: 0 });
    }
    if (this.driveBox) {
      this.driveBox.classList.remove("active");
      this.driveBox.querySelector("#drive-state").textContent = "stopped";
    }
  }
}
