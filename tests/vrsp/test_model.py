"""The light-show simulator: what a receiver of `sim vrsp` sees, checked against figures worked
out by hand (formation geometry, cue burn times, where gimbals point), not against the model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robowire.errors import ConfigError
from robowire.protocols.vrsp import font
from robowire.protocols.vrsp.adapter import show_swarm
from robowire.protocols.vrsp.definitions import DefType, MountType, Swarm
from robowire.protocols.vrsp.model import LightShow

HOLD, MORPH = 12.0, 8.0  # the defaults: a formation is held 12 s, then 8 s of morph
SPAN = HOLD + MORPH


def frame(show: LightShow, t: float) -> Swarm:
    """What `sim vrsp` sends at show time `t`: the show through the adapter's encoder."""
    return show_swarm(show.state(t))


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v rotated by unit quaternion q (w, x, y, z), written out as q v q*."""
    w, x, y, z = (float(c) for c in q)
    matrix = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    return matrix @ v


def hamilton(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = (float(c) for c in a)
    bw, bx, by, bz = (float(c) for c in b)
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def sorted_rows(points: np.ndarray) -> np.ndarray:
    p = np.round(np.asarray(points, dtype=np.float64), 3)
    return p[np.lexsort(p.T[::-1])]


@pytest.fixture(scope="module")
def show300() -> LightShow:
    return LightShow(300, seed=7)


# -- what a frame holds ------------------------------------------------------------------------


def test_frame_columns_have_the_interface_shapes_and_dtypes() -> None:
    show = LightShow(50)
    swarm = frame(show, 3.0)
    assert isinstance(swarm, Swarm)
    assert swarm.ids.dtype == np.uint16 and swarm.ids.tolist() == list(range(1, 51))
    assert swarm.position.shape == (50, 3) and swarm.position.dtype == np.float32
    assert swarm.color.shape == (50, 3) and swarm.color.dtype == np.uint8
    assert swarm.heading.shape == (50,) and swarm.heading.dtype == np.float32
    assert swarm.orientation.shape == (50, 4) and swarm.orientation.dtype == np.float32
    assert swarm.has_color.all() and swarm.has_heading.all() and swarm.has_orientation.all()
    # the spotlight-and-pyro drone has two payloads: two slots for everyone
    assert swarm.light.shape == (50, 2, 3) and swarm.light.dtype == np.uint8
    assert swarm.cue.shape == (50, 2) and swarm.cue.dtype == np.uint8
    assert swarm.cue_ms.shape == (50, 2) and swarm.cue_ms.dtype == np.uint16
    assert swarm.gimbal.shape == (50, 2, 4) and swarm.gimbal.dtype == np.float32
    plain = frame(LightShow(50, orientation=False), 3.0)
    assert not plain.has_orientation.any()


def test_definitions_plain_spotlight_laser_and_pyro() -> None:
    show = LightShow(200)
    defs = show.definitions
    assert [d.definition_id for d in defs] == list(range(len(defs)))
    assert show.definition_of.shape == (200,)
    assert set(show.definition_of.tolist()) == set(range(len(defs)))
    assert len(set(show.ids.tolist())) == 200

    kinds = {tuple((p.def_type, p.mount) for p in d.payloads): d for d in defs}
    assert () in kinds  # the plain show drone
    spot = kinds[((DefType.LIGHT, MountType.GIMBAL_2DOF),)].payloads[0]
    assert spot.light_type == "Spotlight" and spot.spot_angle and spot.color is None  # RGB
    laser = kinds[((DefType.LASER, MountType.GIMBAL_3DOF),)].payloads[0]
    assert laser.color is not None  # fixed colour: an intensity byte
    pyros = [p for d in defs for p in d.payloads if p.def_type is DefType.PYRO]
    assert pyros and all(2 <= len(p.cues) <= 6 for p in pyros)
    for payload in pyros:
        assert [c.id for c in payload.cues] == list(range(1, len(payload.cues) + 1))
        for cue in payload.cues:
            assert cue.vdl
            q = cue.mount_direction
            assert math.isclose(q.w**2 + q.x**2 + q.y**2 + q.z**2, 1.0, rel_tol=1e-9)
    # the first cue points straight up: forward (+Z) turned onto +Y
    first = pyros[0].cues[0].mount_direction
    up = rotate(np.array([first.w, first.x, first.y, first.z]), np.array([0.0, 0.0, 1.0]))
    assert up == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)
    second = pyros[0].cues[1].mount_direction  # 20 degrees off vertical, leaning west
    lean = rotate(np.array([second.w, second.x, second.y, second.z]), np.array([0.0, 0.0, 1.0]))
    s20, c20 = math.sin(math.radians(20)), math.cos(math.radians(20))
    assert lean == pytest.approx([-s20, c20, 0.0], abs=1e-9)
    # a share of the drones carry each payload kind
    counts = np.bincount(show.definition_of, minlength=len(defs))
    assert counts[0] > 150 and all(c >= 1 for c in counts)


def test_a_tiny_show_is_plain_drones() -> None:
    show = LightShow(3)
    assert [d.model for d in show.definitions] == ["X7"]
    assert show.definition_of.tolist() == [0, 0, 0]
    assert frame(show, 1.0).light.shape == (3, 0, 3)


def test_same_seed_same_show_any_time() -> None:
    a, b = LightShow(120, seed=3), LightShow(120, seed=3)
    for t in (0.0, 17.3, 55.5, 1234.5, 86_400.25):
        fa, fb = frame(a, t), frame(b, t)
        for name in ("position", "color", "heading", "orientation", "light", "cue", "cue_ms",
                     "gimbal"):  # fmt: skip
            assert np.array_equal(getattr(fa, name), getattr(fb, name)), (t, name)
    assert not np.array_equal(a.definition_of, LightShow(120, seed=4).definition_of)
    assert np.array_equal(frame(a, 17.3).position, frame(a, 17.3).position)


def test_bad_settings_are_config_errors() -> None:
    for drones in (0, 70_000):
        with pytest.raises(ConfigError):
            LightShow(drones)
    with pytest.raises(ConfigError):
        LightShow(5, spacing=0.0)
    with pytest.raises(ConfigError):
        LightShow(5, hold=-1.0)
    with pytest.raises(ConfigError):
        LightShow(5, text="robo~wire")
    with pytest.raises(ValueError):
        LightShow(5).state(-1.0)


# -- the formations, where they are held --------------------------------------------------------


def test_the_show_starts_as_a_grid() -> None:
    # 16 drones, 2 m apart, 4 x 4, centred; altitude 20 + the wave's 3 m headroom
    got = frame(LightShow(16), 0.0).position
    xs = [-3.0, -1.0, 1.0, 3.0]
    expected = [[x, 23.0, z] for x in xs for z in xs]
    assert sorted_rows(got) == pytest.approx(sorted_rows(np.array(expected)), abs=1e-4)


def test_the_sphere_has_the_radius_worked_out_by_hand() -> None:
    # 400 drones, 2 m: radius 2 * sqrt(400) / 2.5 = 16 m, resting on the 20 m floor
    show = LightShow(400)
    centre = np.array([0.0, 36.0, 0.0])
    for t in (SPAN, SPAN + 4.0, SPAN + HOLD - 0.01):  # reached, spinning, about to leave
        radii = np.linalg.norm(frame(show, t).position - centre, axis=1)
        assert radii == pytest.approx(16.0, abs=1e-3)
    assert frame(show, SPAN).position == pytest.approx(show.targets(0, 1), abs=1e-4)
    assert not np.allclose(frame(show, SPAN + 6.0).position, show.targets(0, 1), atol=0.5)


def test_the_text_is_the_font_drawn_by_hand() -> None:
    # "I" has 11 lit pixels: with 11 drones, one drone per pixel, 2 m apart, bottom at 20 m
    #   .###.   top row y = 32
    #   ..#..   x = (column - 2) * 2
    #   .###.   bottom row y = 20
    show = LightShow(11, text="I")
    expected = [[x, 32.0, 0.0] for x in (-2.0, 0.0, 2.0)]
    expected += [[0.0, y, 0.0] for y in (22.0, 24.0, 26.0, 28.0, 30.0)]
    expected += [[x, 20.0, 0.0] for x in (-2.0, 0.0, 2.0)]
    got = frame(show, 2 * SPAN + 1.0).position
    assert sorted_rows(got) == pytest.approx(sorted_rows(np.array(expected)), abs=1e-4)


def test_the_ring_logo_is_concentric_circles() -> None:
    # 400 drones: the inner circle has radius 2 * sqrt(400) / 8 = 5 m, then 7, 9, ... m
    show = LightShow(400)
    got = frame(show, 3 * SPAN).position.astype(np.float64)
    assert got[:, 2] == pytest.approx(0.0, abs=1e-4)  # facing the audience
    centre_y = show.ring_centre[1]
    radii = np.hypot(got[:, 0], got[:, 1] - centre_y)
    steps = (radii - 5.0) / 2.0
    assert steps == pytest.approx(np.round(steps), abs=1e-3)
    assert radii.min() == pytest.approx(5.0, abs=1e-3)
    assert got[:, 1].min() >= 20.0 - 1e-3


def test_morphs_are_smooth_and_start_and_end_at_rest() -> None:
    show = LightShow(100)
    for boundary in (HOLD, SPAN, SPAN + HOLD, 4 * SPAN):  # hold->morph, morph->hold, loop seam
        before = frame(show, boundary - 1e-3).position
        after = frame(show, boundary + 1e-3).position
        assert np.abs(after - before).max() < 0.01  # no jump; speed ~0 at the seams
    mid = frame(show, HOLD + MORPH / 2).position
    assert np.abs(mid - frame(show, HOLD + MORPH / 2 + 0.1).position).max() > 0.01  # moving


def test_the_loop_goes_on_and_shuffles_drones() -> None:
    show = LightShow(100)
    grid_again = frame(show, 4 * SPAN).position
    assert sorted_rows(grid_again) == pytest.approx(
        sorted_rows(frame(show, 0.0).position), abs=1e-4
    )
    assert frame(show, 40 * SPAN + 1.0).position.shape == (100, 3)


# -- a user's safety and sanity checks ---------------------------------------------------------


def test_drones_stay_apart_and_inside_the_show_volume(show300: LightShow) -> None:
    lo, hi = show300.volume
    closest = math.inf
    for t in np.arange(0.0, 4 * SPAN + 1.0, 0.2):
        p = frame(show300, float(t)).position.astype(np.float64)
        d = np.linalg.norm(p[:, None, :] - p[None, :, :], axis=2)
        np.fill_diagonal(d, np.inf)
        closest = min(closest, float(d.min()))
        assert (p >= lo - 1e-3).all() and (p <= hi + 1e-3).all(), t
        assert (p[:, 1] >= 20.0 - 1e-3).all()  # the altitude (20 m) is the floor of every formation
    assert closest > 1.41  # spacing 2 m: the morphs keep >= 2 / sqrt(2) = 1.414 m


def closest_morph_approach(a: np.ndarray, b: np.ndarray) -> float:
    """The least distance between any two drones flying straight from a to b on one schedule,
    over every pair and the whole morph: |(1 - s) da + s db| minimised over s in [0, 1]."""
    i, j = np.triu_indices(len(a), 1)
    da, db = a[i] - a[j], b[i] - b[j]
    step = db - da
    s = np.clip(-np.einsum("ij,ij->i", da, step) / np.einsum("ij,ij->i", step, step).clip(1e-12),
                0.0, 1.0)  # fmt: skip
    closest = da + s[:, None] * step
    return float(np.sqrt(np.einsum("ij,ij->i", closest, closest).min()))


@pytest.mark.parametrize("drones", [2, 37, 1200])
def test_no_two_drones_come_within_spacing_over_root_two_in_any_morph(drones: int) -> None:
    # every pair, the whole (continuous) morph, every morph of the loop and the seam
    show = LightShow(drones, seed=drones)
    for k in range(4):
        a = show.targets(0, k)
        b = show.targets(1, 0) if k == 3 else show.targets(0, k + 1)
        assert closest_morph_approach(a, b) > 2.0 / math.sqrt(2.0) - 2e-3, k
    assert closest_morph_approach(show.targets(1, 3), show.targets(2, 0)) > 1.41  # next loop


def closest_pair(p: np.ndarray, within: float) -> float:
    """The least distance between two rows of `p` if some pair is closer than `within`, else
    >= `within` (a cell grid of side `within`: such a pair is in one cell or two touching)."""
    cell = np.floor(p / within).astype(np.int64)
    cell -= cell.min(axis=0) - 1
    side = int(cell.max()) + 2
    key = (cell[:, 0] * side + cell[:, 1]) * side + cell[:, 2]
    order = np.argsort(key, kind="stable")
    key, q = key[order], p[order]
    best = math.inf
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                shifted = key + (dx * side + dy) * side + dz
                lo = np.searchsorted(key, shifted, "left")
                hi = np.searchsorted(key, shifted, "right")
                count = hi - lo
                i = np.repeat(np.arange(len(q)), count)
                j = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())
                other = i != j
                if other.any():
                    d = q[i[other]] - q[j[other]]
                    best = min(best, float(np.sqrt(np.einsum("ij,ij->i", d, d).min())))
    return best


def test_closest_pair_finds_the_pair_a_brute_force_finds() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(0.0, 40.0, (400, 3))
    d = np.linalg.norm(p[:, None] - p[None], axis=2)
    np.fill_diagonal(d, np.inf)
    assert closest_pair(p, 1.5) == pytest.approx(float(d.min()))
    assert closest_pair(p + 1000.0, 1.5) == pytest.approx(float(d.min()))


def test_ten_thousand_drones_stay_apart() -> None:
    # the size drone-show tools fly: every morph sampled every 0.25 s, holds every 2 s
    show = LightShow(10_000)
    times = [t for k in range(4) for t in np.arange(k * SPAN, k * SPAN + HOLD, 2.0)]
    times += [t for k in range(4) for t in np.arange(k * SPAN + HOLD, (k + 1) * SPAN, 0.25)]
    closest = min(closest_pair(frame(show, float(t)).position.astype(np.float64), 1.5)
                  for t in times)  # fmt: skip
    assert closest > 1.41


def test_headings_and_orientations(show300: LightShow) -> None:
    for t in np.arange(0.0, 4 * SPAN, 0.7):
        f = frame(show300, float(t))
        assert ((f.heading >= 0) & (f.heading < 360)).all()
        assert np.linalg.norm(f.orientation, axis=1) == pytest.approx(1.0, abs=1e-5)
        # the body's nose, seen from above, points along the heading (0 = north, clockwise)
        for i in range(0, 300, 37):
            nose = rotate(f.orientation[i], np.array([0.0, 0.0, 1.0]))
            angle = math.degrees(math.atan2(nose[0], nose[2])) % 360
            diff = (angle - float(f.heading[i]) + 180) % 360 - 180
            assert abs(diff) < 0.05


def test_morphing_drones_face_where_they_fly(show300: LightShow) -> None:
    t = HOLD + MORPH / 2  # grid -> sphere, half way
    a, b = frame(show300, t - 0.05).position, frame(show300, t + 0.05).position
    step = (b - a).astype(np.float64)
    moving = np.hypot(step[:, 0], step[:, 2]) > 0.01
    travel = np.degrees(np.arctan2(step[moving, 0], step[moving, 2])) % 360
    diff = (travel - frame(show300, t).heading[moving] + 180) % 360 - 180
    assert np.abs(diff) == pytest.approx(0.0, abs=0.1)
    # speeding up (first half of the morph) tips the nose down along the path
    f = frame(show300, HOLD + MORPH / 4)
    i = int(np.flatnonzero(moving)[0])
    nose = rotate(f.orientation[i], np.array([0.0, 0.0, 1.0]))
    assert nose[1] < 0


def test_colours_change_over_time_and_between_formations(show300: LightShow) -> None:
    grid = frame(show300, 1.0).color
    later = frame(show300, 3.0).color
    sphere = frame(show300, SPAN + 1.0).color
    assert not np.array_equal(grid, later)  # the wave moves
    assert len({tuple(c) for c in grid.tolist()}) > 10  # a wave, not one colour
    # the grid's palette is ocean blues (blue >= red), the text's is gold (red >= blue)
    assert (grid[:, 2].astype(int) >= grid[:, 0]).all()
    text = frame(show300, 2 * SPAN + 1.0).color
    assert (text[:, 0].astype(int) >= text[:, 2]).all()
    assert not np.array_equal(grid, sphere)


# -- payloads ----------------------------------------------------------------------------------


def payload_rows(show: LightShow, kind: DefType, mount: MountType) -> list[tuple[int, int]]:
    """(row, slot) of every payload of this kind and mount."""
    found = []
    for d in show.definitions:
        for slot, p in enumerate(d.payloads):
            if p.def_type is kind and p.mount is mount:
                found += [
                    (int(r), slot) for r in np.flatnonzero(show.definition_of == d.definition_id)
                ]
    return found


def test_spotlights_aim_at_the_point_on_the_ground(show300: LightShow) -> None:
    spots = payload_rows(show300, DefType.LIGHT, MountType.GIMBAL_2DOF)
    assert spots
    for t in (2.0, HOLD + 3.0, 2 * SPAN + 5.0):
        f = frame(show300, t)
        target = show300.spot_target(t)
        assert target[1] == 0.0
        for row, slot in spots:
            g = f.gimbal[row, slot].astype(np.float64)
            assert np.linalg.norm(g) == pytest.approx(1.0, abs=1e-5)
            world = hamilton(f.orientation[row].astype(np.float64), g)
            beam = rotate(world / np.linalg.norm(world), np.array([0.0, 0.0, 1.0]))
            want = target - f.position[row]
            assert beam == pytest.approx(want / np.linalg.norm(want), abs=1e-4)
            assert f.light[row, slot].tolist() == f.color[row].tolist()  # lit in the show colour


def test_lasers_point_at_the_centre_and_shine_in_the_sphere_hold(show300: LightShow) -> None:
    lasers = payload_rows(show300, DefType.LASER, MountType.GIMBAL_3DOF)
    assert lasers
    dark, lit = frame(show300, 1.0), frame(show300, SPAN + 2.0)
    for row, slot in lasers:
        assert dark.light[row, slot].tolist() == [0, 0, 0]
        assert lit.light[row, slot, 0] >= 128 and lit.light[row, slot, 1:].tolist() == [0, 0]
        world = hamilton(lit.orientation[row].astype(np.float64), lit.gimbal[row, slot])
        beam = rotate(world / np.linalg.norm(world), np.array([0.0, 0.0, 1.0]))
        want = -lit.position[row].astype(np.float64)
        assert beam == pytest.approx(want / np.linalg.norm(want), abs=1e-4)


def test_pyro_cues_burn_for_their_effect_time_and_then_stop() -> None:
    show = LightShow(100)
    pyro = next(d for d in show.definitions if len(d.payloads) == 1
                and d.payloads[0].def_type is DefType.PYRO)  # fmt: skip
    row = int(np.flatnonzero(show.definition_of == pyro.definition_id)[0])
    step = 0.05
    times = np.arange(0.0, 4 * SPAN, step)
    cues = np.empty(len(times), np.int64)
    ms = np.empty(len(times), np.int64)
    for k, t in enumerate(times):
        f = frame(show, float(t))
        cues[k], ms[k] = int(f.cue[row, 0]), int(f.cue_ms[row, 0])
    assert cues[0] == 0 and cues[-1] == 0  # nothing burning at the start and the seam
    # burn times in seconds, from the VDL descriptions of the six cues
    burn = {1: 6.0, 2: 3.0, 3: 4.0, 4: 2.0, 5: 3.0, 6: 1.0}
    assert pyro.payloads[0].cues[0].vdl == "Silver Waterfall 6s"
    fired = []
    k = 0
    while k < len(times):
        if cues[k] == 0:
            assert ms[k] == 0
            k += 1
            continue
        cue, first = int(cues[k]), k
        while k < len(times) and cues[k] == cue:
            k += 1
        run = ms[first:k]
        assert (np.diff(run) > 0).all()  # counting up while it burns
        assert run[0] < step * 1000 + 1
        # the time since trigger follows the clock (ms), and it stops after the burn time
        assert np.diff(run) == pytest.approx(step * 1000, abs=1.5)
        assert (k - first) * step == pytest.approx(burn[cue], abs=step + 1e-9)
        assert k < len(times) and cues[k] == 0  # then nothing until the next cue
        fired.append(cue)
    assert fired == [1, 2, 3, 4, 5, 6]  # each cue once a loop, in order


def test_pyro_fires_again_next_loop() -> None:
    show = LightShow(100)
    firing = [frame(show, t).cue.any() for t in np.arange(4 * SPAN, 8 * SPAN, 0.5)]
    assert any(firing) and not all(firing)


def test_font_glyphs_are_five_by_seven() -> None:
    for char in sorted(font.CHARACTERS):
        assert font.glyph(char).shape == (7, 5)
    pixels = font.bitmap("IO")
    assert pixels.shape == (7, 11) and not pixels[:, 5].any()  # one blank column between
