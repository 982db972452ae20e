// Top-down geographic view of every device with a latitude/longitude: a lat/lon grid with
// labels and a scale bar (no map tiles, nothing fetched). Drag pans, wheel zooms, click selects;
// in mission mode clicks add waypoints instead (see control.js).

const M_PER_DEG_LAT = 111132.954;

function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x)), f = x / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

export class GeoView {
  constructor(canvas, info, store, onSelect) {
    this.canvas = canvas;
    this.info = info;
    this.store = store;
    this.onSelect = onSelect;
    this.lat0 = 0; this.lon0 = 0;
    this.mpp = 5;                 // metres per CSS pixel
    this.fitted = false;
    this.fitCount = -1;
    this.userMoved = false;
    this.selected = null;
    this.waypoints = null;        // [[lat, lon], ...] while drawing a mission
    this.onWaypoint = null;
    this.visible = 0;
    this.lastDraw = 0;
    this.drawnFrame = -2;
    this.attach();
  }

  mPerDegLon() { return M_PER_DEG_LAT * Math.cos(this.lat0 * Math.PI / 180); }
  toXY(lat, lon, out) {
    out[0] = this.W / 2 + (lon - this.lon0) * this.mPerDegLon() / this.mpp;
    out[1] = this.H / 2 - (lat - this.lat0) * M_PER_DEG_LAT / this.mpp;
    return out;
  }
  toLatLon(x, y) {
    return [this.lat0 - (y - this.H / 2) * this.mpp / M_PER_DEG_LAT,
      this.lon0 + (x - this.W / 2) * this.mpp / this.mPerDegLon()];
  }

  fit() {
    let a = Infinity, b = -Infinity, c = Infinity, d = -Infinity, n = 0;
    for (const g of this.store.groups) {
      const p = g.geodetic;
      for (let i = 0; i < g.n; i++) {
        const lat = p[3 * i], lon = p[3 * i + 1];
        if (!Number.isFinite(lat) || !Number.isFinite(lon)) continue;
        a = Math.min(a, lat); b = Math.max(b, lat); c = Math.min(c, lon); d = Math.max(d, lon); n++;
      }
    }
    if (!n) return false;
    this.lat0 = (a + b) / 2; this.lon0 = (c + d) / 2;
    const W = this.canvas.clientWidth || 300, H = this.canvas.clientHeight || 200;
    const spanM = Math.max((b - a) * M_PER_DEG_LAT / H, (d - c) * this.mPerDegLon() / W);
    this.mpp = Math.max(0.05, spanM * 1.25);
    this.fitted = true;
    return true;
  }

  attach() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener("pointerdown", (e) => {
      drag = { x: e.clientX, y: e.clientY, moved: 0 };
      c.setPointerCapture(e.pointerId);
    });
    c.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      drag.x = e.clientX; drag.y = e.clientY; drag.moved += Math.abs(dx) + Math.abs(dy);
      this.lon0 -= dx * this.mpp / this.mPerDegLon();
      this.lat0 += dy * this.mpp / M_PER_DEG_LAT;
      this.userMoved = true;
      this.draw(true);
    });
    c.addEventListener("pointerup", (e) => {
      if (drag && drag.moved < 4) this.click(e.offsetX, e.offsetY);
      drag = null;
    });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      const before = this.toLatLon(e.offsetX, e.offsetY);
      this.mpp = Math.min(1e5, Math.max(0.01, this.mpp * Math.exp(e.deltaY * 0.0015)));
      const after = this.toLatLon(e.offsetX, e.offsetY);
      this.lat0 += before[0] - after[0]; this.lon0 += before[1] - after[1];
      this.userMoved = true;
      this.draw(true);
    }, { passive: false });
  }

  click(x, y) {
    if (this.waypoints) {
      const [lat, lon] = this.toLatLon(x, y);
      this.waypoints.push([lat, lon]);
      if (this.onWaypoint) this.onWaypoint();
      this.draw(true);
      return;
    }
    const tmp = [0, 0];
    let best = null, bestD = 12 * 12;
    for (const g of this.store.groups) {
      const p = g.geodetic;
      for (let i = 0; i < g.n; i++) {
        if (!Number.isFinite(p[3 * i])) continue;
        this.toXY(p[3 * i], p[3 * i + 1], tmp);
        const d = (tmp[0] - x) ** 2 + (tmp[1] - y) ** 2;
        if (d < bestD) { bestD = d; best = this.store.devices[g.gids[i]]; }
      }
    }
    if (best) this.onSelect(best);
  }

  /** The offscreen layer the dots are written into (remade only when the size changes). */
  dotLayer(w, h) {
    let d = this.dots;
    if (!d || d.canvas.width !== w || d.canvas.height !== h) {
      const canvas = document.createElement("canvas");
      canvas.width = w; canvas.height = h;
      const ctx = canvas.getContext("2d");
      const image = ctx.createImageData(w, h);
      d = this.dots = { canvas, ctx, image, px: new Uint32Array(image.data.buffer) };
    }
    return d;
  }

  /** Redraw (at most ~15 Hz unless forced). */
  draw(force = false, now = performance.now()) {
    if (!force && (now - this.lastDraw < 66 || this.drawnFrame === this.store.frame)) return;
    this.lastDraw = now;
    this.drawnFrame = this.store.frame;
    const cv = this.canvas, dpr = Math.min(window.devicePixelRatio || 1, 2);
    const W = cv.clientWidth, H = cv.clientHeight;
    if (!W || !H) return;
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
      cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr);
    }
    this.W = W; this.H = H;
    if (!this.userMoved && (!this.fitted || this.visible !== this.fitCount)) {
      if (this.fit()) this.fitCount = this.visible;
    }
    const c = cv.getContext("2d");
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = "#0c1014"; c.fillRect(0, 0, W, H);
    // lat/lon grid
    const [latTop, lonLeft] = this.toLatLon(0, 0), [latBot, lonRight] = this.toLatLon(W, H);
    const stepLat = niceStep((latTop - latBot) / 4), stepLon = niceStep((lonRight - lonLeft) / 4);
    const dec = (s) => Math.max(0, Math.min(8, -Math.floor(Math.log10(s)) + 1));
    c.strokeStyle = "rgba(140,160,180,0.25)"; c.lineWidth = 1;
    c.fillStyle = "rgba(150,170,190,0.8)"; c.font = "10px system-ui, sans-serif";
    const tmp = [0, 0];
    for (let lat = Math.ceil(latBot / stepLat) * stepLat; lat <= latTop; lat += stepLat) {
      const y = this.toXY(lat, this.lon0, tmp)[1];
      c.beginPath(); c.moveTo(0, y); c.lineTo(W, y); c.stroke();
      c.fillText(`${lat.toFixed(dec(stepLat))}°`, 3, y - 2);
    }
    for (let lon = Math.ceil(lonLeft / stepLon) * stepLon; lon <= lonRight; lon += stepLon) {
      const x = this.toXY(this.lat0, lon, tmp)[0];
      c.beginPath(); c.moveTo(x, 0); c.lineTo(x, H); c.stroke();
      c.fillText(`${lon.toFixed(dec(stepLon))}°`, x + 2, H - 4);
    }
    // devices: 3x3 device-pixel dots written into one reused ImageData (no string or object
    // per device), composited over the grid with one drawImage
    const dots = this.dotLayer(cv.width, cv.height);
    const pix = dots.px, pw = cv.width, ph = cv.height;
    pix.fill(0);
    let visible = 0;
    for (const g of this.store.groups) {
      const p = g.geodetic, col = g.colour;
      for (let i = 0; i < g.n; i++) {
        const lat = p[3 * i], lon = p[3 * i + 1];
        if (!Number.isFinite(lat) || !Number.isFinite(lon)) continue;
        this.toXY(lat, lon, tmp);
        visible++;
        const x = Math.round(tmp[0] * dpr), y = Math.round(tmp[1] * dpr);
        if (x < 1 || y < 1 || x >= pw - 1 || y >= ph - 1) continue;
        const rgba = (255 << 24 | col[4 * i + 2] << 16 | col[4 * i + 1] << 8 | col[4 * i]) >>> 0;
        for (let dy = -1; dy <= 1; dy++) {
          const row = (y + dy) * pw + x;
          pix[row - 1] = rgba; pix[row] = rgba; pix[row + 1] = rgba;
        }
      }
    }
    dots.ctx.putImageData(dots.image, 0, 0);
    c.setTransform(1, 0, 0, 1, 0, 0);
    c.drawImage(dots.canvas, 0, 0);
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.visible = visible;
    const d = this.selected;
    if (d) {
      const p = d.group.geodetic, j = 3 * d.gi;
      if (Number.isFinite(p[j])) {
        this.toXY(p[j], p[j + 1], tmp);
        c.strokeStyle = "#fff"; c.lineWidth = 1.5;
        c.beginPath(); c.arc(tmp[0], tmp[1], 7, 0, 2 * Math.PI); c.stroke();
        c.fillStyle = "#fff"; c.font = "11px system-ui, sans-serif";
        c.fillText(d.name, tmp[0] + 9, tmp[1] - 6);
      }
    }
    // mission being drawn
    if (this.waypoints && this.waypoints.length) {
      c.strokeStyle = "#f0b84a"; c.fillStyle = "#f0b84a"; c.lineWidth = 2;
      c.beginPath();
      this.waypoints.forEach(([lat, lon], k) => {
        this.toXY(lat, lon, tmp);
        if (k === 0) c.moveTo(tmp[0], tmp[1]); else c.lineTo(tmp[0], tmp[1]);
      });
      c.stroke();
      this.waypoints.forEach(([lat, lon], k) => {
        this.toXY(lat, lon, tmp);
        c.beginPath(); c.arc(tmp[0], tmp[1], 4, 0, 2 * Math.PI); c.fill();
        c.fillText(String(k + 1), tmp[0] + 6, tmp[1] + 4);
      });
    }
    // scale bar
    const len = niceStep(W * 0.3 * this.mpp), px = len / this.mpp;
    c.strokeStyle = "#d8dee6"; c.fillStyle = "#d8dee6"; c.lineWidth = 2;
    c.beginPath(); c.moveTo(W - 10 - px, H - 18); c.lineTo(W - 10, H - 18); c.stroke();
    c.beginPath(); c.moveTo(W - 10 - px, H - 22); c.lineTo(W - 10 - px, H - 14);
    c.moveTo(W - 10, H - 22); c.lineTo(W - 10, H - 14); c.stroke();
    c.font = "10px system-ui, sans-serif";
    c.fillText(len >= 1000 ? `${len / 1000} km` : `${len} m`, W - 10 - px, H - 24);
    if (!visible) {
      c.fillStyle = "rgba(150,170,190,0.8)"; c.font = "12px system-ui, sans-serif";
      c.fillText("no device with latitude/longitude yet", 10, 20);
    }
    this.info.textContent = `${visible} with lat/lon`;
  }
}
