// The 3-D view (WebGL2): ground grid, devices drawn by shape with instancing (one draw call and
// one buffer upload per shape and per instance array per frame), heading arrows, trails (a ring
// of the last TRAIL positions per device, kept in a float texture: one row block per sample),
// neighbour links and spotlight/laser beams. Picking is done on the CPU by projecting
// positions on click (nothing is read back from the GPU).

import { Camera } from "./camera.js";
import { meshes } from "./meshes.js";

export const TRAIL = 21;   // samples: 20 segments (5 of 4 samples each for thousands)
const TRAIL_PERIOD_MS = 100;

const DEVICE_VS = `#version 300 es
layout(location=0) in vec3 a_vert;
layout(location=1) in vec3 a_norm;
layout(location=2) in vec3 a_pos;
layout(location=3) in vec4 a_rot;
layout(location=4) in vec4 a_col;
layout(location=5) in float a_head;
uniform mat4 u_vp;
uniform vec3 u_eye;
uniform float u_size, u_pix;
uniform int u_sel, u_arrow, u_points;
out vec3 v_col;
out vec3 v_norm;
out float v_led;
vec3 qrot(vec4 q, vec3 v) {           // q = (w, x, y, z)
  vec3 u = q.yzw;
  return v + 2.0 * cross(u, cross(u, v) + q.x * v);
}
bool bad(vec3 p) { return any(isnan(p)) || any(greaterThan(abs(p), vec3(1e20))); }
void main() {
  bool hasHead = !(isnan(a_head) || abs(a_head) > 1e20);
  if (bad(a_pos) || (u_arrow == 1 && !hasHead)) { gl_Position = vec4(2.0, 2.0, 2.0, 1.0); return; }
  float d = distance(u_eye, a_pos);
  float s = max(u_size, d * u_pix * 11.0);
  bool sel = (u_points == 1 ? gl_VertexID : gl_InstanceID) == u_sel;
  if (sel) s *= 1.6;
  if (u_points == 1) {                 // many devices: one lit point each (size in pixels)
    gl_Position = u_vp * vec4(a_pos, 1.0);
    gl_PointSize = sel ? 14.0 : clamp(u_size / (d * u_pix), 3.0, 9.0);
    v_col = sel ? vec3(1.0) : a_col.rgb;
    v_norm = vec3(0.0, 0.0, 1.0);
    v_led = a_col.a;
    return;
  }
  vec4 q = a_rot;
  float ql = length(q);
  q = ql > 0.0 && !any(isnan(q)) ? q / ql : vec4(1.0, 0.0, 0.0, 0.0);
  vec3 v = a_vert, n = a_norm;
  bool identity = abs(q.x) > 0.99999;
  if (u_arrow == 1 || (identity && hasHead)) {
    float a = -radians(a_head);          // clockwise from north -> counter-clockwise about +z
    mat2 r = mat2(cos(a), sin(a), -sin(a), cos(a));
    v.xy = r * v.xy; n.xy = r * n.xy;
    if (u_arrow == 1) { v *= 1.7; v.z += 0.05; }
  } else {
    v = qrot(q, v); n = qrot(q, n);
  }
  gl_Position = u_vp * vec4(a_pos + v * s, 1.0);
  vec3 c = a_col.rgb;
  if (u_arrow == 1) c = mix(c, vec3(1.0), 0.55);
  if (sel) c = mix(c, vec3(1.0), 0.45);
  v_col = c;
  v_norm = n;
  v_led = a_col.a;
}`;

const DEVICE_FS = `#version 300 es
precision mediump float;
in vec3 v_col;
in vec3 v_norm;
in float v_led;
uniform highp int u_points;
out vec4 o;
void main() {
  if (u_points == 1) {
    vec2 q = gl_PointCoord * 2.0 - 1.0;
    float r = dot(q, q);
    if (r > 1.0) discard;
    o = vec4(v_col * (1.15 - 0.5 * r), 1.0);
    return;
  }
  vec3 l = normalize(vec3(0.4, -0.3, 0.85));
  float diff = 0.45 + 0.55 * max(dot(normalize(v_norm), l), 0.0);
  vec3 c = v_col * mix(diff, 1.0, v_led * 0.6);     // reported LED colours glow
  o = vec4(c, 1.0);
}`;

const LINE_VS = `#version 300 es
layout(location=0) in vec3 a_p;
layout(location=1) in vec4 a_c;
uniform mat4 u_vp;
out vec4 v_c;
void main() {
  if (any(isnan(a_p))) { gl_Position = vec4(2.0, 2.0, 2.0, 1.0); return; }
  gl_Position = u_vp * vec4(a_p, 1.0);
  v_c = a_c;
}`;

const LINE_FS = `#version 300 es
precision mediump float;
in vec4 v_c;
out vec4 o;
void main() { o = v_c; }`;

const GRID_VS = `#version 300 es
layout(location=0) in vec2 a_p;       // a unit grid of lines from -N..N
uniform mat4 u_vp;
uniform vec2 u_origin;
uniform float u_step, u_fade;
uniform vec2 u_center;
out float v_a;
void main() {
  vec2 p = u_origin + a_p * u_step;
  gl_Position = u_vp * vec4(p, 0.0, 1.0);
  v_a = clamp(1.0 - distance(p, u_center) / u_fade, 0.0, 1.0);
}`;

const GRID_FS = `#version 300 es
precision mediump float;
in float v_a;
uniform vec4 u_col;
out vec4 o;
void main() { o = vec4(u_col.rgb, u_col.a * v_a); }`;

const TRAIL_VS = `#version 300 es
layout(location=0) in vec3 a_p;       // sample r of device j is vertex r * capacity + j
layout(location=1) in vec4 a_c;       // the device's colour then
uniform mat4 u_vp;
uniform int u_head, u_cap;
uniform float u_alpha;
out vec4 v_c;
void main() {
  int age = (gl_VertexID / u_cap - u_head + ${2 * TRAIL - 1}) % ${TRAIL};   // 0 oldest
  if (any(isnan(a_p))) { gl_Position = vec4(2.0, 2.0, 2.0, 1.0); return; }
  gl_Position = u_vp * vec4(a_p, 1.0);
  gl_PointSize = 2.0;
  v_c = vec4(mix(a_c.rgb, vec3(1.0), 0.35), u_alpha * float(age) / float(${TRAIL - 1}));
}`;

function compile(gl, vs, fs) {
  const p = gl.createProgram();
  for (const [type, src] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]]) {
    const s = gl.createShader(type);
    gl.shaderSource(s, src);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    gl.attachShader(p, s);
  }
  gl.linkProgram(p);
  if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(p));
  const u = {};
  const n = gl.getProgramParameter(p, gl.ACTIVE_UNIFORMS);
  for (let i = 0; i < n; i++) {
    const name = gl.getActiveUniform(p, i).name;
    u[name] = gl.getUniformLocation(p, name);
  }
  return { p, u };
}

const GRID_N = 50;

export class Scene {
  constructor(canvas, overlay, store) {
    this.canvas = canvas;
    this.overlay = overlay;
    this.ctx = overlay.getContext("2d");
    this.store = store;
    this.needsDraw = true;
    this.camera = new Camera(canvas, () => { this.needsDraw = true; });
    this.selected = null;
    this.showTrails = true;
    this.showLinks = true;
    this.trailHead = TRAIL - 1;
    this.trailFilled = 0;
    this.lastTrail = 0;
    this.linkData = new Float32Array(0);
    this.linkCount = 0;
    this.drawn = 0;
    this.dotStep = 10;         // points mode: a trail dot every 10th sample (1 s apart)
    const gl = canvas.getContext("webgl2", { antialias: true, alpha: false });
    if (!gl) throw new Error("WebGL2 is not available in this browser");
    this.gl = gl;
    // software GL (SwiftShader, llvmpipe: headless browsers, no GPU) pays per instance drawn:
    // there, a shape with more than a few hundred devices is drawn as points
    const info = gl.getExtension("WEBGL_debug_renderer_info");
    this.renderer = info ? String(gl.getParameter(info.UNMASKED_RENDERER_WEBGL)) : "";
    this.software = /swiftshader|llvmpipe|software|softpipe/i.test(this.renderer);
    const asked = Number(new URLSearchParams(location.search).get("points"));
    this.pointsAbove = Number.isFinite(asked) && asked > 0 ? asked : this.software ? 300 : 20000;
    this.dev = compile(gl, DEVICE_VS, DEVICE_FS);
    this.line = compile(gl, LINE_VS, LINE_FS);
    this.grid = compile(gl, GRID_VS, GRID_FS);
    this.trail = compile(gl, TRAIL_VS, LINE_FS);
    this.meshes = {};
    for (const [name, data] of Object.entries(meshes())) {
      const b = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
      this.meshes[name] = { buffer: b, count: data.length / 6 };
    }
    this.gridBuf = this.makeGrid();
    this.gpu = store.groups.map(() => null);
    this.linkBuf = gl.createBuffer();
    this.linkVao = gl.createVertexArray();
    gl.bindVertexArray(this.linkVao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.linkBuf);
    gl.enableVertexAttribArray(0);
    gl.vertexAttribPointer(0, 3, gl.FLOAT, false, 0, 0);
    gl.vertexAttrib4f(1, 0.35, 0.75, 1.0, 0.22);
    gl.bindVertexArray(null);
  }

  makeGrid() {
    const gl = this.gl, pts = [];
    for (let i = -GRID_N; i <= GRID_N; i++) pts.push(i, -GRID_N, i, GRID_N, -GRID_N, i, GRID_N, i);
    const vao = gl.createVertexArray();
    gl.bindVertexArray(vao);
    const b = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, b);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(pts), gl.STATIC_DRAW);
    gl.enableVertexAttribArray(0);
    gl.vertexAttribPointer(0, 2, gl.FLOAT, false, 0, 0);
    gl.bindVertexArray(null);
    return { vao, count: pts.length / 2 };
  }

  /** GPU state of one group, (re)made when its arrays were reallocated. */
  groupGpu(g) {
    const gl = this.gl;
    let s = this.gpu[g.index];
    if (s && s.version === g.version) return s;
    if (s) {
      for (const b of [s.pos, s.rot, s.col, s.head, s.beamPosBuf, s.beamColBuf]) gl.deleteBuffer(b);
      for (const v of [s.body, s.points, s.arrow, s.trailVao, s.beamVao]) gl.deleteVertexArray(v);
      gl.deleteBuffer(s.trail); gl.deleteBuffer(s.trailCol); gl.deleteBuffer(s.trailIdx);
    }
    const buf = (arr) => {
      const b = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.bufferData(gl.ARRAY_BUFFER, arr.byteLength, gl.DYNAMIC_DRAW);
      return b;
    };
    s = { version: g.version, pos: buf(g.position), rot: buf(g.orientation), col: buf(g.colour),
      head: buf(g.heading) };
    const inst = (loc, b, size, type, norm) => {
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.enableVertexAttribArray(loc);
      gl.vertexAttribPointer(loc, size, type, norm, 0, 0);
      gl.vertexAttribDivisor(loc, 1);
    };
    const vao = (mesh) => {
      const v = gl.createVertexArray();
      gl.bindVertexArray(v);
      if (mesh) {
        gl.bindBuffer(gl.ARRAY_BUFFER, mesh.buffer);
        gl.enableVertexAttribArray(0);
        gl.vertexAttribPointer(0, 3, gl.FLOAT, false, 24, 0);
        gl.enableVertexAttribArray(1);
        gl.vertexAttribPointer(1, 3, gl.FLOAT, false, 24, 12);
      }
      inst(2, s.pos, 3, gl.FLOAT, false);
      inst(3, s.rot, 4, gl.FLOAT, false);
      inst(4, s.col, 4, gl.UNSIGNED_BYTE, true);
      inst(5, s.head, 1, gl.FLOAT, false);
      gl.bindVertexArray(null);
      return v;
    };
    s.body = vao(this.meshes[g.shape]);
    s.points = gl.createVertexArray();
    gl.bindVertexArray(s.points);
    for (const [loc, b, size, type, norm] of [[2, s.pos, 3, gl.FLOAT, false], [3, s.rot, 4, gl.FLOAT, false],
      [4, s.col, 4, gl.UNSIGNED_BYTE, true], [5, s.head, 1, gl.FLOAT, false]]) {
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.enableVertexAttribArray(loc);
      gl.vertexAttribPointer(loc, size, type, norm, 0, 0);
    }
    gl.bindVertexArray(null);
    s.arrow = vao(this.meshes.arrow);
    // trail ring: TRAIL blocks of `capacity` positions, one block per sample
    s.trail = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, s.trail);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(g.capacity * 3 * TRAIL).fill(NaN), gl.DYNAMIC_DRAW);
    s.block = g.capacity * 12;
    s.trailCol = gl.createBuffer();          // and their colours: 4 bytes a sample
    gl.bindBuffer(gl.ARRAY_BUFFER, s.trailCol);
    gl.bufferData(gl.ARRAY_BUFFER, g.capacity * 4 * TRAIL, gl.DYNAMIC_DRAW);
    // a line VAO: vertex positions (3 floats) and colours (4 bytes), one per vertex
    const lines = (posBuf, colBuf) => {
      const v = gl.createVertexArray();
      gl.bindVertexArray(v);
      gl.bindBuffer(gl.ARRAY_BUFFER, posBuf);
      gl.enableVertexAttribArray(0);
      gl.vertexAttribPointer(0, 3, gl.FLOAT, false, 0, 0);
      gl.bindBuffer(gl.ARRAY_BUFFER, colBuf);
      gl.enableVertexAttribArray(1);
      gl.vertexAttribPointer(1, 4, gl.UNSIGNED_BYTE, true, 0, 0);
      return v;
    };
    s.trailVao = lines(s.trail, s.trailCol);
    s.trailIdx = gl.createBuffer();
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, s.trailIdx);
    gl.bindVertexArray(null);
    s.trailCount = 0;
    s.ring = new Float32Array(g.capacity * 3 * TRAIL).fill(NaN);   // the same ring, on the CPU
    s.idx = new Uint32Array(0);
    // beams: plain lines, two vertices per device that has one
    s.beamPos = new Float32Array(g.capacity * 6);
    s.beamCol = new Uint8Array(g.capacity * 8);
    s.beamPosBuf = buf(s.beamPos);
    s.beamColBuf = buf(s.beamCol);
    s.beamVao = lines(s.beamPosBuf, s.beamColBuf);
    gl.bindVertexArray(null);
    s.dirtyAll = true;
    this.gpu[g.index] = s;
    return s;
  }

  upload(g, s) {
    const gl = this.gl, n = g.n;
    const put = (b, arr, per) => {
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.bufferSubData(gl.ARRAY_BUFFER, 0, arr, 0, n * per);
    };
    put(s.pos, g.position, 3);
    put(s.rot, g.orientation, 4);
    put(s.col, g.colour, 4);
    put(s.head, g.heading, 1);
    s.dirtyAll = false;
  }

  /** Push the current positions into the trail ring (every TRAIL_PERIOD_MS): one upload of
   * the new sample, and one of the segment indices (oldest to newest, skipping unknown samples).
   * Plain indexed lines, no instancing: software GL pays per instance. A shape drawn as points
   * needs no indices: its trail is dots drawn from the ring as it is. */
  sampleTrails(now) {
    if (now - this.lastTrail < TRAIL_PERIOD_MS) return;
    this.lastTrail = now;
    const head = this.trailHead = (this.trailHead + 1) % TRAIL;
    this.trailFilled = Math.min(TRAIL, this.trailFilled + 1);
    const gl = this.gl;
    for (const g of this.store.groups) {
      if (g.n === 0) continue;
      const s = this.groupGpu(g), n = g.n, cap = g.capacity, ring = s.ring;
      ring.set(g.position.subarray(0, n * 3), head * cap * 3);
      gl.bindBuffer(gl.ARRAY_BUFFER, s.trail);
      gl.bufferSubData(gl.ARRAY_BUFFER, head * s.block, g.position, 0, n * 3);
      gl.bindBuffer(gl.ARRAY_BUFFER, s.trailCol);
      gl.bufferSubData(gl.ARRAY_BUFFER, head * cap * 4, g.colour, 0, n * 4);
      if (n > this.pointsAbove) { s.trailCount = 0; continue; }   // dots: drawn from the ring as it is
      const segs = this.trailFilled - 1;
      if (s.idx.length < segs * n * 2) s.idx = new Uint32Array((TRAIL - 1) * cap * 2);
      const idx = s.idx;
      let w = 0;
      for (let q = segs; q >= 1; q--) {   // the segment ending q-1 samples back ... newest
        const rb = (head - (q - 1) + TRAIL) % TRAIL, ra = (rb - 1 + TRAIL) % TRAIL;
        const oa = ra * cap, ob = rb * cap;
        for (let j = 0; j < n; j++) {
          const xa = ring[3 * (oa + j)], xb = ring[3 * (ob + j)];
          if (xa !== xa || xb !== xb) continue;          // NaN: unknown then
          idx[w++] = oa + j; idx[w++] = ob + j;
        }
      }
      gl.bindVertexArray(s.trailVao);
      gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, idx.subarray(0, w), gl.DYNAMIC_DRAW);
      gl.bindVertexArray(null);
      s.trailCount = w;
    }
  }

  /** Lines from each device with a beam along it (plain lines: software GL pays per instance);
   * one upload of the positions and one of the colours. Returns the vertex count. */
  buildBeams(g, s, len) {
    const gl = this.gl, p = g.position, e = g.beam, c = g.colour;
    const out = s.beamPos, col = s.beamCol;
    let v = 0;
    for (let i = 0; i < g.n; i++) {
      const bx = e[3 * i], by = e[3 * i + 1], bz = e[3 * i + 2];
      const x = p[3 * i], y = p[3 * i + 1], z = p[3 * i + 2];
      if (bx !== bx || x !== x) continue;                      // NaN: no beam, no position
      const k = len / (Math.hypot(bx, by, bz) || 1);
      out[3 * v] = x; out[3 * v + 1] = y; out[3 * v + 2] = z;
      out[3 * v + 3] = x + bx * k; out[3 * v + 4] = y + by * k; out[3 * v + 5] = z + bz * k;
      for (let q = 0; q < 3; q++) {
        const lit = (c[4 * i + q] + 255) >> 1;                 // the LED colour, paler
        col[4 * v + q] = lit; col[4 * v + 4 + q] = lit;
      }
      col[4 * v + 3] = 230; col[4 * v + 7] = 0;
      v += 2;
    }
    gl.bindBuffer(gl.ARRAY_BUFFER, s.beamPosBuf);
    gl.bufferSubData(gl.ARRAY_BUFFER, 0, out, 0, v * 3);
    gl.bindBuffer(gl.ARRAY_BUFFER, s.beamColBuf);
    gl.bufferSubData(gl.ARRAY_BUFFER, 0, col, 0, v * 4);
    return v;
  }

  buildLinks() {
    let pairs = 0;
    for (const flat of this.store.links.values()) pairs += flat.length / 2;
    if (this.linkData.length < pairs * 6) this.linkData = new Float32Array(pairs * 12);
    const out = this.linkData, devs = this.store.devices;
    let k = 0;
    for (const [si, flat] of this.store.links) {
      const gids = this.store.sources[si].gids;
      for (let i = 0; i < flat.length; i += 2) {
        const a = flat[i] < gids.length ? gids[flat[i]] : -1;
        const b = flat[i + 1] < gids.length ? gids[flat[i + 1]] : -1;
        if (a < 0 || b < 0) continue;
        const da = devs[a], db = devs[b], pa = da.group.position, pb = db.group.position;
        const ja = 3 * da.gi, jb = 3 * db.gi;
        out[k++] = pa[ja]; out[k++] = pa[ja + 1]; out[k++] = pa[ja + 2];
        out[k++] = pb[jb]; out[k++] = pb[jb + 1]; out[k++] = pb[jb + 2];
      }
    }
    this.linkCount = k / 3;
    const gl = this.gl;
    gl.bindBuffer(gl.ARRAY_BUFFER, this.linkBuf);
    gl.bufferData(gl.ARRAY_BUFFER, out.subarray(0, k), gl.DYNAMIC_DRAW);
  }

  resize() {
    const dpr = Math.min(window.devicePixelRatio || 1, 2);
    const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
    const pw = Math.max(1, Math.round(w * dpr)), ph = Math.max(1, Math.round(h * dpr));
    if (this.canvas.width !== pw || this.canvas.height !== ph) {
      this.canvas.width = pw; this.canvas.height = ph;
      this.overlay.width = pw; this.overlay.height = ph;
      this.needsDraw = true;
    }
    this.dpr = dpr;
    return [w, h];
  }

  /** Bounds of every known position (of the devices `keep(device)` accepts, when given):
   * [min, max], Infinity when none. */
  bounds(keep = null) {
    const min = [Infinity, Infinity, Infinity], max = [-Infinity, -Infinity, -Infinity];
    for (const g of this.store.groups) {
      const p = g.position;
      for (let i = 0; i < 3 * g.n; i += 3) {
        if (keep && !keep(this.store.devices[g.gids[i / 3]])) continue;
        const x = p[i], y = p[i + 1], z = p[i + 2];
        if (!(Number.isFinite(x) && Number.isFinite(y) && Number.isFinite(z))) continue;
        if (x < min[0]) min[0] = x; if (y < min[1]) min[1] = y; if (z < min[2]) min[2] = z;
        if (x > max[0]) max[0] = x; if (y > max[1]) max[1] = y; if (z > max[2]) max[2] = z;
      }
    }
    return [min, max];
  }

  fitAll() {
    const [min, max] = this.bounds();
    this.camera.fit(min, max);
  }

  /** Frame the devices `keep(device)` accepts (a source's, one device's). */
  fit(keep) {
    const [min, max] = this.bounds(keep);
    this.camera.fit(min, max);
    this.camera.userMoved = true;      // stays where the user asked
  }

  /** The device drawn nearest to (x, y) CSS pixels, within 14 px; or null. */
  pick(x, y) {
    const cam = this.camera, tmp = [0, 0];
    let best = null, bestD = 14 * 14;
    for (const g of this.store.groups) {
      const p = g.position;
      for (let i = 0; i < g.n; i++) {
        const s = cam.project(p[3 * i], p[3 * i + 1], p[3 * i + 2], tmp);
        if (!s || !Number.isFinite(s[0])) continue;
        const d = (s[0] - x) ** 2 + (s[1] - y) ** 2;
        if (d < bestD) { bestD = d; best = this.store.devices[g.gids[i]]; }
      }
    }
    return best;
  }

  draw(now) {
    const gl = this.gl, cam = this.camera;
    const [w, h] = this.resize();
    cam.update(w, h);
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.clearColor(0.063, 0.078, 0.094, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    gl.enable(gl.BLEND);
    gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA);

    // grid: minor and major lines, snapped around the camera target
    const step = 10 ** Math.floor(Math.log10(Math.max(0.5, cam.distance / 6)));
    this.gridStep = step;
    gl.useProgram(this.grid.p);
    gl.uniformMatrix4fv(this.grid.u.u_vp, false, cam.viewProj);
    gl.uniform2f(this.grid.u.u_center, cam.target[0], cam.target[1]);
    gl.depthMask(false);
    gl.bindVertexArray(this.gridBuf.vao);
    for (const [st, alpha] of [[step, 0.3], [step * 10, 0.6]]) {
      gl.uniform2f(this.grid.u.u_origin, Math.round(cam.target[0] / st) * st, Math.round(cam.target[1] / st) * st);
      gl.uniform1f(this.grid.u.u_step, st);
      gl.uniform1f(this.grid.u.u_fade, Math.min(GRID_N * st, cam.distance * 3));
      gl.uniform4f(this.grid.u.u_col, 0.55, 0.62, 0.7, alpha);
      gl.drawArrays(gl.LINES, 0, this.gridBuf.count);
    }
    gl.depthMask(true);

    // devices: one upload per instance array and one draw per shape
    gl.useProgram(this.dev.p);
    const u = this.dev.u;
    gl.uniformMatrix4fv(u.u_vp, false, cam.viewProj);
    gl.uniform3fv(u.u_eye, cam.eye);
    gl.uniform1f(u.u_size, 0.35);
    gl.uniform1f(u.u_pix, 2 * Math.tan(cam.fovy / 2) / Math.max(1, h));
    let drawn = 0;
    for (const g of this.store.groups) {
      if (g.n === 0) continue;
      const s = this.groupGpu(g);
      if (g.dirty || s.dirtyAll) { this.upload(g, s); g.dirty = false; }
      const sel = this.selected && this.selected.group === g ? this.selected.gi : -1;
      gl.uniform1i(u.u_sel, sel);
      gl.uniform1i(u.u_arrow, 0);
      if (g.n > this.pointsAbove) {       // thousands: points (software GL stays usable)
        gl.uniform1i(u.u_points, 1);
        gl.bindVertexArray(s.points);
        gl.drawArrays(gl.POINTS, 0, g.n);
        gl.uniform1i(u.u_points, 0);
        drawn += g.n;
        continue;
      }
      gl.uniform1i(u.u_points, 0);
      gl.bindVertexArray(s.body);
      gl.drawArraysInstanced(gl.TRIANGLES, 0, this.meshes[g.shape].count, g.n);
      gl.uniform1i(u.u_arrow, 1);
      gl.bindVertexArray(s.arrow);
      gl.drawArraysInstanced(gl.TRIANGLES, 0, this.meshes.arrow.count, g.n);
      drawn += g.n;
    }
    this.drawn = drawn;

    gl.depthMask(false);
    if (this.showTrails) {
      this.sampleTrails(now);
      gl.useProgram(this.trail.p);
      gl.uniformMatrix4fv(this.trail.u.u_vp, false, cam.viewProj);
      gl.uniform1i(this.trail.u.u_head, this.trailHead);
      gl.uniform1f(this.trail.u.u_alpha, 0.7);
      for (const g of this.store.groups) {
        if (g.n === 0) continue;
        const s = this.groupGpu(g);
        gl.uniform1i(this.trail.u.u_cap, g.capacity);
        gl.bindVertexArray(s.trailVao);
        if (g.n > this.pointsAbove) {
          // many drawn as points: their trails are dots, every dotStep-th sample (no indices)
          for (let k = TRAIL - 1; k >= TRAIL - this.trailFilled && k >= 0; k -= this.dotStep) {
            const r = (this.trailHead + 1 + k) % TRAIL;
            gl.drawArrays(gl.POINTS, r * g.capacity, g.n);
          }
          continue;
        }
        if (!s.trailCount) continue;
        gl.drawElements(gl.LINES, s.trailCount, gl.UNSIGNED_INT, 0);
      }
    }
    const beamLen = Math.min(40, Math.max(3, cam.distance * 0.08));
    let beamProgram = false;
    for (const g of this.store.groups) {
      if (g.n === 0 || !g.hasBeam) continue;
      const s = this.groupGpu(g);
      const count = this.buildBeams(g, s, beamLen);
      if (!count) continue;
      if (!beamProgram) {
        gl.useProgram(this.line.p);
        gl.uniformMatrix4fv(this.line.u.u_vp, false, cam.viewProj);
        beamProgram = true;
      }
      gl.bindVertexArray(s.beamVao);
      gl.drawArrays(gl.LINES, 0, count);
    }
    if (this.showLinks && this.store.links.size) {
      this.buildLinks();
      gl.useProgram(this.line.p);
      gl.uniformMatrix4fv(this.line.u.u_vp, false, cam.viewProj);
      gl.bindVertexArray(this.linkVao);
      gl.drawArrays(gl.LINES, 0, this.linkCount);
    }
    gl.depthMask(true);
    gl.bindVertexArray(null);
    this.drawOverlay(w, h);
    this.needsDraw = false;
  }

  drawOverlay(w, h) {
    const c = this.ctx, cam = this.camera, tmp = [0, 0];
    c.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    c.clearRect(0, 0, w, h);
    c.font = "11px system-ui, sans-serif";
    // metre labels along the major grid lines through the target
    const major = this.gridStep * 10;
    c.fillStyle = "rgba(170,185,200,0.8)";
    const ox = Math.round(cam.target[0] / major) * major, oy = Math.round(cam.target[1] / major) * major;
    for (let k = -3; k <= 3; k++) {
      for (const [x, y, label] of [[ox + k * major, oy, `E ${fmtMetres(ox + k * major)}`],
        [ox, oy + k * major, `N ${fmtMetres(oy + k * major)}`]]) {
        if (k === 0 && label[0] === "N") continue;
        const s = cam.project(x, y, 0, tmp);
        if (!s || s[0] < 0 || s[1] < 0 || s[0] > w || s[1] > h) continue;
        c.fillText(label, s[0] + 3, s[1] - 3);
      }
    }
    c.fillStyle = "rgba(170,185,200,0.9)";
    const points = this.store.groups.some((g) => g.n > this.pointsAbove);
    c.fillText(`grid ${fmtMetres(this.gridStep)} / ${fmtMetres(major)}  ·  x east, y north (m)`
      + (points ? `  ·  more than ${this.pointsAbove} of a kind: points` : ""), 8, 16);
    // compass: where north is on screen
    const a = cam.project(cam.target[0], cam.target[1], 0, [0, 0]);
    const b = a && cam.project(cam.target[0], cam.target[1] + cam.distance * 0.05, 0, [0, 0]);
    if (a && b) {
      const ang = Math.atan2(b[1] - a[1], b[0] - a[0]);
      const cx = w - 28, cy = 28;
      c.strokeStyle = "#ff8a80"; c.lineWidth = 2; c.beginPath();
      c.moveTo(cx, cy); c.lineTo(cx + 16 * Math.cos(ang), cy + 16 * Math.sin(ang)); c.stroke();
      c.fillStyle = "#ff8a80";
      c.fillText("N", cx + 22 * Math.cos(ang) - 4, cy + 22 * Math.sin(ang) + 4);
    }
    const d = this.selected;
    if (d) {
      const p = d.group.position, j = 3 * d.gi;
      const s = cam.project(p[j], p[j + 1], p[j + 2], tmp);
      if (s && Number.isFinite(s[0])) {
        c.strokeStyle = "#fff"; c.lineWidth = 1.5;
        c.beginPath(); c.arc(s[0], s[1], 13, 0, 2 * Math.PI); c.stroke();
        c.fillStyle = "#fff"; c.font = "12px system-ui, sans-serif";
        c.fillText(d.name, s[0] + 16, s[1] - 8);
      }
    }
  }
}

export function fmtMetres(m) {
  const a = Math.abs(m);
  if (a >= 1000) return `${+(m / 1000).toFixed(2)} km`;
  if (a >= 1 || a === 0) return `${+m.toFixed(1)} m`;
  return `${+(m * 100).toFixed(1)} cm`;
}
