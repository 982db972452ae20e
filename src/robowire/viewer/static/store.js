// Device state in typed arrays, grouped by the shape a device is drawn with.
// Catalog messages append devices (slots are contiguous per source and never reused); state
// frames write into the arrays in place. Arrays grow by doubling, so appending 10,000 devices
// costs a handful of copies and applying a frame allocates nothing.

export const SHAPES = ["drone", "robot", "tracker", "vehicle", "sensor", "other"];

const SHAPE_OF_KIND = {
  drone: "drone", vrsp: "drone",
  xrp: "robot", robot: "robot",
  tracker: "tracker", object: "tracker", rigid_body: "tracker", rigidbody: "tracker",
  ugcs: "vehicle", vehicle: "vehicle", aircraft: "vehicle", uav: "vehicle",
  sensor_node: "sensor", sensor: "sensor", node: "sensor",
};

export function shapeOf(kind) { return SHAPE_OF_KIND[kind] ?? "other"; }

/** One shape's devices: the instance arrays the scene uploads as they are. */
class Group {
  constructor(shape, index) {
    this.shape = shape;
    this.index = index;
    this.n = 0;
    this.capacity = 0;
    this.version = 0;          // bumped when arrays are reallocated
    this.dirty = false;        // written since the last upload
    this.hasBeam = false;
    this.gids = new Int32Array(0);
    this.alloc(64);
  }

  alloc(cap) {
    const grow = (Old, old, per, fill) => {
      const a = new Old(cap * per);
      if (fill !== undefined) a.fill(fill);
      if (old) a.set(old.subarray(0, this.n * per));
      return a;
    };
    this.position = grow(Float32Array, this.position, 3, NaN);
    this.orientation = grow(Float32Array, this.orientation, 4, 0);
    this.colour = grow(Uint8Array, this.colour, 4, 0);
    this.heading = grow(Float32Array, this.heading, 1, NaN);
    this.geodetic = grow(Float32Array, this.geodetic, 3, NaN);
    this.beam = grow(Float32Array, this.beam, 3, NaN);
    this.gids = grow(Int32Array, this.gids, 1, -1);
    for (let i = this.n; i < cap; i++) this.orientation[4 * i] = 1;
    this.capacity = cap;
    this.version++;
  }

  add(gid) {
    if (this.n === this.capacity) this.alloc(this.capacity * 2);
    const i = this.n++;
    this.gids[i] = gid;
    this.colour[4 * i + 3] = 0;
    return i;
  }
}

export class Store {
  constructor() {
    this.sources = [];          // by frame index: {index, name, protocol, count, gids: Int32Array}
    this.byName = new Map();
    this.groups = SHAPES.map((s, i) => new Group(s, i));
    this.groupByShape = new Map(this.groups.map((g) => [g.shape, g]));
    this.devices = [];          // gid -> {gid, source, slot, id, name, kind, shape, group, gi}
    this.links = new Map();     // source index -> Uint32Array of slot pairs
    this.linksVersion = 0;
    this.catalogVersion = 0;
    this.frame = -1;
    this.frameTime = 0;
    this.updates = 0;           // device updates applied, in total
    this.onCatalog = null;
  }

  source(index, name, protocol) {
    let s = this.sources[index];
    if (!s) {
      s = { index, name, protocol, count: 0, gids: new Int32Array(64).fill(-1) };
      this.sources[index] = s;
      this.byName.set(name, s);
    }
    return s;
  }

  /** A `catalog` message: devices appended at slots start.. of source `index`. */
  catalog(msg) {
    const s = this.source(msg.index, msg.source, msg.protocol);
    const end = msg.start + msg.devices.length;
    if (end > s.gids.length) {
      let cap = s.gids.length;
      while (cap < end) cap *= 2;
      const g = new Int32Array(cap).fill(-1);
      g.set(s.gids);
      s.gids = g;
    }
    msg.devices.forEach((d, k) => {
      const slot = msg.start + k;
      if (s.gids[slot] >= 0) return;            // already known (a repeated catalog)
      const shape = shapeOf(d.kind);
      const group = this.groupByShape.get(shape);
      const gid = this.devices.length;
      const gi = group.add(gid);
      this.devices.push({ gid, source: s, slot, id: String(d.id), name: d.name ?? String(d.id),
        kind: d.kind ?? "device", shape, group, gi });
      s.gids[slot] = gid;
    });
    s.count = Math.max(s.count, end);
    this.catalogVersion++;
    if (this.onCatalog) this.onCatalog();
  }

  /** A decoded state frame: copy every block into the group arrays. */
  apply(f) {
    this.frame = f.frame;
    this.frameTime = f.time;
    for (const b of f.blocks) {
      const s = this.sources[b.source];
      if (!s) continue;                          // frame before its catalog: ignore the block
      const gids = s.gids, devs = this.devices;
      const { slot, position, orientation, colour, heading, geodetic, beam } = b;
      for (let i = 0; i < b.n; i++) {
        const sl = slot[i];
        if (sl >= gids.length) continue;
        const gid = gids[sl];
        if (gid < 0) continue;
        const d = devs[gid], g = d.group, j = d.gi;
        const p = g.position, q = g.orientation, c = g.colour, geo = g.geodetic;
        p[3 * j] = position[3 * i]; p[3 * j + 1] = position[3 * i + 1]; p[3 * j + 2] = position[3 * i + 2];
        q[4 * j] = orientation[4 * i]; q[4 * j + 1] = orientation[4 * i + 1];
        q[4 * j + 2] = orientation[4 * i + 2]; q[4 * j + 3] = orientation[4 * i + 3];
        c[4 * j] = colour[4 * i]; c[4 * j + 1] = colour[4 * i + 1];
        c[4 * j + 2] = colour[4 * i + 2]; c[4 * j + 3] = colour[4 * i + 3];
        g.heading[j] = heading[i];
        geo[3 * j] = geodetic[3 * i]; geo[3 * j + 1] = geodetic[3 * i + 1]; geo[3 * j + 2] = geodetic[3 * i + 2];
        if (beam) {
          const e = g.beam;
          e[3 * j] = beam[3 * i]; e[3 * j + 1] = beam[3 * i + 1]; e[3 * j + 2] = beam[3 * i + 2];
          g.hasBeam = true;
        }
        g.dirty = true;
      }
      this.updates += b.n;
    }
  }

  /** A `links` message: pairs of slots of one source. */
  setLinks(msg) {
    const s = this.byName.get(msg.source);
    if (!s) return;
    const flat = new Uint32Array(msg.pairs.length * 2);
    msg.pairs.forEach((p, i) => { flat[2 * i] = p[0]; flat[2 * i + 1] = p[1]; });
    this.links.set(s.index, flat);
    this.linksVersion++;
  }

  device(sourceName, slot) {
    const s = this.byName.get(sourceName);
    if (!s || slot >= s.gids.length || s.gids[slot] < 0) return null;
    return this.devices[s.gids[slot]];
  }

  /** Position [e, n, u] of a device (a new array: for UI and tests, not for hot paths). */
  position(d) {
    const p = d.group.position, j = d.gi;
    return [p[3 * j], p[3 * j + 1], p[3 * j + 2]];
  }

  geodetic(d) {
    const p = d.group.geodetic, j = d.gi;
    return [p[3 * j], p[3 * j + 1], p[3 * j + 2]];
  }

  colourCss(d) {
    const c = d.group.colour, j = d.gi;
    return `rgb(${c[4 * j]},${c[4 * j + 1]},${c[4 * j + 2]})`;
  }
}
