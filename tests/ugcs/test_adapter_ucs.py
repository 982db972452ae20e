"""UCS side -> world: vehicles keyed by serial, degrees and ENU, held values and NA, batching.

Expected numbers are worked out by hand from the units on the wire (radians, m, m/s, 0..1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.adapter import UcsAdapter, quaternions
from robowire.protocols.ugcs.codec import defs, pb
from robowire.protocols.ugcs.device import (
    CommandSpec,
    DeviceSpec,
    FieldSpec,
    IdCounter,
    SubsystemSpec,
    register,
)
from robowire.protocols.ugcs.session_ucs import UcsSession
from robowire.world import World

S = defs
BEGIN = 1_700_000_000_000
LAT, LON = 56.9496, 24.1052  # degrees


def spec(serial: str) -> DeviceSpec:
    return DeviceSpec(
        properties={"vehicle_serial": (serial, S.FIELD_SEMANTIC_STRING)},
        subsystems=(
            SubsystemSpec(
                type=S.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
                properties={"autopilot_type": ("emulator", S.FIELD_SEMANTIC_STRING)},
                telemetry=(
                    FieldSpec("latitude", S.FIELD_SEMANTIC_LATITUDE),
                    FieldSpec("longitude", S.FIELD_SEMANTIC_LONGITUDE),
                    FieldSpec("altitude_amsl", S.FIELD_SEMANTIC_ALTITUDE_AMSL),
                    FieldSpec("heading", S.FIELD_SEMANTIC_HEADING),
                    FieldSpec("ground_speed", S.FIELD_SEMANTIC_GROUND_SPEED),
                    FieldSpec("vertical_speed", S.FIELD_SEMANTIC_VERTICAL_SPEED),
                    FieldSpec("remaining_power_level", S.FIELD_SEMANTIC_CAPACITY_LEVEL),
                    FieldSpec("is_armed", S.FIELD_SEMANTIC_BOOL),
                    FieldSpec("flight_mode", S.FIELD_SEMANTIC_FLIGHT_MODE),
                    FieldSpec("native_flight_mode", S.FIELD_SEMANTIC_STRING),
                ),
                commands=(CommandSpec("arm"),),
            ),
        ),
    )


class Vsm:
    """Two registered vehicles fed to a UCS session, events into one adapter."""

    def __init__(self, origin: tuple[float, float, float] | None = None) -> None:
        self.world = World()
        self.adapter = UcsAdapter(self.world, "ugcs@test", origin)
        self.session = UcsSession(0.0, peer_id=1)
        peer = pb.Vsm_message(device_id=0)
        peer.register_peer.peer_id = 9
        peer.register_peer.peer_type = S.PEER_TYPE_VSM
        self.feed(codec.encode(peer))
        ids = IdCounter()
        self.infos = [register(spec(s), ids, BEGIN) for s in ("SN-1", "SN-2")]
        for info in self.infos:
            msg = info.to_message()
            msg.message_id = info.device_id
            msg.response_required = True
            self.feed(codec.encode(msg))

    def feed(self, data: bytes) -> int:
        return self.adapter.apply(self.session.feed(data, 1.0), 1000.0)

    def status(self, index: int, ms: int = 500, **values: Any) -> bytes:
        info = self.infos[index]
        msg = pb.Vsm_message(device_id=info.device_id)
        for name, value in values.items():
            f = info.fields_by_key[name]
            tf = msg.device_status.telemetry_fields.add(field_id=f.field_id, ms_since_epoch=ms)
            codec.write_value(tf.value, value, f.kind)
        return codec.encode(msg)


def test_a_vehicle_in_degrees_enu_and_units() -> None:
    vsm = Vsm()
    taken = vsm.feed(
        vsm.status(
            0,
            latitude=math.radians(LAT),
            longitude=math.radians(LON),
            altitude_amsl=30.0,
            heading=math.pi / 2,  # due east
            ground_speed=4.0,
            vertical_speed=1.0,
            remaining_power_level=0.75,
            is_armed=True,
            flight_mode=S.FLIGHT_MODE_RTH,
            native_flight_mode="GOTO",
        )
    )
    assert taken == 1
    device = vsm.world.device("ugcs@test", "SN-1")
    assert device.kind == "ugcs"
    assert device.geodetic == pytest.approx((LAT, LON, 30.0))
    assert device.position == pytest.approx((0.0, 0.0, 0.0), abs=1e-6)  # the first fix
    assert device.velocity == pytest.approx((4.0, 0.0, 1.0), abs=1e-6)  # east at 4 m/s, up 1
    # heading east = facing +x: the identity rotation
    assert device.orientation == pytest.approx((1.0, 0.0, 0.0, 0.0), abs=1e-6)
    t = device.telemetry
    assert t["latitude"][0] == pytest.approx(LAT) and t["latitude"][1] == "deg"
    assert t["heading"][0] == pytest.approx(90.0) and t["heading"][1] == "deg"
    assert t["altitude_amsl"] == (30.0, "m")
    assert t["ground_speed"] == (4.0, "m/s")
    assert t["remaining_power_level"] == (0.75, "ratio")
    assert t["battery"] == (75.0, "%")
    assert t["is_armed"] == (1.0, "bool")
    assert t["flight_mode"][0] == S.FLIGHT_MODE_RTH
    assert device.attributes["flight_mode"] == "RTH"
    assert device.attributes["native_flight_mode"] == "GOTO"
    assert device.attributes["autopilot_type"] == "emulator"
    assert device.attributes["commands"] == ["arm"]
    assert device.source_time == pytest.approx((BEGIN + 500) / 1000.0)


def test_enu_from_the_first_fix_or_the_given_origin() -> None:
    north = math.radians(LAT + 0.001)  # 0.001 deg of latitude is about 111.3 m
    for origin, expected_north in ((None, 111.3), ((LAT, LON, 30.0), 111.3)):
        vsm = Vsm(origin)
        first = vsm.status(0, latitude=math.radians(LAT), longitude=math.radians(LON),
                           altitude_amsl=30.0)  # fmt: skip
        second = vsm.status(1, latitude=north, longitude=math.radians(LON), altitude_amsl=40.0)
        vsm.feed(first + second)
        far = vsm.world.device("ugcs@test", "SN-2")
        assert far.position is not None
        assert far.position[0] == pytest.approx(0.0, abs=0.01)
        assert far.position[1] == pytest.approx(expected_north, abs=0.2)
        assert far.position[2] == pytest.approx(10.0, abs=0.01)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy's "invalid value in cos" too
@pytest.mark.parametrize(
    "latitude", [math.inf, -math.inf, math.radians(100.0)], ids=["inf", "-inf", "100 deg"]
)
def test_a_fix_off_the_globe_is_no_fix_and_no_origin(latitude: float) -> None:
    vsm = Vsm()
    broken = vsm.status(0, latitude=latitude, longitude=math.radians(LON), altitude_amsl=30.0,
                        heading=math.inf, ground_speed=2.0)  # fmt: skip
    vsm.feed(broken)
    bad = vsm.world.device("ugcs@test", "SN-1")
    assert bad.geodetic is None and bad.position is None and bad.orientation is None
    north = math.radians(LAT + 0.001)
    vsm.feed(vsm.status(1, latitude=math.radians(LAT), longitude=math.radians(LON),
                        altitude_amsl=30.0))  # fmt: skip
    vsm.feed(vsm.status(1, latitude=north, longitude=math.radians(LON), altitude_amsl=30.0))
    good = vsm.world.device("ugcs@test", "SN-2")
    assert good.position is not None  # from the good vehicle's first fix, not the broken one
    assert good.position[1] == pytest.approx(111.3, abs=0.2)
    assert vsm.adapter.origin == pytest.approx((LAT, LON, 30.0))


def test_values_hold_and_na_clears_them() -> None:
    vsm = Vsm()
    vsm.feed(vsm.status(0, altitude_amsl=30.0, ground_speed=2.0))
    vsm.feed(vsm.status(0, ground_speed=3.0))
    t = vsm.world.device("ugcs@test", "SN-1").telemetry
    assert t["altitude_amsl"] == (30.0, "m")  # not sent again: still valid
    assert t["ground_speed"] == (3.0, "m/s")
    vsm.feed(vsm.status(0, altitude_amsl=None))
    assert "altitude_amsl" not in vsm.world.device("ugcs@test", "SN-1").telemetry


def test_one_read_is_one_world_update() -> None:
    vsm = Vsm()
    seen: list[Any] = []
    with vsm.world.subscribe(every_update=True) as feed:
        data = b"".join(vsm.status(i % 2, ms=i, ground_speed=float(i)) for i in range(10))
        assert vsm.feed(data) == 10
        seen = [u for u in feed.pull()]
    assert len(seen) == 1
    assert sorted(vsm.world.tables["ugcs@test"].ids_of(seen[0].slots)) == ["SN-1", "SN-2"]
    assert vsm.world.device("ugcs@test", "SN-1").telemetry["ground_speed"][0] == 8.0
    assert vsm.world.device("ugcs@test", "SN-2").telemetry["ground_speed"][0] == 9.0


def test_unregister_marks_the_vehicle() -> None:
    vsm = Vsm()
    gone = pb.Vsm_message(device_id=vsm.infos[1].device_id)
    gone.unregister_device.SetInParent()
    vsm.feed(codec.encode(gone))
    assert vsm.world.device("ugcs@test", "SN-2").attributes["registered"] is False
    assert vsm.world.device("ugcs@test", "SN-1").attributes["registered"] is True


@pytest.mark.parametrize(
    ("heading", "pitch", "roll", "expected"),
    [
        (math.pi / 2, 0.0, 0.0, (1.0, 0.0, 0.0, 0.0)),  # east: identity
        (0.0, 0.0, 0.0, (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))),  # north
        # east, nose up 90 deg: body x points up = a -90 deg turn about y
        (math.pi / 2, math.pi / 2, 0.0, (math.cos(math.pi / 4), 0.0, -math.sin(math.pi / 4), 0.0)),
        # east, right wing down 90 deg: body y (left) points up = +90 deg about x
        (math.pi / 2, 0.0, math.pi / 2, (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)),
    ],
)
def test_orientation_from_ugcs_angles(
    heading: float, pitch: float, roll: float, expected: tuple[float, ...]
) -> None:
    q = quaternions(np.array([heading]), np.array([pitch]), np.array([roll]))[0]
    assert tuple(q) == pytest.approx(expected, abs=1e-9)


async def test_the_golden_capture_replays_into_the_world() -> None:
    from pathlib import Path

    from robowire.addresses import parse_endpoint
    from robowire.protocols.ugcs import PROTOCOL

    capture = Path(__file__).parents[1] / "data" / "captures" / "ugcs" / "capture_hello_basic.jsonl"
    assert capture.is_file()
    world = World()
    source = PROTOCOL.source(parse_endpoint(f"ugcs:{capture}"))
    await source.run(world)
    device = world.device(source.name, "asd123456")  # the hello world's serial_number
    t = device.telemetry
    # the last values of frames 4-15 (decoded text): armed, altitude_raw 2.5 m, heading 0.4 rad
    assert t["is_armed"] == (1.0, "bool")
    assert t["altitude_raw"] == (2.5, "m")
    assert t["heading"][0] == pytest.approx(math.degrees(0.4), abs=1e-4)
    assert t["main_voltage"] == (13.5, "V")
    assert device.attributes["autopilot_type"] == "my_t"
    assert device.source_time == pytest.approx((BEGIN_HELLO + 10999) / 1000.0)
    # taken in: 1 registration, 6 telemetry reports, 2 availability reports (frames 4 and 9),
    # the unregistration at the end of the file; dropped: the 3 replies to requests that the
    # capture's client sent (ping, arm, mission), which this session never sent
    assert (source.stats.messages_in, source.stats.dropped) == (10, 3)


BEGIN_HELLO = 1795336002989  # frame 2's begin_of_epoch


def test_a_vehicle_registered_again_under_a_new_id_before_the_old_goes_stays_registered() -> None:
    """A VSM that finds a vehicle again registers it under a new id (ids are the session's);
    when the old id's Unregister_device comes after the new registration, the vehicle (its
    serial) is still registered, under its new session id, and the old id is forgotten."""
    vsm = Vsm()
    old = vsm.infos[1]
    again = register(spec("SN-2"), IdCounter(1000), BEGIN)
    msg = again.to_message()
    msg.message_id, msg.response_required = 77, True
    vsm.feed(codec.encode(msg))
    gone = pb.Vsm_message(device_id=old.device_id)
    gone.unregister_device.SetInParent()
    vsm.feed(codec.encode(gone))
    device = vsm.world.device("ugcs@test", "SN-2")
    assert device.attributes["registered"] is True
    assert device.attributes["session_id"] == again.device_id
    assert sorted(vsm.world.tables["ugcs@test"].ids) == ["SN-1", "SN-2"]  # no ghost
    vsm.feed(vsm.status(1, ground_speed=4.0))  # `status(1)` speaks as the old id: unknown now
    assert "ground_speed" not in vsm.world.device("ugcs@test", "SN-2").telemetry
