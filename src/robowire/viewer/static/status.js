// Per-service status (the server's 1 Hz `status` message): state, address, devices, rate,
// message, error, drop and shed counters, the wire's (lost, duplicated, reordered,
// reconnected: the non-zero ones, as `robowire status` shows them), and the worker a service
// runs in. A handful of rows, rebuilt in place.

function n(x) { return x === null || x === undefined ? "" : String(x); }

// the wire column's counts and their short names, in `robowire status`'s order and words
const WIRE = [["lost", "lost"], ["duplicated", "dup"], ["reordered", "reord"],
  ["reconnected", "reconn"]];

function wire(s) {
  return WIRE.filter(([k]) => s[k]).map(([k, short]) => `${short} ${s[k].toLocaleString("en-US")}`)
    .join(", ");
}

export class StatusTable {
  constructor(tbody, counts) {
    this.tbody = tbody;
    this.counts = counts;
    this.last = null;
  }

  update(msg) {
    this.last = msg;
    const rows = msg.services ?? [];
    while (this.tbody.rows.length > rows.length) this.tbody.deleteRow(-1);
    rows.forEach((s, i) => {
      const tr = this.tbody.rows[i] ?? this.tbody.insertRow();
      while (tr.cells.length < 12) tr.insertCell();
      tr.dataset.service = s.name;
      // a worker's own sources and sinks say where they run, as `robowire status` does
      const name = s.worker ? `${s.name} (worker ${s.worker})` : s.name;
      const cells = [name, s.role, s.state, s.address ?? "", n(s.devices),
        typeof s.rate === "number" ? s.rate.toFixed(1) : n(s.rate), n(s.messages), n(s.errors),
        n(s.dropped), n(s.shed), wire(s), s.last_drop ?? ""];
      cells.forEach((v, k) => { if (tr.cells[k].textContent !== v) tr.cells[k].textContent = v; });
      tr.cells[2].className = `st-${s.state}`;
      tr.cells[11].title = s.last_drop ?? "";
    });
    const sources = rows.filter((s) => s.role === "source");
    const up = sources.filter((s) => s.state === "connected").length;
    const rate = sources.reduce((a, s) => a + (s.rate || 0), 0);
    this.summary = `${up}/${sources.length} sources connected · ${rate.toFixed(0)} msgs/s`;
  }
}
