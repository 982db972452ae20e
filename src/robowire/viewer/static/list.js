// The device list: grouped by source, filtered by a search box, virtualised (only the rows in
// view exist in the DOM, so 10,000 devices cost a few dozen elements).

const ROW = 22;

function span(className) {
  const el = document.createElement("span");
  el.className = className;
  return el;
}

export class DeviceList {
  constructor(container, spacer, search, store, onSelect) {
    this.el = container;
    this.spacer = spacer;
    this.search = search;
    this.store = store;
    this.onSelect = onSelect;
    this.rows = new Int32Array(0);   // >= 0: a device gid; < 0: -(source index) - 1, a header
    this.pool = [];
    this.selected = null;
    this.builtVersion = -1;
    this.dirty = true;
    search.addEventListener("input", () => { this.dirty = true; });
    container.addEventListener("scroll", () => this.render());
    container.addEventListener("click", (e) => {
      const row = e.target.closest(".row");
      if (row && row.dataset.source !== undefined && this.onSource) {
        this.onSource(this.store.sources[+row.dataset.source]);
        return;
      }
      if (!row || row.dataset.gid === undefined) return;
      const d = this.store.devices[+row.dataset.gid];
      if (d) this.onSelect(d);
    });
    container.addEventListener("keydown", (e) => this.key(e));
    new ResizeObserver(() => this.render()).observe(container);
  }

  rebuild() {
    const q = this.search.value.trim().toLowerCase();
    const out = [];
    for (const s of this.store.sources) {
      if (!s) continue;
      const gids = s.gids, match = [];
      for (let slot = 0; slot < s.count; slot++) {
        const gid = gids[slot];
        if (gid < 0) continue;
        const d = this.store.devices[gid];
        if (q && !(d.name.toLowerCase().includes(q) || d.id.toLowerCase().includes(q)
          || d.kind.toLowerCase().includes(q) || s.name.toLowerCase().includes(q))) continue;
        match.push(gid);
      }
      if (!match.length && q) continue;
      out.push(-s.index - 1);
      for (const gid of match) out.push(gid);
    }
    this.rows = Int32Array.from(out);
    this.matched = out.length - this.store.sources.filter(Boolean).length;
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    this.builtVersion = this.store.catalogVersion;
    this.dirty = false;
    this.render();
  }

  /** Called each animation frame: rebuilds when the catalog or the search changed. */
  tick() {
    if (this.dirty || this.builtVersion !== this.store.catalogVersion) this.rebuild();
  }

  render() {
    const top = this.el.scrollTop, h = this.el.clientHeight;
    const first = Math.max(0, Math.floor(top / ROW) - 2);
    const last = Math.min(this.rows.length, Math.ceil((top + h) / ROW) + 2);
    const need = last - first;
    while (this.pool.length < need) {
      const div = document.createElement("div");
      div.className = "row";
      this.el.appendChild(div);
      this.pool.push(div);
    }
    for (let k = 0; k < this.pool.length; k++) {
      const div = this.pool[k], i = first + k;
      if (k >= need) { div.hidden = true; continue; }
      div.hidden = false;
      div.style.top = `${i * ROW}px`;
      const r = this.rows[i];
      if (r < 0) {
        const s = this.store.sources[-r - 1];
        div.className = "row group";
        delete div.dataset.gid;
        div.dataset.source = s.index;
        div.textContent = `${s.name} (${s.count})`;
        div.parts = null;  // (textContent took the device row's spans)
        div.title = `${s.name}: click to frame its devices`;
      } else {
        const d = this.store.devices[r];
        div.className = d === this.selected ? "row sel" : "row";
        delete div.dataset.source;
        div.dataset.gid = r;
        div.title = `${d.name} · ${d.kind} · id ${d.id}`;
        // the row's spans are made once and kept: rendered again twice a second (the swatch
        // colours), a row whose spans were replaced could lose a click pressed on one
        if (!div.parts) {
          div.textContent = "";
          div.parts = { swatch: span("swatch"), name: span("name"), kind: span("k") };
          div.append(div.parts.swatch, div.parts.name, div.parts.kind);
        }
        const parts = div.parts;
        parts.swatch.style.background = this.store.colourCss(d);
        if (parts.name.textContent !== d.name) parts.name.textContent = d.name;
        if (parts.kind.textContent !== d.kind) parts.kind.textContent = d.kind;
      }
    }
  }

  select(d) {
    this.selected = d;
    if (d) {
      const i = this.rows.indexOf(d.gid);
      if (i >= 0) {
        const y = i * ROW;
        if (y < this.el.scrollTop || y > this.el.scrollTop + this.el.clientHeight - ROW) {
          this.el.scrollTop = y - this.el.clientHeight / 2;
        }
      }
    }
    this.render();
  }

  key(e) {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    let i = this.selected ? this.rows.indexOf(this.selected.gid) : -1;
    const step = e.key === "ArrowDown" ? 1 : -1;
    do { i += step; } while (i >= 0 && i < this.rows.length && this.rows[i] < 0);
    if (i >= 0 && i < this.rows.length) this.onSelect(this.store.devices[this.rows[i]]);
  }
}
