"""CLI glue for SpyGlass: `robowire listen|serve spyglass://...`, `sim|decode spyglass`."""

from __future__ import annotations

from robowire.endpoints import Endpoint
from robowire.protocols.spyglass.decode import decode_capture
from robowire.protocols.spyglass.services import (
    DEFAULT_PORT,
    SpyglassSim,
    SpyglassSink,
    SpyglassSource,
)
from robowire.service import Sim, SimOptions, Sink, Source

NAME = "spyglass"
command = None

__all__ = [
    "DEFAULT_PORT",
    "NAME",
    "command",
    "decode_capture",
    "open_sim",
    "open_sink",
    "open_source",
]


def open_source(endpoint: Endpoint) -> Source:
    """`spyglass://host:7870` (TCP client, reconnects) or a file: `recording.rec`,
    `spyglass:capture.pcap`, `spyglass:-` (stdin). Options: `profile`, `scale`, `offset`,
    `retry`; files also `speed` (1 = the recorded pacing; default: as fast as possible)."""
    return SpyglassSource(endpoint)


def open_sink(endpoint: Endpoint) -> Sink:
    """`spyglass://127.0.0.1:7871`: a TCP server sending every world device as a node."""
    return SpyglassSink(endpoint)


def open_sim(options: SimOptions) -> Sim:
    """A simulated mobile sensor network served over TCP (default port 7870)."""
    return SpyglassSim(options)
