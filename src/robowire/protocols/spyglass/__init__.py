"""SpyGlass (ITM Lübeck's wireless sensor network visualizer): packets, streams, files, sim.

    codec     bytes <-> typed packets (`decode`, `encode`, `frame`, `split` + `decode_batch`)
    profile   syntax types and the semantic-type profile (what semantic type means what)
    events    `PacketReceived` and the `SpyglassEvent` union sessions return
    session   `SpyglassSession`: the sans-I/O stream session, both directions
    adapter   `SpyglassAdapter`: packets -> world (nodes, links, telemetry, moving objects);
              `WorldEncoder`: world updates -> packets (what the sink serves);
              `network_packets`: the simulator's reports -> packets (the same conversion)
    model     `SensorNetworkSim`: a mobile sensor network, its reports in world units
    rec       capture reading: `.rec` recordings (reader, writer), and `sniff` / `read_capture`
              telling `.rec`, pcap and raw streams apart (stdin too)
    services  `SpyglassSource`, `SpyglassFileSource`, `SpyglassSink`, `SpyglassSim`, and the
              URL options (`Settings`)
    dissect   `decode_capture`: `robowire decode spyglass FILE`

Where this package differs from the common shape, and why:
* `profile.py` beside `codec.py`: the semantic-type profile is configuration both the codec
  (which packet class a semantic type gives) and the adapter (telemetry names, units) read.
* `rec.py`: SpyGlass has its own capture format (`.rec`), read into the same records a live
  TCP stream gives, so the file source is the shared `CaptureSource` fed by `read_capture`.
* No `messages.py`: the packet classes are few and live in `codec.py`.

Transport (robowire's choice, see docs/spyglass.md): packets back to back over TCP, each
delimited by its own uint16 length field; default port `DEFAULT_PORT` = 7870.
"""

from robowire.capture import CaptureFormat
from robowire.protocols.base import Demo, WireProtocol
from robowire.protocols.spyglass.adapter import (
    NODE_KIND,
    OBJECT_KIND,
    SpyglassAdapter,
    WorldEncoder,
    object_id,
)
from robowire.protocols.spyglass.codec import (
    HEADER_SIZE,
    MAX_PACKET_SIZE,
    NAME,
    PACKET_TYPES,
    VERSION,
    WISEBED_PREFIX,
    CoordinatesList2Packet,
    CoordinatesList3Packet,
    DataPacket,
    NeighborhoodPacket,
    NodeLinkPacket,
    Packet,
    SpyglassPacket,
    StdPacket,
    TrajectoryPacket2,
    TrajectoryPacket3,
    VariableListPacket,
    decode,
    decode_batch,
    encode,
    frame,
    next_packet,
    split,
    syntax_type_of,
    time_fields,
)
from robowire.protocols.spyglass.dissect import decode_capture, decode_rec, packet_fields
from robowire.protocols.spyglass.events import PacketReceived, SpyglassEvent
from robowire.protocols.spyglass.model import SIM_SETTINGS, SensorNetworkSim, SimConfig
from robowire.protocols.spyglass.profile import (
    DEFAULT_PROFILE,
    Interpretation,
    SemanticProfile,
    SemanticRule,
    SyntaxType,
)
from robowire.protocols.spyglass.rec import (
    MAX_REC_PACKET,
    RecEntry,
    RecordTooLarge,
    RecWriter,
    iter_rec,
    looks_like_rec,
    read_capture,
    read_rec,
    rec_record,
    rec_records,
    sniff,
    write_rec,
)
from robowire.protocols.spyglass.services import (
    DEFAULT_PORT,
    FILE_OPTIONS,
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    RecSink,
    Settings,
    SpyglassFileSource,
    SpyglassSim,
    SpyglassSink,
    SpyglassSource,
    open_sim,
    open_sink,
)
from robowire.protocols.spyglass.session import SpyglassSession

PROTOCOL = WireProtocol(
    name=NAME,
    title="SpyGlass",
    default_port=DEFAULT_PORT,
    schemes=(NAME,),
    open_source=SpyglassSource,
    open_file=SpyglassFileSource,
    formats=(
        CaptureFormat(
            name="SpyGlass recording", suffixes=(".rec",), sniff=looks_like_rec, read=rec_records
        ),
    ),
    record=RecSink,
    open_sink=open_sink,
    open_sim=open_sim,
    dissect=decode_capture,
    read_capture=read_capture,
    source_options=SOURCE_OPTIONS,
    file_options=FILE_OPTIONS,
    sink_options=SINK_OPTIONS,
    sim_settings=SIM_SETTINGS,
    command=None,
    kind="sensor_node",
    demo=Demo(url="spyglass://{host}:{port}"),
    wireshark=True,
)
"""SpyGlass as the registry, the gateway and the CLI see it."""

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_PROFILE",
    "HEADER_SIZE",
    "MAX_PACKET_SIZE",
    "MAX_REC_PACKET",
    "NAME",
    "NODE_KIND",
    "OBJECT_KIND",
    "PACKET_TYPES",
    "PROTOCOL",
    "SIM_SETTINGS",
    "VERSION",
    "WISEBED_PREFIX",
    "CoordinatesList2Packet",
    "CoordinatesList3Packet",
    "DataPacket",
    "Interpretation",
    "NeighborhoodPacket",
    "NodeLinkPacket",
    "Packet",
    "PacketReceived",
    "RecEntry",
    "RecWriter",
    "RecordTooLarge",
    "SemanticProfile",
    "SemanticRule",
    "SensorNetworkSim",
    "Settings",
    "SimConfig",
    "SpyglassAdapter",
    "SpyglassEvent",
    "SpyglassFileSource",
    "SpyglassPacket",
    "SpyglassSession",
    "SpyglassSim",
    "SpyglassSink",
    "SpyglassSource",
    "StdPacket",
    "SyntaxType",
    "TrajectoryPacket2",
    "TrajectoryPacket3",
    "VariableListPacket",
    "WorldEncoder",
    "decode",
    "decode_batch",
    "decode_capture",
    "decode_rec",
    "encode",
    "frame",
    "iter_rec",
    "next_packet",
    "object_id",
    "packet_fields",
    "read_capture",
    "read_rec",
    "rec_record",
    "rec_records",
    "sniff",
    "split",
    "syntax_type_of",
    "time_fields",
    "write_rec",
]
