"""XRP: the WPILib `halsim_xrp` UDP protocol, robot side and WPILib side.

codec      header, tagged blocks, every tag; a one-call fast path for the firmware's status
session    sans-I/O robot session (firmware rules) and WPILib-side session (halsim_xrp rules)
physics    vectorised differential-drive model of many XRP robots
adapter    WPILib-side state -> world model (odometry pose, telemetry with units)
sim        `robowire sim xrp`: simulated robots on UDP ports
endpoints  CLI glue (listen, serve, sim, decode, `robowire xrp drive`)
"""

from robowire.protocols.xrp.codec import (
    DEFAULT_PORT,
    DIO,
    NO_PERIOD,
    Accel,
    AnalogIn,
    Encoder,
    Gyro,
    Packet,
    Tag,
    UnknownBlock,
    XRPMotor,
    XRPServo,
    decode_packet,
    decode_status,
    encode_packet,
)
from robowire.protocols.xrp.physics import Arena, Fleet
from robowire.protocols.xrp.session import ClientSession, RobotSession, RobotStatus

__all__ = [
    "DEFAULT_PORT",
    "DIO",
    "NO_PERIOD",
    "Accel",
    "AnalogIn",
    "Arena",
    "ClientSession",
    "Encoder",
    "Fleet",
    "Gyro",
    "Packet",
    "RobotSession",
    "RobotStatus",
    "Tag",
    "UnknownBlock",
    "XRPMotor",
    "XRPServo",
    "decode_packet",
    "decode_status",
    "encode_packet",
]

from robowire.protocols.base import WireProtocol
from robowire.protocols.xrp import endpoints as _endpoints
from robowire.protocols.xrp.decode import capture_datagrams as _capture_datagrams

_ARENA = frozenset({"arena_width", "arena_height", "line_radius", "line_width"})
PROTOCOL = WireProtocol(
    name="xrp",
    title="XRP",
    default_port=DEFAULT_PORT,
    schemes=("xrp",),
    open_source=_endpoints.open_source,
    open_sink=_endpoints.open_sink,
    open_sim=_endpoints.open_sim,
    dissect=_endpoints.decode_capture,
    read_capture=_capture_datagrams,  # type: ignore[arg-type]  # temporary until the reshape
    source_options=frozenset({"enable", "left", "right"}),
    sink_options=_ARENA | {"device", "source"},
    sim_settings=_ARENA | {"lag", "button"},
    command=_endpoints.command,
)
