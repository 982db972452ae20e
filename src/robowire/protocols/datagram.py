"""The datagram templates: what every UDP protocol's services share, so that a UDP protocol
writes its codec, adapter and simulator model and no socket code.

* `DatagramSource`: a UDP receiver on `host:port` (`listen NAME://0.0.0.0:PORT`), or with
  `remote` set a client whose socket is connected to its peer (XRP's WPILib side). Port 0
  binds first and names the source after the port it got; the shared `DatagramDriver` reads
  every datagram a wake-up has queued (at most `batch`) and feeds them to the session (a
  batch session takes them as one list); `silence` says when a peer that stopped is gone
  (UDP shows nothing else); `time_default` is "receive" (no stamps on the wire).
* `DatagramSink` / `DatagramSim`: a sink or simulator that sends datagrams to `host:port`
  (`serve NAME://HOST:PORT`, `sim NAME --to HOST:PORT`): the address resolved once, the
  sender socket (`open_sender_socket`, `broadcast`), `send` with the counters. A simulator
  times its sends with the `Sim` template's `step`; a protocol whose session times them
  (VRSP's DEF/DATA schedule) runs that session on the socket (`run_session`).
* `StatelessSession`: the session of a protocol with no handshake and no timers: each
  datagram is decoded (`decode(data) -> messages`), a `DecodeError` is a counted drop.
* `datagram_records`: the capture reader of a datagram protocol (pcap/pcapng: every UDP
  datagram; any other file: one raw datagram), and `udp_records` its pcap half.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from robowire.capture import Record, is_pcap, read_pcap
from robowire.endpoints import Endpoint, split_host_port
from robowire.errors import ConfigError, DecodeError, TransportError
from robowire.service import Sim, SimOptions, Sink, Source
from robowire.timebase import monotonic
from robowire.transport.udp import (
    MAX_DATAGRAM,
    DatagramDriver,
    open_udp_socket,
    run_datagram,
    send_datagrams,
)
from robowire.wire import Address, DatagramSession, PacketDropped, SessionStats
from robowire.world import World

SILENCE_SECONDS = 2.0  # a datagram peer this long silent is gone (nothing else shows it)
SEND_BUFFER = 4 << 20  # room for a whole frame's datagrams at once


def resolve(host: str, port: int) -> Address:
    """An IPv4 address for `host` (replies are matched against it exactly); TransportError
    (one line) when it has none."""
    try:
        info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        raise TransportError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    return (str(info[0][4][0]), int(info[0][4][1]))


def open_sender_socket(destination: Address, broadcast: bool = False) -> socket.socket:
    """A non-blocking UDP socket for sending to `destination` (bound to loopback when that
    is where it sends, else to every interface on a free port)."""
    local = "127.0.0.1" if destination[0].startswith("127.") else "0.0.0.0"
    sock = open_udp_socket((local, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    if broadcast:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    return sock


# -- receiving -----------------------------------------------------------------------------------


class DatagramSource(Source):
    """A UDP receiver on `host:port`, or (`dials`) a client of the peer there (see the module
    docstring).

    A protocol writes `new_adapter` and builds `self.session` (a `DatagramSession`) in its
    constructor; `received` gets each wake-up's events (delivered by default). A receiver is
    connected once bound; a client's socket is connected to `remote` (`host:port` resolved at
    each connect) and it calls `connected()` itself (when its peer first answers)."""

    dials = False  # a client: send to host:port from any local port, read its replies
    silence = SILENCE_SECONDS
    time_default = "receive"  # no timestamps on the wire: stamp on receipt
    batch = 1024  # datagrams read per wake-up at most

    def __init__(self, scheme: str, host: str, port: int) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        super().__init__(f"{scheme}@{host}:{port}")
        self.session: DatagramSession[Any] | None = None
        self.remote: Address | None = None  # a client's peer (`dials`), resolved at each connect
        self.driver: DatagramDriver | None = None
        self._bound: socket.socket | None = None

    @property
    def wakeups(self) -> int:
        """How many times its socket woke the loop up (each wake-up is one batch)."""
        return 0 if self.driver is None else self.driver.wakeups

    def received(self, events: list[Any]) -> None:
        """A wake-up's events (or a timer's): into the world."""
        self.deliver(events, monotonic())

    async def run(self, world: World) -> None:
        if self.port == 0 and not self.dials:  # bind first: named after the port it got
            self._bound = open_udp_socket((self.host, 0))
            self.port = int(self._bound.getsockname()[1])
            if self.name == f"{self.scheme}@{self.host}:0":  # (not renamed by its owner)
                self.name = f"{self.scheme}@{self.host}:{self.port}"
        await super().run(world)

    def _opened(self, driver: DatagramDriver) -> None:
        """The driver is up (nothing sent yet)."""
        self.driver = driver

    def _listening(self, address: Address) -> None:
        self.listening(address)
        self.connected()

    async def connect(self, world: World) -> None:
        assert self.session is not None, "a datagram source builds its session first"
        if self.dials:  # any local port, connected to its peer
            self.remote = resolve(self.host, self.port)
            sock = open_udp_socket(("0.0.0.0", 0), self.remote)
        else:
            sock = self._bound or open_udp_socket((self.host, self.port))  # TransportError
        self._bound = None
        try:
            await run_datagram(
                self.session,
                self.received,
                sock=sock,
                on_open=self._opened,
                on_listening=None if self.dials else self._listening,
                batch=self.batch,
            )
        finally:
            self.driver = None


# -- sending -------------------------------------------------------------------------------------


class _Sending:
    """What a sink and a simulator that send datagrams share: the resolved destination, the
    socket and `send`."""

    announce = "sending to"
    broadcast = False  # SO_BROADCAST on the socket (a broadcast destination)
    host: str
    port: int
    stats: SessionStats
    sock: socket.socket | None = None
    destination: Address | None = None

    def _open_sender(self) -> socket.socket:
        self.destination = resolve(self.host, self.port)
        self.sock = open_sender_socket(self.destination, self.broadcast)
        return self.sock

    def send(self, datagrams: Iterable[bytes]) -> None:
        """Send `datagrams` to the destination; counted (a full buffer or an unreachable
        peer loses one: UDP may)."""
        if self.sock is None:
            return
        out: list[tuple[bytes, Address | None]] = [(d, self.destination) for d in datagrams]
        failed = send_datagrams(self.sock, out)
        self.stats.messages_out += len(out) - failed
        self.stats.bytes_out += sum(len(d) for d, _ in out)
        if failed:
            self.stats.drop(f"{failed} datagram(s) not sent")

    async def run_session(
        self, session: DatagramSession[Any], on_events: Callable[[list[Any]], None]
    ) -> DatagramDriver:
        """A session that times its own sends (its `next_deadline`), on the socket."""
        assert self.sock is not None
        driver = DatagramDriver(session, on_events, self.sock)
        driver.flush()
        return driver


class DatagramSink(_Sending, Sink):
    """A sink that sends datagrams to `host:port` (see the module docstring). A protocol
    writes `write` (encode what changed, `send` it) or, with a session of its own,
    `sending(world)`."""

    def __init__(self, scheme: str, endpoint: Endpoint, default_port: int) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(default_port)
        super().__init__(f"{scheme}-sender@{self.host}:{self.port}")

    async def serve(self, world: World) -> None:
        sock = self._open_sender()
        try:
            await self.sending(world)
        finally:
            sock.close()

    async def sending(self, world: World) -> None:
        """Runs while the socket is open: says where it sends, then waits (`write` sends)."""
        assert self.destination is not None
        self.listening(self.destination)
        await asyncio.Future()


class DatagramSim(_Sending, Sim):
    """A simulator that sends datagrams to `--to HOST[:PORT]` (else `host:port` of its
    options, the protocol's default port): `step(now)` sends what is due (the `Sim`
    template times it), or, with a session of its own, `sending()`."""

    def __init__(self, scheme: str, options: SimOptions, default_port: int) -> None:
        port = default_port if options.port is None else options.port
        self.host, self.port = (
            split_host_port(options.target, port, options.host)
            if options.target
            else (options.host, port)
        )
        super().__init__(f"{scheme}-sim@{self.host}:{self.port}")

    async def serve(self) -> None:
        sock = self._open_sender()
        try:
            await self.sending()
        finally:
            sock.close()

    async def sending(self) -> None:
        """Runs while the socket is open: says where it sends, then waits (`step` sends)."""
        assert self.destination is not None
        self.listening(self.destination)
        await asyncio.Future()


# -- a protocol with no state --------------------------------------------------------------------


class StatelessSession:
    """The session of a datagram protocol with no handshake and no timers: each datagram is
    `decode`d into messages (the events the adapter takes), a `DecodeError` is one
    `PacketDropped`. Nothing to send, no deadline."""

    def __init__(self, protocol: str, decode: Callable[[bytes], Sequence[Any]]) -> None:
        self.protocol = protocol
        self.decode = decode
        self.stats = SessionStats()

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[Any]:
        self.stats.bytes_in += len(data)
        try:
            messages = list(self.decode(data))
        except DecodeError as exc:
            self.stats.drop(exc.reason)
            return [PacketDropped(protocol=self.protocol, reason=exc.reason, size=len(data))]
        self.stats.messages_in += len(messages)
        return messages

    def tick(self, now: float) -> list[Any]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        return []

    def next_deadline(self) -> float | None:
        return None


# -- captures ------------------------------------------------------------------------------------


def udp_records(path: str) -> Iterator[Record]:
    """Every UDP datagram of a pcap/pcapng, in order."""
    return (r for r in read_pcap(path) if r.transport == "udp")


def datagram_records(path: str, max_datagram: int = MAX_DATAGRAM) -> Iterator[Record]:
    """The records of a datagram protocol's capture: every UDP datagram of a pcap/pcapng, or
    a raw file (or "-", stdin) as one datagram of at most `max_datagram` bytes."""
    if path != "-" and not Path(path).exists():
        raise ConfigError(f"no such file: {path}")
    if path != "-" and is_pcap(path):
        return udp_records(path)
    return _raw(path, max_datagram)


def _raw(path: str, max_datagram: int) -> Iterator[Record]:
    import sys

    if path == "-":
        data = sys.stdin.buffer.read(max_datagram + 1)
    else:
        with open(path, "rb") as f:
            data = f.read(max_datagram + 1)
    if len(data) > max_datagram:
        raise ConfigError(f"{path}: more than {max_datagram} bytes: not one datagram")
    yield Record(data, None, "udp", flow="raw")
