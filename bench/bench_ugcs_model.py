"""UgCS simulated vehicles: the cost of one `Fleet.step` for 1,000 vehicles, against a bare
per-vehicle Python loop doing only the navigation arithmetic (the floor a loop cannot beat),
both measured in this run; and the cost of a `telemetry()` and an `availability()` snapshot.

The fleet is busy: a third parked, a third climbing or hovering, a third flying a square
mission at 10 Hz steps (the VSM's 5 Hz telemetry needs at most that). Target: < 1 ms per step.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

from robowire.protocols.ugcs.definitions import COMMANDS, FIELDS
from robowire.protocols.ugcs.model import Fleet

VEHICLES = 1000
STEPS = 300
DT = 0.1


def _busy_fleet() -> Fleet:
    fleet = Fleet(VEHICLES, gps_warmup=(0.0, 0.0))
    fleet.step(0.0)
    spec = {s.name: s for s in COMMANDS}

    def params(name: str, **given: float) -> dict[str, float | None]:
        return {p.name: given.get(p.name) for p in spec[name].parameters}

    lat0, lon0 = math.radians(fleet.origin[0]), math.radians(fleet.origin[1])
    r = 6_378_137.0
    corners = [(0.0, 0.0), (200.0, 0.0), (200.0, 200.0), (0.0, 200.0)]
    items = [("set_speed", params("set_speed", ground_speed=8.0))]
    for north, east in corners * 3:
        lat = lat0 + north / r
        lon = lon0 + east / (r * math.cos(lat0))
        items.append(("move", params("move", latitude=lat, longitude=lon, altitude_amsl=40.0)))
    upload = params("mission_upload", altitude_origin=fleet.origin[2])
    for i in range(VEHICLES):
        if i % 3 == 0:
            continue
        fleet.command(i, "arm", {})
        if i % 3 == 1:
            fleet.command(i, "takeoff_command", {"relative_altitude": 20.0 + i % 50})
        else:
            fleet.mission_upload(i, upload, items)
            fleet.command(i, "auto", {})
    return fleet


def _loop_floor(n: int, steps: int) -> float:
    """Seconds per step of the navigation arithmetic alone, one vehicle at a time."""
    east = [0.0] * n
    north = [0.0] * n
    alt = [10.0] * n
    target = [(200.0, 200.0, 40.0)] * n
    start = time.perf_counter()
    for _ in range(steps):
        for i in range(n):
            te, tn, tu = target[i]
            de, dn, dz = te - east[i], tn - north[i], tu - alt[i]
            d = math.hypot(de, dn)
            reach = min(d, 8.0 * DT)
            if d > 0:
                east[i] += de * reach / d
                north[i] += dn * reach / d
            alt[i] += max(-2.0 * DT, min(2.0 * DT, dz))
    return (time.perf_counter() - start) / steps


def _per_call(fn: Callable[[], object], calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    fleet = _busy_fleet()
    now = [0.0]

    def step() -> None:
        now[0] += DT
        fleet.step(now[0])

    steps = _per_call(step, STEPS)
    floor = _loop_floor(VEHICLES, STEPS // 3)
    tel = _per_call(fleet.telemetry, 100)
    avail = _per_call(fleet.availability, 100)
    p50 = statistics.median(steps)
    p99 = sorted(steps)[int(0.99 * len(steps))]
    flying = int(fleet.airborne.sum())
    print(f"   {VEHICLES} vehicles ({flying} in the air), {STEPS} steps of {DT} s")
    print(f"   step        p50 {p50 * 1e3:6.3f} ms  p99 {p99 * 1e3:6.3f} ms  (target < 1 ms)")
    print(f"   loop floor      {floor * 1e3:6.3f} ms  -> step is {floor / p50:4.1f}x faster")
    print(f"   telemetry() p50 {statistics.median(tel) * 1e3:6.3f} ms  ({len(FIELDS)} columns)")
    print(f"   availability() p50 {statistics.median(avail) * 1e3:6.3f} ms")
