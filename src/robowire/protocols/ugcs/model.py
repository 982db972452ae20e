"""The UgCS simulator: a fleet of multicopters that really fly (numpy, one row per vehicle).
Pure: no clocks (time is an argument), no sockets, no protobuf, no asyncio.

The VSM session registers the vocabulary of `definitions.py` and drives a `Fleet`:

* `Fleet(count, *, origin=(lat_deg, lon_deg, alt_amsl_m), seed=0, ...)`, or
  `Fleet.from_settings(count, settings, seed=...)` from `--set k=v` text (`SETTINGS`):
  - `step(now)` integrates every vehicle to `now` (seconds, any monotonic origin);
  - `command(index, name, params, items=()) -> Result`: one UgCS command for vehicle
    `index` at the time of the last `step`; `params` maps every registered parameter name
    to its value in wire units (radians, metres, m/s; None = META_VALUE_NA); `items` are the
    mission items of a `mission_upload` as `(name, params)` pairs;
    `mission_upload(index, params, items)` is the same as `command(index, "mission_upload",
    params, items)`;
  - `telemetry() -> dict[str, NDArray]`: one column per field of `FIELDS`, `count` rows, in
    world units: the fields' units but degrees for their angles (latitude, longitude,
    heading, course, roll, pitch, as the world and the UCS adapter have them); the
    adapter's `fleet_columns` converts them to the wire's, the one place the sink's world
    columns are converted too; float64 with NaN for "not available" (the VSM sends
    META_VALUE_NA), also for int and bool fields (whole numbers, 0/1: convert when
    encoding), except STRING fields, which are object arrays of `str | None`;
  - `availability() -> dict[str, NDArray[bool]]`: `is_enabled` per command per vehicle
    (every command of `COMMANDS` is `is_available`);
  - `serial(index)` -- the vehicle's serial number.
* `Result` (from `definitions.py`): what a command did.

What stays in wire units here, and why: commands. Their parameters arrive as the UCS sends
them (radians, `params` above) and their `Result`s are replies only a VSM gives: no sink
takes commands (a world device served as a UgCS vehicle registers none), so there is no
second conversion to share.

Facts from `shared/protocols/ugcs.md` (sections 3.3-3.6) and the SDK's `Vehicle` class (command
and parameter names, which are mission items, the semantic a name gets by default). Units on
the wire: latitude/longitude radians, heading radians 0..2pi clockwise from north, altitudes
metres, speeds m/s, voltage V, current A, remaining_power_level 0..1.

Our own choices (not from any source):

* The ground is flat at the origin's altitude; vehicles park on a square grid `spacing` m apart
  (east, then north) starting at the origin, home = parking spot.
* Kinematic flight: horizontal motion straight toward the target at the commanded ground
  speed, vertical motion at the commanded vertical speed, both at once, no acceleration; the
  nose points along the motion unless a heading was commanded. Position in local east/north
  metres, converted to latitude/longitude with the small-distance (equirectangular) formula.
* A target counts as reached within its acceptance radius horizontally and `ALT_TOLERANCE`
  vertically; the vehicle goes on to the exact point when it is the last one.
* Altitudes in commands: `altitude_amsl - altitude_origin` is the height above home (the
  SDK's vehicles fly relative to the take-off point); without `altitude_origin` the altitude
  is taken as AMSL.
* Battery: 4S LiPo of `battery_capacity` Ah; current 0.4 A disarmed, 2 A armed on the
  ground, 12 A hovering + 0.8 A per m/s ground speed + 4 A per m/s climb; voltage
  4 x (3.3 + 0.9 x charge) V less 0.02 ohm x current. Below 15 % in the air the vehicle does
  the mission's `low_battery_action` (return home by default) once. Reported as a MAVLink
  autopilot does: voltage and current to 0.01 V / A, the level in whole percent (so that a
  VSM sending only changes does not resend them at every step).
* GPS: satellites climb from 0 to 10..16 (seeded per vehicle) over a warm-up of
  `gps_warmup` seconds (seeded per vehicle) from the first step; fix NONE below 4
  satellites, 2D below 6, 3D from 6. Position telemetry is NA below 4 satellites. Arming
  needs a 3D fix.
* Landing disarms the vehicle at touchdown.
* `direct_vehicle_control`: pitch +1 = full `cruise_speed` forward, roll +1 = right,
  yaw +1 = turn clockwise at 90 deg/s, throttle +1 = climb at `climb_rate` (-1 descends at
  `descent_rate`); the sticks fall back to 0 after `DIRECT_TIMEOUT` s without a command.
  Throttle down onto the ground lands (and disarms).
* Mission items get vehicle command ids `FIRST_COMMAND_ID + index` (reported as
  `current_command`). `wait` without a time, and the `mission_pause` item, pause the mission
  until `mission_resume`. `move`'s turn_type, loiter_radius, ground_elevation and
  follow_terrain are checked but not simulated (every turn stops and turns; flat ground).
  Targets in the air are raised to at least `MIN_HEIGHT` above the ground.
* `patrol=SIDE` (metres, 0 = off, the default): each vehicle flies a looping mission by itself
  (what `robowire demo` shows): once it has a 3D fix it takes off to `PATROL_HEIGHT` m above
  home (2 m higher per vehicle, up to 10 vehicles, so that they do not collide), flies the
  square of side SIDE whose south-west corner is its home, and starts the square again at its
  end. Landed (low battery: return home), it gets a fresh battery and starts again. Any command
  to a vehicle ends its patrol: the pilot has taken over.

Size: one module over 600 lines because it is one thing, `Fleet`: every command handler,
the mission runner and the integrator read and write the same per-vehicle arrays, so they stay
methods of the one class (the vocabulary and the command checker are `definitions.py`).
"""

from __future__ import annotations

import enum
import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire import endpoints
from robowire.errors import ConfigError
from robowire.protocols.ugcs.definitions import (
    COMMAND_BY_NAME,
    COMMAND_NAMES,
    MISSION_ITEMS,
    OK,
    InvalidCommand,
    MissionItem,
    Params,
    Result,
    all_params,
    failed,
    invalid,
    parse_params,
)
from robowire.wire import SITE

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
AnyFloats = npt.NDArray[np.floating[Any]]

EARTH_RADIUS = 6_378_137.0  # m, WGS84 equatorial
ALT_TOLERANCE = 0.1  # m, vertical distance that counts as "at the target altitude"
POSITION_TOLERANCE = 0.05  # m, horizontal distance that counts as "at the point"
DIRECT_TIMEOUT = 1.0  # s, sticks fall back to 0 without a new direct_vehicle_control
MAX_YAW_RATE = math.pi / 2  # rad/s at yaw = 1
LOW_BATTERY = 0.15  # charge at which the low-battery action runs (airborne)
CRITICAL_BATTERY = 0.20  # autopilot_status CRITICAL below this charge
MAX_DISTANCE = 100_000.0  # m from the origin: targets farther are refused
FIRST_COMMAND_ID = 1  # vehicle command id of mission item 0
MAX_SUBSTEPS = 400  # per `step` call (100 s of flight at the default max_step)
MIN_HEIGHT = 1.0  # m above the ground: lower targets in the air are raised to it
PATROL_HEIGHT = 20.0  # m above home of the first vehicle's patrol

# -- vehicle state ----------------------------------------------------------------------------


class Activity(enum.IntEnum):
    """What a vehicle is doing (one per row; `native_flight_mode` reports the name)."""

    IDLE = 0  # on the ground
    HOLD = 1  # hovering in place (also paused missions, guided/manual/joystick without input)
    TAKEOFF = 2
    GOTO = 3  # flying to a `waypoint` command's point
    MISSION = 4
    RTH_CLIMB = 5
    RTH_FLY = 6
    RTH_LAND = 7
    LAND = 8
    EMERGENCY = 9
    DIRECT = 10  # direct_vehicle_control


class Phase(enum.IntEnum):
    """Where a vehicle running a mission is within its current item."""

    FLY = 0  # toward the item's point
    WAIT = 1  # until `wait_until`
    DESCEND = 2  # land_mission: down to the ground


_NATIVE = np.array([a.name for a in Activity], dtype=object)
_FLIGHT_MODE = {  # Flight_mode: WAYPOINTS 0, RTH 1, LAND 2, TAKEOFF 3, HOLD 4; NaN = NA
    Activity.IDLE: math.nan, Activity.HOLD: 4, Activity.TAKEOFF: 3, Activity.GOTO: 0,
    Activity.MISSION: 0, Activity.RTH_CLIMB: 1, Activity.RTH_FLY: 1, Activity.RTH_LAND: 1,
    Activity.LAND: 2, Activity.EMERGENCY: 2, Activity.DIRECT: 4,
}  # fmt: skip
_FLIGHT_MODE_TABLE = np.array([_FLIGHT_MODE[a] for a in Activity], dtype=np.float64)
MANUAL, AUTO, CLICK_GO, JOYSTICK = 0, 1, 2, 3  # Control_mode
_NAVIGATING = (Activity.TAKEOFF, Activity.GOTO, Activity.MISSION, Activity.RTH_CLIMB,
               Activity.RTH_FLY, Activity.RTH_LAND, Activity.LAND, Activity.EMERGENCY)  # fmt: skip
_LANDING = (Activity.RTH_LAND, Activity.LAND, Activity.EMERGENCY)


@dataclass(slots=True, kw_only=True)
class Mission:
    """An uploaded mission, already checked: items as (name, parsed parameters)."""

    mission_id: int
    altitude_origin: float
    items: list[tuple[str, dict[str, Any]]]
    safe_altitude: float = math.nan
    rth_wait_altitude: float = math.nan
    low_battery_action: int = 0
    rth_action: int = 0
    name: str | None = None
    command_map: tuple[tuple[int, int], ...] = field(default=())


class Fleet:
    """State of `count` simulated multicopters; `step(now)` flies all of them to `now`.

    Rows are vehicles (`index` 0..count-1). The arrays are public for the VSM and tests to
    read; change them only through `command`.
    """

    def __init__(
        self,
        count: int,
        *,
        origin: tuple[float, float, float] = SITE,
        seed: int = 0,
        patrol: float = 0.0,
        spacing: float = 5.0,
        gps_warmup: tuple[float, float] = (2.0, 5.0),
        cruise_speed: float = 5.0,
        climb_rate: float = 2.0,
        descent_rate: float = 1.5,
        rth_altitude: float = 30.0,
        acceptance_radius: float = 2.0,
        battery_capacity: float = 5.2,
        max_step: float = 0.25,
    ) -> None:
        if count < 0:
            raise ValueError("count must not be negative")
        n = count
        self.count = n
        self.origin = origin
        self.seed = seed
        self.cruise_speed = cruise_speed
        self.climb_rate = climb_rate
        self.descent_rate = descent_rate
        self.rth_altitude = rth_altitude
        self.acceptance_radius = acceptance_radius
        self.battery_capacity = battery_capacity
        self.max_step = max_step
        self.patrol = patrol
        self.patrolling = np.full(n, patrol > 0)  # flies `patrol` until a command comes
        self.time: float | None = None  # of the last step
        self.start: float | None = None  # of the first step (GPS warm-up)
        lat0 = math.radians(origin[0])
        self._lat0 = lat0
        self._lon0 = math.radians(origin[1])
        self._east_scale = EARTH_RADIUS * math.cos(lat0)  # m per radian of longitude
        rng = np.random.default_rng(seed)
        cols = max(1, math.ceil(math.sqrt(n)))
        k = np.arange(n)
        # position: east, north (m from the origin), altitude AMSL (m)
        self.east = (k % cols) * float(spacing)
        self.north = (k // cols) * float(spacing)
        self.ground = np.full(n, float(origin[2]))
        self.alt = self.ground.copy()
        self.home = np.stack([self.east, self.north, self.alt], axis=1)  # (n, 3)
        self.velocity = np.zeros((n, 3))  # east, north, up m/s over the last step
        self.heading = np.zeros(n)  # rad, clockwise from north
        self.heading_hold = np.full(n, math.nan)  # commanded heading, NaN = along the motion
        self._allocate(n)
        # power and GPS
        self.charge = np.ones(n)  # 0..1
        self.current = np.full(n, 0.4)  # A
        self.satellites_max = rng.integers(10, 17, size=n).astype(np.float64)
        low, high = gps_warmup
        self.gps_warmup = rng.uniform(low, high, size=n) if high > low else np.full(n, low)

    def _allocate(self, n: int) -> None:
        """The per-vehicle state arrays, every vehicle parked, idle and without a mission."""
        cruise_speed, climb_rate = self.cruise_speed, self.climb_rate
        # state
        self.armed = np.zeros(n, dtype=bool)
        self.airborne = np.zeros(n, dtype=bool)
        self.activity = np.zeros(n, dtype=np.int64)  # Activity
        self.control_mode = np.zeros(n, dtype=np.int64)  # Control_mode
        self.emergency = np.zeros(n, dtype=bool)
        self.low_battery_done = np.zeros(n, dtype=bool)
        # navigation target (local metres, AMSL), speeds and acceptance radius
        self.target = self.home.copy()
        self.pending = np.zeros(n, dtype=bool)  # an arrival at `target` is awaited
        self.speed = np.full(n, cruise_speed)  # horizontal, m/s
        self.vspeed = np.full(n, climb_rate)  # vertical, m/s
        self.radius = np.full(n, self.acceptance_radius)
        # direct control: body-frame sticks (forward, right, yaw, throttle) and their deadline
        self.sticks = np.zeros((n, 4))
        self.sticks_until = np.zeros(n)
        # missions
        self.missions: list[Mission | None] = [None] * n
        self.item = np.full(n, -1, dtype=np.int64)  # current item index, -1 = not started
        self.phase = np.zeros(n, dtype=np.int64)  # Phase
        self.wait_until = np.full(n, math.inf)
        self.paused = np.zeros(n, dtype=bool)
        self.mission_speed = np.full(n, cruise_speed)
        self.mission_vspeed = np.full(n, climb_rate)
        self.current_command = np.full(n, math.nan)
        self.mission_id = np.full(n, math.nan)
        self.altitude_origin = np.full(n, math.nan)

    @classmethod
    def from_settings(
        cls, count: int, settings: Mapping[str, str], *, seed: int = 0, where: str = "ugcs sim"
    ) -> Fleet:
        """A fleet with the `SETTINGS` that `settings` names (`--set k=v`, URL options):
        `origin=LAT,LON,ALT` (degrees, degrees, metres AMSL), `gps_warmup=S` or `MIN,MAX`, the
        rest one non-negative number each. ConfigError names a bad one."""
        given: dict[str, Any] = {}
        for key, text in settings.items():
            if key not in SETTINGS:
                continue
            if key == "origin":
                given[key] = endpoints.place(text, key, where)
                continue
            numbers = endpoints.numbers(text, key, where)
            if any(x < 0 for x in numbers):
                raise ConfigError(f"{where}: {key} must not be negative, not {text!r}")
            if key == "gps_warmup" and len(numbers) in (1, 2):
                given[key] = (numbers[0], numbers[-1])
            elif len(numbers) == 1 and (numbers[0] > 0 or key in ("spacing", "patrol")):
                given[key] = numbers[0]
            else:
                raise ConfigError(f"{where}: {key} must be one positive number, not {text!r}")
        return cls(count, seed=seed, **given)

    # -- public API ---------------------------------------------------------------------------

    def serial(self, index: int) -> str:
        """Vehicle `index`'s serial number (`vehicle_serial`): SIM-0001, SIM-0002, ..."""
        return f"SIM-{index + 1:04d}"

    def step(self, now: float) -> None:
        """Fly every vehicle from the last step to `now` (seconds, monotonic), in steps of at
        most `max_step` (longer ones after a gap of more than `MAX_SUBSTEPS` of them)."""
        if self.time is None:
            self.time = self.start = now
            return
        total = now - self.time
        if total <= 0.0:
            return
        # at most MAX_SUBSTEPS per call: after a long gap (a suspended host) the flight is
        # integrated in longer steps, still without overshooting any target
        steps = min(MAX_SUBSTEPS, max(1, math.ceil(total / self.max_step)))
        dt = total / steps
        start = self.time
        for k in range(1, steps + 1):
            self.time = start + k * dt
            self._advance(dt)
        self.time = now
        if self.patrolling.any():
            self._patrol()

    def command(
        self,
        index: int,
        name: str,
        params: Params | None = None,
        items: Sequence[MissionItem] = (),
    ) -> Result:
        """Run UgCS command `name` for vehicle `index` now (the time of the last step).
        A patrolling vehicle stops patrolling: the pilot has taken over."""
        if not 0 <= index < self.count:
            return Result(code="STATUS_INVALID_SESSION_ID", text=f"no vehicle {index}")
        self.patrolling[index] = False
        return self._command(index, name, params, items)

    def _command(
        self, index: int, name: str, params: Params | None, items: Sequence[MissionItem] = ()
    ) -> Result:
        spec = COMMAND_BY_NAME.get(name)
        if spec is None:
            return invalid(f"unknown command {name!r}")
        mission: Mission | None = None
        try:
            values = parse_params(spec, params or {})
            if name == "mission_upload":
                mission = self._parse_mission(values, items)
            elif items:
                raise InvalidCommand(f"{name}: only mission_upload takes mission items")
        except InvalidCommand as error:
            return invalid(str(error))
        if mission is not None:
            return self._upload(index, mission)
        handler = getattr(self, "_do_" + name, None)
        if handler is None:  # a mission item sent as a command
            return invalid(f"{name} is a mission item, not a command")
        try:
            result: Result = handler(index, values)
        except InvalidCommand as error:
            return invalid(str(error))
        return result

    def mission_upload(self, index: int, params: Params, items: Sequence[MissionItem]) -> Result:
        """`command(index, "mission_upload", params, items)`."""
        return self.command(index, "mission_upload", params, items)

    def telemetry(self) -> dict[str, npt.NDArray[Any]]:
        """Every field of `FIELDS` for every vehicle, in world units (angles in degrees; the
        adapter's `fleet_columns` gives the wire's radians) (NaN / None = NA): where
        and how it flies (`_flight`), its power, links and modes, and its home and target
        (`_places`)."""
        n = self.count
        sats = self._satellites()
        has_position = sats >= 4
        fix = np.where(sats >= 6, 2.0, np.where(sats >= 4, 1.0, 0.0))  # Gps_fix_type
        status = np.where(self.armed, 1.0, 0.0)  # Autopilot_status STANDBY / ACTIVE
        status = np.where(self.charge < CRITICAL_BATTERY, 2.0, status)
        status = np.where(self.emergency, 3.0, status)
        ones = np.ones(n)
        return {
            **self._flight(has_position),
            "main_voltage": np.round(4.0 * (3.3 + 0.9 * self.charge) - 0.02 * self.current, 2),
            "main_current": np.round(self.current, 2),
            "remaining_power_level": np.round(self.charge, 2),
            "satellite_count": sats,
            "gps_fix": fix,
            "rc_link_quality": np.full(n, math.nan),
            "gcs_link_quality": ones.copy(),
            "downlink_present": ones.copy(),
            "uplink_present": ones.copy(),
            "is_armed": self.armed.astype(np.float64),
            "fence_enabled": np.zeros(n),
            "control_mode": self.control_mode.astype(np.float64),
            "flight_mode": _FLIGHT_MODE_TABLE[self.activity],
            "native_flight_mode": _NATIVE[self.activity],
            "autopilot_status": status,
            **self._places(has_position),
        }

    def _flight(self, has_position: BoolArray) -> dict[str, npt.NDArray[Any]]:
        """Position, altitudes, heading, speeds and attitude (no position without a 3D fix)."""
        nan = np.full(self.count, math.nan)
        lat, lon = self._geodetic(self.east, self.north)
        ve, vn, vu = self.velocity[:, 0], self.velocity[:, 1], self.velocity[:, 2]
        ground_speed = np.hypot(ve, vn)
        moving = ground_speed > 0.05
        course = np.where(moving, np.mod(np.arctan2(ve, vn), math.tau), self.heading)
        forward = ve * np.sin(self.heading) + vn * np.cos(self.heading)
        right = ve * np.cos(self.heading) - vn * np.sin(self.heading)
        pitch = np.where(self.airborne, -np.clip(0.03 * forward, -0.5, 0.5), 0.0)
        roll = np.where(self.airborne, np.clip(0.03 * right, -0.5, 0.5), 0.0)
        return {
            "latitude": np.where(has_position, np.degrees(lat), nan),
            "longitude": np.where(has_position, np.degrees(lon), nan),
            "altitude_amsl": np.where(has_position, self.alt, nan),
            "altitude_agl": self.alt - self.ground,
            "altitude_raw": self.alt - self.home[:, 2],
            "altitude_origin": self.altitude_origin.copy(),
            "heading": np.degrees(self.heading),
            "course": np.degrees(course),
            "ground_speed": ground_speed,
            "air_speed": ground_speed.copy(),
            "vertical_speed": vu.copy(),
            "roll": np.degrees(roll),
            "pitch": np.degrees(pitch),
        }

    def _places(self, has_position: BoolArray) -> dict[str, npt.NDArray[Any]]:
        """Home, the target while navigating or holding in the air, and the mission's place."""
        nan = np.full(self.count, math.nan)
        home_lat, home_lon = self._geodetic(self.home[:, 0], self.home[:, 1])
        target_lat, target_lon = self._geodetic(self.target[:, 0], self.target[:, 1])
        navigating = np.isin(self.activity, _NAVIGATING) | (self.activity == Activity.HOLD)
        navigating &= self.airborne
        show_target = navigating & has_position
        home_alt = self.home[:, 2]
        return {
            "home_latitude": np.where(has_position, np.degrees(home_lat), nan),
            "home_longitude": np.where(has_position, np.degrees(home_lon), nan),
            "home_altitude_amsl": np.where(has_position, home_alt, nan),
            "home_altitude_raw": np.zeros(self.count),
            "target_latitude": np.where(show_target, np.degrees(target_lat), nan),
            "target_longitude": np.where(show_target, np.degrees(target_lon), nan),
            "target_altitude_amsl": np.where(show_target, self.target[:, 2], nan),
            "target_altitude_raw": np.where(navigating, self.target[:, 2] - home_alt, nan),
            "current_command": self.current_command.copy(),
            "current_mission_id": self.mission_id.copy(),
        }

    def availability(self) -> dict[str, BoolArray]:
        """`is_enabled` of every command of `COMMANDS` per vehicle (mission items: always)."""
        armed, airborne = self.armed, self.airborne
        activity = self.activity
        fix3d = self._satellites() >= 6
        loaded = ~np.isnan(self.mission_id)
        running = activity == Activity.MISSION
        landing = np.isin(activity, _LANDING)
        rth = np.isin(activity, (Activity.RTH_CLIMB, Activity.RTH_FLY, Activity.RTH_LAND))
        always = np.ones(self.count, dtype=bool)
        enabled = {
            "arm": ~armed & fix3d & (self.charge > 0.0),
            "disarm": armed & ~airborne,
            "auto": armed & loaded & ~running & ~landing,
            "manual": armed.copy(),
            "guided": airborne.copy(),
            "joystick": airborne.copy(),
            "direct_vehicle_control": airborne & (activity != Activity.EMERGENCY),
            "emergency_land": airborne & (activity != Activity.EMERGENCY),
            "land_command": airborne & ~landing,
            "takeoff_command": armed & ~airborne,
            "return_to_home": airborne & ~rth & (activity != Activity.EMERGENCY),
            "mission_upload": always.copy(),
            "mission_clear": loaded & ~running,
            "mission_pause": running.copy(),
            "mission_resume": loaded & self.paused & airborne,
            "waypoint": airborne & (activity != Activity.EMERGENCY),
        }
        for name in MISSION_ITEMS:
            enabled.setdefault(name, always.copy())
        return {name: enabled[name] for name in COMMAND_NAMES}

    # -- patrol ------------------------------------------------------------------------------

    def _patrol(self) -> None:
        """Patrolling vehicles on the ground with a 3D fix get a fresh battery, their patrol
        mission, arm and start it; airborne ones past its last corner start the loop again."""
        ready = self.patrolling & ~self.armed & (self.activity == Activity.IDLE)
        ready &= self._satellites() >= 6
        for i in np.flatnonzero(ready).tolist():
            self.charge[i] = 1.0
            result = self._command(i, "mission_upload", *self._patrol_mission(i))
            if result.ok and self._command(i, "arm", {}).ok:
                self._command(i, "auto", {})
        looped = self.patrolling & self.airborne & (self.activity == Activity.HOLD)
        for i in np.flatnonzero(looped).tolist():
            mission = self.missions[i]
            if mission is not None and self.item[i] == len(mission.items):
                self.activity[i] = Activity.MISSION
                self._next_item(i, 1)  # the first corner again (item 0 is the take-off)

    def _patrol_mission(self, i: int) -> tuple[Params, list[MissionItem]]:
        """A take-off, then the square of side `patrol` whose south-west corner is the
        vehicle's home, at `PATROL_HEIGHT` m above it (higher by 2 m per vehicle up to 10)."""
        east, north, home = (float(x) for x in self.home[i])
        side, height = self.patrol, PATROL_HEIGHT + 2.0 * (i % 10)
        corners = ((side, 0.0), (side, side), (0.0, side), (0.0, 0.0))
        items: list[MissionItem] = [
            ("takeoff_mission", all_params("takeoff_mission", altitude_amsl=home + height))
        ]
        for de, dn in corners:
            lat, lon = self._geodetic(np.array(east + de), np.array(north + dn))
            items.append(("move", all_params(
                "move", latitude=float(lat), longitude=float(lon), altitude_amsl=home + height
            )))  # fmt: skip
        return all_params("mission_upload", altitude_origin=home, name="patrol"), items

    # -- geometry -----------------------------------------------------------------------------

    def _geodetic(self, east: AnyFloats, north: AnyFloats) -> tuple[AnyFloats, AnyFloats]:
        """(latitude, longitude) in radians of local east/north metres."""
        return self._lat0 + north / EARTH_RADIUS, self._lon0 + east / self._east_scale

    def _local(self, latitude: float, longitude: float) -> tuple[float, float]:
        """(east, north) metres of a point in radians."""
        return ((longitude - self._lon0) * self._east_scale,
                (latitude - self._lat0) * EARTH_RADIUS)  # fmt: skip

    def _satellites(self) -> FloatArray:
        if self.time is None or self.start is None:
            return np.zeros(self.count)
        elapsed = self.time - self.start
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(self.gps_warmup > 0, elapsed / self.gps_warmup, 1.0)
        result: FloatArray = np.floor(self.satellites_max * np.clip(share, 0.0, 1.0))
        return result

    # -- physics ------------------------------------------------------------------------------

    def _advance(self, dt: float) -> None:
        now = self.time if self.time is not None else 0.0
        flying = self.airborne
        direct = flying & (self.activity == Activity.DIRECT)
        nav = flying & ~direct
        before = np.stack([self.east, self.north, self.alt], axis=1)

        # navigation: straight toward the target, horizontal and vertical at once
        de = self.target[:, 0] - self.east
        dn = self.target[:, 1] - self.north
        dz = self.target[:, 2] - self.alt
        distance = np.hypot(de, dn)
        reach = np.minimum(distance, self.speed * dt)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(distance > 0, reach / distance, 0.0)
        climb = np.clip(dz, -self.vspeed * dt, self.vspeed * dt)
        self.east += np.where(nav, de * share, 0.0)
        self.north += np.where(nav, dn * share, 0.0)
        self.alt += np.where(nav, climb, 0.0)
        turning = nav & (reach > 1e-3)
        self.heading = np.where(turning, np.mod(np.arctan2(de, dn), math.tau), self.heading)

        if direct.any():
            self._fly_direct(direct, now, dt)

        self.heading = np.where(flying & ~np.isnan(self.heading_hold) & ~direct,
                                self.heading_hold, self.heading)  # fmt: skip
        after = np.stack([self.east, self.north, self.alt], axis=1)
        self.velocity = (after - before) / dt

        # battery
        ground_speed = np.hypot(self.velocity[:, 0], self.velocity[:, 1])
        in_air = 12.0 + 0.8 * ground_speed + 4.0 * np.maximum(self.velocity[:, 2], 0.0)
        self.current = np.where(flying, in_air, np.where(self.armed, 2.0, 0.4))
        used = self.current * dt / 3600.0 / self.battery_capacity
        self.charge = np.maximum(self.charge - used, 0.0)

        # events, each for the few vehicles it concerns
        self._landings()
        arrived = (
            self.pending & nav & (distance - reach <= np.maximum(self.radius, POSITION_TOLERANCE))
        )
        arrived &= np.abs(self.target[:, 2] - self.alt) <= ALT_TOLERANCE
        for i in np.flatnonzero(arrived).tolist():
            self.pending[i] = False
            self._arrived(i)
        waited = (self.activity == Activity.MISSION) & (self.phase == Phase.WAIT)
        waited &= self.wait_until <= now + 1e-9
        for i in np.flatnonzero(waited).tolist():
            self._next_item(i, int(self.item[i]) + 1)
        low = self.airborne & (self.charge < LOW_BATTERY) & ~self.low_battery_done
        for i in np.flatnonzero(low).tolist():
            self.low_battery_done[i] = True
            self._low_battery(i)

    def _fly_direct(self, direct: BoolArray, now: float, dt: float) -> None:
        """`direct_vehicle_control`: the sticks of the vehicles in `direct` fly them in the body
        frame for `dt` s (sticks older than `DIRECT_TIMEOUT` are back at 0)."""
        live = direct & (now <= self.sticks_until)
        sticks = np.where(live[:, None], self.sticks, 0.0)
        self.heading = np.where(
            direct, np.mod(self.heading + sticks[:, 2] * MAX_YAW_RATE * dt, math.tau),
            self.heading)  # fmt: skip
        fwd, right = sticks[:, 0] * self.cruise_speed, sticks[:, 1] * self.cruise_speed
        s, c = np.sin(self.heading), np.cos(self.heading)
        up = np.where(sticks[:, 3] >= 0, sticks[:, 3] * self.climb_rate,
                      sticks[:, 3] * self.descent_rate)  # fmt: skip
        self.east += np.where(direct, (fwd * s + right * c) * dt, 0.0)
        self.north += np.where(direct, (fwd * c - right * s) * dt, 0.0)
        self.alt = np.where(direct, np.maximum(self.alt + up * dt, self.ground), self.alt)

    def _landings(self) -> None:
        """Vehicles descending onto the ground touch down and disarm."""
        down = self.airborne & (self.alt <= self.ground + 1e-6)
        down &= (
            np.isin(self.activity, _LANDING)
            | ((self.activity == Activity.MISSION) & (self.phase == Phase.DESCEND))
            | ((self.activity == Activity.DIRECT) & (self.sticks[:, 3] < 0))  # throttle down
        )
        if not down.any():
            return
        mission_done = down & (self.activity == Activity.MISSION)
        for i in np.flatnonzero(mission_done).tolist():
            mission = self.missions[i]
            self.item[i] = len(mission.items) if mission else -1
        self.alt = np.where(down, self.ground, self.alt)
        self.airborne &= ~down
        self.armed &= ~down
        self.emergency &= ~down
        self.pending &= ~down
        self.paused &= ~down
        self.activity = np.where(down, Activity.IDLE, self.activity)
        self.control_mode = np.where(down, MANUAL, self.control_mode)
        self.velocity[down] = 0.0

    # -- transitions (a few vehicles at a time) -------------------------------------------------

    def _go(self, i: int, east: float, north: float, alt: float, *, speed: float,
            vspeed: float, radius: float) -> None:  # fmt: skip
        self.target[i] = (east, north, alt)
        self.speed[i] = speed
        self.vspeed[i] = vspeed
        self.radius[i] = radius
        self.pending[i] = True

    def _hold(self, i: int) -> None:
        """Hover where the vehicle is (stay put, on the ground)."""
        self.activity[i] = Activity.HOLD if self.airborne[i] else Activity.IDLE
        self.target[i] = (self.east[i], self.north[i], self.alt[i])
        self.pending[i] = False

    def _arrived(self, i: int) -> None:
        activity = Activity(int(self.activity[i]))
        if activity in (Activity.TAKEOFF, Activity.GOTO):
            self.activity[i] = Activity.HOLD  # goes on to the exact point, then hovers
        elif activity is Activity.RTH_CLIMB:
            self.activity[i] = Activity.RTH_FLY
            home = self.home[i]
            self._go(i, float(home[0]), float(home[1]), float(self.alt[i]),
                     speed=self.cruise_speed, vspeed=self.climb_rate,
                     radius=POSITION_TOLERANCE)  # fmt: skip
        elif activity is Activity.RTH_FLY:
            mission = self.missions[i]
            if mission is not None and mission.rth_action == 1:  # RTH_ACTION_WAIT
                self.activity[i] = Activity.HOLD
                wait_alt = mission.rth_wait_altitude
                if not math.isnan(wait_alt):
                    self.target[i, 2] = self._altitude(i, wait_alt, mission.altitude_origin)
            else:
                self._land(i, Activity.RTH_LAND)
        elif activity is Activity.MISSION:
            self._item_reached(i)

    def _land(self, i: int, activity: Activity, rate: float | None = None) -> None:
        self.activity[i] = activity
        self._go(i, float(self.east[i]), float(self.north[i]), float(self.ground[i]),
                 speed=0.0, vspeed=rate or self.descent_rate,
                 radius=POSITION_TOLERANCE)  # fmt: skip

    def _start_rth(self, i: int) -> None:
        mission = self.missions[i]
        height = self.rth_altitude
        if mission is not None and not math.isnan(mission.safe_altitude):
            height = mission.safe_altitude - mission.altitude_origin
        alt = max(float(self.alt[i]), float(self.home[i, 2]) + height)
        self.activity[i] = Activity.RTH_CLIMB
        self.control_mode[i] = AUTO
        self.paused[i] = False
        self.heading_hold[i] = math.nan
        self._go(i, float(self.east[i]), float(self.north[i]), alt, speed=0.0,
                 vspeed=self.climb_rate, radius=POSITION_TOLERANCE)  # fmt: skip

    def _low_battery(self, i: int) -> None:
        if Activity(int(self.activity[i])) in (*_LANDING, Activity.RTH_CLIMB, Activity.RTH_FLY):
            return
        mission = self.missions[i]
        if mission is not None and mission.low_battery_action == 1:  # FAILSAFE_ACTION_LAND
            self.control_mode[i] = AUTO
            self.paused[i] = False
            self._land(i, Activity.LAND)
        else:
            self._start_rth(i)

    def _altitude(self, i: int, altitude_amsl: float, origin: float) -> float:
        """Simulated AMSL of a commanded altitude (relative to home when `origin` is known)."""
        if math.isnan(origin):
            return altitude_amsl
        return float(self.home[i, 2]) + altitude_amsl - origin

    def _point(self, values: Mapping[str, Any]) -> tuple[float, float]:
        """(east, north) of a command's latitude/longitude, refused when out of range."""
        lat, lon = values["latitude"], values["longitude"]
        if not (-math.pi / 2 <= lat <= math.pi / 2 and -math.pi <= lon <= math.pi):
            raise InvalidCommand("latitude/longitude out of range (radians expected)")
        east, north = self._local(lat, lon)
        if math.hypot(east, north) > MAX_DISTANCE:
            raise InvalidCommand(
                f"point {math.hypot(east, north) / 1000:.0f} km away is out of reach"
            )
        return east, north

    # -- missions -----------------------------------------------------------------------------

    def _parse_mission(self, values: dict[str, Any], items: Sequence[MissionItem]) -> Mission:
        parsed: list[tuple[str, dict[str, Any]]] = []
        for k, item in enumerate(items):
            try:
                name, params = item
            except (TypeError, ValueError):
                raise InvalidCommand(f"mission item {k} is not (name, params)") from None
            spec = COMMAND_BY_NAME.get(name) if isinstance(name, str) else None
            if spec is None:
                raise InvalidCommand(f"unregistered mission item {name!r} at {k}")
            if not spec.available_in_mission:
                raise InvalidCommand(f"command not allowed in mission: {name} at {k}")
            if not isinstance(params, Mapping):
                raise InvalidCommand(f"mission item {k} ({name}): parameters are not a mapping")
            item_values = parse_params(spec, params)
            if "latitude" in item_values and not math.isnan(item_values["latitude"]):
                if math.isnan(item_values["longitude"]):
                    raise InvalidCommand(f"mission item {k} ({name}): latitude without longitude")
                self._point(item_values)
            parsed.append((name, item_values))
        origin = values["altitude_origin"]
        content = json.dumps([sorted(values.items()), [(n, sorted(v.items())) for n, v in parsed]],
                             default=str)  # fmt: skip
        return Mission(
            mission_id=zlib.crc32(content.encode()),
            altitude_origin=origin,
            items=parsed,
            safe_altitude=values["safe_altitude"],
            rth_wait_altitude=values["rth_wait_altitude"],
            low_battery_action=_int_or(values["low_battery_action"], 0),
            rth_action=_int_or(values["rth_action"], 0),
            name=values["name"],
            command_map=tuple((FIRST_COMMAND_ID + k, k) for k in range(len(parsed))),
        )

    def _upload(self, i: int, mission: Mission) -> Result:
        if self.activity[i] == Activity.MISSION:
            self._hold(i)  # the running mission stops; the new one starts with `auto`
            self.control_mode[i] = CLICK_GO
        self.missions[i] = mission
        self.item[i] = -1
        self.phase[i] = Phase.FLY
        self.paused[i] = False
        self.mission_id[i] = mission.mission_id
        self.altitude_origin[i] = mission.altitude_origin
        self.current_command[i] = math.nan
        return Result(mission_id=mission.mission_id, command_map=mission.command_map)

    def _start_mission(self, i: int, first: int) -> None:
        self.activity[i] = Activity.MISSION
        self.control_mode[i] = AUTO
        self.paused[i] = False
        self.mission_speed[i] = self.cruise_speed
        self.mission_vspeed[i] = self.climb_rate
        self.heading_hold[i] = math.nan
        self._next_item(i, first)

    def _next_item(self, i: int, k: int) -> None:
        """Start mission item `k` of vehicle `i` (running the instant ones at once)."""
        mission = self.missions[i]
        assert mission is not None
        while k < len(mission.items):
            name, v = mission.items[k]
            self.item[i] = k
            self.current_command[i] = FIRST_COMMAND_ID + k
            self.phase[i] = Phase.FLY
            if name == "set_speed":
                if not math.isnan(v["ground_speed"]):
                    self.mission_speed[i] = v["ground_speed"]
                if not math.isnan(v["vertical_speed"]):
                    self.mission_vspeed[i] = v["vertical_speed"]
            elif name == "set_heading":
                self.heading_hold[i] = v["heading"]
            elif name == "set_home":
                east, north = self._point(v)
                alt = self._altitude(i, v["altitude_amsl"], mission.altitude_origin)
                self.home[i] = (east, north, alt)
            elif name in ("wait", "mission_pause"):
                self._hold(i)
                self.activity[i] = Activity.MISSION
                duration = v.get("time", math.nan)
                if name == "mission_pause" or math.isnan(duration) or duration < 0:
                    self.activity[i] = Activity.HOLD
                    self.paused[i] = True  # waits for mission_resume
                    self.item[i] = k + 1
                    self.phase[i] = Phase.WAIT
                else:
                    self.phase[i] = Phase.WAIT
                    self.wait_until[i] = (self.time or 0.0) + duration
                return
            else:  # move, takeoff_mission, land_mission
                self._fly_item(i, mission, name, v)
                return
            k += 1
        # past the last item: hover at the last target (or stay on the ground)
        self.item[i] = len(mission.items)
        self.activity[i] = Activity.HOLD if self.airborne[i] else Activity.IDLE
        self.pending[i] = False

    def _fly_item(self, i: int, mission: Mission, name: str, v: Mapping[str, Any]) -> None:
        if math.isnan(v["latitude"]):
            east, north = float(self.east[i]), float(self.north[i])
        else:
            east, north = self._point(v)
        alt = float(self.alt[i])
        if not math.isnan(v["altitude_amsl"]):
            alt = self._altitude(i, v["altitude_amsl"], mission.altitude_origin)
        alt = max(alt, float(self.ground[i]) + MIN_HEIGHT)
        radius = v["acceptance_radius"]
        if math.isnan(radius):
            radius = self.acceptance_radius
        if name == "takeoff_mission":
            self.airborne[i] = True
            rate = v["climb_rate"]
            vspeed = self.mission_vspeed[i] if math.isnan(rate) or rate <= 0 else rate
            self._go(i, float(self.east[i]), float(self.north[i]), alt, speed=0.0,
                     vspeed=float(vspeed), radius=POSITION_TOLERANCE)  # fmt: skip
            return
        if name == "land_mission":  # fly there at the current altitude, then descend
            alt = float(self.alt[i])
        self.airborne[i] = True
        self._go(i, east, north, alt, speed=float(self.mission_speed[i]),
                 vspeed=float(self.mission_vspeed[i]), radius=radius)  # fmt: skip
        # the last item is flown to its exact point
        if self.item[i] == len(mission.items) - 1 and name == "move":
            self.radius[i] = POSITION_TOLERANCE

    def _item_reached(self, i: int) -> None:
        mission = self.missions[i]
        assert mission is not None
        k = int(self.item[i])
        name, v = mission.items[k]
        if name == "land_mission":
            if self.phase[i] == Phase.DESCEND:
                return  # the touchdown (`_landings`) ends it, not the last centimetres
            self.phase[i] = Phase.DESCEND
            rate = v["descent_rate"]
            if math.isnan(rate) or rate <= 0:
                rate = self.descent_rate
            self._go(i, float(self.target[i, 0]), float(self.target[i, 1]),
                     float(self.ground[i]), speed=float(self.mission_speed[i]),
                     vspeed=float(rate), radius=POSITION_TOLERANCE)  # fmt: skip
            return
        if name == "move":
            heading = v["heading"]
            if not math.isnan(heading):
                self.heading_hold[i] = heading
            wait = v["wait_time"]
            if not math.isnan(wait) and wait > 0:
                self.phase[i] = Phase.WAIT
                self.wait_until[i] = (self.time or 0.0) + wait
                return
        self._next_item(i, k + 1)

    # -- commands -----------------------------------------------------------------------------

    def _do_arm(self, i: int, _: Params) -> Result:
        if self.armed[i]:
            return failed("already armed")
        if self._satellites()[i] < 6:
            return failed("no 3D GPS fix")
        if self.charge[i] <= 0.0:
            return failed("battery empty")
        self.armed[i] = True
        self.low_battery_done[i] = False
        return OK

    def _do_disarm(self, i: int, _: Params) -> Result:
        if not self.armed[i]:
            return failed("not armed")
        if self.airborne[i]:
            return failed("cannot disarm in flight")
        self.armed[i] = False
        self.activity[i] = Activity.IDLE
        self.control_mode[i] = MANUAL
        return OK

    def _do_takeoff_command(self, i: int, v: Mapping[str, Any]) -> Result:
        height = v["relative_altitude"]
        if height <= 0:
            return invalid("takeoff_command: relative_altitude must be positive")
        if not self.armed[i]:
            return failed("not armed")
        if self.airborne[i]:
            return failed("already flying")
        self.airborne[i] = True
        self.activity[i] = Activity.TAKEOFF
        self.control_mode[i] = AUTO
        self.heading_hold[i] = math.nan
        self._go(i, float(self.east[i]), float(self.north[i]), float(self.ground[i]) + height,
                 speed=0.0, vspeed=self.climb_rate, radius=POSITION_TOLERANCE)  # fmt: skip
        return OK

    def _need_airborne(self, i: int) -> Result | None:
        return None if self.airborne[i] else failed("not flying")

    def _do_land_command(self, i: int, _: Params) -> Result:
        if (refused := self._need_airborne(i)) is not None:
            return refused
        if self.activity[i] in _LANDING:
            return failed("already landing")
        self.paused[i] = self.activity[i] == Activity.MISSION or bool(self.paused[i])
        self.control_mode[i] = AUTO
        self._land(i, Activity.LAND)
        return OK

    def _do_emergency_land(self, i: int, _: Params) -> Result:
        if (refused := self._need_airborne(i)) is not None:
            return refused
        if self.activity[i] == Activity.EMERGENCY:
            return failed("already landing")
        self.emergency[i] = True
        self.control_mode[i] = AUTO
        self._land(i, Activity.EMERGENCY, rate=2.0 * self.descent_rate)
        return OK

    def _do_return_to_home(self, i: int, _: Params) -> Result:
        if (refused := self._need_airborne(i)) is not None:
            return refused
        activity = self.activity[i]
        if activity in (Activity.RTH_CLIMB, Activity.RTH_FLY, Activity.RTH_LAND):
            return failed("already returning home")
        if activity == Activity.EMERGENCY:
            return failed("emergency landing")
        self._start_rth(i)
        return OK

    def _do_auto(self, i: int, _: Params) -> Result:
        mission = self.missions[i]
        if mission is None:
            return failed("no mission")
        if not self.armed[i]:
            return failed("not armed")
        if self.activity[i] == Activity.MISSION:
            return failed("mission already running")
        if self.activity[i] in _LANDING:
            return failed("landing")
        item = int(self.item[i])
        if self.paused[i] or 0 <= item < len(mission.items):
            return self._resume(i)
        self._start_mission(i, 0)
        return OK

    def _resume(self, i: int) -> Result:
        mission = self.missions[i]
        assert mission is not None
        self.paused[i] = False
        self.activity[i] = Activity.MISSION
        self.control_mode[i] = AUTO
        k = int(self.item[i])
        if k < 0:
            k = 0
        if self.phase[i] == Phase.DESCEND:  # an interrupted landing descends again
            self.phase[i] = Phase.FLY
        self._next_item(i, k)
        return OK

    def _set_mode(self, i: int, mode: int, need_airborne: bool) -> Result:
        if not self.armed[i]:
            return failed("not armed")
        if need_airborne and not self.airborne[i]:
            return failed("not flying")
        self.control_mode[i] = mode
        self.emergency[i] = False  # the pilot took over
        if self.airborne[i]:
            if self.activity[i] == Activity.MISSION:
                self.paused[i] = True
            self._hold(i)
        return OK

    def _do_manual(self, i: int, _: Params) -> Result:
        return self._set_mode(i, MANUAL, need_airborne=False)

    def _do_guided(self, i: int, _: Params) -> Result:
        return self._set_mode(i, CLICK_GO, need_airborne=True)

    def _do_joystick(self, i: int, _: Params) -> Result:
        return self._set_mode(i, JOYSTICK, need_airborne=True)

    def _do_direct_vehicle_control(self, i: int, v: Mapping[str, Any]) -> Result:
        if (refused := self._need_airborne(i)) is not None:
            return refused
        if self.activity[i] == Activity.EMERGENCY:
            return failed("emergency landing")
        if self.activity[i] == Activity.MISSION:
            self.paused[i] = True
        self.activity[i] = Activity.DIRECT
        self.control_mode[i] = JOYSTICK
        self.pending[i] = False
        self.heading_hold[i] = math.nan
        sticks = [v[axis] for axis in ("pitch", "roll", "yaw", "throttle")]
        self.sticks[i] = [0.0 if math.isnan(x) else x for x in sticks]
        self.sticks_until[i] = (self.time or 0.0) + DIRECT_TIMEOUT
        return OK

    def _do_waypoint(self, i: int, v: Mapping[str, Any]) -> Result:
        if (refused := self._need_airborne(i)) is not None:
            return refused
        if self.activity[i] == Activity.EMERGENCY:
            return failed("emergency landing")
        east, north = self._point(v)
        alt = max(self._altitude(i, v["altitude_amsl"], v["altitude_origin"]),
                  float(self.ground[i]) + MIN_HEIGHT)  # fmt: skip
        speed, vspeed = v["ground_speed"], v["vertical_speed"]
        if self.activity[i] == Activity.MISSION:
            self.paused[i] = True
        self.activity[i] = Activity.GOTO
        self.control_mode[i] = CLICK_GO
        self.heading_hold[i] = v["heading"]
        self._go(i, east, north, alt,
                 speed=self.cruise_speed if math.isnan(speed) or speed <= 0 else speed,
                 vspeed=self.climb_rate if math.isnan(vspeed) or vspeed <= 0 else vspeed,
                 radius=POSITION_TOLERANCE)  # fmt: skip
        return OK

    def _do_mission_pause(self, i: int, v: Mapping[str, Any]) -> Result:
        if self.activity[i] != Activity.MISSION:
            return failed("no mission running")
        self._hold(i)
        self.paused[i] = True
        extra = v["additional_altitude"]
        if not math.isnan(extra) and extra != 0:
            alt = max(float(self.alt[i]) + extra, float(self.ground[i]) + MIN_HEIGHT)
            self._go(i, float(self.east[i]), float(self.north[i]), alt, speed=0.0,
                     vspeed=self.climb_rate, radius=POSITION_TOLERANCE)  # fmt: skip
            self.pending[i] = False
        return OK

    def _do_mission_resume(self, i: int, _: Params) -> Result:
        if self.missions[i] is None:
            return failed("no mission")
        if not self.paused[i]:
            return failed("mission not paused")
        if not self.airborne[i]:
            return failed("not flying")
        return self._resume(i)

    def _do_mission_clear(self, i: int, _: Params) -> Result:
        if self.missions[i] is None:
            return failed("no mission")
        if self.activity[i] == Activity.MISSION:
            return failed("mission running")
        self.missions[i] = None
        self.item[i] = -1
        self.paused[i] = False
        self.mission_id[i] = math.nan
        self.current_command[i] = math.nan
        self.altitude_origin[i] = math.nan
        return OK


SETTINGS = ("origin", "patrol", "spacing", "gps_warmup", "cruise_speed", "climb_rate",
            "descent_rate", "rth_altitude", "acceptance_radius", "battery_capacity")  # fmt: skip
"""The `Fleet` options a user can set (`Fleet.from_settings`)."""


def _int_or(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
