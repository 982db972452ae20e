"""The sink registry: every sink the CLI and a site file can open, by URL scheme or file suffix.

    SINKS       URL scheme -> "module:function" (Endpoint -> Sink) of the sinks that are not a
                wire protocol's: Foxglove live (`sinks/foxglove.py`), the web viewer
                (`viewer/`), Zenoh (`zenoh/`); more from the `robowire.sinks` entry point group
    RECORDERS   file suffix -> "module:function" (path, foxglove_rate -> Sink): the MCAP recorder
    FORMATS     `record --format NAME` -> "module:function" (path -> Sink): a ROS 2 bag
    protocols   a wire protocol's server is its `WireProtocol.open_sink` (`serve vrpn://…`), and
                a file in its own format its `WireProtocol.record` (`record -o run.vrpn`)

Modules are imported only when their sink is opened. JSON lines (`--json`) and the live table
are this package's own sinks (`JsonLinesSink`, `TableSink`): commands open them by a flag, not
by an address. Add a sink: docs/architecture.md, "Add a sink".
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from robowire import protocols
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import WireProtocol
from robowire.service import Sink
from robowire.sinks.jsonlines import JsonLinesSink
from robowire.sinks.table import TableSink

__all__ = [
    "FORMATS",
    "RECORDERS",
    "SINKS",
    "JsonLinesSink",
    "TableSink",
    "check_scheme",
    "load",
    "names",
    "open_recorder",
    "open_sink",
]

SINKS: dict[str, str] = {
    "foxglove": "robowire.sinks.foxglove:open_sink",
    "http": "robowire.viewer.server:open_sink",
    "zenoh": "robowire.zenoh:open_sink",
    "ros2": "robowire.ros2:open_sink",
    "ros2+zenoh": "robowire.ros2.zenoh_sink:open_sink",
}
"""URL schemes that name a sink, not a wire protocol (`serve foxglove://…`, the web viewer's
`serve http://…`): scheme -> "module:function" taking the `Endpoint`, returning the `Sink`."""

RECORDERS: dict[str, str] = {".mcap": "robowire.recording:open_recorder"}
"""`record -o FILE` by FILE's suffix (any other, and no suffix, is MCAP) -> "module:function"
taking the path and `foxglove_rate`, returning the `Sink`; protocols' own formats come first."""

FORMATS: dict[str, str] = {"rosbag2": "robowire.ros2.bag_recorder:open_recorder"}
"""`record -o PATH --format NAME`: NAME -> "module:function" taking the path and returning the
`Sink` (a ROS 2 bag: a directory, so not told by a suffix)."""


def names() -> list[str]:
    """The URL schemes of the sinks that are not a wire protocol's, in a stable order."""
    extra = [ep.name for ep in entry_points(group="robowire.sinks")]
    return [*SINKS, *(n for n in extra if n not in SINKS)]


def load(target: str) -> Any:
    """The function a `"module:function"` registry entry names."""
    module_name, _, function = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{target}: needs the missing package {exc.name!r}") from None
    return getattr(module, function)


def _target(scheme: str) -> str | None:
    if scheme in SINKS:
        return SINKS[scheme]
    return next(
        (ep.value for ep in entry_points(group="robowire.sinks") if ep.name == scheme), None
    )


def open_sink(endpoint: Endpoint) -> Sink:
    """The sink an address names (`robowire serve URL`): a registered sink's, or the server of
    the wire protocol of its scheme, its options checked."""
    if endpoint.is_file:
        raise ConfigError(f"{endpoint.raw}: serve needs a URL like {endpoint.protocol}://host:port")
    target = _target(endpoint.protocol)
    if target is not None:
        opened: Sink = load(target)(endpoint)
        return opened
    protocol = protocols.get(endpoint.protocol)
    if protocol.open_sink is None:
        raise ConfigError(f"{protocol.name}: serving is not available in robowire yet")
    check_scheme(protocol, endpoint)
    endpoint.check_options(protocol.sink_options, f"a {protocol.title} server")
    return protocol.open_sink(endpoint)


def open_recorder(path: str, foxglove_rate: float = 10.0, format: str | None = None) -> Sink:
    """The sink that writes the file `path` (`record -o`): `format`'s (`FORMATS`) when given,
    a protocol's own format when one claims its suffix (`.vrpn`, `.rec`), else a registered
    recorder's (MCAP by default)."""
    if format is not None:
        if format not in FORMATS:
            raise ConfigError(f"unknown record format {format!r} (known: {', '.join(FORMATS)})")
        opened: Sink = load(FORMATS[format])(path)
        return opened
    suffix = Path(path).suffix.lower()
    for protocol in protocols.landed():
        if protocol.record is not None and suffix in protocol.suffixes():
            return protocol.record(path)
    target = RECORDERS.get(suffix, RECORDERS[".mcap"])
    recorder: Sink = load(target)(path, foxglove_rate)
    return recorder


def check_scheme(protocol: WireProtocol, endpoint: Endpoint) -> None:
    """ConfigError unless `endpoint`'s scheme is one `protocol` speaks."""
    if endpoint.scheme not in protocol.schemes:
        known = ", ".join(f"{s}://" for s in protocol.schemes)
        raise ConfigError(f"{endpoint.raw}: {protocol.title} speaks {known}")
