"""VRPN: the Virtual-Reality Peripheral Network protocol (VRPN 07.38 wire format), both sides.

    codec     cookie, header, padding, lob datagram, vectorised frame scanner (`scan`)
    messages  typed bodies of the user message types; imager.py (the imager's), system.py
              (descriptions, the system messages) and registry.py (wire names -> classes, the
              vectorised tracker report columns) are parts of this message layer
    events    `VrpnEvent`: Connected, TrackerReports (batches), MessageReceived, Described,
              PongReceived, PeerSilent, PacketDropped, ConnectionLost
    session   `VrpnSession`: the sans-I/O connection endpoint, client and server roles, TCP-only
              and UDP+TCP (State, Trigger, TRANSITIONS)
    adapter   `VrpnAdapter`: events -> world; `WorldEncoder`: world -> messages (the sink's);
              `tracker_values` / `tracker_reports`: the simulator's tracker frames -> the
              same reports (`pose_rows`, the report kinds and their defaults)
    model     `DeviceModel`: the simulated tracker (world units), analog, buttons and dials
    services  `VrpnSource`, `VrpnFileSource`, `VrpnSink`, `VrpnSim` on the templates, and the
              option sets each role reads
    logfile   VRPN log files (`.vrpn`, §12): entry codec, `read_log` (a log as capture records)
    dissect   `decode_capture`: `robowire decode vrpn FILE` (captures and log files)

Where this package differs from the common shape, and why:
* `driver.py`: a VRPN connection is a TCP stream plus a UDP socket sharing one session, and a
  UDP+TCP client is connected *to* by the server after asking with a lob datagram; the driver
  is the shared StreamDriver plus that socket, and its server is `serve_stream` plus a lob
  listener on the shared DatagramDriver.
* `server.py`: the multi-client fan-out (one session per client, broadcasts skipping congested
  clients, the tracker's request replies) that both the sink and the simulator serve with.
* Message modules beside `messages.py` (imager, system, registry): VRPN has ~50 message types.
* `model` gives its analog, buttons and dials as messages: their values are the same numbers
  in the world and on the wire (no conversion to share), and what the simulator does with
  them is a VRPN server's own behaviour (a Button_Filter's full states on connect and on every
  ping, dials reporting turns as deltas), not a relay of world telemetry as the sink's.
"""

from robowire.protocols.vrpn.codec import (
    COOKIE_SIZE,
    DEFAULT_PORT,
    HEADER_SIZE,
    MAGIC,
    Cookie,
    Frame,
    FrameIndex,
    LogMode,
    SystemType,
    decode_cookie,
    decode_datagram,
    decode_frame,
    decode_lob,
    encode_cookie,
    encode_frame,
    encode_lob,
    scan,
)
from robowire.protocols.vrpn.events import (
    Connected,
    Described,
    MessageReceived,
    PeerSilent,
    PongReceived,
    TrackerReports,
    VrpnEvent,
)
from robowire.protocols.vrpn.imager import (
    ImagerBeginFrame,
    ImagerChannel,
    ImagerDescription,
    ImagerDiscardedFrames,
    ImagerEndFrame,
    ImagerRegion,
    ImagerRegionF32,
    ImagerRegionU12In16,
    ImagerRegionU16,
    ImagerThrottleFrames,
)
from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    AnalogOutputChangeChannelsRequest,
    AnalogOutputChangeRequest,
    AnalogOutputNumChannelsReport,
    Body,
    ButtonAdmin,
    ButtonAlert,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    Ping,
    Pong,
    PoserRequestPosQuat,
    PoserRequestRelativePosQuat,
    PoserRequestRelativeVelocity,
    PoserRequestVelocity,
    TextMessage,
    TrackerAcceleration,
    TrackerPosQuat,
    TrackerRequestToRoom,
    TrackerRequestUnitToSensor,
    TrackerRequestWorkspace,
    TrackerResetOrigin,
    TrackerSetUpdateRate,
    TrackerToRoom,
    TrackerUnitToSensor,
    TrackerVelocity,
    TrackerWorkspace,
)
from robowire.protocols.vrpn.registry import BODY_TYPES, decode_body
from robowire.protocols.vrpn.session import TRANSITIONS, Role, State, Trigger, VrpnSession
from robowire.protocols.vrpn.system import (
    DisconnectMessage,
    LogDescription,
    SenderDescription,
    TypeDescription,
    UdpDescription,
    decode_system,
)

__all__ = [
    "BODY_TYPES",
    "COOKIE_SIZE",
    "DEFAULT_PORT",
    "HEADER_SIZE",
    "MAGIC",
    "PROTOCOL",
    "TRANSITIONS",
    "AnalogChannel",
    "AnalogOutputChangeChannelsRequest",
    "AnalogOutputChangeRequest",
    "AnalogOutputNumChannelsReport",
    "Body",
    "ButtonAdmin",
    "ButtonAlert",
    "ButtonChange",
    "ButtonStates",
    "Connected",
    "Cookie",
    "Described",
    "DialUpdate",
    "DisconnectMessage",
    "Frame",
    "FrameIndex",
    "ImagerBeginFrame",
    "ImagerChannel",
    "ImagerDescription",
    "ImagerDiscardedFrames",
    "ImagerEndFrame",
    "ImagerRegion",
    "ImagerRegionF32",
    "ImagerRegionU12In16",
    "ImagerRegionU16",
    "ImagerThrottleFrames",
    "LogDescription",
    "LogMode",
    "MessageReceived",
    "PeerSilent",
    "Ping",
    "Pong",
    "PongReceived",
    "PoserRequestPosQuat",
    "PoserRequestRelativePosQuat",
    "PoserRequestRelativeVelocity",
    "PoserRequestVelocity",
    "Role",
    "SenderDescription",
    "State",
    "SystemType",
    "TextMessage",
    "TrackerAcceleration",
    "TrackerPosQuat",
    "TrackerReports",
    "TrackerRequestToRoom",
    "TrackerRequestUnitToSensor",
    "TrackerRequestWorkspace",
    "TrackerResetOrigin",
    "TrackerSetUpdateRate",
    "TrackerToRoom",
    "TrackerUnitToSensor",
    "TrackerVelocity",
    "TrackerWorkspace",
    "Trigger",
    "TypeDescription",
    "UdpDescription",
    "VrpnEvent",
    "VrpnSession",
    "decode_body",
    "decode_capture",
    "decode_cookie",
    "decode_datagram",
    "decode_frame",
    "decode_lob",
    "decode_system",
    "encode_cookie",
    "encode_frame",
    "encode_lob",
    "scan",
]

import re

from robowire.capture import CaptureFormat
from robowire.capture import read_capture as _read_capture
from robowire.protocols.base import Demo, WireProtocol
from robowire.protocols.vrpn.dissect import decode_capture
from robowire.protocols.vrpn.logfile import LOG_SUFFIX, is_log, read_log
from robowire.protocols.vrpn.services import (
    FILE_OPTIONS,
    SIM_SETTINGS,
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    VrpnFileSource,
    VrpnLogSink,
    VrpnSource,
    open_sim,
    open_sink,
)

NATIVE_NAME = re.compile(r"^(?P<device>[^@/:?]+)@(?:(?P<scheme>tcp|x-vrpn|file)://)?(?P<rest>.+)$")
"""VRPN's `Device@[tcp://|x-vrpn://|file://]host[:port]` (vrpn_get_connection_by_name)."""
NATIVE_SCHEMES = {None: "vrpn", "x-vrpn": "vrpn", "tcp": "vrpn+tcp"}


def native_address(text: str) -> str | None:
    """The robowire URL of a VRPN name (`Tracker0@host:3883` -> `vrpn://Tracker0@host:3883`,
    `Tracker0@file://run.vrpn` -> `vrpn:run.vrpn`), or None if `text` is not one."""
    match = NATIVE_NAME.match(text)
    if match is None:
        return None
    device, scheme, rest = match["device"], match["scheme"], match["rest"]
    if scheme == "file":
        return f"vrpn:{rest}"
    return f"{NATIVE_SCHEMES[scheme]}://{device}@{rest}"


PROTOCOL = WireProtocol(
    name="vrpn",
    title="VRPN",
    default_port=DEFAULT_PORT,
    schemes=("vrpn", "vrpn+tcp"),
    open_source=VrpnSource,
    open_file=VrpnFileSource,
    formats=(CaptureFormat(name="VRPN log", suffixes=(LOG_SUFFIX,), sniff=is_log, read=read_log),),
    native_address=native_address,
    record=VrpnLogSink,
    open_sink=open_sink,
    open_sim=open_sim,
    dissect=decode_capture,
    read_capture=_read_capture,
    source_options=SOURCE_OPTIONS,
    file_options=FILE_OPTIONS,
    sink_options=SINK_OPTIONS,
    sim_settings=SIM_SETTINGS,
    command=None,
    kind="tracker",
    demo=Demo(url="vrpn://Tracker0,Analog0,Button0,Dial0@{host}:{port}"),
    wireshark=True,
)
"""VRPN as the registry, the gateway and the CLI see it."""
