"""The asyncio driver VRPN needs: one TCP connection plus, in UDP+TCP mode, one UDP socket.

Thin, like `robowire.transport`: it feeds the session bytes and datagrams with `loop.time()`,
writes what the session queued, hands events to a callback and re-arms one timer. The parts
that are not a session's business live here too: the client's TCP listener and lob datagram
(UDP+TCP mode), and the server's UDP port that receives lobs and connects back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import cast

from robowire.errors import DecodeError, TransportError
from robowire.protocols.base import Address
from robowire.protocols.vrpn.codec import decode_lob, encode_lob
from robowire.protocols.vrpn.session import PEER_CLOSED, VrpnSession
from robowire.transport.tcp import OnDriver, StreamDriver
from robowire.transport.tcp import OnEvents as StreamOnEvents
from robowire.transport.udp import MAX_DATAGRAM, open_udp_socket

log = logging.getLogger("robowire.vrpn")

SessionFactory = Callable[[Address, Address | None], VrpnSession]
"""(peer TCP address, our inbound UDP address or None for TCP-only) -> a new session."""
OnEvents = Callable[["VrpnLink", list[object]], None]
OnLink = Callable[["VrpnLink"], None]

MAX_CLIENTS = 256  # like vrpn_MAX_ENDPOINTS: more clients are turned away
LOB_INTERVAL = 2.0  # the C++ client re-sends its connection request every 2 s
SLOW_PEER_BYTES = 1 << 20  # a peer this far behind gets no more low-latency data


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
                self._loop.add_reader(self.sock.fileno(), self._readable)
        return self._factory(self.peer, inbound)

    def _start(self) -> None:
        self._tick()  # starts the session's clock (its cookie timer) and flushes

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_udp()
        super().connection_lost(exc)

    def _readable(self) -> None:
        sock, session = self.sock, self.session
        if sock is None or session is None:
            return
        now = self._loop.time()
        events: list[object] = []
        for _ in range(256):
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                break
            except OSError:
                continue
            events += session.feed_datagram(data, (str(addr[0]), int(addr[1])), now)
        self._after(events)

    def flush(self) -> None:
        """Send queued datagrams, then what the stream driver does: TCP bytes, close, timer."""
        session = self.session
        if session is not None and self.sock is not None:
            for datagram, addr in session.datagrams_to_send():
                try:
                    if addr is not None:
                        self.sock.sendto(datagram, addr)
                except OSError:  # full buffer or unreachable peer: UDP may lose it
                    self.send_errors += 1
        super().flush()

    @property
    def congested(self) -> bool:
        """True when TCP bytes pile up for this peer: skip its low-latency data for now."""
        return not self.connected or self.write_buffer_size() > SLOW_PEER_BYTES

    def close(self) -> None:
        super().close()
        self._close_udp()

    def _close_udp(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None


# -- client ---------------------------------------------------------------------------------


def _ipv4(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise TransportError(f"cannot resolve {host}: {exc}") from None


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
    loop = asyncio.get_running_loop()
    if not udp:
        try:
            _, link = await asyncio.wait_for(
                loop.create_connection(
                    lambda: VrpnLink(session_factory, on_events, on_close=on_close), host, port
                ),
                timeout,
            )
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            raise TransportError(f"cannot connect to {host}:{port}: {reason}") from None
        return link

    server_ip = _ipv4(host)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((server_ip, port))
        local_ip = str(probe.getsockname()[0])
    except OSError as exc:
        raise TransportError(f"no route to {host}:{port}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    udp_sock = open_udp_socket((local_ip, 0))
    arrived: asyncio.Future[VrpnLink] = loop.create_future()

    def opened(link: VrpnLink) -> None:
        if not arrived.done():
            arrived.set_result(link)
        else:  # a second connect-back (a repeated lob): keep the first
            link.close()

    def make_link() -> VrpnLink:
        return VrpnLink(session_factory, on_events, udp=udp_sock, on_open=opened, on_close=on_close)

    try:
        listener = await loop.create_server(make_link, local_ip, 0, backlog=1)
    except OSError as exc:
        udp_sock.close()
        raise TransportError(f"cannot listen for the server's connection: {exc}") from None
    tcp_port = int(listener.sockets[0].getsockname()[1])
    lob = encode_lob(local_ip, tcp_port)
    try:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError):
                    udp_sock.sendto(lob, (server_ip, port))
                done, _ = await asyncio.wait([arrived], timeout=LOB_INTERVAL)
                if done:
                    return arrived.result()
    except TimeoutError:
        udp_sock.close()
        raise TransportError(
            f"no VRPN server answered at {host}:{port} (UDP connection request)"
        ) from None
    finally:
        listener.close()


# -- server ---------------------------------------------------------------------------------


class _LobProtocol(asyncio.DatagramProtocol):
    def __init__(self, on_lob: Callable[[bytes, Address], None]) -> None:
        self._on_lob = on_lob

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self._on_lob(data, (str(addr[0]), int(addr[1])))


async def serve(
    host: str,
    port: int,
    session_factory: SessionFactory,
    on_events: OnEvents,
    *,
    on_listening: Callable[[Address], None] | None = None,
    on_open: OnLink | None = None,
    on_close: OnLink | None = None,
) -> None:
    """Serve TCP-only clients on TCP `port` and UDP+TCP clients' lobs on UDP `port`."""
    loop = asyncio.get_running_loop()
    links: set[VrpnLink] = set()
    pending: set[Address] = set()

    def opened(link: VrpnLink) -> None:
        if len(links) >= MAX_CLIENTS:
            log.warning("VRPN: %d clients already; turning %s:%s away", MAX_CLIENTS, *link.peer)
            link.close()
            return
        links.add(link)
        log.info("VRPN client %s:%s connected", *link.peer)
        if on_open is not None:
            on_open(link)

    def closed(link: VrpnLink) -> None:
        links.discard(link)
        if link.lob_target is not None:
            pending.discard(link.lob_target)
        reason = link.session.close_reason if link.session is not None else ""
        # a peer breaking the protocol is worth a warning; a peer leaving is not
        level = logging.INFO if reason in ("", PEER_CLOSED) else logging.WARNING
        log.log(level, "VRPN client %s:%s gone%s", *link.peer, f": {reason}" if reason else "")
        if on_close is not None:
            on_close(link)

    def factory(udp: bool) -> Callable[[], VrpnLink]:
        return lambda: VrpnLink(
            session_factory, on_events, udp=udp, on_open=opened, on_close=closed
        )

    async def connect_back(target: Address) -> None:
        try:
            _, link = await asyncio.wait_for(loop.create_connection(factory(True), *target), 5.0)
            link.lob_target = target
        except (OSError, TimeoutError) as exc:
            pending.discard(target)
            log.warning("VRPN: cannot connect back to %s:%s: %s", *target, exc)

    tasks: set[asyncio.Task[None]] = set()

    def on_lob(data: bytes, addr: Address) -> None:
        try:
            target = decode_lob(data)
        except DecodeError as exc:
            log.warning("VRPN: bad connection request from %s:%s: %s", *addr, exc.reason)
            return
        if target in pending:
            return  # a repeated request while we connect (or are connected) back
        if len(pending) >= MAX_CLIENTS:
            log.warning("VRPN: too many connection requests; ignoring %s:%s", *target)
            return
        pending.add(target)
        task = loop.create_task(connect_back(target))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        server = await loop.create_server(factory(False), host, port)
    except OSError as exc:
        raise TransportError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = server.sockets[0].getsockname()
    try:
        lob_transport, _ = await loop.create_datagram_endpoint(
            lambda: _LobProtocol(on_lob), local_addr=(str(bound[0]), int(bound[1]))
        )
    except OSError as exc:
        server.close()
        raise TransportError(f"cannot open UDP {host}:{bound[1]}: {exc.strerror or exc}") from None
    if on_listening is not None:
        on_listening((str(bound[0]), int(bound[1])))
    try:
        await asyncio.Future()  # until cancelled
    finally:
        lob_transport.close()
        server.close()
        for task in list(tasks):
            task.cancel()
        for link in list(links):
            link.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)
