"""VRSP: Verge Aero's drone-swarm streaming protocol (Verge Design Studio), both sides, at show
scale (10,000 drones at 30 Hz). The project's profile of the unfinished public spec (byte order,
framing, the choices it leaves open) is docs/vrsp-profile.md.

definitions  the typed swarm description (device definitions, payloads, cues) and `Swarm`,
             one DATA frame as columns
codec        VRSP_DEF / VRSP_DATA bytes <-> packets; `DefinitionTable` decodes DATA records
             in runs of one layout (one numpy structured dtype per definition x flags)
events       the sessions' typed events (`VrspEvent`)
session      `ReceiverSession` (DEF before DATA, instances, reassembly, staleness) and
             `SenderSession` (DEF at 1 Hz, DATA at the frame rate, splitting)
adapter      frames -> world columns (left-handed Y-up -> ENU, geodetic via pymap3d, lights,
             payloads, pyro) and the world -> a swarm (`SwarmEncoder`, the serve sink;
             `show_swarm`, the simulator's frames, through the same columns)
model        the simulator: a light show (formations, lights, gimbals, pyro) in world units
services     listen (UDP source, capture source), serve (sink) and sim on the templates
dissect      `robowire decode vrsp`, and the capture reader (pcap/pcapng, one raw datagram)

Where it differs from the shape: `definitions` holds the types the codec and the simulator
share; one `session` module holds both sides (each is small); the receiver takes a wake-up's
datagrams as one batch (`feed_datagrams`) so that a frame is decoded once, when whole.
"""

from robowire.protocols.base import Demo, WireProtocol
from robowire.protocols.vrsp.codec import (
    DEFAULT_PORT,
    DefBlock,
    DefinitionTable,
    VrspData,
    VrspDef,
    decode_packet,
    definition_from_json,
    definition_to_json,
    encode_data,
    encode_def,
)
from robowire.protocols.vrsp.definitions import (
    Cue,
    DefType,
    DeviceDefinition,
    MountType,
    Payload,
    Quaternion,
    Swarm,
)
from robowire.protocols.vrsp.dissect import dissect, read_capture
from robowire.protocols.vrsp.services import (
    SENDER_OPTIONS,
    SHOW_SETTINGS,
    SOURCE_OPTIONS,
    VrspFileSource,
    VrspSim,
    VrspSink,
    VrspSource,
)
from robowire.protocols.vrsp.session import ReceiverSession, SenderSession

__all__ = [
    "DEFAULT_PORT",
    "PROTOCOL",
    "Cue",
    "DefBlock",
    "DefType",
    "DefinitionTable",
    "DeviceDefinition",
    "MountType",
    "Payload",
    "Quaternion",
    "ReceiverSession",
    "SenderSession",
    "Swarm",
    "VrspData",
    "VrspDef",
    "decode_packet",
    "definition_from_json",
    "definition_to_json",
    "encode_data",
    "encode_def",
]


PROTOCOL = WireProtocol(
    name="vrsp",
    title="VRSP (Verge Aero)",
    default_port=DEFAULT_PORT,
    schemes=("vrsp",),
    open_source=VrspSource,
    open_file=VrspFileSource,
    open_sink=VrspSink,
    open_sim=VrspSim,
    dissect=dissect,
    read_capture=read_capture,
    source_options=SOURCE_OPTIONS,
    file_options=frozenset({"speed", "framing", "rgba"}),
    sink_options=SENDER_OPTIONS,
    sim_settings=SHOW_SETTINGS | {"lat", "lon", "alt", "size", "broadcast"},
    kind="drone",
    sends=True,
    demo=Demo(url="vrsp://{host}:{port}"),
    wireshark=True,
)
"""VRSP for the registry: `listen vrsp://0.0.0.0:9742` (a UDP receiver; `?framing=`, `rgba=1`,
`geodetic=0`), `vrsp:capture.pcap` (a capture), `serve vrsp://HOST:9742?broadcast=1&rate=30`
(the world as a swarm), `sim vrsp --drones N --to HOST:PORT` (a light show)."""
