"""A broken device among good ones, through every sink to a client of its protocol.

Bad input is normal input, on the way out too: a source can hand the world infinite, NaN or
huge values (a broken tracker, a vehicle sending inf). Every sink must keep serving, the good
device must arrive exactly, the broken ones as each protocol can say them, and nothing may warn
(numpy's "overflow" / "invalid value" are errors in these tests, pyproject.toml). Expected
values are worked out here from each wire's number format (docs/bridging.md): float64 carries
1e308 as it is, float32 makes it inf, SpyGlass clips its int16 units and sends a device with no
position at 0, 0, 0, a UgCS fix off the globe is no fix.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import warnings

import numpy as np
import pytest

from robowire.gateway import Gateway

from .farend import (
    SINKS,
    SPYGLASS_SCALE,
    Leg,
    Said,
    open_leg,
    stop,
    until,
)

pytestmark = pytest.mark.timeout(120)

INF, NAN, HUGE = math.inf, math.nan, 1e308
GOOD = (1.0, 2.0, 22.0)
GOOD_FIX = (56.9, 24.1, 30.0)
# devices: good; "hole" has no position (a NaN in it) and an infinite fix; "huge" is finite
# past float32, its fix off the globe
POSITION = np.array([GOOD, (INF, -INF, NAN), (HUGE, -HUGE, 0.0)])
ORIENTATION = np.array([(1.0, 0.0, 0.0, 0.0), (INF, NAN, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)])
VELOCITY = np.array([(0.5, 0.0, 0.0), (INF, NAN, -INF), (HUGE, 0.0, 0.0)])
GEODETIC = np.array([GOOD_FIX, (INF, 200.0, NAN), (100.0, -400.0, HUGE)])
BATTERY = np.array([12.0, INF, NAN])

F32_HUGE = (INF, -INF, 0.0)  # 1e308 as float32
CLIPPED = (0x7FFF * SPYGLASS_SCALE, -0x8000 * SPYGLASS_SCALE, 0.0)
POSITIONS = {  # the positions each far end holds, one per device that has one
    "vrpn": {GOOD, (HUGE, -HUGE, 0.0)},
    "vrsp": {GOOD, F32_HUGE},
    "spyglass": {GOOD, (0.0, 0.0, 0.0), CLIPPED},
    "foxglove": {GOOD, (HUGE, -HUGE, 0.0)},
    "http": {GOOD, F32_HUGE},
    "zenoh": {GOOD, (HUGE, -HUGE, 0.0)},
    "ros2": {GOOD, (HUGE, -HUGE, 0.0)},  # /tf's doubles
    "ros2+zenoh": {GOOD, (HUGE, -HUGE, 0.0)},
}
FIXES = {"ugcs": {GOOD_FIX}}  # the UgCS far end's devices are placed by their fixes


def rounded(points: object) -> set[tuple[float, ...]]:
    return {tuple(round(float(c), 4) for c in p) for p in points}  # type: ignore[attr-defined]


def held(leg: Leg) -> set[tuple[float, ...]]:
    seen = leg.seen().values()
    if leg.name in FIXES:
        return rounded(o.geodetic for o in seen if o.geodetic is not None)
    return rounded(o.position for o in seen if o.position is not None)


def expected(leg: Leg) -> set[tuple[float, ...]]:
    return rounded(FIXES.get(leg.name) or POSITIONS.get(leg.name, ()))


async def run() -> tuple[dict[str, set[tuple[float, ...]]], dict[str, bool], list[str]]:
    errors = Said(logging.ERROR)
    logging.getLogger("robowire").addHandler(errors)
    front = Gateway()
    front_task = asyncio.create_task(front.run())
    legs: list[Leg] = []
    try:
        for name in SINKS:  # (the XRP sink's robot mirrors the good device)
            legs.append(await open_leg(name, front, "good"))
        await until(lambda: all(leg.ready() for leg in legs))
        world = front.world
        slots = world.table("probe").slots(["good", "hole", "huge"], "drone")

        async def keep_writing() -> None:  # (far ends that join late get the next update)
            while True:
                world.update(
                    "probe",
                    slots,
                    receive_time=time.time(),
                    position=POSITION,
                    orientation=ORIENTATION,
                    velocity=VELOCITY,
                    geodetic=GEODETIC,
                    telemetry={"battery": (BATTERY, "V")},
                )
                await asyncio.sleep(0.05)

        writer = asyncio.create_task(keep_writing())
        agreed = {}
        for leg in legs:
            if leg.name == "xrp":  # its robot's own sensors: only that it keeps serving
                agreed[leg.name] = await until(lambda leg=leg: "xrp" in leg.seen())
            else:
                agreed[leg.name] = await until(lambda leg=leg: held(leg) == expected(leg))
        writer.cancel()
        return {leg.name: held(leg) for leg in legs}, agreed, errors.lines
    finally:
        await stop(front, front_task)  # the servers first, then their clients (farend.run_source)
        for leg in legs:
            await leg.close()
        logging.getLogger("robowire").removeHandler(errors)


def test_a_broken_device_never_stops_a_sink_and_arrives_as_each_wire_can_say_it() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        held_by, agreed, errors = asyncio.run(run())
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert errors == []
    for name, ok in agreed.items():
        if name != "xrp":
            assert held_by[name] == rounded(FIXES.get(name) or POSITIONS[name]), name
        assert ok, name
