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
