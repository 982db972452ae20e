"""UgCS VSM: the protocol between a UgCS Control Server (UCS) and a Vehicle Specific Module (VSM).

proto/          robowire's own .proto schema and the modules `make proto` generates from it
codec           LEB128 framing both ways, the incremental frame reader, Field_value <-> Python
device          a device's registration both ways: specs -> ids (one counter) -> Register_device
events          the typed events of both sessions
session_vsm     the VSM side: one session per VSM, a `VsmLink` per UCS connection
session_ucs     the UCS side: one session per connection to a VSM (names <-> ids, held values)
held            the UCS side's held values as columns (`Held`), a cache beside the session
telemetry       the VSM side's telemetry columns and Device_status encoder (`DeviceGroup`)
vehicle         a vehicle's registration the way the SDK's `Vehicle` does it
model           the simulator: a vectorised fleet of multicopters that fly missions; its
                telemetry in world units (angles in degrees)
adapter         world devices -> VSM telemetry columns (the serve sink), and the fleet's
                telemetry -> the same (`fleet_columns`, the sim's): one conversion to wire
                units; UCS side -> world (vehicles with geodetic and ENU pose, telemetry with
                units: the listen source)
services        sim (the model's fleet as a VSM, also dialling out), serve (world -> UgCS),
                listen (the UCS side: dials a VSM, or `?mode=listen` for reverse-mode VSMs)
vsm_server      what `services` runs the VSM side on: `VsmServer` (one `VsmSession` over
                asyncio, listening or dialling) and `VsmSim` (the runner of `Member`s)
control         the listen source's commands as the viewer shows them (`robowire.control`)
gcfreeze        keeping large registrations out of the garbage collector's full collections
dissect         `robowire decode ugcs` on pcap/pcapng and the jsonl capture form

Where it differs from the shape:
proto/, device, vehicle   the schema is protobuf (generated code), and both sides share the
                registration model, so it is a module of its own.
session_vsm     one session serves every connection of a VSM (the SDK's primary-connection
                rules span connections); each connection is a `VsmLink` view of it.
model           takes commands in wire units (parameters in radians as the UCS sends them)
                and answers them (`Result`, availability): only a VSM's simulator does that,
                no sink registers commands, so that part has no second conversion to share.
client, cli     `UcsClient` (the UCS side as a Python object) and, on it, the `robowire ugcs`
                commands (`PROTOCOL.command`: devices, command, mission): UgCS vehicles
                commanded without UgCS.

Size: five modules stay over 600 lines, each one thing (each says why in its docstring):
`model` (`Fleet`), `adapter` (the mapping both ways), `session_vsm` and `session_ucs` (one
state machine each), `codec` (framing, the columnar scan and values of one wire format).
"""

from robowire.protocols.base import Demo, WireProtocol
from robowire.protocols.ugcs.cli import command as _command
from robowire.protocols.ugcs.client import Mission, UcsClient
from robowire.protocols.ugcs.codec import DEFAULT_PORT, FrameReader, decode_frames, encode
from robowire.protocols.ugcs.dissect import dissect, read_capture
from robowire.protocols.ugcs.services import (
    SIM_SETTINGS,
    UCS_FILE_OPTIONS,
    UCS_SOURCE_OPTIONS,
    UcsFileSource,
    UcsSource,
    UgcsSim,
    UgcsSink,
)
from robowire.protocols.ugcs.session_ucs import UcsSession
from robowire.protocols.ugcs.session_vsm import VsmLink, VsmSession

__all__ = [
    "DEFAULT_PORT",
    "PROTOCOL",
    "FrameReader",
    "Mission",
    "UcsClient",
    "UcsSession",
    "UcsSource",
    "UgcsSim",
    "UgcsSink",
    "VsmLink",
    "VsmSession",
    "decode_frames",
    "encode",
]


PROTOCOL = WireProtocol(
    name="ugcs",
    title="UgCS VSM",
    default_port=DEFAULT_PORT,
    schemes=("ugcs",),
    open_source=UcsSource,
    open_file=UcsFileSource,
    open_sink=UgcsSink,
    open_sim=UgcsSim,
    dissect=dissect,
    read_capture=read_capture,
    source_options=UCS_SOURCE_OPTIONS,
    file_options=UCS_FILE_OPTIONS,
    sink_options=frozenset({"origin", "keep_alive", "name"}),
    sim_settings=SIM_SETTINGS,
    command=_command,
    kind="ugcs",
    demo=Demo(url="ugcs://{host}:{port}", settings={"patrol": "40"}),  # a looping 40 m square
    wireshark=True,
)
"""UgCS for the registry: `listen ugcs://127.0.0.1:5556` (we are the UgCS server: dial a VSM;
`?mode=listen` to be dialled by reverse-mode VSMs; `?origin=LAT,LON,ALT`; `ugcs:FILE` replays
a capture's VSM side), `sim ugcs`
(simulated vehicles behind a VSM on 127.0.0.1:5556, or `--to HOST[:PORT]` to dial a UCS),
`serve ugcs://127.0.0.1:5556 --from ...` (world devices as UgCS vehicles), `decode ugcs FILE`,
and `robowire ugcs devices|command|mission` (`client`)."""
