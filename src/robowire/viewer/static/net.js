// The WebSocket link to the viewer server (contract: viewer-spec.md).
// Text frames are JSON messages, dispatched by `type`; binary frames are state frames, decoded
// with typed-array views over the received buffer (no per-device parsing).
// Flow control: the server sends a state frame only for a `ready`; we keep WINDOW of them
// outstanding and send the next when a frame has been applied and drawn (see `frameDone`), so
// the browser's own display rate (requestAnimationFrame) is what paces its feed, and a busy
// server need not wait for our answer before it sends the next frame.

export const PROTOCOL = "robowire.viewer.v1";
const FRAME_KIND = 1;
const HEADER = 16;
const BLOCK_HEADER = 8;
const WINDOW = 2; // frames asked for ahead (the server grants at most this many)

/** Decode one binary state frame into {frame, time, blocks: [{source, n, slot, position, ...}]}.
 * Every array is a view into `buf`; throws RangeError on a truncated or malformed frame. */
export function decodeFrame(buf) {
  if (buf.byteLength < HEADER) throw new RangeError(`state frame of ${buf.byteLength} B`);
  const dv = new DataView(buf);
  const kind = dv.getUint8(0);
  if (kind !== FRAME_KIND) throw new RangeError(`state frame kind ${kind}`);
  const count = dv.getUint16(2, true);
  const frame = dv.getUint32(4, true);
  const time = dv.getFloat64(8, true);
  const blocks = [];
  let off = HEADER;
  for (let b = 0; b < count; b++) {
    if (off + BLOCK_HEADER > buf.byteLength) throw new RangeError("truncated block header");
    const source = dv.getUint16(off, true);
    const sections = dv.getUint16(off + 2, true);
    const n = dv.getUint32(off + 4, true);
    off += BLOCK_HEADER;
    const size = n * ((sections & 1) ? 64 : 52);
    if (off + size > buf.byteLength) throw new RangeError(`truncated block: ${n} devices`);
    const slot = new Uint32Array(buf, off, n); off += 4 * n;
    const position = new Float32Array(buf, off, 3 * n); off += 12 * n;
    const orientation = new Float32Array(buf, off, 4 * n); off += 16 * n;
    const colour = new Uint8Array(buf, off, 4 * n); off += 4 * n;
    const heading = new Float32Array(buf, off, n); off += 4 * n;
    const geodetic = new Float32Array(buf, off, 3 * n); off += 12 * n;
    let beam = null;
    if (sections & 1) { beam = new Float32Array(buf, off, 3 * n); off += 12 * n; }
    blocks.push({ source, n, slot, position, orientation, colour, heading, geodetic, beam });
  }
  return { frame, time, blocks };
}

export class Connection {
  /** handlers: {message(msg), frame(decoded), state(s)} */
  constructor(url, handlers, rate = 60) {
    this.url = url;
    this.handlers = handlers;
    this.rate = rate;
    this.ws = null;
    this.state = "connecting";
    this.pending = null;      // the newest undrawn frame (older ones are replaced, never queued)
    this.owed = 0;            // `ready`s outstanding (frames the server owes us)
    this.frames = 0;
    this.bytes = 0;
    this.errors = 0;
    this.hello = null;
    this.retry = 500;
    this.connect();
  }

  connect() {
    const ws = new WebSocket(this.url, PROTOCOL);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.setState("connecting");
    ws.onopen = () => {
      this.retry = 500;
      if (this.opened && this.handlers.reconnected) {   // the server may have restarted:
        this.handlers.reconnected();                      // its source indices and slots too
        return;
      }
      this.opened = true;
      this.setState("open");
      this.send({ type: "hello", rate: this.rate });
      this.owed = 0;
      this.pending = null;
      this.ask();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        let msg;
        try { msg = JSON.parse(ev.data); } catch (e) { this.errors++; return; }
        if (msg.type === "hello") this.hello = msg;
        this.handlers.message(msg);
        return;
      }
      this.bytes += ev.data.byteLength;
      this.owed = Math.max(0, this.owed - 1);
      try {
        this.pending = decodeFrame(ev.data);
        this.frames++;
      } catch (e) {
        this.errors++;
        console.warn("robowire: bad state frame:", e.message);
      }
    };
    ws.onclose = () => {
      this.setState("closed");
      this.owed = 0;
      setTimeout(() => this.connect(), this.retry);
      this.retry = Math.min(this.retry * 2, 5000);
    };
  }

  setState(s) { this.state = s; this.handlers.state(s); }

  send(obj) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) { this.ws.send(JSON.stringify(obj)); return true; }
    return false;
  }

  /** Asks for frames until WINDOW are owed. */
  ask() {
    while (this.owed < WINDOW && this.send({ type: "ready" })) this.owed++;
  }

  /** The newest frame received since the last call, or null. */
  take() {
    const f = this.pending;
    if (f) this.pending = null;
    return f;
  }

  /** Call once per drawn animation frame: asks for more frames once the last one is drawn. */
  frameDone() {
    if (this.pending === null) this.ask();
  }
}
