"""UgCS VSM: the protocol between a UgCS Control Server (UCS) and a Vehicle Specific Module (VSM).

proto/          robowire's own .proto schema and the generated modules (`make proto`)
codec           LEB128 framing both ways, the incremental frame reader, Field_value <-> Python
device          a device's registration both ways: specs -> ids (one counter) -> Register_device
events          the typed events of both sessions
session_vsm     the VSM side (one session per VSM, a link per UCS connection)
session_ucs     the UCS side (one session per connection to a VSM)
adapter         UCS side -> world (vehicles with geodetic and ENU pose, telemetry with units)
model           the simulator: a fleet of multicopters that fly missions
services        listen (the UCS-side source)

Where it differs from the shape:
client          `UcsClient` (the UCS side as a Python object) and the `robowire ugcs` commands
                (`PROTOCOL.command`): command vehicles and upload missions without UgCS.
session_<role>  two modules, one per side: each side is a whole state machine of its own.
device          registrations are shared by both sides (the VSM builds them, the UCS reads them).
"""

from collections.abc import Iterator
from typing import Any

from robowire.capture import Record
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import WireProtocol
from robowire.protocols.ugcs.client import Mission, UcsClient
from robowire.protocols.ugcs.client import command as _command
from robowire.protocols.ugcs.codec import DEFAULT_PORT
from robowire.protocols.ugcs.services import UCS_SOURCE_OPTIONS, UcsSource
from robowire.protocols.ugcs.session_ucs import UcsSession

__all__ = ["PROTOCOL", "Mission", "UcsClient", "UcsSession"]


def _open_source(endpoint: Endpoint) -> UcsSource:
    if endpoint.is_file:
        raise ConfigError(f"{endpoint.raw}: ugcs captures are not read as sources yet")
    return UcsSource(endpoint)


def _no_dissector(path: str) -> Iterator[dict[str, Any]]:
    raise ConfigError("ugcs: no dissector yet")


def _no_capture(path: str) -> Iterator[Record]:
    raise ConfigError("ugcs: no capture reader yet")


PROTOCOL = WireProtocol(
    name="ugcs",
    title="UgCS VSM",
    default_port=DEFAULT_PORT,
    schemes=("ugcs",),
    open_source=_open_source,
    dissect=_no_dissector,
    read_capture=_no_capture,
    source_options=UCS_SOURCE_OPTIONS,
    command=_command,
)
"""UgCS for the registry: `ugcs://host:5556` (we are the UgCS server dialling a VSM;
`?mode=listen` for VSMs that dial us; `?origin=lat,lon,alt`)."""
