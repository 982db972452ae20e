"""XRP: the WPILib `halsim_xrp` UDP protocol, robot side and WPILib side.

codec           header, tagged blocks, every tag; a one-call fast path for the firmware's status
events          the typed events of both sessions (`XrpEvent`)
session_robot   the robot side (firmware rules); reads its sensors from a `StatusSource`
session_wpilib  the WPILib side (halsim_xrp rules)
adapter         WPILib-side events -> world (odometry pose, telemetry with units); and a world
                device -> a simulated robot's pose (`DeviceMirror`, for the serve sink)
robot           your robot code behind the XRP wire: `Robot` (`step(now, outputs) -> Sensors`),
                served with `serve(robot, port=...)` (the simulator is one too)
model           the simulator: vectorised differential-drive physics of many robots, the arena
services        listen (source, capture source), serve (sink), sim and `serve` on the templates
dissect         `robowire decode xrp`, and the capture reader (pcap/pcapng, text captures)

Where it differs from the shape:
client          `XrpClient` (the WPILib side as a Python object) and the `robowire xrp drive`
                command (`PROTOCOL.command`): a real robot's users drive it without a gateway.
session_<role>  two modules, one per side: each side is a whole state machine of its own.
robot, model    the world -> wire conversion: an XRP robot reports sensors, not a pose, so the
                serve sink is itself a simulated robot (`adapter.DeviceMirror`: a `model.Fleet`
                row that `follow`s the world device, or an XRP robot's own reported values).
                The sink and the simulator share the sensor model (`Fleet`) and one encoding
                of sensor values into the firmware's status (`robot.status_rows`: i32 counts,
                period numerators, also `reported_status`'s and your `Robot`'s). It sits in
                `robot`, below `model` (which encodes each step's snapshot once for all
                robots) and `adapter` (which imports `model`). What only the simulator makes:
                the status of robots whose motors the WPILib side drives (physics from
                motor outputs); no world device has motor outputs to drive.
"""

from robowire.protocols.base import Demo, WireProtocol
from robowire.protocols.xrp.client import command as _command
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
from robowire.protocols.xrp.dissect import dissect, read_capture
from robowire.protocols.xrp.events import Outputs, RobotStatus
from robowire.protocols.xrp.model import ARENA_KEYS, Arena, Fleet
from robowire.protocols.xrp.robot import Robot, Sensors
from robowire.protocols.xrp.services import (
    RobotServer,
    XrpFileSource,
    XrpSim,
    XrpSink,
    XrpSource,
    serve,
)
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import ClientSession

__all__ = [
    "DEFAULT_PORT",
    "DIO",
    "NO_PERIOD",
    "PROTOCOL",
    "Accel",
    "AnalogIn",
    "Arena",
    "ClientSession",
    "Encoder",
    "Fleet",
    "Gyro",
    "Outputs",
    "Packet",
    "Robot",
    "RobotServer",
    "RobotSession",
    "RobotStatus",
    "Sensors",
    "Tag",
    "UnknownBlock",
    "XRPMotor",
    "XRPServo",
    "decode_packet",
    "decode_status",
    "encode_packet",
    "serve",
]


PROTOCOL = WireProtocol(
    name="xrp",
    title="XRP",
    default_port=DEFAULT_PORT,
    schemes=("xrp",),
    open_source=XrpSource,
    open_file=XrpFileSource,
    open_sink=XrpSink,
    open_sim=XrpSim,
    dissect=dissect,
    read_capture=read_capture,
    source_options=frozenset({"enable", "left", "right"}),
    file_options=frozenset({"speed"}),
    sink_options=frozenset(ARENA_KEYS) | {"device", "source"},
    sim_settings=frozenset(ARENA_KEYS) | {"lag", "button"},
    command=_command,
    kind="xrp",
    demo=Demo(url="xrp://{host}:{port}?enable=1&left=0.3&right=0.2"),  # driving a wide circle
    wireshark=True,
)
"""XRP for the registry: `xrp://host:3540` (we are the WPILib side; `?enable=1&left=E&right=E`
drives it), `xrp:capture.txt` or a pcap/pcapng (replays what the WPILib side saw), `serve
xrp://127.0.0.1:3540?device=ID` (a robot mirroring a world device), `sim xrp` (simulated
robots that real WPILib programs drive)."""
