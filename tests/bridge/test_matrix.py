"""The bridge matrix (issue 13 item 1): every source's simulator -> gateway -> every sink ->
a client of that sink's protocol at the far end.

Expected values are computed here from the frozen source world and each sink's documented
mapping (docs/bridging.md, whose table this test checks), never taken from the sink's encoder:
VRPN keeps a VRPN source's devices as they are (sender, sensor, every kind of report) and names
other devices `[A-Za-z0-9_.-]` with sensor 0 and telemetry as analog channels; SpyGlass positions
in units of `scale` rounded and clipped to int16 (unknown = 0), numbered nodes, float data;
UgCS geodetic from the device's fix or its ENU position about the sink's origin (pymap3d), the
heading clockwise from north; VRSP positions in float32 about the DEF root; XRP one robot whose
gyro follows the mirrored device's yaw (an XRP robot's own sensor values, exactly); Foxglove
/tf, /location and /telemetry/<source>; the viewer's float32 frames and its telemetry with
units; Zenoh the whole device.

Sources and sinks come from the registries (`farend.SOURCES`, `farend.SINKS`: every protocol
with a simulator, every server). All cases run in one event loop before the first assertion
(the sources one after another, each with every sink at once), so the whole matrix takes
seconds, not minutes. A protocol with no mapping here is checked by the rule any protocol
server keeps: its far end has every placed device at its position.
"""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import pymap3d
import pytest

from robowire.world import Device, World

from .farend import (
    MIRRORED,
    PEERS,
    SINKS,
    SOURCES,
    SPYGLASS_SCALE,
    UGCS_ORIGIN,
    Obs,
    Outcome,
    Seen,
    complete,
    run_source,
)

pytestmark = pytest.mark.timeout(300)

DOC = Path(__file__).resolve().parents[2] / "docs" / "bridging.md"


def close(a: Any, b: Any, tol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if len(a) != len(b):
        return False
    return all(
        abs(float(x) - float(y)) <= tol * max(1.0, abs(float(y))) for x, y in zip(a, b, strict=True)
    )


def f32(value: float) -> float:
    import numpy as np

    return float(np.float32(value))


def yaw(q: tuple[float, float, float, float]) -> float:
    """Counter-clockwise from East (rad) of an ENU quaternion (w, x, y, z), computed here."""
    w, x, y, z = q
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def angle_gap(a: float, b: float) -> float:
    return abs(math.remainder(a - b, math.tau))


def vrpn_name(device_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device_id)


def ros_token(text: str) -> str:
    """A legal ROS name token (docs/ros2.md, "Names"): any other character `_`, runs of `_`
    one, `_` before a leading digit, `unnamed` for nothing."""
    cleaned = re.sub(r"__+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text))
    if cleaned in ("", "_"):
        return "unnamed"
    return f"_{cleaned}" if cleaned[0].isdigit() else cleaned


def ros_frame(device: Device, protocol: str) -> str:
    """A device's TF frame (docs/ros2.md, "Per protocol"): a VRPN tracker's sensor N > 0 is
    `<tracker>_<N>`; other names token by token, an id that starts with a digit after its kind."""
    name = device.device_id
    if protocol == "vrpn":
        sender, _, sensor = name.rpartition("/")
        if not sender or not sensor.isdigit():
            sender, sensor = name, "0"
        return ros_token(sender) + (f"_{int(sensor)}" if int(sensor) else "")
    if device.kind and name[:1].isdigit():
        name = f"{device.kind}_{name}"
    return "/".join(ros_token(part) for part in name.split("/") if part) or "unnamed"


BATTERY = {  # BatteryState's float32 fields: the world field, its sign (ROS: discharging < 0)
    "battery.voltage": ("main_voltage", 1.0),
    "battery.current": ("main_current", -1.0),
    "battery.percentage": ("remaining_power_level", 1.0),
}


def same_number(a: float | None, b: float) -> bool:
    return a is not None and (a == b or (math.isnan(a) and math.isnan(b)))


# -- what each sink's far end must see, from the docs ---------------------------------------------


def problems(
    source: str, sink: str, world: World, seen: Seen, arrived: set[str] | None = None
) -> list[str]:
    """What the far end of `sink` lacks or has wrong, given the frozen source world; `arrived`
    collects what was compared and found right: "pos" (positions), "geo" (geodetic fixes),
    "tel" (telemetry), "yaw" (the XRP robot's heading)."""
    devices = list(world.devices())
    out: list[str] = []
    got_right = arrived if arrived is not None else set()

    def check(ok: bool, what: str, aspect: str = "") -> None:
        if not ok:
            out.append(what)
        elif aspect:
            got_right.add(aspect)

    def get(key: str) -> Obs:
        found = seen.get(key)
        check(found is not None, f"{key}: missing (far end has {sorted(seen)[:12]})")
        return found if found is not None else Obs()

    def same_keys(want: set[str]) -> None:
        check(set(seen) == want, f"far-end devices {sorted(seen)} != {sorted(want)}")

    if not devices:
        return ["the source world is empty"]
    if sink == "zenoh":  # the whole device, as it is
        same_keys({d.device_id for d in devices})
        for d in devices:
            o = get(d.device_id)
            check(o.kind == d.kind, f"{d.device_id}: kind {o.kind} != {d.kind}")
            if d.position is not None:
                check(close(o.position, d.position, 1e-9), f"{d.device_id}: {o.position}", "pos")
            if d.geodetic is not None:
                check(close(o.geodetic, d.geodetic, 1e-9), f"{d.device_id}: {o.geodetic}", "geo")
            if d.telemetry:
                check(o.telemetry == dict(d.telemetry), f"{d.device_id}: {o.telemetry}", "tel")
    elif sink == "vrpn" and source == "vrpn":  # its own protocol: every device as it is
        same_keys({d.device_id for d in devices})
        for d in devices:
            o = get(d.device_id)
            check(o.kind == d.kind, f"{d.device_id}: kind {o.kind} != {d.kind}")
            if d.position is not None:
                check(
                    close(o.position, d.position, 1e-9)
                    and close(o.orientation, d.orientation, 1e-9)
                    and close(o.velocity, d.velocity, 1e-9),
                    f"{d.device_id}: {o.position} {o.orientation} {o.velocity}",
                    "pos",
                )
            if d.telemetry:
                names = sorted(d.telemetry)
                check(
                    sorted(o.telemetry) == names
                    and all(o.telemetry[n][1] == d.telemetry[n][1] for n in names)
                    and close(
                        [o.telemetry[n][0] for n in names], [d.telemetry[n][0] for n in names], 1e-9
                    ),
                    f"{d.device_id}: {o.telemetry} != {d.telemetry}",
                    "tel",
                )
    elif sink == "vrpn":  # a tracker per device, telemetry as the analog channels of its name
        same_keys(
            {f"{vrpn_name(d.device_id)}/0" for d in devices if d.position or d.velocity}
            | {vrpn_name(d.device_id) for d in devices if d.telemetry}
        )
        for d in devices:
            name = vrpn_name(d.device_id)
            if d.position is not None:
                o = get(f"{name}/0")
                check(close(o.position, d.position, 1e-9), f"{name}/0: {o.position}", "pos")
                if d.orientation is not None:
                    gap = angle_gap(yaw(o.orientation or (1, 0, 0, 0)), yaw(d.orientation))
                    check(gap < 1e-6, f"{name}/0: yaw off by {gap}")
            if d.telemetry:
                o = get(name)
                want = sorted(v for v, _ in d.telemetry.values())
                got = sorted(v for v, _ in o.telemetry.values())
                check(len(got) == len(want) and close(got, want, 1e-9), f"{name}: {got}", "tel")
                check({u for _, u in o.telemetry.values()} == {"1"}, f"{name}: units")
    elif sink == "spyglass":  # numbered nodes, positions in units of `scale`, float data
        keys, free = set(), 65535
        for d in devices:
            if d.device_id.isdigit() and int(d.device_id) <= 65535:
                key = d.device_id
            else:
                key, free = str(free), free - 1
            keys.add(key)
            o = get(key)
            want = tuple(
                max(-32768, min(32767, round(v / SPYGLASS_SCALE))) * SPYGLASS_SCALE
                for v in (d.position or (0.0, 0.0, 0.0))  # unknown: 0
            )
            check(close(o.position, want, 1e-9), f"node {key}: {o.position} != {want}", "pos")
            got = sorted(v for v, _ in o.telemetry.values())
            wanted = sorted(f32(v) for v, _ in d.telemetry.values())
            if wanted:
                check(len(got) == len(wanted) and close(got, wanted, 1e-9), f"{key}: {got}", "tel")
        same_keys(keys)
    elif sink == "ugcs":  # every device a vehicle, serial its id; the fix its own, or ENU
        same_keys({d.device_id for d in devices})
        for d in devices:
            o = get(d.device_id)
            if d.position is None and d.geodetic is None:
                continue
            assert d.position is not None or d.geodetic is not None
            fix = d.geodetic or pymap3d.enu2geodetic(*(d.position or ()), *UGCS_ORIGIN)
            check(  # latitude, longitude as doubles; the altitude is a float32 on the wire
                close(o.geodetic and o.geodetic[:2], fix[:2], 1e-9)
                and abs((o.geodetic or fix)[2] - fix[2]) < 1e-3,
                f"{d.device_id}: geodetic {o.geodetic} != {fix}",
                "geo",
            )
            if o.geodetic is not None:
                enu = pymap3d.geodetic2enu(*o.geodetic, *UGCS_ORIGIN)
                check(close(o.position, enu, 1e-6), f"{d.device_id}: {o.position}", "pos")
            if d.orientation is not None:
                heading = (90.0 - math.degrees(yaw(d.orientation))) % 360.0
                got, unit = o.telemetry.get("heading", (math.nan, ""))
                check(
                    unit == "deg" and angle_gap(math.radians(got), math.radians(heading)) < 1e-4,
                    f"{d.device_id}: heading {got} {unit} != {heading}",
                    "tel",
                )
            for name in ("main_voltage", "altitude_agl", "remaining_power_level"):
                if name in d.telemetry:
                    want_value, want_unit = d.telemetry[name]
                    got_value, got_unit = o.telemetry.get(name, (math.nan, ""))
                    check(
                        abs(got_value - want_value) < 1e-3 and got_unit == want_unit,
                        f"{d.device_id}: {name} {got_value} {got_unit} != {want_value}",
                    )
    elif sink == "vrsp":  # drones in order of first sight, float32 ENU about the DEF root
        placed = [d for d in devices if d.position is not None]
        check(len(seen) == len(placed), f"{len(seen)} drones for {len(placed)} devices")
        for d in placed:
            match = [o for o in seen.values() if close(o.position, d.position, 1e-6)]
            check(bool(match), f"{d.device_id}: no drone at {d.position}", "pos")
            if match and d.geodetic is not None:
                check(close(match[0].geodetic, d.geodetic, 1e-7), f"{d.device_id}: geo", "geo")
            if match and all(f"led_{c}" in d.telemetry for c in ("red", "green", "blue")):
                leds = {f"led_{c}" for c in ("red", "green", "blue")}
                check(
                    {k: v for k, v in match[0].telemetry.items() if k in leds}
                    == {k: d.telemetry[k] for k in leds},
                    f"{d.device_id}: LED {match[0].telemetry}",
                    "tel",
                )
    elif sink == "xrp" and source == "xrp":  # the robot's own sensor values, as they came
        same_keys({"xrp"})
        robot = next(d for d in devices if d.device_id == "xrp")
        o = seen.get("xrp", Obs())
        sensors = [
            *(f"encoder_{i}_{f}" for i in range(4) for f in ("count", "rate", "distance")),
            *(f"gyro_{f}_{axis}" for f in ("rate", "angle") for axis in "xyz"),
            *(f"accel_{axis}" for axis in "xyz"),
            *(f"analog_{i}" for i in range(3)),
            *("reflectance_left", "reflectance_right", "range", "button"),
        ]
        got = {name: o.telemetry.get(name) for name in sensors}
        want = {name: robot.telemetry.get(name) for name in sensors}
        check(None not in want.values() and got == want, f"robot sensors {got} != {want}", "tel")
    elif sink == "xrp":  # one robot, its gyro following the mirrored device's yaw
        same_keys({"xrp"})
        target = next(d for d in devices if d.device_id == MIRRORED[source])
        o = seen.get("xrp", Obs())
        want = yaw(target.orientation) if target.orientation is not None else 0.0
        got = yaw(o.orientation) if o.orientation is not None else math.nan
        check(angle_gap(got, want) < 0.02, f"robot yaw {got} != {target.device_id}'s {want}", "yaw")
        # The far end's odometry starts at the origin where the robot was put down (docs/xrp.md,
        # serve sink: where a status first reported it): the XRP robot starts at the origin
        # itself; a VRPN sensor 1 circles at radius 1.25 m.
        far_xy = (o.position or (math.nan, math.nan))[:2]
        xy = (target.position or (math.nan, math.nan))[:2]
        first = (xy[0] - far_xy[0], xy[1] - far_xy[1])
        if source == "xrp":
            check(close(far_xy, xy, 0.01), f"robot at {far_xy} != {xy}", "pos")
        elif source == "vrpn":
            check(abs(math.hypot(*first) - 1.25) < 0.02, f"robot placed at {first}", "pos")
        check(o.telemetry.get("gyro_angle_z", (0, ""))[1] == "deg", "gyro_angle_z in deg")
        check(o.telemetry.get("encoder_0_distance", (0, ""))[1] == "m", "encoder distance in m")
    elif sink in ("ros2", "ros2+zenoh"):  # a TF frame per device, its own topics, /diagnostics
        # (docs/ros2.md): the same topics over DDS and over rmw_zenoh
        frames = {d.device_id: ros_frame(d, world.tables[d.source].protocol) for d in devices}
        same_keys(
            {
                frames[d.device_id]
                for d in devices
                if d.position or d.velocity or d.geodetic or d.telemetry
            }
        )
        for d in devices:
            key = frames[d.device_id]
            if d.position is not None:  # on /tf and its own pose topic, as doubles
                o = get(key)
                q = d.orientation or (1.0, 0.0, 0.0, 0.0)  # (identity if it has none)
                own = o.own_pose or (None, None)
                check(
                    close(o.position, d.position, 1e-9) and close(o.orientation, q, 1e-9),
                    f"{key}: /tf {o.position} {o.orientation} != {d.position} {q}",
                    "pos",
                )
                check(
                    close(own[0], d.position, 1e-9) and close(own[1], q, 1e-9),
                    f"{key}: pose topic {o.own_pose} != {d.position} {q}",
                )
            if d.velocity is not None:
                o = get(key)
                check(close(o.velocity, d.velocity, 1e-9), f"{key}: twist {o.velocity}")
            if d.geodetic is not None:
                o = get(key)
                check(close(o.geodetic, d.geodetic, 1e-9), f"{key}: fix {o.geodetic}", "geo")
            if d.telemetry:  # every field with its unit, exactly; the kind
                o = get(key)
                check(o.kind == d.kind, f"{key}: kind {o.kind!r} != {d.kind!r}")
                battery = {k: v for k, v in o.telemetry.items() if k in BATTERY}
                diagnosed = {k: v for k, v in o.telemetry.items() if k not in BATTERY}
                check(diagnosed == dict(d.telemetry), f"{key}: {diagnosed} != {d.telemetry}", "tel")
                if any(field in d.telemetry for field, _ in BATTERY.values()):
                    for name, (field, sign) in BATTERY.items():
                        value = d.telemetry.get(field, (math.nan, ""))[0]
                        got = battery.get(name, (None, ""))[0]
                        check(same_number(got, f32(sign * value)), f"{key}: {name} {got}")
    elif sink not in ("foxglove", "http"):  # another protocol's: its source's devices, placed
        same_keys({d.device_id for d in devices if d.position is not None})
        for d in devices:
            if d.position is not None:
                o = get(d.device_id)
                check(close(o.position, d.position, 1e-6), f"{d.device_id}: {o.position}", "pos")
    else:  # Foxglove and the viewer: frames "<source>/<device>"
        tol = 1e-9 if sink == "foxglove" else 1e-6  # the viewer's frames are float32
        if sink == "http":  # the viewer lists every device
            same_keys({f"{d.source}/{d.device_id}" for d in devices})
        else:  # Foxglove: frames of devices with a pose, a fix or telemetry
            same_keys(
                {
                    f"{d.source}/{d.device_id}"
                    for d in devices
                    if d.position or d.geodetic or d.telemetry
                }
            )
        for d in devices:
            key = f"{d.source}/{d.device_id}"
            o = seen.get(key, Obs())
            if d.position is not None:
                check(close(o.position, d.position, tol), f"{key}: {o.position}", "pos")
            if d.geodetic is not None:
                check(close(o.geodetic, d.geodetic, tol), f"{key}: {o.geodetic}", "geo")
            if d.telemetry:
                for name, (value, unit) in d.telemetry.items():
                    got_value, got_unit = o.telemetry.get(name, (math.nan, "?"))
                    check(abs(got_value - value) < 1e-9, f"{key}: {name} {got_value} != {value}")
                    check(got_unit == unit, f"{key}: {name} unit {got_unit} != {unit}")
                check(set(o.telemetry) == set(d.telemetry), f"{key}: {sorted(o.telemetry)}", "tel")
    return out


# -- running the matrix ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    async def run_all() -> dict[str, Outcome]:
        found = {}
        for source in SOURCES:
            found[source] = await run_source(
                source, SINKS, lambda s, k, w, seen: not problems(s, k, w, seen)
            )
        return found

    return asyncio.run(run_all())


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("source", SOURCES)
def test_source_into_sink(outcomes: dict[str, Outcome], source: str, sink: str) -> None:
    outcome = outcomes[source]
    assert complete(source, outcome.world), "the simulator never made its whole world"
    assert outcome.errors[sink] == [], "the far end could not read what came"
    found = problems(source, sink, outcome.world, outcome.seen[sink])
    assert not found, "\n".join(found)


def arrived_cells(outcomes: dict[str, Outcome]) -> dict[tuple[str, str], str]:
    """(source, sink) -> what reached the far end and was right, e.g. "pos geo tel"."""
    order = ("pos", "geo", "tel", "yaw")
    cells = {}
    for source, outcome in outcomes.items():
        for sink in SINKS:
            arrived: set[str] = set()
            problems(source, sink, outcome.world, outcome.seen[sink], arrived)
            cells[(source, sink)] = " ".join(a for a in order if a in arrived) or "-"
    return cells


def doc_matrix() -> dict[tuple[str, str], str]:
    """The matrix table of docs/bridging.md, cell by cell."""
    text = DOC.read_text()
    body = text[text.index("<!-- matrix:begin -->") : text.index("<!-- matrix:end -->")]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in body.splitlines()
        if line.startswith("|")
    ]
    header, table = rows[0], rows[2:]
    assert sorted(header[1:]) == sorted(SINKS)
    return {
        (row[0], sink): cell
        for row in table
        for sink, cell in zip(header[1:], row[1:], strict=True)
    }


def test_the_docs_matrix_is_what_arrived(outcomes: dict[str, Outcome]) -> None:
    assert doc_matrix() == arrived_cells(outcomes)


@pytest.mark.parametrize("source", SOURCES)
def test_sinks_say_where_they_place_devices_without_a_fix(
    outcomes: dict[str, Outcome], source: str
) -> None:
    """A source without fixes into the geodetic sinks: one line each, never a silent default."""
    said = outcomes[source].said
    ugcs = [line for line in said if line.startswith("ugcs: devices without a geodetic fix")]
    vrsp = [line for line in said if line.startswith("vrsp: no device has a geodetic position")]
    if any(d.geodetic is None and d.position is not None for d in outcomes[source].world.devices()):
        assert len(ugcs) == 1 and "56.9496, 24.1052, 10 m" in ugcs[0]
    else:
        assert ugcs == []
    if all(d.geodetic is None for d in outcomes[source].world.devices()):
        assert len(vrsp) == 1 and "0, 0, 0" in vrsp[0]
    elif source in PEERS:  # ROS 2 topics are found one by one: the first drones may go out
        assert len(vrsp) <= 1  # before a fix came (said then, once), or after it
    else:
        assert vrsp == []
