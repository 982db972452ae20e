// Orbit camera over the ENU world (x east, y north, z up) and the few matrix helpers it needs.
// Mouse: left-drag orbits, right- or shift-drag pans, wheel zooms; touch: one finger orbits,
// two fingers pinch-zoom and pan. `fit(bounds)` frames a box ("fit all", key F).

export function perspective(out, fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2), nf = 1 / (near - far);
  out.fill(0);
  out[0] = f / aspect; out[5] = f; out[10] = (far + near) * nf; out[11] = -1;
  out[14] = 2 * far * near * nf;
  return out;
}

export function lookAt(out, eye, target, up) {
  let zx = eye[0] - target[0], zy = eye[1] - target[1], zz = eye[2] - target[2];
  let l = Math.hypot(zx, zy, zz) || 1; zx /= l; zy /= l; zz /= l;
  let xx = up[1] * zz - up[2] * zy, xy = up[2] * zx - up[0] * zz, xz = up[0] * zy - up[1] * zx;
  l = Math.hypot(xx, xy, xz) || 1; xx /= l; xy /= l; xz /= l;
  const yx = zy * xz - zz * xy, yy = zz * xx - zx * xz, yz = zx * xy - zy * xx;
  out[0] = xx; out[1] = yx; out[2] = zx; out[3] = 0;
  out[4] = xy; out[5] = yy; out[6] = zy; out[7] = 0;
  out[8] = xz; out[9] = yz; out[10] = zz; out[11] = 0;
  out[12] = -(xx * eye[0] + xy * eye[1] + xz * eye[2]);
  out[13] = -(yx * eye[0] + yy * eye[1] + yz * eye[2]);
  out[14] = -(zx * eye[0] + zy * eye[1] + zz * eye[2]);
  out[15] = 1;
  return out;
}

export function multiply(out, a, b) {
  for (let c = 0; c < 4; c++) {
    const b0 = b[4 * c], b1 = b[4 * c + 1], b2 = b[4 * c + 2], b3 = b[4 * c + 3];
    out[4 * c] = a[0] * b0 + a[4] * b1 + a[8] * b2 + a[12] * b3;
    out[4 * c + 1] = a[1] * b0 + a[5] * b1 + a[9] * b2 + a[13] * b3;
    out[4 * c + 2] = a[2] * b0 + a[6] * b1 + a[10] * b2 + a[14] * b3;
    out[4 * c + 3] = a[3] * b0 + a[7] * b1 + a[11] * b2 + a[15] * b3;
  }
  return out;
}

export class Camera {
  constructor(canvas, onChange) {
    this.canvas = canvas;
    this.onChange = onChange;
    this.target = [0, 0, 0];
    this.distance = 60;
    this.yaw = -0.6;          // radians, around +z
    this.pitch = 0.6;         // radians above the ground plane
    this.fovy = 0.9;
    this.eye = [0, 0, 0];
    this.view = new Float32Array(16);
    this.proj = new Float32Array(16);
    this.viewProj = new Float32Array(16);
    this.width = 1; this.height = 1;
    this.userMoved = false;
    this.attach();
  }

  update(width, height) {
    this.width = width; this.height = height;
    const cp = Math.cos(this.pitch);
    this.eye[0] = this.target[0] + this.distance * cp * Math.sin(this.yaw);
    this.eye[1] = this.target[1] - this.distance * cp * Math.cos(this.yaw);
    this.eye[2] = this.target[2] + this.distance * Math.sin(this.pitch);
    lookAt(this.view, this.eye, this.target, [0, 0, 1]);
    perspective(this.proj, this.fovy, width / Math.max(1, height),
      Math.max(0.01, this.distance / 1000), this.distance * 100 + 1000);
    multiply(this.viewProj, this.proj, this.view);
  }

  /** World point -> [x, y] CSS pixels (or null behind the camera); writes into `out`. */
  project(x, y, z, out) {
    const m = this.viewProj;
    const w = m[3] * x + m[7] * y + m[11] * z + m[15];
    if (w <= 1e-6) return null;
    out[0] = ((m[0] * x + m[4] * y + m[8] * z + m[12]) / w * 0.5 + 0.5) * this.width;
    out[1] = (0.5 - (m[1] * x + m[5] * y + m[9] * z + m[13]) / w * 0.5) * this.height;
    return out;
  }

  fit(min, max) {
    if (!(isFinite(min[0]) && isFinite(max[0]))) return;
    this.target = [(min[0] + max[0]) / 2, (min[1] + max[1]) / 2, (min[2] + max[2]) / 2];
    const r = Math.max(2, Math.hypot(max[0] - min[0], max[1] - min[1], max[2] - min[2]) / 2);
    this.distance = r / Math.sin(this.fovy / 2) * 1.1;
    this.changed();
  }

  changed() { if (this.onChange) this.onChange(); }

  orbit(dx, dy) {
    this.yaw -= dx * 0.006;
    this.pitch = Math.min(1.55, Math.max(-0.2, this.pitch + dy * 0.006));
    this.userMoved = true; this.changed();
  }

  pan(dx, dy) {
    const s = this.distance * 2 * Math.tan(this.fovy / 2) / Math.max(1, this.height);
    const cy = Math.cos(this.yaw), sy = Math.sin(this.yaw);
    // screen right = (cos yaw, sin yaw, 0); screen up on the ground = (-sin yaw, cos yaw, 0)
    this.target[0] -= (dx * cy - dy * -sy) * s;
    this.target[1] -= (dx * sy - dy * cy) * s;
    this.userMoved = true; this.changed();
  }

  zoom(factor) {
    this.distance = Math.min(1e6, Math.max(0.5, this.distance * factor));
    this.userMoved = true; this.changed();
  }

  attach() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener("contextmenu", (e) => e.preventDefault());
    c.addEventListener("pointerdown", (e) => {
      if (e.pointerType === "touch") return;
      drag = { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.button === 1 || e.shiftKey, moved: 0 };
      c.setPointerCapture(e.pointerId);
    });
    c.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      drag.x = e.clientX; drag.y = e.clientY;
      drag.moved += Math.abs(dx) + Math.abs(dy);
      if (drag.pan) this.pan(dx, dy); else this.orbit(dx, dy);
    });
    c.addEventListener("pointerup", (e) => {
      if (drag && drag.moved < 4 && e.button === 0 && this.onClick) this.onClick(e.offsetX, e.offsetY);
      drag = null;
    });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      this.zoom(Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015)));
    }, { passive: false });
    // touch: one finger orbits, two fingers pinch and pan
    let touches = null, travel = 0;
    const read = (e) => Array.from(e.touches, (t) => [t.clientX, t.clientY]);
    c.addEventListener("touchstart", (e) => {
      e.preventDefault();
      if (e.touches.length === 1) travel = 0;
      touches = read(e);
    }, { passive: false });
    c.addEventListener("touchmove", (e) => {
      e.preventDefault();
      const now = read(e);
      if (touches && touches.length) travel += Math.abs(now[0][0] - touches[0][0]) + Math.abs(now[0][1] - touches[0][1]);
      if (touches && now.length === 1 && touches.length === 1) {
        this.orbit(now[0][0] - touches[0][0], now[0][1] - touches[0][1]);
      } else if (touches && now.length >= 2 && touches.length >= 2) {
        const d0 = Math.hypot(touches[0][0] - touches[1][0], touches[0][1] - touches[1][1]);
        const d1 = Math.hypot(now[0][0] - now[1][0], now[0][1] - now[1][1]);
        if (d0 > 0 && d1 > 0) this.zoom(d0 / d1);
        this.pan((now[0][0] + now[1][0] - touches[0][0] - touches[1][0]) / 2,
          (now[0][1] + now[1][1] - touches[0][1] - touches[1][1]) / 2);
      }
      touches = now;
    }, { passive: false });
    c.addEventListener("touchend", (e) => {
      if (touches && touches.length === 1 && e.touches.length === 0 && travel < 8 && this.onClick) {
        const r = c.getBoundingClientRect(), t = e.changedTouches[0];
        this.onClick(t.clientX - r.left, t.clientY - r.top);
      }
      touches = read(e);
    });
  }
}
