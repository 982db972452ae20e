"""VRPN captures as sources: `robowire listen vrpn:capture.pcap` shows what a client saw.

Each TCP direction of the capture (or a raw one-direction stream file) feeds its own client
session, exactly as a live connection would, so names are learnt from that side's
descriptions and the adapter writes the reports into the world. A UDP datagram goes to the
session of the side that sent it: the UDP description a side sends on TCP names the port it
receives on, so datagrams to that port come from the other side of that connection.
"""

from __future__ import annotations

import asyncio
import logging

from robowire.capture import Record, batches, read_capture
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import ConnectionLost, PacketDropped
from robowire.protocols.vrpn.adapter import VrpnAdapter
from robowire.protocols.vrpn.dissect import looks_like_lob
from robowire.protocols.vrpn.registry import TrackerReports
from robowire.protocols.vrpn.session import MessageReceived, Role, VrpnSession
from robowire.service import Source
from robowire.timebase import WallClock
from robowire.world import World

log = logging.getLogger("robowire.vrpn")


def _reverse(flow: str) -> str:
    src, _, dst = flow.partition(">")
    return f"{dst}>{src}"


class VrpnFileSource(Source):
    """Reads a capture to its end into the world. Options: `time=sender|receive`, `speed`
    (0 or absent: as fast as it decodes; 1: the recorded pacing)."""

    def __init__(self, endpoint: Endpoint) -> None:
        assert endpoint.path is not None
        super().__init__(f"vrpn:{endpoint.path}")
        self.path = endpoint.path
        self.time_mode = endpoint.option("time", "sender")
        if self.time_mode not in ("sender", "receive"):
            raise ConfigError(f"{endpoint.raw}: time must be 'sender' or 'receive'")
        self.speed = endpoint.float_option("speed", 0.0)
        self.sessions: dict[str, VrpnSession] = {}

    def _session_for(self, record: Record) -> VrpnSession | None:
        if record.transport != "udp":
            session = self.sessions.get(record.flow)
            if session is None:
                session = self.sessions[record.flow] = VrpnSession(Role.CLIENT, now=0.0)
            return session
        port = record.dst[1] if record.dst else None
        for flow, session in self.sessions.items():
            if session.peer_udp is not None and session.peer_udp[1] == port:
                return self.sessions.get(_reverse(flow))
        return None

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        adapter = VrpnAdapter(world, self.name, time=self.time_mode)
        self.ready.set()
        async for batch in batches(read_capture(self.path), self.speed):
            now = loop.time()
            events: list[object] = []
            for record in batch:
                session = self._session_for(record)
                if session is None:
                    if not looks_like_lob(record.data):  # connection requests carry no data
                        self.stats.drop("datagram of no connection seen in the capture")
                    continue
                if record.transport == "udp":
                    events += session.feed_datagram(record.data, record.src or ("", 0), now)
                else:
                    events += session.feed(record.data, now)
            self._count(events)
            adapter.apply(events, clock.wall(loop.time()))

    def _count(self, events: list[object]) -> None:
        for event in events:
            if isinstance(event, TrackerReports):
                self.stats.messages_in += len(event)
            elif isinstance(event, MessageReceived):
                self.stats.messages_in += 1
            elif isinstance(event, PacketDropped):
                self.stats.drop(event.reason)
            elif isinstance(event, ConnectionLost):  # that direction's stream is broken
                self.stats.drop(event.reason)
                log.warning("%s: %s", self.name, event.reason)
