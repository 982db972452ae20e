"""The UCS side's commands as the viewer shows and reports them (`robowire.control`).

`UcsSource` (services) is `control.Controllable` through these: a registered command as a
`CommandSpec` in user units, the browser's mission form as a `Mission`, and a VSM's reply as a
`CommandStatus`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from robowire.control import FAILED, IN_PROGRESS, OK, TIMEOUT, CommandSpec, CommandStatus, ParamSpec
from robowire.protocols.ugcs.adapter import semantic_unit
from robowire.protocols.ugcs.client import Mission, home_altitude, status_name
from robowire.protocols.ugcs.codec import ValueKind
from robowire.protocols.ugcs.device import CommandInfo
from robowire.protocols.ugcs.events import CommandTimedOut, ResponseReceived
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.session_ucs import UcsDevice

_NUMBERS = frozenset({ValueKind.DOUBLE, ValueKind.FLOAT, ValueKind.INT})
_DEGREE_UNIT = semantic_unit(defs.FIELD_SEMANTIC_LATITUDE)
_LABELS = {
    "arm": "Arm",
    "disarm": "Disarm",
    "auto": "Auto mode",
    "manual": "Manual mode",
    "guided": "Guided mode",
    "emergency_land": "Emergency land",
    "land_command": "Land",
    "takeoff_command": "Take off",
    "return_to_home": "Return home",
    "mission_upload": "Upload mission",
    "mission_pause": "Pause mission",
    "mission_resume": "Resume mission",
    "mission_clear": "Clear mission",
    "waypoint": "Go to",
}
MISSION_PARAMS = (
    ParamSpec(name="waypoints", type="waypoints", unit="deg,deg,m", required=True),
    ParamSpec(name="speed", type="number", unit="m/s", default=5.0, minimum=0.1, maximum=100.0),
    ParamSpec(name="name", type="string", default="robowire"),
    ParamSpec(name="start", type="bool", default=False),
)
"""The browser's mission_upload: waypoints [lat deg, lon deg, height above home m], one ground
speed for all, the mission's name, and `start` (send `auto` once the upload is OK)."""


def command_spec(info: CommandInfo) -> CommandSpec:
    """A registered command as the viewer shows it: its parameters in user units (degrees
    for angles, metres, m/s), enumerations as strings naming a choice. Parameters of kinds a
    browser cannot give (bytes, lists) are left out: they go as NA."""
    label = _LABELS.get(info.name, info.name.replace("_", " ").capitalize())
    if info.name == "mission_upload":
        return CommandSpec(name=info.name, label=label, params=MISSION_PARAMS)
    params = []
    for p in info.parameters:
        unit = semantic_unit(p.semantic)
        low, high = p.min, p.max
        if unit == _DEGREE_UNIT:
            low = math.degrees(low) if isinstance(low, int | float) else None
            high = math.degrees(high) if isinstance(high, int | float) else None
        minimum = float(low) if isinstance(low, int | float) else None
        maximum = float(high) if isinstance(high, int | float) else None
        if p.enumeration:
            choices = tuple(p.enumeration[k] for k in sorted(p.enumeration))
            params.append(ParamSpec(name=p.name, type="string", choices=choices))
        elif p.kind in _NUMBERS:
            params.append(
                ParamSpec(name=p.name, type="number", unit=unit, minimum=minimum, maximum=maximum)
            )
        elif p.kind is ValueKind.BOOL:
            params.append(ParamSpec(name=p.name, type="bool"))
        elif p.kind is ValueKind.STRING:
            params.append(ParamSpec(name=p.name, type="string"))
    return CommandSpec(name=info.name, label=label, params=tuple(params))


def mission_of(params: Mapping[str, Any], target: UcsDevice) -> Mission:
    """The browser's mission form as a `Mission`: heights above home become AMSL altitudes
    over the vehicle's home (`altitude_origin` = home), one speed for all waypoints."""
    home = home_altitude(target)
    speed = float(params.get("speed", 5.0))
    return Mission.from_json(
        {
            "attributes": {"altitude_origin": home, "name": str(params.get("name", "robowire"))},
            "waypoints": [
                {"latitude": lat, "longitude": lon, "altitude": home + alt, "speed": speed}
                for lat, lon, alt in params["waypoints"]
            ],
        }
    )


def reply_status(command: str, reply: ResponseReceived | CommandTimedOut) -> CommandStatus:
    """A VSM's reply as a command status."""
    if isinstance(reply, CommandTimedOut):
        return CommandStatus(TIMEOUT, f"{command}: no reply from the VSM in {reply.timeout:g} s")
    text = reply.status
    if reply.code == defs.STATUS_IN_PROGRESS:
        if reply.progress is not None:
            text = f"{text} {reply.progress:.0%}".strip()
        return CommandStatus(IN_PROGRESS, f"{command}: {text or 'in progress'}")
    if reply.code == defs.STATUS_OK:
        return CommandStatus(OK, f"{command}: {text or 'done'}")
    return CommandStatus(FAILED, f"{command}: {text or status_name(reply.code)}")
