// The WebSocket link to the viewer server (contract: viewer-spec.md).
// Text frames are JSON messages, dispatched by `type`; binary frames are state frames, decoded
// with typed-array views over the received buffer (no per-device parsing).
// Flow control: the server sends a state frame only after a `ready`; we send one when the
// previous frame has been applied and drawn (see `frameDone`), so the browser's own display
// rate (requestAnimationFrame) is what paces its feed.

export const PROTOCOL = "robowire.viewer.v1";
const FRAME_KIND = 1;
const HEADER = 16;
const BLOCK_HEADER = 8;

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
    this.awaiting = false;    // a `ready` is outstanding (the server owes us a frame)
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
      this.awaiting = false;
      this.pending = null;
      this.sendReady();
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
      try {
        this.pending = decodeFrame(ev.data);
        this.frames++;
      } catch (e) {
        this.errors++;
        console.warn("robowire: bad state frame:", e.message);
        this.awaiting = false;
      }
    };
    ws.onclose = () => {
      this.setState("closed");
      this.awaiting = false;
      setTimeout(() => this.connect(), this.retry);
      this.retry = Math.min(this.retry * 2, 5000);
    };
  }

  setState(s) { this.state = s; this.handlers.state(s); }

  send(obj) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) { this.ws.send(JSON.stringify(obj)); return true; }
    return false;
  }

  sendReady() {
    if (this.send({ type: "ready" })) this.awaiting = true;
  }

  /** The newest frame received since the last call, or null. */
  take() {
    const f = this.pending;
    if (f) { this.pending = null; this.awaiting = false; }
    return f;
  }

  /** Call once per drawn animation frame: asks for the next state frame if none is owed. */
  frameDone() {
    if (!this.awaiting && this.pending === null) this.sendReady();
  }
}
