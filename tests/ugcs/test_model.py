"""The simulated UgCS vehicles: they fly what they are told, at the commanded speeds.

Expected figures are worked out by hand from the commanded values (distances, speeds, rates);
positions are checked with a haversine distance on the reported radians.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robowire.errors import ConfigError
from robowire.protocols.ugcs.adapter import fleet_columns
from robowire.protocols.ugcs.definitions import COMMANDS, FIELDS, MISSION_ITEMS, Params
from robowire.protocols.ugcs.model import Activity, Fleet

R = 6_378_137.0  # m; the test's own Earth radius for metres <-> radians
ORIGIN = (56.9496, 24.1052, 10.0)
NA = None


def wire(fleet: Fleet) -> dict[str, Any]:
    """What `sim ugcs` sends of `fleet`: its telemetry through the adapter's conversion."""
    return fleet_columns(fleet.telemetry())


def ready(count: int = 1, **options: Any) -> Fleet:
    """A fleet with its GPS fixed at t = 0."""
    fleet = Fleet(count, origin=ORIGIN, gps_warmup=(0.0, 0.0), **options)
    fleet.step(0.0)
    return fleet


class Clock:
    """Steps a fleet in fixed ticks (integer count, no float drift) and records telemetry."""

    def __init__(self, fleet: Fleet, dt: float = 0.1) -> None:
        self.fleet = fleet
        self.dt = dt
        self.ticks = 0

    @property
    def now(self) -> float:
        return self.ticks * self.dt

    def run(self, seconds: float, watch: Callable[[float, Mapping[str, Any]], None] | None = None,
            until: Callable[[Mapping[str, Any]], bool] | None = None) -> float:  # fmt: skip
        """Step for `seconds` (or until `until(telemetry)`); returns the time it stopped."""
        for _ in range(round(seconds / self.dt)):
            self.ticks += 1
            self.fleet.step(self.now)
            tel = wire(self.fleet)
            if watch is not None:
                watch(self.now, tel)
            if until is not None and until(tel):
                break
        return self.now


def rad(lat_deg: float, lon_deg: float, north: float, east: float) -> tuple[float, float]:
    """Radians of the point `north`, `east` metres from (lat_deg, lon_deg)."""
    lat = math.radians(lat_deg)
    return lat + north / R, math.radians(lon_deg) + east / (R * math.cos(lat))


def haversine(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    a = math.sin((lat2 - lat1) / 2) ** 2
    a += math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * R * math.asin(math.sqrt(a))


def position(tel: Mapping[str, Any], i: int = 0) -> tuple[float, float]:
    return float(tel["latitude"][i]), float(tel["longitude"][i])


def move(lat: float, lon: float, alt: float, radius: float | None = 1.0,
         wait: float | None = NA) -> tuple[str, Params]:  # fmt: skip
    return ("move", {"turn_type": NA, "latitude": lat, "longitude": lon, "altitude_amsl": alt,
                     "acceptance_radius": radius, "loiter_radius": NA, "wait_time": wait,
                     "heading": NA, "ground_elevation": NA, "follow_terrain": NA})  # fmt: skip


def mission_params(origin: float | None, name: str | None = "square") -> Params:
    return {"altitude_origin": origin, "name": name, "safe_altitude": NA,
            "rth_wait_altitude": NA, "rc_loss_action": NA, "gps_loss_action": NA,
            "low_battery_action": NA, "rth_action": NA}  # fmt: skip


def waypoint(lat: float, lon: float, alt: float, speed: float | None = NA) -> Params:
    return {
        "latitude": lat,
        "longitude": lon,
        "altitude_amsl": alt,
        "acceptance_radius": NA,
        "altitude_origin": NA,
        "ground_speed": speed,
        "vertical_speed": NA,
        "heading": NA,
    }


def take_off(fleet: Fleet, clock: Clock, height: float, i: int = 0) -> None:
    assert fleet.command(i, "arm", {}).ok
    assert fleet.command(i, "takeoff_command", {"relative_altitude": height}).ok
    clock.run(height / fleet.climb_rate + 1.0)


# -- vocabulary -------------------------------------------------------------------------------


def test_fields_and_commands_use_the_sdk_names() -> None:
    names = {spec.name for spec in FIELDS}
    for name in ("latitude", "longitude", "altitude_amsl", "altitude_agl", "heading",
                 "ground_speed", "vertical_speed", "main_voltage", "remaining_power_level",
                 "satellite_count", "gps_fix", "is_armed", "control_mode", "flight_mode",
                 "current_command", "current_mission_id", "home_latitude"):  # fmt: skip
        assert name in names
    semantic = {spec.name: spec.semantic for spec in FIELDS}
    assert semantic["latitude"] == "FIELD_SEMANTIC_LATITUDE"
    assert semantic["main_voltage"] == "FIELD_SEMANTIC_VOLTAGE"
    assert semantic["remaining_power_level"] == "FIELD_SEMANTIC_CAPACITY_LEVEL"
    assert semantic["current_command"] == "FIELD_SEMANTIC_NUMERIC"
    kinds = {spec.name: spec.kind for spec in FIELDS}
    assert (kinds["latitude"], kinds["altitude_amsl"], kinds["gps_fix"]) == ("double", "float",
                                                                             "int")  # fmt: skip
    commands = {spec.name: spec for spec in COMMANDS}
    waypoint_params = [p.name for p in commands["waypoint"].parameters]
    assert waypoint_params == [
        "latitude",
        "longitude",
        "altitude_amsl",
        "acceptance_radius",
        "altitude_origin",
        "ground_speed",
        "vertical_speed",
        "heading",
    ]
    assert [p.name for p in commands["takeoff_command"].parameters] == ["relative_altitude"]
    assert set(MISSION_ITEMS) >= {"move", "wait", "set_speed", "takeoff_mission",
                                  "land_mission", "set_heading", "mission_pause"}  # fmt: skip
    assert not commands["arm"].available_in_mission
    assert commands["mission_upload"].parameters[0].name == "altitude_origin"
    assert commands["mission_upload"].parameters[0].required


def test_telemetry_has_every_field_for_every_vehicle() -> None:
    fleet = ready(7)
    tel = wire(fleet)
    assert list(tel) == [spec.name for spec in FIELDS]
    assert all(len(column) == 7 for column in tel.values())
    assert np.all(tel["is_armed"] == 0) and np.all(tel["remaining_power_level"] == 1.0)
    # parked on a 5 m grid, 3 columns: vehicle 4 is one east, one north of the origin
    lat, lon = position(tel, 4)
    expected = rad(*ORIGIN[:2], north=5.0, east=5.0)
    assert haversine(lat, lon, *expected) < 0.01
    assert tel["altitude_amsl"][4] == pytest.approx(ORIGIN[2])
    assert tel["home_latitude"][4] == pytest.approx(lat)


# -- GPS -------------------------------------------------------------------------------------


def test_gps_warms_up_then_3d_fix_allows_arming() -> None:
    fleet = Fleet(3, origin=ORIGIN, gps_warmup=(4.0, 4.0), seed=5)
    fleet.step(100.0)
    tel = wire(fleet)
    assert np.all(tel["satellite_count"] == 0) and np.all(tel["gps_fix"] == 0)
    assert np.all(np.isnan(tel["latitude"]))  # unknown until a fix: sent as NA
    result = fleet.command(0, "arm", {})
    assert (result.code, result.text) == ("STATUS_FAILED", "no 3D GPS fix")
    assert not fleet.availability()["arm"][0]
    fleet.step(104.0)
    tel = wire(fleet)
    assert np.all(tel["gps_fix"] == 2)  # GPS_FIX_TYPE_3D
    assert np.all((tel["satellite_count"] >= 10) & (tel["satellite_count"] <= 16))
    assert not np.any(np.isnan(tel["latitude"]))
    assert fleet.availability()["arm"][0]
    assert fleet.command(0, "arm", {}).ok


def test_same_seed_same_fleet() -> None:
    a, b, c = (Fleet(20, seed=s) for s in (1, 1, 2))
    for fleet in (a, b, c):
        fleet.step(0.0)
        fleet.step(30.0)
    sats = [wire(f)["satellite_count"] for f in (a, b, c)]
    assert np.array_equal(sats[0], sats[1])
    assert not np.array_equal(sats[0], sats[2])


# -- flight ----------------------------------------------------------------------------------


def test_takeoff_climbs_to_the_relative_altitude_at_the_climb_rate() -> None:
    fleet = ready(2, climb_rate=2.5)
    clock = Clock(fleet)
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(0, "takeoff_command", {"relative_altitude": 12.0}).ok
    seen: dict[float, Mapping[str, Any]] = {}
    clock.run(8.0, watch=lambda t, tel: seen.__setitem__(round(t, 1), tel))
    # 12 m at 2.5 m/s: 4.8 s; half way (6 m) at 2.4 s
    assert seen[2.4]["altitude_agl"][0] == pytest.approx(6.0)
    assert seen[2.4]["vertical_speed"][0] == pytest.approx(2.5)
    assert seen[2.4]["flight_mode"][0] == 3  # FLIGHT_MODE_TAKEOFF
    assert seen[4.7]["altitude_agl"][0] < 12.0
    assert seen[4.8]["altitude_agl"][0] == pytest.approx(12.0)
    assert seen[5.0]["flight_mode"][0] == 4  # FLIGHT_MODE_HOLD
    assert seen[5.0]["vertical_speed"][0] == 0.0
    assert seen[8.0]["altitude_amsl"][0] == pytest.approx(ORIGIN[2] + 12.0)
    assert seen[8.0]["is_armed"][0] == 1 and seen[8.0]["altitude_agl"][1] == 0.0  # other parked


def test_waypoint_flies_straight_at_the_commanded_speed() -> None:
    fleet = ready()
    clock = Clock(fleet)
    take_off(fleet, clock, 10.0)
    start = clock.now
    lat, lon = rad(*ORIGIN[:2], north=0.0, east=80.0)
    assert fleet.command(0, "waypoint", waypoint(lat, lon, ORIGIN[2] + 10.0, speed=8.0)).ok
    mid = clock.run(5.0)
    tel = wire(fleet)
    assert haversine(*position(tel), *rad(*ORIGIN[:2], 0.0, 40.0)) < 0.05  # 8 m/s x 5 s
    assert tel["ground_speed"][0] == pytest.approx(8.0)
    assert tel["heading"][0] == pytest.approx(math.pi / 2)  # due east
    assert tel["target_latitude"][0] == pytest.approx(lat)
    assert tel["control_mode"][0] == 2  # CONTROL_MODE_CLICK_GO
    arrived = clock.run(10.0, until=lambda tel: tel["ground_speed"][0] == 0.0)
    assert arrived - start == pytest.approx(10.0 + 0.1, abs=0.11)  # 80 m / 8 m/s (+ a tick)
    assert haversine(*position(wire(fleet)), lat, lon) < 0.05
    assert mid - start == pytest.approx(5.0)


def test_square_mission_is_flown_at_the_commanded_speeds_and_altitudes() -> None:
    fleet = ready(climb_rate=2.0)
    clock = Clock(fleet)
    home = float(wire(fleet)["home_altitude_amsl"][0])
    alt = home + 20.0
    corners = [(100.0, 0.0), (100.0, 100.0), (0.0, 100.0), (0.0, 0.0)]  # north, east
    points = [rad(*ORIGIN[:2], north=n, east=e) for n, e in corners]
    items = [
        ("set_speed", {"ground_speed": 10.0, "vertical_speed": 2.0}),
        ("takeoff_mission", {"latitude": NA, "longitude": NA, "altitude_amsl": alt,
                             "acceptance_radius": NA, "heading": NA, "climb_rate": NA,
                             "ground_elevation": NA}),
        *(move(lat, lon, alt, radius=1.0) for lat, lon in points),
        ("land_mission", {"latitude": NA, "longitude": NA, "altitude_amsl": NA,
                          "acceptance_radius": NA, "heading": NA, "descent_rate": 4.0,
                          "ground_elevation": NA, "follow_terrain": NA}),
    ]  # fmt: skip
    result = fleet.mission_upload(0, mission_params(home), items)
    assert result.ok, result.text
    assert result.command_map == tuple((k + 1, k) for k in range(len(items)))
    vehicle_id = {index: vid for vid, index in result.command_map}
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(0, "auto", {}).ok

    changes: list[tuple[float, float, Mapping[str, Any]]] = []  # time, new command, telemetry
    speeds: list[float] = []
    previous: list[Mapping[str, Any]] = [wire(fleet)]

    def watch(t: float, tel: Mapping[str, Any]) -> None:
        assert tel["current_mission_id"][0] == result.mission_id
        if tel["current_command"][0] != previous[0]["current_command"][0]:
            changes.append((t, float(tel["current_command"][0]), tel))
        if tel["current_command"][0] in (vehicle_id[3], vehicle_id[4]):
            speeds.append(float(tel["ground_speed"][0]))
        previous[0] = tel

    landed = clock.run(120.0, watch=watch, until=lambda tel: tel["is_armed"][0] == 0)
    # set_speed at once, takeoff (current at auto), then each move, then the landing
    assert [c for _, c, _ in changes] == [vehicle_id[k] for k in (2, 3, 4, 5, 6)]
    assert changes[0][2]["altitude_amsl"][0] == pytest.approx(alt, abs=0.1)  # took off
    # at each later item change the vehicle was within the acceptance radius of the waypoint
    for (_, _, at), (lat, lon) in zip(changes[1:], points, strict=True):
        assert haversine(*position(at), lat, lon) <= 1.0 + 0.01
        assert at["altitude_amsl"][0] == pytest.approx(alt, abs=0.1)
    # the last move is flown to its point before the descent
    assert haversine(*position(changes[-1][2]), *points[-1]) < 0.05
    assert max(speeds) == pytest.approx(10.0)
    # 20 m climb at 2 m/s, 4 x 100 m at 10 m/s (each leg ends 1 m early, the last exactly),
    # 20 m descent at 4 m/s: 10 + 40 + 5 = 55 s
    assert landed == pytest.approx(55.0, abs=0.6)
    tel = wire(fleet)
    assert tel["altitude_agl"][0] == 0.0 and tel["current_command"][0] == vehicle_id[6]
    assert haversine(*position(tel), *points[-1]) < 0.05


def test_wait_items_hold_for_their_time() -> None:
    fleet = ready()
    clock = Clock(fleet)
    take_off(fleet, clock, 10.0)
    alt = ORIGIN[2] + 10.0
    here = position(wire(fleet))
    there = rad(*ORIGIN[:2], north=25.0, east=0.0)
    items = [move(*here, alt), ("wait", {"time": 6.0}), move(*there, alt)]
    result = fleet.mission_upload(0, mission_params(ORIGIN[2]), items)
    assert fleet.command(0, "auto", {}).ok
    start = clock.now
    clock.run(5.0)
    tel = wire(fleet)
    assert tel["current_command"][0] == result.command_map[1][0]  # still waiting
    assert haversine(*position(tel), *here) < 0.05
    done = clock.run(20.0, until=lambda tel: tel["flight_mode"][0] == 4)  # HOLD at the end
    assert done - start == pytest.approx(6.0 + 25.0 / 5.0, abs=0.25)  # cruise speed 5 m/s


def test_pause_holds_position_and_resume_goes_on() -> None:
    fleet = ready()
    clock = Clock(fleet)
    take_off(fleet, clock, 10.0)
    far = rad(*ORIGIN[:2], north=200.0, east=0.0)
    fleet.mission_upload(0, mission_params(ORIGIN[2]), [move(*far, ORIGIN[2] + 10.0)])
    assert not fleet.availability()["mission_pause"][0]
    assert fleet.command(0, "auto", {}).ok
    clock.run(4.0)
    assert fleet.availability()["mission_pause"][0]
    assert fleet.command(0, "mission_pause", {"additional_altitude": NA}).ok
    held = wire(fleet)
    assert held["flight_mode"][0] == 4  # HOLD
    clock.run(10.0)
    tel = wire(fleet)
    assert haversine(*position(tel), *position(held)) < 0.01
    assert tel["ground_speed"][0] == 0.0
    assert tel["current_command"][0] == held["current_command"][0] == 1
    assert fleet.availability()["mission_resume"][0]
    assert fleet.command(0, "mission_resume", {}).ok
    clock.run(40.0, until=lambda tel: tel["flight_mode"][0] == 4)
    assert haversine(*position(wire(fleet)), *far) < 0.05
    # flew 20 m, held 10 s, then 180 m at 5 m/s: 4 + 10 + 36 s after auto
    assert clock.now == pytest.approx(6.0 + 4.0 + 10.0 + 36.0, abs=0.25)


def test_return_to_home_climbs_flies_home_and_lands() -> None:
    fleet = ready(rth_altitude=30.0, climb_rate=2.0, descent_rate=1.5, cruise_speed=5.0)
    clock = Clock(fleet)
    home = position(wire(fleet))
    take_off(fleet, clock, 10.0)
    away = rad(*ORIGIN[:2], north=0.0, east=-100.0)
    assert fleet.command(0, "waypoint", waypoint(*away, ORIGIN[2] + 10.0, speed=10.0)).ok
    clock.run(11.0)
    assert fleet.command(0, "return_to_home", {}).ok
    start = clock.now
    modes: set[float] = set()
    landed = clock.run(120.0, watch=lambda _, tel: modes.add(float(tel["flight_mode"][0])),
                       until=lambda tel: tel["is_armed"][0] == 0)  # fmt: skip
    assert modes >= {1.0}  # FLIGHT_MODE_RTH
    # 20 m up at 2 m/s, 100 m at 5 m/s, 30 m down at 1.5 m/s: 10 + 20 + 20 s
    assert landed - start == pytest.approx(50.0, abs=0.3)
    tel = wire(fleet)
    assert haversine(*position(tel), *home) < 0.05
    assert tel["altitude_agl"][0] == 0.0 and tel["autopilot_status"][0] == 0  # STANDBY
    assert fleet.availability()["arm"][0]


def test_land_and_emergency_land() -> None:
    fleet = ready(2, descent_rate=1.0)
    clock = Clock(fleet)
    take_off(fleet, clock, 6.0, i=0)
    take_off(fleet, clock, 6.0, i=1)
    assert fleet.command(0, "land_command", {}).ok
    assert fleet.command(1, "emergency_land", {}).ok
    assert wire(fleet)["autopilot_status"][1] == 3  # EMERGENCY
    clock.run(3.0)
    tel = wire(fleet)
    assert tel["altitude_agl"][0] == pytest.approx(3.0)  # 1 m/s
    assert tel["altitude_agl"][1] == pytest.approx(0.0)  # twice as fast: down
    assert tel["is_armed"][1] == 0 and tel["flight_mode"][0] == 2  # LAND
    clock.run(3.5)
    assert wire(fleet)["is_armed"][0] == 0


def test_direct_vehicle_control_moves_while_the_sticks_are_held() -> None:
    fleet = ready(cruise_speed=4.0)
    clock = Clock(fleet)
    take_off(fleet, clock, 10.0)
    start = position(wire(fleet))
    sticks = {"pitch": 0.5, "roll": 0.0, "yaw": 0.0, "throttle": 0.0}
    assert fleet.command(0, "direct_vehicle_control", sticks).ok
    clock.run(0.5)
    assert fleet.command(0, "direct_vehicle_control", sticks).ok
    clock.run(3.0)  # sticks fall back to 0 one second after the last command
    tel = wire(fleet)
    assert tel["control_mode"][0] == 3  # JOYSTICK
    # heading north (0), 2 m/s for 1.5 s
    assert haversine(*position(tel), *start) == pytest.approx(3.0, abs=0.05)
    assert tel["ground_speed"][0] == 0.0


# -- power -----------------------------------------------------------------------------------


def test_battery_drains_faster_while_flying() -> None:
    fleet = ready(3, battery_capacity=5.0)
    clock = Clock(fleet)
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(1, "arm", {}).ok
    assert fleet.command(1, "takeoff_command", {"relative_altitude": 2.0}).ok
    clock.run(361.0)
    tel = wire(fleet)
    level = tel["remaining_power_level"]
    # on the ground armed 2 A, disarmed 0.4 A for 361 s; of 5 Ah
    # (reported in whole percent)
    assert level[0] == pytest.approx(1 - 2.0 * 361 / 3600 / 5.0, abs=0.005)
    assert level[2] == pytest.approx(1 - 0.4 * 361 / 3600 / 5.0, abs=0.005)
    # hovering 12 A (+4 A per m/s while climbing 1 s at 2 m/s)
    assert level[1] == pytest.approx(1 - (12.0 * 361 + 8.0 * 1.0) / 3600 / 5.0, abs=0.005)
    assert level[1] < level[0] < level[2]
    assert tel["main_current"][1] == pytest.approx(12.0)
    assert tel["main_voltage"][1] < tel["main_voltage"][0] < tel["main_voltage"][2] <= 16.8


def test_low_battery_returns_home() -> None:
    fleet = ready(battery_capacity=0.05)  # 12 A hover drains 85 % in about 12.8 s
    clock = Clock(fleet)
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(0, "takeoff_command", {"relative_altitude": 5.0}).ok
    clock.run(30.0, until=lambda tel: tel["flight_mode"][0] == 1)
    assert wire(fleet)["remaining_power_level"][0] <= 0.15
    assert 10.0 < clock.now < 14.0


# -- refusals --------------------------------------------------------------------------------


def test_refused_commands_say_why() -> None:
    fleet = ready()
    clock = Clock(fleet)

    def check(name: str, params: Params, code: str, text: str) -> None:
        result = fleet.command(0, name, params)
        assert (result.code, text in result.text) == (code, True), result

    check("takeoff_command", {"relative_altitude": 5.0}, "STATUS_FAILED", "not armed")
    check("disarm", {}, "STATUS_FAILED", "not armed")
    check("auto", {}, "STATUS_FAILED", "no mission")
    check("takeoff_command", {}, "STATUS_INVALID_COMMAND", "missing parameter relative_altitude")
    check("takeoff_command", {"relative_altitude": NA}, "STATUS_INVALID_COMMAND",
          "not available")  # fmt: skip
    check("takeoff_command", {"relative_altitude": "high"}, "STATUS_INVALID_COMMAND", "number")
    check("fly_to_the_moon", {}, "STATUS_INVALID_COMMAND", "unknown command")
    check("move", move(0.1, 0.1, 10.0)[1], "STATUS_INVALID_COMMAND", "mission item")
    check("arm", {"force": True}, "STATUS_INVALID_COMMAND", "unknown parameter")
    assert fleet.command(0, "arm", {}).ok
    check("arm", {}, "STATUS_FAILED", "already armed")
    assert fleet.command(0, "takeoff_command", {"relative_altitude": 5.0}).ok
    clock.run(1.0)
    check("disarm", {}, "STATUS_FAILED", "in flight")
    check("takeoff_command", {"relative_altitude": 5.0}, "STATUS_FAILED", "already flying")
    sticks = {"pitch": 2.0, "roll": 0.0, "yaw": 0.0, "throttle": 0.0}
    check("direct_vehicle_control", sticks, "STATUS_INVALID_COMMAND", "maximum")
    check("mission_resume", {}, "STATUS_FAILED", "no mission")
    far = waypoint(0.0, 0.0, 20.0)
    check("waypoint", far, "STATUS_INVALID_COMMAND", "out of reach")
    assert fleet.command(7, "arm", {}).code == "STATUS_INVALID_SESSION_ID"


def test_refused_missions_say_why() -> None:
    fleet = ready()
    point = rad(*ORIGIN[:2], 10.0, 10.0)

    def upload(params: Params, items: list[Any]) -> tuple[str, str]:
        result = fleet.mission_upload(0, params, items)
        return result.code, result.text

    code, text = upload(mission_params(NA), [move(*point, 20.0)])
    assert code == "STATUS_INVALID_COMMAND" and "altitude_origin" in text
    code, text = upload(mission_params(10.0), [("arm", {})])
    assert code == "STATUS_INVALID_COMMAND" and "not allowed in mission" in text
    code, text = upload(mission_params(10.0), [("teleport", {})])
    assert code == "STATUS_INVALID_COMMAND" and "unregistered mission item" in text
    bad_enum = dict(mission_params(10.0), rth_action=7)
    assert upload(bad_enum, [])[0] == "STATUS_INVALID_COMMAND"
    no_lat = ("move", {**move(*point, 20.0)[1], "latitude": NA})
    code, text = upload(mission_params(10.0), [move(*point, 20.0), no_lat])
    assert code == "STATUS_INVALID_COMMAND" and "latitude" in text
    assert np.isnan(wire(fleet)["current_mission_id"][0])  # nothing was loaded


def test_mission_id_is_a_crc_of_the_content() -> None:
    a, b = ready(), ready()
    p1 = rad(*ORIGIN[:2], 10.0, 0.0)
    p2 = rad(*ORIGIN[:2], 10.0, 0.001)  # 1 mm further east
    first = a.mission_upload(0, mission_params(10.0), [move(*p1, 20.0)])
    again = b.mission_upload(0, mission_params(10.0), [move(*p1, 20.0)])
    moved = a.mission_upload(0, mission_params(10.0), [move(*p2, 20.0)])
    renamed = a.mission_upload(0, mission_params(10.0, name="other"), [move(*p1, 20.0)])
    ids = [r.mission_id for r in (first, again, moved, renamed)]
    assert all(isinstance(i, int) and 0 <= i < 2**32 for i in ids)
    assert ids[0] == ids[1]
    assert len({ids[0], ids[2], ids[3]}) == 3
    assert wire(a)["current_mission_id"][0] == ids[3]  # the last upload is current


def test_mission_clear_forgets_the_mission() -> None:
    fleet = ready()
    fleet.mission_upload(0, mission_params(10.0), [move(*rad(*ORIGIN[:2], 5.0, 5.0), 20.0)])
    assert fleet.availability()["mission_clear"][0]
    assert fleet.command(0, "mission_clear", {}).ok
    assert np.isnan(wire(fleet)["current_mission_id"][0])
    assert fleet.command(0, "mission_clear", {}).code == "STATUS_FAILED"


# -- availability agrees with what commands do -----------------------------------------------

_SIMPLE: dict[str, Params] = {
    "arm": {}, "disarm": {}, "auto": {}, "manual": {}, "guided": {}, "joystick": {},
    "emergency_land": {}, "land_command": {}, "return_to_home": {}, "mission_clear": {},
    "mission_resume": {}, "mission_pause": {"additional_altitude": NA},
    "takeoff_command": {"relative_altitude": 8.0},
    "waypoint": waypoint(*rad(*ORIGIN[:2], 30.0, 20.0), 25.0),
    "direct_vehicle_control": {"pitch": 0.3, "roll": NA, "yaw": 0.2, "throttle": NA},
}  # fmt: skip
_UPLOAD = ("upload", {})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([*_SIMPLE, "upload"]),
                          st.sampled_from([0.0, 0.5, 3.0, 20.0])), max_size=25))  # fmt: skip
def test_availability_predicts_what_a_command_does(steps: list[tuple[str, float]]) -> None:
    fleet = ready()
    now = 0.0
    items = [move(*rad(*ORIGIN[:2], 20.0, 0.0), 25.0), ("wait", {"time": 2.0}),
             move(*rad(*ORIGIN[:2], 0.0, 0.0), 25.0)]  # fmt: skip
    for name, dt in steps:
        now += dt
        fleet.step(now)
        if name == "upload":
            assert fleet.mission_upload(0, mission_params(ORIGIN[2]), items).ok
            continue
        enabled = bool(fleet.availability()[name][0])
        result = fleet.command(0, name, _SIMPLE[name])
        assert result.ok == enabled, (name, result)
        assert result.code in ("STATUS_OK", "STATUS_FAILED")


# -- bad input never raises -------------------------------------------------------------------

_values = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.text(max_size=4),
                    st.floats(allow_nan=True, allow_infinity=True))  # fmt: skip
_names = st.sampled_from([spec.name for spec in COMMANDS] + ["bogus"])
_param_names = st.sampled_from(sorted({p.name for s in COMMANDS for p in s.parameters}))


@settings(max_examples=200, deadline=None)
@given(_names, st.dictionaries(_param_names, _values, max_size=10),
       st.lists(st.tuples(_names, st.dictionaries(_param_names, _values, max_size=10)),
                max_size=3))  # fmt: skip
def test_random_commands_give_a_result_never_an_exception(
    name: str, params: dict[str, Any], items: list[tuple[str, dict[str, Any]]]
) -> None:
    fleet = ready()
    result = fleet.command(0, name, params, items if name == "mission_upload" else ())
    assert result.code in ("STATUS_OK", "STATUS_FAILED", "STATUS_INVALID_COMMAND")
    fleet.step(1.0)
    wire(fleet)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(MISSION_ITEMS)),
                          st.floats(-50, 50), st.floats(-50, 50), st.floats(0, 40)),
                max_size=6),
       st.sampled_from([0.13, 0.2, 0.37, 1.0]))  # fmt: skip
def test_any_valid_mission_flies_to_an_end(
    items: list[tuple[str, float, float, float]], tick: float
) -> None:
    fleet = ready()
    spec = {s.name: s for s in COMMANDS}
    mission = []
    for name, north, east, height in items:
        lat, lon = rad(*ORIGIN[:2], north, east)
        given_values = {"latitude": lat, "longitude": lon, "altitude_amsl": ORIGIN[2] + height,
                        "time": 1.0, "heading": 1.0, "ground_speed": 7.0}  # fmt: skip
        mission.append((name, {p.name: given_values.get(p.name) for p in spec[name].parameters}))
    assert fleet.mission_upload(0, mission_params(ORIGIN[2]), mission).ok
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(0, "auto", {}).ok
    now = 0.0
    for _ in range(round(300 / tick)):  # at most 300 s
        now += tick
        fleet.step(now)
        if fleet.paused[0]:  # a wait without time or a mission_pause item
            if not fleet.command(0, "mission_resume", {}).ok:
                assert fleet.command(0, "auto", {}).ok  # on the ground
        elif fleet.activity[0] != 4:  # no longer Activity.MISSION: the end
            break
    tel = wire(fleet)
    mode = tel["native_flight_mode"][0]
    assert mode in ("HOLD", "IDLE")
    assert np.isfinite(tel["latitude"][0]) and tel["altitude_agl"][0] >= 0.0
    if mode == "HOLD":  # hovering in the air
        assert tel["altitude_agl"][0] >= 1.0 - 0.1
    flown = [name for name, *_ in items if name in ("move", "takeoff_mission", "land_mission")]
    if flown and flown[-1] == "land_mission":  # ends landed and disarmed
        assert (mode, tel["altitude_agl"][0], tel["is_armed"][0]) == ("IDLE", 0.0, 0.0)


# -- many vehicles ----------------------------------------------------------------------------


def test_a_thousand_vehicles_fly_together() -> None:
    fleet = ready(1000)
    for i in range(1000):
        assert fleet.command(i, "arm", {}).ok
        assert fleet.command(i, "takeoff_command", {"relative_altitude": 4.0 + i % 3}).ok
    for k in range(1, 41):
        fleet.step(k * 0.1)
    tel = wire(fleet)
    expected = 4.0 + np.arange(1000) % 3  # 4..6 m at 2 m/s: all up within 3 s
    assert tel["altitude_agl"] == pytest.approx(expected)
    assert np.all(tel["flight_mode"] == 4)


# -- settings ---------------------------------------------------------------------------------


def test_settings_from_the_command_line() -> None:
    fleet = Fleet.from_settings(
        2, {"origin": "47.5,8.25,400", "cruise_speed": "12", "gps_warmup": "1,3", "other": "x"}
    )
    assert fleet.origin == (47.5, 8.25, 400.0) and fleet.cruise_speed == 12.0
    fleet.step(0.0)
    fleet.step(3.0)
    tel = wire(fleet)
    assert math.degrees(tel["latitude"][0]) == pytest.approx(47.5)
    assert tel["altitude_amsl"][0] == 400.0
    for bad in ({"origin": "47.5,8.25"}, {"origin": "95,0,0"}, {"climb_rate": "fast"},
                {"climb_rate": "0"}, {"descent_rate": "-1"}, {"cruise_speed": "nan"}):  # fmt: skip
        with pytest.raises(ConfigError, match="ugcs sim: "):
            Fleet.from_settings(1, bad)


# -- the example mission of the docs ------------------------------------------------------------

EXAMPLE = Path(__file__).parents[2] / "examples" / "ugcs-square.json"


def from_example(data: dict[str, Any], home_altitude: float) -> tuple[Params, list[Any]]:
    """The documented mission file form (user units: degrees) as wire-unit parameters."""
    spec = {s.name: s for s in COMMANDS}

    def wire(name: str, given: Mapping[str, Any]) -> Params:
        out: dict[str, Any] = {p.name: None for p in spec[name].parameters}
        for key, value in given.items():
            assert key in out, (name, key)
            radians = key in ("latitude", "longitude", "heading")
            out[key] = math.radians(value) if radians else value
        return out

    attributes = {"altitude_origin": home_altitude, **data["attributes"]}
    items: list[Any] = []
    speed = None
    for point in data["waypoints"]:
        point = dict(point)
        name = point.pop("command", "move")
        if name == "move":
            point["altitude_amsl"] = point.pop("altitude")
            new = point.pop("speed", None)
            if new is not None and new != speed:
                items.append(("set_speed", wire("set_speed", {"ground_speed": new})))
                speed = new
        items.append((name, wire(name, point)))
    return wire("mission_upload", attributes), items


@pytest.mark.parametrize("tick", [0.1, 0.17, 0.2, 0.5])  # 0.2: the sim's 5 Hz; 0.17: uneven
def test_the_example_mission_flies_on_the_default_fleet(tick: float) -> None:
    fleet = ready()
    clock = Clock(fleet, tick)
    params, items = from_example(json.loads(EXAMPLE.read_text()), ORIGIN[2])
    result = fleet.mission_upload(0, params, items)
    assert result.ok, result.text
    assert fleet.command(0, "arm", {}).ok and fleet.command(0, "auto", {}).ok
    top: list[float] = []
    clock.run(200.0, watch=lambda _, tel: top.append(float(tel["altitude_agl"][0])),
              until=lambda tel: tel["is_armed"][0] == 0)  # fmt: skip
    # 30 m up at 3 m/s; 2 x 100 m at 8 m/s, 3 s wait, 2 x 100 m at 5 m/s (legs end up to 2 m
    # early); 30 m down at 2 m/s: 10 + 25 + 3 + 40 + 15 = 93 s
    assert clock.now == pytest.approx(93.0, abs=1.5)
    assert max(top) == pytest.approx(30.0)
    assert wire(fleet)["altitude_agl"][0] == 0.0  # landed, and so disarmed
    lat, lon = position(wire(fleet))
    assert haversine(lat, lon, math.radians(ORIGIN[0]), math.radians(ORIGIN[1])) < 2.01


def test_a_long_gap_between_steps_overshoots_nothing() -> None:
    fleet = ready(battery_capacity=1000.0)  # 12 A for a day: 288 Ah
    assert fleet.command(0, "arm", {}).ok
    assert fleet.command(0, "takeoff_command", {"relative_altitude": 7.0}).ok
    fleet.step(0.1)
    lat, lon = rad(*ORIGIN[:2], north=300.0, east=400.0)
    fleet.step(5.0)
    assert fleet.command(0, "waypoint", waypoint(lat, lon, ORIGIN[2] + 7.0)).ok
    fleet.step(86_400.0)  # a day later (the host slept)
    tel = wire(fleet)
    assert haversine(*position(tel), lat, lon) < 0.05
    assert tel["altitude_agl"][0] == pytest.approx(7.0)
    assert tel["remaining_power_level"][0] == pytest.approx(1 - 12.0 * 24 / 1000.0, abs=0.01)


def test_throttle_down_onto_the_ground_lands() -> None:
    fleet = ready(descent_rate=1.0)
    clock = Clock(fleet)
    take_off(fleet, clock, 2.0)
    sticks = {"pitch": 0.0, "roll": 0.0, "yaw": 0.0, "throttle": -1.0}
    for _ in range(3):  # 1 m/s down, re-sent every 0.6 s (the sticks hold for 1 s)
        assert fleet.command(0, "direct_vehicle_control", sticks).ok
        clock.run(0.6)
    clock.run(0.5)  # 2 m down at 2.0 s
    tel = wire(fleet)
    assert tel["altitude_agl"][0] == 0.0 and tel["is_armed"][0] == 0
    assert tel["native_flight_mode"][0] == "IDLE"


def test_a_patrol_loops_its_square_until_a_command_and_lands_for_a_fresh_battery() -> None:
    fleet = Fleet(2, patrol=40.0, gps_warmup=(1.0, 1.0))
    corners = np.array([(0, 0), (40, 0), (40, 40), (0, 40)])
    visits = np.zeros(4, dtype=int)  # steps spent within 2.5 m of each corner at 20 m
    t = 0.0
    while t < 200.0:  # a lap is 160 m at 5 m/s: 32 s; several laps
        fleet.step(t)
        t += 0.1
        if abs(fleet.alt[0] - 10.0 - 20.0) < 0.1:
            near = np.hypot(*(corners - (fleet.east[0], fleet.north[0])).T) < 2.5
            visits += near
    assert (visits >= 20).all(), visits  # every corner, lap after lap (about 10 a pass)
    assert fleet.alt[1] == pytest.approx(10.0 + 22.0)  # the next vehicle flies 2 m higher
    assert fleet.activity[0] == Activity.MISSION and fleet.armed.all()
    fleet.charge[0] = 0.16  # near the low-battery level: home, land, a fresh battery, again
    while fleet.charge[0] < 0.5:
        fleet.step(t)
        t += 0.1
    assert fleet.airborne[0] or fleet.armed[0]
    assert fleet.command(0, "return_to_home", {}).ok  # the pilot takes over: patrol ends
    for _ in range(1000):
        fleet.step(t)
        t += 0.1
    assert not fleet.armed[0] and fleet.activity[0] == Activity.IDLE
    assert fleet.patrolling.tolist() == [False, True]
