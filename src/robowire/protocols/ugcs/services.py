"""The UgCS services on the shared templates.

# --- UCS side: the source (`robowire listen ugcs://host:5556`) ---------------------------------

* `UcsSource`: we are the UgCS server. By default it dials the VSM (the VSM listens, 5556 by
  convention) and the `Source` template reconnects with backoff when the connection ends.
  `?mode=listen` listens on host:port instead, for VSMs in reverse mode (they dial the server
  and retry by themselves); every VSM that connects is one more session. `?origin=lat,lon,alt`
  (degrees, metres) fixes the ENU origin; by default it is the first fix.
  Our `peer_id` is one number per process (`client.process_peer_id`), as the VSM expects of one
  server. VSM instances are told apart by their own `peer_id`: when one VSM is connected more
  than once (reverse mode with several endpoints), only its newest connection feeds the world
  (the VSM itself sends telemetry only to the newest of our connections, ugcs.md 1.4); the
  others are kept open and take over, newest first, when it closes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import ConnectionLost, PacketDropped
from robowire.protocols.ugcs.adapter import Origin, UcsAdapter
from robowire.protocols.ugcs.client import process_peer_id
from robowire.protocols.ugcs.codec import DEFAULT_PORT
from robowire.protocols.ugcs.events import DeviceRegistered, PeerRegistered
from robowire.protocols.ugcs.session_ucs import UcsSession
from robowire.service import Source
from robowire.timebase import monotonic
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.world import World

log = logging.getLogger("robowire.ugcs")

UCS_SOURCE_OPTIONS = frozenset({"mode", "origin"})
_PASSED_ON = (PacketDropped, ConnectionLost)  # what a standby connection still reports


def parse_origin(endpoint: Endpoint) -> Origin | None:
    """`?origin=lat,lon[,alt]` in degrees and metres, or None (the first fix)."""
    text = endpoint.options.get("origin")
    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3) or not (-90 <= parts[0] <= 90 and -180 <= parts[1] <= 180):
        raise ConfigError(f"{endpoint.raw}: origin must be LAT,LON[,ALT] in degrees and metres")
    return (parts[0], parts[1], parts[2] if len(parts) == 3 else 0.0)


class UcsSource(Source):
    """The UCS side as a world source: dials a VSM (or, with `?mode=listen`, is dialled)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        self.mode = endpoint.option("mode", "connect")
        if self.mode not in ("connect", "listen"):
            raise ConfigError(f"{endpoint.raw}: mode must be connect or listen, not {self.mode!r}")
        super().__init__(f"ugcs@{self.host}:{self.port}")
        if self.mode == "listen":
            self.announce = "listening on"
        self.origin = parse_origin(endpoint)
        self.peer_id = process_peer_id()
        self.sessions: dict[int, UcsSession] = {}  # conn -> its session
        self._conn_ids = itertools.count(1)
        self._newest: dict[int, list[int]] = {}  # VSM peer_id -> its conns, newest last

    def new_adapter(self, world: World) -> UcsAdapter:
        return UcsAdapter(world, self.name, self.origin)

    def _new_session(self) -> UcsSession:
        conn = next(self._conn_ids)
        session = UcsSession(monotonic(), peer_id=self.peer_id, name="robowire", conn=conn)
        self.sessions[conn] = session
        return session

    def primary(self, session: UcsSession) -> bool:
        """True if `session` is the connection of its VSM that feeds the world."""
        if session.peer is None:
            return True
        conns = self._newest.get(session.peer.peer_id)
        return not conns or conns[-1] == session.conn

    def _on_events(self, driver: StreamDriver, events: list[Any]) -> None:
        session = driver.session
        if not isinstance(session, UcsSession):
            return
        for event in events:
            if isinstance(event, PeerRegistered):
                conns = self._newest.setdefault(event.peer_id, [])
                if conns:
                    log.info("%s: VSM %d connected again; the newest connection is used",
                             self.name, event.peer_id)  # fmt: skip
                conns.append(session.conn)
                self._resend(conns)
        if not self.primary(session):
            events = [e for e in events if isinstance(e, _PASSED_ON)]
        self.deliver(events, monotonic())

    def _resend(self, conns: Sequence[int]) -> None:
        """The newest connection of a VSM took over: its devices (already registered on it)
        become the world's again."""
        session = self.sessions.get(conns[-1])
        if session is None:
            return
        events = [
            DeviceRegistered(conn=session.conn, device=d.info) for d in session.devices.values()
        ]
        if events:
            self.deliver(events, monotonic())

    def _closed(self, driver: StreamDriver) -> None:
        session = driver.session
        if not isinstance(session, UcsSession):
            return
        self.sessions.pop(session.conn, None)
        if session.peer is not None:
            conns = self._newest.get(session.peer.peer_id, [])
            was_primary = bool(conns) and conns[-1] == session.conn
            if session.conn in conns:
                conns.remove(session.conn)
            if not conns:
                self._newest.pop(session.peer.peer_id, None)
            elif was_primary:
                self._resend(conns)

    async def connect(self, world: World) -> None:
        if self.mode == "listen":
            await serve_stream(
                self.host,
                self.port,
                lambda _peer: self._new_session(),
                self._on_events,
                on_listening=self._listening,
                on_close=self._closed,
            )
            return
        session = self._new_session()
        driver: StreamDriver | None = None

        def opened(new: StreamDriver) -> None:
            nonlocal driver
            driver = new
            self.address = (self.host, self.port)
            self.connected()

        try:
            await connect_stream(self.host, self.port, session, self._on_events, on_open=opened)
        finally:
            if driver is not None:
                self._closed(driver)
            self.sessions.pop(session.conn, None)

    def _listening(self, address: tuple[str, int]) -> None:
        self.listening(address)
        self.connected()
