"""The VRSP light-show simulator: a looping drone show as columns (numpy, one row per drone).
Pure: no clocks (time `t` is an argument, seconds since the show started), no sockets, no
global RNG (a `seed`).

`LightShow(drones)` gives the swarm's `definitions` (what a VRSP_DEF carries), the drones'
`ids` and `definition_of`, and `state(t)` -> `ShowState`, the drones in world units (ENU
metres, ENU quaternions, degrees, RGB, seconds), for any t >= 0; the adapter's `show_swarm`
makes it a DATA frame, as the sink does with the world's drones.

The show (all our own choices):

* Formations, each held `hold` seconds, then a `transition`-second morph to the next, looping:
  a horizontal **grid** (a slow wave runs across it), a **sphere** (Fibonacci points; spins
  one turn), the **text** (default "ROBOWIRE", hand-drawn 5x7 font, facing south) and a
  **ring** logo (concentric circles, spins one turn in its plane).
* Morphs are straight lines, every drone on the same smootherstep (6u^5 - 15u^4 + 10u^3, so
  speed and acceleration are 0 at both ends). Which drone goes to which point is
  `matching.match` with limit spacing/sqrt(2) (its docstring says how; 10,000 drones set up
  in 1.5 s or so). With its property two drones are never closer than
  min(|A_i - A_j|, |B_i - B_j|) / sqrt(2) during a morph, and every formation keeps its points
  at least `spacing` apart: the show keeps any two drones >= spacing/sqrt(2) apart (1.41 m for
  the default 2 m), for any number of drones. The slot permutation that one loop applies is
  carried into the next (drone i holds grid slot pi^L(i) in loop L), so the show never
  re-crosses at the loop's seam.
* Colours: each formation has a palette (ocean, rainbow, gold, violet-fire) swept over it as a
  wave; a morph blends the two formations' colours.
* Heading: a morphing drone faces its direction of travel; a holding drone turns from the way
  it came to the way it will go. Orientation: yaw = heading, pitched into its acceleration
  (atan(a / g), nose down when speeding up; Unity's convention: +X rotation = nose down).
* Spotlights (2DOF) aim at a point circling on the ground (y = 0), lit in the drone's colour;
  lasers (fixed green, 3DOF) aim at the ground under the show's centre and shine during the
  sphere and ring holds. A gimbal quaternion is relative to the body: world aim =
  orientation x gimbal, and it rotates the payload's forward (+Z) onto the target.
* Pyro: cue c of every pyro payload fires once a loop at a scripted time (cues in sequence
  through the sphere, text and ring holds, staggered per drone), never two at once on one
  payload; while it burns, `cue` = c and `cue_ms` counts up; after its duration, 0.

Frame: the show is laid out on a Y-up stage, x = East, y = Up, z = North, metres from the
root; the audience stands south (-z). Quaternions (w, x, y, z) compose and rotate with the
usual Hamilton formulas applied to these coordinates (as Unity does). The formations, the
collision-free matching (its k-d splits follow the axes' order) and the yaw/pitch quaternions
are written on that stage; `state` turns it into ENU at the end (`_enu`, `_enu_rotation`).

Size: one module over 600 lines because it is one thing, `LightShow`: the formations, the
colours, the payloads and the cue plan all index the same drones (the collision-free matching
is `matching.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from robowire import quaternions
from robowire.errors import ConfigError
from robowire.protocols.vrsp import font
from robowire.protocols.vrsp.definitions import (
    Cue,
    DefType,
    DeviceDefinition,
    MountType,
    Payload,
    Quaternion,
)
from robowire.protocols.vrsp.matching import NEAR, Cycles, match, near_pairs

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Index = npt.NDArray[np.intp]

GRAVITY = 9.80665
MAX_DRONES = 65535  # device ids are uint16; ours are 1..N
SPHERE_PACKING = 2.5  # sphere radius = spacing * sqrt(N) / 2.5 (Fibonacci points: >= spacing)
CUE_GAP = 0.25  # s, least time between one cue's end and the next on the same payload

# (VDL, burn time in s): Finale3D-style descriptions; cue k of a pyro payload is entry k - 1.
EFFECTS: tuple[tuple[str, float], ...] = (
    ("Silver Waterfall 6s", 6.0),
    ("red comet three times", 3.0),
    ("30mm Gold Glitter Gerb 4s", 4.0),
    ("Blue Strobe Pot 2s", 2.0),
    ("Green Crossette Mine 3s", 3.0),
    ("White Flash Salute", 1.0),
)
# cue id -> (formation whose hold it fires in, offset and stagger as fractions of the hold)
_CUE_SCRIPT: dict[int, tuple[int, float, float]] = {
    1: (1, 1 / 12, 2 / 12),
    2: (2, 1 / 12, 4 / 12),
    3: (2, 8.5 / 12, 0.0),
    4: (3, 1 / 12, 3 / 12),
    5: (3, 6.5 / 12, 1 / 12),
    6: (3, 11 / 12, 0.0),
}

UP = Quaternion(w=math.sqrt(0.5), x=-math.sqrt(0.5))  # forward (+Z) turned to point up (+Y)


def _leaning(degrees: float) -> Quaternion:
    """UP, then leaned `degrees` about the north axis (+Z; positive leans west): the product
    rotZ x UP, written out."""
    c, s, h = math.cos(math.radians(degrees) / 2), math.sin(math.radians(degrees) / 2), UP.w
    return Quaternion(w=c * h, x=-c * h, y=-s * h, z=s * h)


def _cues(count: int) -> tuple[Cue, ...]:
    directions = (UP, _leaning(20.0), _leaning(-20.0))  # straight up, leaning west, east
    return tuple(
        Cue(id=k + 1, vdl=EFFECTS[k][0], mount_direction=directions[k % len(directions)])
        for k in range(count)
    )


SPOTLIGHT = Payload(
    def_type=DefType.LIGHT,
    mount=MountType.GIMBAL_2DOF,
    lumens=2500.0,
    light_type="Spotlight",
    spot_angle=15.0,
)
LASER = Payload(
    def_type=DefType.LASER, mount=MountType.GIMBAL_3DOF, lumens=60.0, color=(0, 255, 64),
    spot_angle=0.2,
)  # fmt: skip

# The show's drone types, with the share of the swarm each gets (the plain drones the rest).
DEFINITIONS: tuple[tuple[DeviceDefinition, float], ...] = (
    (DeviceDefinition(definition_id=0, model="X7", lumens=900.0), 0.0),
    (DeviceDefinition(definition_id=1, model="X7-Spot", lumens=900.0, payloads=(SPOTLIGHT,)),
     0.06),
    (DeviceDefinition(definition_id=2, model="X7-Laser", lumens=900.0, payloads=(LASER,)), 0.04),
    (DeviceDefinition(definition_id=3, model="X7-Pyro", lumens=900.0,
                      payloads=(Payload(def_type=DefType.PYRO, cues=_cues(6)),)), 0.06),
    (DeviceDefinition(definition_id=4, model="X7-SpotPyro", lumens=900.0,
                      payloads=(Payload(def_type=DefType.PYRO, cues=_cues(2)), SPOTLIGHT)),
     0.02),
)  # fmt: skip

# Palettes: colour stops around a cycle (0..1), one per formation.
_PALETTES: tuple[tuple[tuple[int, int, int], ...], ...] = (
    ((0, 20, 120), (0, 200, 255), (220, 240, 255), (0, 200, 255)),  # ocean
    ((255, 0, 0), (255, 255, 0), (0, 255, 0), (0, 255, 255), (0, 0, 255), (255, 0, 255)),
    ((255, 110, 0), (255, 200, 40), (255, 250, 220), (255, 200, 40)),  # gold
    ((120, 0, 255), (255, 0, 180), (255, 80, 40), (255, 0, 180)),  # violet fire
)
_PALETTE_SPEED = (0.2, 0.1, 0.3, 0.5)  # cycles per second the colour wave moves
GRID, SPHERE, TEXT, RING = range(4)
NAMES = ("grid", "sphere", "text", "ring")


@dataclass(frozen=True, slots=True)
class Formation:
    """One formation: its `points` (slot order), the colour phase of each slot, and when it
    is held in loop 0 (`start`..`end`, seconds; loop L adds L * period)."""

    name: str
    points: F64  # (n, 3)
    phase: F32  # (n,) 0..1, where the slot sits in the formation's colour wave
    start: float
    end: float


def smootherstep(u: F64 | float) -> F64:
    u = np.clip(u, 0.0, 1.0)
    return np.asarray(u * u * u * (u * (u * 6.0 - 15.0) + 10.0), dtype=np.float64)


def _palette(stops: tuple[tuple[int, int, int], ...]) -> F32:
    """256 colours (float32 RGB) interpolated around the cycle of `stops`."""
    where = np.linspace(0.0, 1.0, len(stops) + 1)
    ring = np.array([*stops, stops[0]], dtype=np.float64)
    x = np.arange(256) / 256.0
    return np.stack([np.interp(x, where, ring[:, c]) for c in range(3)], axis=1).astype(np.float32)


def yaw_pitch(yaw: F64, pitch: F64) -> F32:
    """Quaternions of a turn `yaw` (rad) about +Y, then `pitch` (rad) about the turned +X."""
    cy, sy = np.cos(yaw * 0.5), np.sin(yaw * 0.5)
    cp, sp = np.cos(pitch * 0.5), np.sin(pitch * 0.5)
    return np.stack([cy * cp, cy * sp, sy * cp, -sy * sp], axis=1).astype(np.float32)


# -- formations --------------------------------------------------------------------------------


def grid_points(n: int, spacing: float, height: float) -> F64:
    """A horizontal square grid (row-major, centred on x = z = 0) at `height`."""
    side = math.ceil(math.sqrt(n))
    k = np.arange(n)
    x = (k % side - (side - 1) / 2) * spacing
    z = (k // side - (math.ceil(n / side) - 1) / 2) * spacing
    return np.stack([x, np.full(n, height), z], axis=1)


def sphere_radius(n: int, spacing: float) -> float:
    return spacing * math.sqrt(n) / SPHERE_PACKING


def sphere_points(n: int, radius: float, centre_y: float) -> F64:
    """Fibonacci points on a sphere of `radius` centred at (0, centre_y, 0)."""
    i = np.arange(n) + 0.5
    y = 1.0 - 2.0 * i / n
    r = np.sqrt(1.0 - y * y)
    angle = math.pi * (1.0 + math.sqrt(5.0)) * i
    return np.stack([r * np.sin(angle), y, r * np.cos(angle)], axis=1) * radius + [
        0.0,
        centre_y,
        0.0,
    ]


def text_points(n: int, text: str, spacing: float, bottom: float) -> F64:
    """`text` in the vertical plane z = 0, readable from the south, bottom row at `bottom`.

    Each font pixel becomes s x s points `spacing` apart, s the least that gives >= n points;
    the n used are spread evenly over them (raster order)."""
    pixels = font.bitmap(text)
    lit = int(pixels.sum())
    s = max(1, math.ceil(math.sqrt(n / lit)))
    fine = np.kron(pixels, np.ones((s, s), dtype=np.bool_))
    rows, cols = np.nonzero(fine)  # row 0 at the top
    pick = (np.arange(n) * len(rows)) // n
    x = (cols[pick] - (fine.shape[1] - 1) / 2) * spacing
    y = bottom + (fine.shape[0] - 1 - rows[pick]) * spacing
    return np.stack([x, y, np.zeros(n)], axis=1).astype(np.float64)


def ring_layout(n: int, spacing: float) -> tuple[F64, float]:
    """Concentric circles `spacing` apart, points on each >= `spacing` apart (chords), filled
    from the inside out: (x, y) offsets from the centre in the ring's plane, outer radius."""
    inner = max(spacing, spacing * math.sqrt(n) / 8)
    xs: list[F64] = []
    have, radius = 0, inner
    while have < n:
        count = max(1, math.floor(math.pi / math.asin(min(1.0, spacing / (2 * radius)))))
        take = min(count, n - have)
        angle = 2 * math.pi * np.arange(take) / take + radius  # rings start at different angles
        xs.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        have += take
        radius += spacing
    return np.concatenate(xs)[:n], radius - spacing


# -- the show ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Hold:
    formation: int
    base: F32  # (n, 3) positions
    phase: F32  # (n,)
    wave: F32  # (n,) the grid wave's spatial phase (rad)
    came: F64  # (n,) heading in, degrees
    goes: F64  # (n,) heading out


@dataclass(slots=True)
class _Morph:
    formation: int
    start: F32  # (n, 3)
    delta: F32  # (n, 3)
    phase_from: F32
    phase_to: F32
    heading: F64  # (n,) degrees
    yaw: F64  # (n,) radians
    reach: F64  # (n,) horizontal path length, m


def _check_options(
    drones: int, *, spacing: float, altitude: float, hold: float, transition: float
) -> None:
    if not 1 <= drones <= MAX_DRONES:
        raise ConfigError(f"vrsp show: drones must be 1..{MAX_DRONES}, not {drones}")
    for name, value in (("spacing", spacing), ("hold", hold), ("transition", transition)):
        if not value > 0 or not math.isfinite(value):
            raise ConfigError(f"vrsp show: {name} must be > 0, not {value}")
    if not math.isfinite(altitude) or altitude < 0:
        raise ConfigError(f"vrsp show: altitude must be >= 0, not {altitude}")


def _assign_definitions(
    n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int32], tuple[DeviceDefinition, ...]]:
    """Who is who: each drone's index into the definitions in use (their `DEFINITIONS`
    shares, at least one of each when there are enough drones, shuffled), and those."""
    counts = [round(share * n) for _, share in DEFINITIONS]
    if n >= len(DEFINITIONS):
        counts = [max(1, c) for c in counts]
    counts[0] = n - sum(counts[1:])
    kinds = np.repeat(np.arange(len(DEFINITIONS)), counts)
    used = [d for (d, _), c in zip(DEFINITIONS, counts, strict=True) if c]
    position = np.cumsum(np.array(counts) > 0) - 1  # the kinds in use, renumbered 0..
    definition_of = np.empty(n, dtype=np.int32)
    definition_of[rng.permutation(n)] = position[kinds]
    definition_of.setflags(write=False)
    return definition_of, tuple(replace(d, definition_id=k) for k, d in enumerate(used))


def _morphs(points: tuple[F64, ...], spacing: float) -> tuple[tuple[Index, ...], Cycles]:
    """The morphs (slot of formation k -> slot of formation k + 1, no two drones closer than
    allowed on the way) and the permutation one whole loop of the show makes."""
    limit = spacing / math.sqrt(2.0) * 0.999
    near = [near_pairs(p, NEAR * limit) for p in points]
    following = tuple(
        match(points[k], points[(k + 1) % 4], limit, near[k], near[(k + 1) % 4]) for k in range(4)
    )
    loop = np.arange(len(points[0]))
    for k in range(4):
        loop = following[k][loop]
    return following, Cycles(loop)


class LightShow:
    """A drone light show of `drones` drones (see the module docstring). `altitude` is the
    lowest point of the formations above the root (m); `text` is what the text formation
    spells; `hold`/`transition` are seconds; `orientation` False leaves the 0x4 option out."""

    def __init__(
        self,
        drones: int,
        *,
        seed: int = 0,
        spacing: float = 2.0,
        altitude: float = 20.0,
        text: str = "ROBOWIRE",
        hold: float = 12.0,
        transition: float = 8.0,
        orientation: bool = True,
    ) -> None:
        _check_options(drones, spacing=spacing, altitude=altitude, hold=hold, transition=transition)
        n = drones
        self.drones = n
        self.spacing = spacing
        self.hold = hold
        self.transition = transition
        self.period = 4 * (hold + transition)
        self.orientation = orientation
        rng = np.random.default_rng(seed)  # drawn from in this order: definitions, then cues

        self.ids = np.arange(1, n + 1, dtype=np.uint16)
        self.ids.setflags(write=False)
        self.definition_of, self.definitions = _assign_definitions(n, rng)
        self.slots = max((len(d.payloads) for d in self.definitions), default=0)
        points = self._place_formations(altitude, text)
        self._next, self._loop = _morphs(points, spacing)
        self.volume = self._volume(points)
        self._plan_cues(rng)
        self._cache: dict[tuple[int, int], _Hold | _Morph] = {}

        self._has_color = np.ones(n, dtype=np.bool_)
        self._has_heading = np.ones(n, dtype=np.bool_)
        self._has_orientation = np.full(n, orientation, dtype=np.bool_)
        for flags in (self._has_color, self._has_heading, self._has_orientation):
            flags.setflags(write=False)

    def _place_formations(self, altitude: float, text: str) -> tuple[F64, F64, F64, F64]:
        """The four formations (`self.formations`, their geometry and colour phases); returns
        their points (grid, sphere, text, ring)."""
        n, spacing, hold, transition = self.drones, self.spacing, self.hold, self.transition
        self.wave_amplitude = 1.5 * spacing
        radius = sphere_radius(n, spacing)
        ring_xy, ring_radius = ring_layout(n, spacing)
        grid = grid_points(n, spacing, altitude + self.wave_amplitude)
        sphere = sphere_points(n, radius, altitude + radius)
        words = text_points(n, text, spacing, altitude)
        ring_centre = altitude + ring_radius
        ring = np.stack([ring_xy[:, 0], ring_xy[:, 1] + ring_centre, np.zeros(n)], axis=1)
        self.sphere_radius = radius
        self.sphere_centre = np.array([0.0, altitude + radius, 0.0])
        self.ring_radius = ring_radius
        self.ring_centre = np.array([0.0, ring_centre, 0.0])
        points = (grid, sphere, words, ring)

        def spread(v: F64) -> F64:
            return np.asarray((v - v.min()) / max(float(np.ptp(v)), 1e-9), dtype=np.float64)

        phases = (
            spread(grid[:, 0] + grid[:, 2]) * 0.999,
            spread(sphere[:, 1]) * 0.999,
            spread(words[:, 0]) * 0.999,
            (np.arctan2(ring_xy[:, 0], ring_xy[:, 1]) / (2 * np.pi)) % 1.0,
        )
        self.formations = tuple(
            Formation(
                name=NAMES[k],
                points=points[k],
                phase=phases[k].astype(np.float32),
                start=k * (hold + transition),
                end=k * (hold + transition) + hold,
            )
            for k in range(4)
        )
        for f in self.formations:
            f.points.setflags(write=False)
        wavelength = 12.0 * spacing
        self._wave = ((grid[:, 0] * 0.8 + grid[:, 2] * 0.6) * (2 * np.pi / wavelength)).astype(
            np.float32
        )
        self._palettes = tuple(_palette(p) for p in _PALETTES)
        return points

    def _volume(self, points: tuple[F64, ...]) -> tuple[F64, F64]:
        """(low, high) corners of the box every drone stays in (the grid's wave, the ring)."""
        ring_top = float(self.ring_centre[1]) + self.ring_radius
        grid_y = float(points[GRID][0, 1])
        lo = np.min([p.min(0) for p in points], axis=0)
        hi = np.max([p.max(0) for p in points], axis=0)
        lo[1] = min(lo[1], grid_y - self.wave_amplitude)
        hi[1] = max(hi[1], grid_y + self.wave_amplitude, ring_top)
        lo[0] = min(lo[0], -self.ring_radius)
        hi[0] = max(hi[0], self.ring_radius)
        return lo, hi

    def _plan_cues(self, rng: np.random.Generator) -> None:
        """Payload slots, (rows, slot k, payload) per definition with payloads, and when each
        pyro drone fires each cue (`_CUE_SCRIPT`, staggered at random, never overlapping)."""
        self._groups = [
            (np.flatnonzero(self.definition_of == d.definition_id), k, p)
            for d in self.definitions
            for k, p in enumerate(d.payloads)
        ]
        self._cue_start: list[F64] = []
        durations = np.array([e[1] for e in EFFECTS])
        for rows, _, payload in self._groups:
            count = len(payload.cues) if payload.def_type is DefType.PYRO else 0
            starts = np.full((len(rows), count), np.inf)
            end = np.zeros(len(rows))
            for c in range(count):
                where, offset, stagger = _CUE_SCRIPT[c + 1]
                planned = self.formations[where].start + self.hold * (
                    offset + stagger * rng.random(len(rows))
                )
                begin = np.maximum(planned, end + CUE_GAP * (c > 0))
                fits = begin + durations[c] <= self.period
                starts[:, c] = np.where(fits, begin, np.inf)
                end = np.where(fits, begin + durations[c], end)
            self._cue_start.append(starts)
        self._cue_length = durations

    # -- which slot each drone holds -------------------------------------------------------------

    def slots_of(self, loop: int, formation: int) -> Index:
        """The slot of `formation` each drone (row) takes in loop `loop`."""
        slot = self._loop.power(loop)
        for k in range(formation):
            slot = self._next[k][slot]
        return slot

    def targets(self, loop: int, formation: int) -> F64:
        """Where each drone (row) holds `formation` in loop `loop` (m)."""
        return np.asarray(self.formations[formation].points[self.slots_of(loop, formation)])

    def _segment(self, loop: int, index: int) -> _Hold | _Morph:
        """Segment `index` of loop `loop`: 2k = hold of formation k, 2k + 1 = morph k -> k+1."""
        key = (loop, index)
        found = self._cache.get(key)
        if found is not None:
            return found
        k = index // 2
        if index % 2:
            a = self.targets(loop, k)
            b = self.targets(loop + 1, 0) if k == 3 else self.targets(loop, k + 1)
            d = b - a
            yaw = np.arctan2(d[:, 0], d[:, 2])
            seg: _Hold | _Morph = _Morph(
                formation=k,
                start=a.astype(np.float32),
                delta=d.astype(np.float32),
                phase_from=self.formations[k].phase[self.slots_of(loop, k)],
                phase_to=self.formations[(k + 1) % 4].phase[
                    self.slots_of(loop + (k == 3), (k + 1) % 4)
                ],
                heading=np.degrees(yaw) % 360.0,
                yaw=yaw,
                reach=np.hypot(d[:, 0], d[:, 2]),
            )
        else:
            came = self._segment(loop - (k == 0), (index - 1) % 8)
            goes = self._segment(loop, index + 1)
            assert isinstance(came, _Morph) and isinstance(goes, _Morph)
            slot = self.slots_of(loop, k)
            seg = _Hold(
                formation=k,
                base=self.formations[k].points[slot].astype(np.float32),
                phase=self.formations[k].phase[slot],
                wave=self._wave[slot] if k == GRID else np.zeros(0, np.float32),
                came=came.heading,
                goes=goes.heading,
            )
        if len(self._cache) >= 6:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = seg
        return seg

    # -- one frame -------------------------------------------------------------------------------

    def _colour(self, formation: int, phase: F32, t: float) -> F32:
        shift = (t * _PALETTE_SPEED[formation]) % 1.0
        index = ((phase + np.float32(shift)) * np.float32(256.0)).astype(np.intp) & 255
        colours: F32 = self._palettes[formation][index]
        return colours

    def _held_position(self, seg: _Hold, k: int, u: float) -> F32:
        """Positions during formation `k`'s hold, `u` (0..1) into it: the grid's wave, the
        sphere's and the ring's turn."""
        position = seg.base.copy()
        if k == GRID:
            lift = self.wave_amplitude * math.sin(math.pi * u) ** 2
            position[:, 1] += np.float32(lift) * np.sin(seg.wave - np.float32(2 * np.pi * u * 4))
        elif k in (SPHERE, RING):
            angle = 2 * math.pi * float(smootherstep(u))
            c, s = np.float32(math.cos(angle)), np.float32(math.sin(angle))
            centre = (self.sphere_centre if k == SPHERE else self.ring_centre).astype(np.float32)
            rel = seg.base - centre
            if k == SPHERE:  # about the vertical axis
                position[:, 0] = centre[0] + c * rel[:, 0] + s * rel[:, 2]
                position[:, 2] = centre[2] - s * rel[:, 0] + c * rel[:, 2]
            else:  # in the ring's plane, about its axis (z)
                position[:, 0] = centre[0] + c * rel[:, 0] - s * rel[:, 1]
                position[:, 1] = centre[1] + s * rel[:, 0] + c * rel[:, 1]
        return position

    def state(self, t: float) -> ShowState:
        """The swarm at `t` seconds (t >= 0), in world units (row i = drone `ids[i]`)."""
        if not t >= 0 or not math.isfinite(t):
            raise ValueError(f"show time must be finite and >= 0, not {t}")
        n = self.drones
        loop, tau = divmod(float(t), self.period)
        span = self.hold + self.transition
        k = min(int(tau // span), 3)
        within = tau - k * span
        holding = within < self.hold
        seg = self._segment(int(loop), 2 * k + (0 if holding else 1))
        pitch = np.zeros(n)
        if isinstance(seg, _Hold):
            u = within / self.hold
            position = self._held_position(seg, k, u)
            colour = self._colour(k, seg.phase, t)
            turn = (seg.goes - seg.came + 180.0) % 360.0 - 180.0
            heading = seg.came + turn * smootherstep(u)
        else:
            u = (within - self.hold) / self.transition
            s = np.float32(smootherstep(u))
            position = seg.start + s * seg.delta
            mix = (
                self._colour(k, seg.phase_from, t) * (1 - s)
                + self._colour((k + 1) % 4, seg.phase_to, t) * s
            )
            colour = mix
            heading = seg.heading
            accel = (60 * u - 180 * u * u + 120 * u**3) / (self.transition**2)
            pitch = np.arctan(seg.reach * (accel / GRAVITY))
        heading32 = (np.asarray(heading) % 360.0).astype(np.float32)
        heading32[heading32 >= 360.0] = 0.0
        yaw = np.radians(heading32.astype(np.float64))
        body = yaw_pitch(yaw, pitch) if self.orientation else yaw_pitch(yaw, np.zeros(n))
        light, cue, since, gimbal = self._payloads(t, tau, position, body, colour)
        return ShowState(
            ids=self.ids,
            position=_enu(position),
            orientation=_enu_rotation(body) if self.orientation else None,
            heading=heading32,
            color=colour,
            light=light,
            cue=cue,
            since=since,
            gimbal=_enu_rotation(gimbal),
        )

    def spot_target(self, t: float) -> F64:
        """The point on the ground (y = 0) the spotlights aim at, at `t`."""
        angle = 2 * math.pi * t / 20.0
        r = 0.5 * max(self.sphere_radius, self.ring_radius)
        return np.array([r * math.sin(angle), 0.0, r * math.cos(angle)])

    LASER_TARGET = np.zeros(3)  # the ground under the show's centre

    def laser_on(self, tau: float) -> bool:
        """Lasers shine during the sphere and ring holds (loop time `tau`)."""
        return any(self.formations[k].start <= tau < self.formations[k].end for k in (1, 3))

    def _payloads(
        self, t: float, tau: float, position: F32, body: F32, colour: F32
    ) -> tuple[F32, npt.NDArray[np.uint8], F64, F32]:
        """Per payload slot: light colour or level (0..255), pyro cue and seconds it has
        burnt, gimbal (relative to `body`); in the stage frame."""
        n, slots = self.drones, self.slots
        light = np.zeros((n, slots, 3), dtype=np.float32)
        cue = np.zeros((n, slots), dtype=np.uint8)
        since = np.zeros((n, slots))
        gimbal = np.zeros((n, slots, 4), dtype=np.float32)
        laser = self.laser_on(tau)
        pulse = 0.75 + 0.25 * math.cos(2 * math.pi * tau)
        for (rows, slot, payload), starts in zip(self._groups, self._cue_start, strict=True):
            if payload.def_type is DefType.PYRO:
                burning = tau - starts
                active = (burning >= 0) & (burning < self._cue_length[: starts.shape[1]])
                ids = np.arange(1, starts.shape[1] + 1, dtype=np.uint8)
                cue[rows, slot] = (active * ids).max(axis=1, initial=0)
                since[rows, slot] = np.where(active, burning, 0.0).sum(axis=1)
                continue
            if payload.color is None:
                light[rows, slot] = colour[rows]
            else:
                light[rows, slot, 0] = 255 * pulse if laser else 0
            if payload.mount is MountType.STATIC:
                continue
            target = self.spot_target(t) if payload.def_type is DefType.LIGHT else self.LASER_TARGET
            aim = target - position[rows].astype(np.float64)
            yaw = np.arctan2(aim[:, 0], aim[:, 2])
            pitch = np.arctan2(-aim[:, 1], np.hypot(aim[:, 0], aim[:, 2]))
            world = yaw_pitch(yaw, pitch)
            inverse = body[rows] * np.array([1, -1, -1, -1], dtype=np.float32)
            gimbal[rows, slot] = quaternions.multiply(inverse, world)
        return light, cue, since, gimbal


@dataclass(frozen=True, slots=True)
class ShowState:
    """One moment of the show in world units, one row per drone (`adapter.show_swarm` makes it
    the DATA frame a VRSP sender sends, as the sink does the world's drones)."""

    ids: npt.NDArray[np.uint16]
    position: F32  # (n, 3) ENU metres from the root
    orientation: F32 | None  # (n, 4) ENU quaternions (w, x, y, z); None: not sent (0x4 off)
    heading: F32  # (n,) degrees clockwise from north
    color: F32  # (n, 3) the LED colour, RGB 0..255
    light: F32  # (n, K, 3) per payload slot: a light's colour, a laser's level in [..., 0]
    cue: npt.NDArray[np.uint8]  # (n, K) the pyro cue burning (0: none)
    since: F64  # (n, K) seconds the burning cue has burnt
    gimbal: F32  # (n, K, 4) gimballed payloads' aim relative to the body, ENU quaternions


def _enu(stage: F32) -> F32:
    """Stage points (x East, y Up, z North) -> ENU."""
    return stage[..., [0, 2, 1]]


def _enu_rotation(stage: F32) -> F32:
    """Stage-frame rotations (w, x, y, z) -> the same rotations in ENU: the stage frame is ENU
    with y and z swapped (a reflection M), and M R M turns about -M a: (w, -x, -z, -y)."""
    return np.stack([stage[..., 0], -stage[..., 1], -stage[..., 3], -stage[..., 2]], axis=-1)
