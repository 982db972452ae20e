// Device shapes as triangle lists (position + normal, interleaved), in a local frame where +y is
// the device's forward direction, +x its right and +z up; about one unit across.

function box(out, cx, cy, cz, sx, sy, sz, rot = 0) {
  const c = Math.cos(rot), s = Math.sin(rot);
  const faces = [
    [[1, 0, 0], [[1, -1, -1], [1, 1, -1], [1, 1, 1], [1, -1, 1]]],
    [[-1, 0, 0], [[-1, 1, -1], [-1, -1, -1], [-1, -1, 1], [-1, 1, 1]]],
    [[0, 1, 0], [[1, 1, -1], [-1, 1, -1], [-1, 1, 1], [1, 1, 1]]],
    [[0, -1, 0], [[-1, -1, -1], [1, -1, -1], [1, -1, 1], [-1, -1, 1]]],
    [[0, 0, 1], [[-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]]],
    [[0, 0, -1], [[-1, 1, -1], [1, 1, -1], [1, -1, -1], [-1, -1, -1]]],
  ];
  for (const [n, q] of faces) {
    const v = q.map(([x, y, z]) => {
      const px = x * sx / 2, py = y * sy / 2;
      return [cx + c * px - s * py, cy + s * px + c * py, cz + z * sz / 2];
    });
    const nx = c * n[0] - s * n[1], ny = s * n[0] + c * n[1];
    for (const i of [0, 1, 2, 0, 2, 3]) out.push(...v[i], nx, ny, n[2]);
  }
}

/** A flat triangle pointing along +y (a nose or an arrow head), both faces. */
function wedge(out, cy, len, half, z) {
  const a = [0, cy + len, z], b = [-half, cy, z], c = [half, cy, z];
  out.push(...a, 0, 0, 1, ...b, 0, 0, 1, ...c, 0, 0, 1);
  out.push(...a, 0, 0, -1, ...c, 0, 0, -1, ...b, 0, 0, -1);
}

function octahedron(out, r, cz = 0) {
  const p = [[r, 0, cz], [0, r, cz], [-r, 0, cz], [0, -r, cz]];
  const top = [0, 0, cz + r], bot = [0, 0, cz - r];
  for (let i = 0; i < 4; i++) {
    const a = p[i], b = p[(i + 1) % 4];
    for (const [apex, flip] of [[top, false], [bot, true]]) {
      const tri = flip ? [a, apex, b] : [a, b, apex];
      const u = tri[1].map((v, k) => v - tri[0][k]), w = tri[2].map((v, k) => v - tri[0][k]);
      let n = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]];
      const l = Math.hypot(...n); n = n.map((x) => x / l);
      for (const v of tri) out.push(...v, ...n);
    }
  }
}

export function meshes() {
  const drone = [];
  box(drone, 0, 0, 0, 0.42, 0.42, 0.16);
  for (let k = 0; k < 4; k++) {
    const a = Math.PI / 4 + k * Math.PI / 2, x = 0.42 * Math.cos(a), y = 0.42 * Math.sin(a);
    box(drone, x / 2, y / 2, 0, 0.6, 0.07, 0.05, a);
    box(drone, x, y, 0.05, 0.34, 0.34, 0.03, a);
  }
  box(drone, 0, 0.24, 0, 0.12, 0.1, 0.1);          // a nose: forward is visible

  const robot = [];
  box(robot, 0, 0, 0.2, 0.7, 0.8, 0.3);
  box(robot, -0.42, 0, 0.15, 0.12, 0.36, 0.36);
  box(robot, 0.42, 0, 0.15, 0.12, 0.36, 0.36);
  wedge(robot, 0.4, 0.25, 0.3, 0.36);

  const tracker = [];
  box(tracker, 0, 0, 0, 0.35, 0.35, 0.35);
  box(tracker, 0, 0.4, 0, 0.08, 0.6, 0.08);
  box(tracker, 0, 0, 0.3, 0.06, 0.06, 0.3);

  const vehicle = [];
  box(vehicle, 0, 0, 0, 0.18, 1.0, 0.16);
  box(vehicle, 0, 0.05, 0, 1.2, 0.22, 0.04);
  box(vehicle, 0, -0.42, 0, 0.45, 0.14, 0.04);
  box(vehicle, 0, -0.42, 0.12, 0.04, 0.14, 0.24);

  const sensor = [];
  box(sensor, 0, 0, 0.35, 0.06, 0.06, 0.7);
  octahedron(sensor, 0.25, 0.75);
  box(sensor, 0, 0, 0.02, 0.4, 0.4, 0.04);

  const other = [];
  octahedron(other, 0.35);

  const arrow = [];                                // heading arrow, on the device's plane
  box(arrow, 0, 0.55, 0, 0.06, 0.5, 0.02);
  wedge(arrow, 0.8, 0.35, 0.16, 0);

  const f = (a) => new Float32Array(a);
  return { drone: f(drone), robot: f(robot), tracker: f(tracker), vehicle: f(vehicle),
    sensor: f(sensor), other: f(other), arrow: f(arrow) };
}
