"""Zenoh as the distributed engine: `serve zenoh://…` publishes the world, `listen zenoh://…`
subscribes into one (docs/zenoh.md).

    keys.py     the key expressions (`robowire/<source>/=state`, …), name escaping
    codec.py    payloads <-> typed frames (STATE columns, DEVICES, LOG); pure, no zenoh
    net.py      URL -> session configuration (listen/connect, scouting), opening a session
    sink.py     the publishing sink (one writer thread, a queryable for late joiners)
    source.py   the subscribing source and its adapter (frames -> world)

Not a wire protocol of the registry: the `zenoh` scheme is in the sink registry
(`robowire.sinks.SINKS`) and in `robowire.addresses.SOURCES`. The sink and source modules
import `zenoh` (eclipse-zenoh) only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robowire.endpoints import Endpoint

if TYPE_CHECKING:
    from robowire.zenoh.sink import ZenohSink
    from robowire.zenoh.source import ZenohSource


def open_sink(endpoint: Endpoint) -> ZenohSink:
    from robowire.zenoh.sink import open_sink as opened

    return opened(endpoint)


def open_source(endpoint: Endpoint) -> ZenohSource:
    from robowire.zenoh.source import open_source as opened

    return opened(endpoint)
