"""The asyncio driver VRPN needs: one TCP connection plus, in UDP+TCP mode, one UDP socket.

Why VRPN has a driver of its own (the one difference from robowire.transport's): a VRPN
connection is a TCP stream *and* a UDP socket sharing one session, and a UDP+TCP client is
connected to by the server (it asks with a "lob" datagram). `VrpnLink` is the shared
`StreamDriver` plus that socket, read by the shared `transport.udp.DatagramReader` (every
datagram of a wake-up goes to the session as one batch, `VrpnSession.feed_datagrams`) and
written with `send_datagrams`; `serve` (a `VrpnListener`) is `transport.tcp.serve_stream` plus
a UDP listener for lobs (run by the shared `DatagramDriver`) that connects back. No protocol
logic lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import cast

from robowire.errors import DecodeError, TransportError
from robowire.protocols.vrpn.codec import PROTOCOL, decode_lob, encode_lob
from robowire.protocols.vrpn.events import VrpnEvent
from robowire.protocols.vrpn.session import PEER_CLOSED, VrpnSession
from robowire.transport.tcp import OnDriver, StreamDriver, serve_stream
from robowire.transport.tcp import OnEvents as StreamOnEvents
from robowire.transport.udp import (
    DatagramDriver,
    DatagramReader,
    open_udp_socket,
    send_datagrams,
)
from robowire.wire import Address, PacketDropped, SessionStats

log = logging.getLogger("robowire.vrpn")

SessionFactory = Callable[[Address, Address | None], VrpnSession]
"""(peer TCP address, our inbound UDP address or None for TCP-only) -> a new session."""
OnEvents = Callable[["VrpnLink", list[VrpnEvent]], None]
OnLink = Callable[["VrpnLink"], None]

MAX_CLIENTS = 256  # like vrpn_MAX_ENDPOINTS: more clients are turned away
LOB_INTERVAL = 2.0  # the C++ client re-sends its connection request every 2 s
SLOW_PEER_BYTES = 1 << 20  # a peer this far behind gets no more low-latency data
UDP_BATCH = 256  # datagrams read per wake-up
CONNECT_BACK_TIMEOUT = 5.0


class VrpnLink(StreamDriver):
    """One VRPN connection: the shared TCP stream driver plus an optional UDP socket."""

    session: VrpnSession | None

    def __init__(
        self,
        session_factory: SessionFactory,
        on_events: OnEvents,
        *,
        udp: bool | socket.socket = False,
        on_open: OnLink | None = None,
        on_close: OnLink | None = None,
    ) -> None:
        # the callbacks get this VrpnLink, which is the StreamDriver they are called with
        super().__init__(
            lambda peer: session_factory(peer, None),  # TCP only; _new_session adds UDP
            cast(StreamOnEvents, on_events),
            on_open=cast(OnDriver | None, on_open),
            on_close=cast(OnDriver | None, on_close),
        )
        self._factory = session_factory
        self._udp_wanted = udp
        self.sock: socket.socket | None = udp if isinstance(udp, socket.socket) else None
        self._reader: DatagramReader | None = None  # reads `sock` once the session is made
        self.send_errors = 0
        self.skipped = 0
        self.lob_target: Address | None = None  # the address a lob asked us to connect to

    def _new_session(self, transport: asyncio.BaseTransport) -> VrpnSession:
        local = transport.get_extra_info("sockname") or ("127.0.0.1", 0)
        inbound: Address | None = None
        if self._udp_wanted is not False:
            if self.sock is None:
                try:
                    self.sock = open_udp_socket((str(local[0]), 0))
                except TransportError as exc:
                    log.warning("VRPN %s:%s: no UDP socket (%s); TCP only", *self.peer, exc)
            if self.sock is not None:
                name = self.sock.getsockname()
                inbound = (str(local[0]), int(name[1]))
                self._reader = DatagramReader(self.sock, self._datagrams, batch=UDP_BATCH)
        return self._factory(self.peer, inbound)

    def _start(self) -> None:
        self._tick()  # starts the session's clock (its cookie timer) and flushes

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_udp()
        super().connection_lost(exc)

    def _datagrams(self, datagrams: list[tuple[bytes, Address]], now: float) -> None:
        """A wake-up's datagrams decode as one batch: one delivery, one world update."""
        if self.session is not None:
            self._after(self.session.feed_datagrams(datagrams, now))

    def flush(self) -> None:
        """Send queued datagrams, then what the stream driver does: TCP bytes, close, timer."""
        session = self.session
        if session is not None and self.sock is not None:
            self.send_errors += send_datagrams(self.sock, session.datagrams_to_send())
        super().flush()

    @property
    def congested(self) -> bool:
        """True when TCP bytes pile up for this peer: skip its low-latency data for now."""
        return not self.connected or self.write_buffer_size() > SLOW_PEER_BYTES

    def close(self) -> None:
        super().close()
        self._close_udp()

    def _close_udp(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        elif self.sock is not None:
            self.sock.close()
        self.sock = None


# -- client ---------------------------------------------------------------------------------


def _ipv4(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise TransportError(f"cannot resolve {host}: {exc}") from None


def _route(host: str, port: int) -> tuple[str, str]:
    """(the server's IPv4 address, ours on the route to it): where the lob goes, and the
    address it names for the server to connect back to."""
    server_ip = _ipv4(host)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((server_ip, port))
        return server_ip, str(probe.getsockname()[0])
    except OSError as exc:
        raise TransportError(f"no route to {host}:{port}: {exc.strerror or exc}") from None
    finally:
        probe.close()


async def connect(
    host: str,
    port: int,
    session_factory: SessionFactory,
    on_events: OnEvents,
    *,
    udp: bool,
    timeout: float = 5.0,
    on_close: OnLink | None = None,
) -> VrpnLink:
    """Open a client connection, TCP-only or UDP+TCP; TransportError if none comes up.

    UDP+TCP: listen on an ephemeral TCP port, send the lob datagram "<our ip> <port>" to the
    server's UDP port every 2 s, and take the connection the server makes back to us.
    """
    if udp:
        return await _connect_back_to_us(host, port, session_factory, on_events, timeout, on_close)
    try:
        async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can lose a cancel
            _, link = await asyncio.get_running_loop().create_connection(
                lambda: VrpnLink(session_factory, on_events, on_close=on_close), host, port
            )
    except (OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise TransportError(f"cannot connect to {host}:{port}: {reason}") from None
    return link


async def _connect_back_to_us(
    host: str,
    port: int,
    session_factory: SessionFactory,
    on_events: OnEvents,
    timeout: float,
    on_close: OnLink | None,
) -> VrpnLink:
    """UDP+TCP `connect`: lobs every `LOB_INTERVAL` s until the server connects back."""
    loop = asyncio.get_running_loop()
    server_ip, local_ip = _route(host, port)
    udp_sock = open_udp_socket((local_ip, 0))
    arrived: asyncio.Future[VrpnLink] = loop.create_future()
    made: list[VrpnLink] = []

    def opened(link: VrpnLink) -> None:
        if link is made[0] and not arrived.done():
            arrived.set_result(link)
        else:  # a second connect-back (a repeated lob): keep the first
            link.close()

    def make_link() -> VrpnLink:
        # only the first connection gets (and owns) the UDP socket: closing a second one must
        # not close the socket, nor take over its reader, under the first
        udp: bool | socket.socket = udp_sock if not made else False
        made.append(
            VrpnLink(session_factory, on_events, udp=udp, on_open=opened, on_close=on_close)
        )
        return made[-1]

    try:
        listener = await loop.create_server(make_link, local_ip, 0, backlog=1)
    except OSError as exc:
        udp_sock.close()
        raise TransportError(f"cannot listen for the server's connection: {exc}") from None
    tcp_port = int(listener.sockets[0].getsockname()[1])
    lob = encode_lob(local_ip, tcp_port)
    taken: VrpnLink | None = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError):
                    udp_sock.sendto(lob, (server_ip, port))
                done, _ = await asyncio.wait([arrived], timeout=LOB_INTERVAL)
                if done:
                    taken = arrived.result()
                    return taken
    except TimeoutError:
        raise TransportError(
            f"no VRPN server answered at {host}:{port} (UDP connection request)"
        ) from None
    finally:
        listener.close()
        if taken is None:  # timed out or cancelled: nothing of this attempt may stay open
            for link in made:
                link.close()
            udp_sock.close()


# -- server ---------------------------------------------------------------------------------


class LobListener:
    """The server's UDP port as a datagram session: each datagram is a client's connection
    request ("lob"), which becomes the address to connect back to, or a PacketDropped."""

    def __init__(self) -> None:
        self.stats = SessionStats()

    def feed_datagram(
        self, data: bytes, addr: Address, now: float
    ) -> list[Address | PacketDropped]:
        self.stats.bytes_in += len(data)
        try:
            target = decode_lob(data)
        except DecodeError as exc:
            self.stats.drop(exc.reason)
            reason = f"bad connection request from {addr[0]}:{addr[1]}: {exc.reason}"
            return [PacketDropped(protocol=PROTOCOL, reason=reason, size=len(data))]
        self.stats.messages_in += 1
        return [target]

    def tick(self, now: float) -> list[Address | PacketDropped]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        return []

    def next_deadline(self) -> float | None:
        return None


class VrpnListener:
    """A VRPN server's listening side: TCP-only clients connect to TCP `port`; UDP+TCP clients
    send lobs to UDP `port` and are connected back to. Every connection is a `VrpnLink` of
    `session_factory` and `on_events`; `on_open` / `on_close` see them come and go (past
    `MAX_CLIENTS`, a new one is closed at once). `links` holds the open ones."""

    def __init__(
        self,
        session_factory: SessionFactory,
        on_events: OnEvents,
        *,
        on_open: OnLink | None = None,
        on_close: OnLink | None = None,
    ) -> None:
        self._factory = session_factory
        self._on_events = on_events
        self._on_open = on_open
        self._on_close = on_close
        self.links: set[StreamDriver] = set()
        self._pending: set[Address] = set()  # lob targets being connected back to, or connected
        self._tasks: set[asyncio.Task[None]] = set()
        self._track: tuple[OnDriver, OnDriver] | None = None  # the stream server's trackers
        self._lobs: DatagramDriver | None = None
        self._warned = False  # a stray sender must not flood the log (a pipe can fill)

    async def run(
        self, host: str, port: int, on_listening: Callable[[Address], None] | None = None
    ) -> None:
        """Serve until cancelled; then close every connection."""
        await serve_stream(
            host,
            port,
            lambda peer: self._factory(peer, None),
            cast(StreamOnEvents, self._on_events),
            on_listening=on_listening,
            new_driver=self._new_link,
            drivers=self.links,
            attach=self._attach,
        )

    # -- connections ---------------------------------------------------------------------------

    def _new_link(
        self, track_open: OnDriver, track_close: OnDriver, lob_target: Address | None = None
    ) -> VrpnLink:
        self._track = (track_open, track_close)
        link = VrpnLink(
            self._factory,
            self._on_events,
            udp=lob_target is not None,  # a connection back to a lob: UDP+TCP
            on_open=self._opened,
            on_close=self._closed,
        )
        link.lob_target = lob_target  # known before it can close: `_closed` frees the target
        return link

    def _opened(self, link: VrpnLink) -> None:
        assert self._track is not None
        self._track[0](link)
        if len(self.links) > MAX_CLIENTS:
            log.warning("VRPN: %d clients already; turning %s:%s away", MAX_CLIENTS, *link.peer)
            link.close()
        elif self._on_open is not None:
            self._on_open(link)

    def _closed(self, link: VrpnLink) -> None:
        assert self._track is not None
        self._track[1](link)
        if link.lob_target is not None:
            self._pending.discard(link.lob_target)
        reason = link.session.close_reason if link.session is not None else ""
        # a peer breaking the protocol is worth a warning; a peer leaving is not
        level = logging.INFO if reason in ("", PEER_CLOSED) else logging.WARNING
        log.log(level, "VRPN client %s:%s gone%s", *link.peer, f": {reason}" if reason else "")
        if self._on_close is not None:
            self._on_close(link)

    # -- connection requests (lobs) on the UDP port ---------------------------------------------

    def _attach(
        self, bound: Address, track_open: OnDriver, track_close: OnDriver
    ) -> Callable[[], None]:
        self._track = (track_open, track_close)
        self._lobs = DatagramDriver(LobListener(), self._on_lobs, open_udp_socket(bound))
        return self._detach

    def _detach(self) -> None:
        if self._lobs is not None:
            self._lobs.close()
        for task in list(self._tasks):
            task.cancel()

    def _on_lobs(self, events: list[Address | PacketDropped]) -> None:
        for event in events:
            if isinstance(event, PacketDropped):  # said once, then counted (stats)
                level = logging.DEBUG if self._warned else logging.WARNING
                self._warned = True
                log.log(level, "VRPN: %s (more are counted, not logged)", event.reason)
            elif event in self._pending:
                continue  # a repeated request while we connect (or are connected) back
            elif len(self._pending) >= MAX_CLIENTS:
                log.warning("VRPN: too many connection requests; ignoring %s:%s", *event)
            else:
                self._pending.add(event)
                task = asyncio.get_running_loop().create_task(self._connect_back(event))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _connect_back(self, target: Address) -> None:
        assert self._track is not None
        track_open, track_close = self._track
        try:
            async with asyncio.timeout(CONNECT_BACK_TIMEOUT):
                await asyncio.get_running_loop().create_connection(
                    lambda: self._new_link(track_open, track_close, target), *target
                )
        except (OSError, TimeoutError) as exc:
            self._pending.discard(target)
            log.warning("VRPN: cannot connect back to %s:%s: %s", *target, exc)
