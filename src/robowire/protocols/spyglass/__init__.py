"""SpyGlass (ITM Lübeck's wireless sensor network visualizer): packets, streams, files, sim.

    codec    bytes <-> typed packets (`decode`, `encode`, `split` + `decode_batch`, `next_packet`)
    profile  syntax types and the semantic-type profile (what semantic type means what)
    rec      `.rec` recordings (reader, writer, records mirroring the live stream)
    session  `SpyglassSession`: the sans-I/O stream session, both directions
    adapter  `SpyglassAdapter`: packets -> world (nodes, links, telemetry, moving objects)
    sim      `SensorNetworkSim`: a mobile sensor network producing encoded packets
    decode   `decode_capture`: `robowire decode spyglass FILE`

Transport (robowire's choice, see docs/spyglass.md): packets back to back over TCP, each
delimited by its own uint16 length field; default port `DEFAULT_PORT` = 7870.
"""

from robowire.protocols.spyglass.adapter import NODE_KIND, OBJECT_KIND, SpyglassAdapter, object_id
from robowire.protocols.spyglass.codec import (
    HEADER_SIZE,
    MAX_PACKET_SIZE,
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
    next_packet,
    split,
    syntax_type_of,
    time_fields,
)
from robowire.protocols.spyglass.decode import decode_capture, decode_rec, packet_fields
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
    read_rec,
    rec_record,
    rec_records,
    write_rec,
)
from robowire.protocols.spyglass.services import DEFAULT_PORT
from robowire.protocols.spyglass.session import PacketReceived, SpyglassSession, frame
from robowire.protocols.spyglass.sim import SensorNetworkSim, SimConfig

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_PROFILE",
    "HEADER_SIZE",
    "MAX_PACKET_SIZE",
    "MAX_REC_PACKET",
    "NODE_KIND",
    "OBJECT_KIND",
    "PACKET_TYPES",
    "PROTOCOL",
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
    "SimConfig",
    "SpyglassAdapter",
    "SpyglassPacket",
    "SpyglassSession",
    "StdPacket",
    "SyntaxType",
    "TrajectoryPacket2",
    "TrajectoryPacket3",
    "VariableListPacket",
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
    "read_rec",
    "rec_record",
    "rec_records",
    "split",
    "syntax_type_of",
    "time_fields",
    "write_rec",
]

import dataclasses as _dataclasses

from robowire.protocols.base import WireProtocol
from robowire.protocols.spyglass import endpoints as _endpoints
from robowire.protocols.spyglass.services import file_records as _file_records

_FRAME_OPTIONS = frozenset({"profile", "scale", "offset", "max_size"})
PROTOCOL = WireProtocol(
    name="spyglass",
    title="SpyGlass",
    default_port=DEFAULT_PORT,
    schemes=("spyglass",),
    open_source=_endpoints.open_source,
    open_sink=_endpoints.open_sink,
    open_sim=_endpoints.open_sim,
    dissect=decode_capture,
    read_capture=_file_records,
    source_options=_FRAME_OPTIONS | {"retry"},
    file_options=_FRAME_OPTIONS | {"speed"},
    sink_options=frozenset({"profile", "scale", "offset"}),
    sim_settings=frozenset(f.name for f in _dataclasses.fields(SimConfig)) - {"nodes"},
)
