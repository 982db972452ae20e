"""The fault proxy's sockets: a UDP relay and a TCP relay on loopback, between a real peer and
robowire, doing what their plans (`tests.faults.plan`) decide and nothing else.

`UdpProxy`: datagrams to `listen` go to `target` from one socket per client address (as a NAT
would), replies come back from `listen`, so a peer with a connected socket (WPILib's XRP
client) takes them. `up` is the client->target plan, `down` the way back.

`TcpProxy`: each connection to `listen` is relayed to a new connection to `target`. Its
controls act on every connection it relays: `cut("rst"|"fin")` now, `pause(direction)`
(stop reading that way: the sender's window fills, the receiver hears nothing, nothing is
closed; a stalled or SIGSTOPped peer as the other end sees it) and `resume(direction)`, and
`refuse` (new connections are closed at once: a peer that is down). `plans` makes each new
connection's `StreamPlan`s (a cut after N bytes). `counts` says what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .plan import Cut, DatagramPlan, StreamPlan

Address = tuple[str, int]
Direction = Literal["up", "down"]  # up: client -> target; down: target -> client
READ = 64 << 10


class _Relay(asyncio.DatagramProtocol):
    """One socket of the UDP proxy: what it reads goes to `received`."""

    def __init__(self, received: Callable[[bytes, Address], None]) -> None:
        self.received = received
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram transport

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self.received(data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:
        pass  # a port not listening (ICMP refused): the datagram is lost, as on a real wire


class _Pump:
    """Sends what a `DatagramPlan` says is due, when it is due."""

    def __init__(self, plan: DatagramPlan, send: Callable[[bytes], None]) -> None:
        self.plan, self.send = plan, send
        self._timer: asyncio.TimerHandle | None = None

    def feed(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        self.plan.feed(data, loop.time())
        self.run()

    def run(self) -> None:
        loop = asyncio.get_running_loop()
        for data in self.plan.due(loop.time()):
            self.send(data)
        due = self.plan.next_due()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if due is not None:
            self._timer = loop.call_at(due, self.run)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


@dataclass
class UdpProxy:
    """A UDP relay with faults (see the module docstring); `async with` or start/close."""

    target: Address
    up: DatagramPlan = field(default_factory=DatagramPlan)
    down: DatagramPlan = field(default_factory=DatagramPlan)
    listen: Address = ("127.0.0.1", 0)
    address: Address | None = None
    _front: _Relay | None = None
    _backs: dict[Address, tuple[socket.socket, _Pump, _Pump]] = field(default_factory=dict)

    async def start(self) -> UdpProxy:
        loop = asyncio.get_running_loop()
        _, front = await loop.create_datagram_endpoint(
            lambda: _Relay(self._from_client), local_addr=self.listen
        )
        self._front = front
        assert front.transport is not None
        host, port = front.transport.get_extra_info("sockname")[:2]
        self.address = (str(host), int(port))
        return self

    async def __aenter__(self) -> UdpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.forget()
        if self._front is not None and self._front.transport is not None:
            self._front.transport.close()

    def forget(self) -> None:
        """Close every client's relay socket (as a NAT's mappings expire): a client that
        sends again gets a new one."""
        loop = asyncio.get_running_loop()
        for sock, up, down in self._backs.values():
            up.close()
            down.close()
            loop.remove_reader(sock.fileno())
            sock.close()
        self._backs.clear()

    def set(self, *, enabled: bool | None = None, outage: bool | None = None) -> None:
        """Faults on or off, an outage on or off, both ways (held datagrams go at once)."""
        now = asyncio.get_running_loop().time()
        for plan in (self.up, self.down):
            if enabled is not None:
                plan.enabled = enabled
                if not enabled:
                    plan.release_all(now)
            if outage is not None:
                plan.outage = outage
        for _, up, down in self._backs.values():
            up.run()
            down.run()

    def _from_client(self, data: bytes, client: Address) -> None:
        back = self._backs.get(client)
        if back is None:
            back = self._open(client)
        back[1].feed(data)

    def _open(self, client: Address) -> tuple[socket.socket, _Pump, _Pump]:
        front = self._front
        assert front is not None and front.transport is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        transport = front.transport
        down = _Pump(self.down, lambda data: transport.sendto(data, client))
        up = _Pump(self.up, lambda data: _sendto(sock, data, self.target))
        asyncio.get_running_loop().add_reader(sock.fileno(), _read, sock, down)
        self._backs[client] = (sock, up, down)
        return self._backs[client]


def _read(sock: socket.socket, down: _Pump) -> None:
    while True:
        try:
            data = sock.recv(READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # a port not listening (ICMP refused): lost, as on a real wire
            continue
        down.feed(data)


def _sendto(sock: socket.socket, data: bytes, target: Address) -> None:
    with contextlib.suppress(OSError):  # a full buffer or a refused port: lost
        sock.sendto(data, target)


@dataclass
class _Connection:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    running: dict[Direction, asyncio.Event]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


@dataclass
class TcpProxy:
    """A TCP relay with faults (see the module docstring)."""

    target: Address
    listen: Address = ("127.0.0.1", 0)
    plans: Callable[[], tuple[StreamPlan, StreamPlan]] = lambda: (StreamPlan(), StreamPlan())
    refuse: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    address: Address | None = None
    _server: asyncio.Server | None = None
    _connections: list[_Connection] = field(default_factory=list)
    _paused: set[Direction] = field(default_factory=set)
    _opening: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, *self.listen)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (str(host), int(port))
        for name in ("connections", "refused", "rst", "fin", "up_bytes", "down_bytes"):
            self.counts[name] = 0
        return self

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            self._end(conn, "fin", count=False)
        for conn in list(self._connections):
            for task in conn.tasks:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    @property
    def open(self) -> int:
        return len(self._connections)

    def cut(self, how: Cut) -> None:
        """End every relayed connection now, both sides: a reset or a clean close (one still
        being opened to the target too)."""
        for conn in list(self._connections):
            self._end(conn, how)
        for writer in list(self._opening):
            self.counts[how] += 1
            if how == "rst":
                _reset(writer)
            else:
                writer.close()

    def pause(self, direction: Direction) -> None:
        """Stop reading `direction`'s sender (nothing is closed)."""
        self._paused.add(direction)
        for conn in self._connections:
            conn.running[direction].clear()

    def resume(self, direction: Direction) -> None:
        self._paused.discard(direction)
        for conn in self._connections:
            conn.running[direction].set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            self.counts["refused"] += 1
            _reset(writer)
            return
        self._opening.add(writer)  # a cut meanwhile cuts it too
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self.counts["refused"] += 1
            _reset(writer)
            return
        finally:
            self._opening.discard(writer)
        if writer.is_closing():  # cut while it was being opened
            server_writer.close()
            return
        self.counts["connections"] += 1
        running: dict[Direction, asyncio.Event] = {"up": asyncio.Event(), "down": asyncio.Event()}
        for d, event in running.items():
            if d not in self._paused:
                event.set()
        conn = _Connection(writer, server_writer, running)
        self._connections.append(conn)
        up_plan, down_plan = self.plans()
        conn.tasks = [
            asyncio.create_task(self._pump(conn, "up", reader, server_writer, up_plan)),
            asyncio.create_task(self._pump(conn, "down", server_reader, writer, down_plan)),
        ]

    async def _pump(
        self,
        conn: _Connection,
        direction: Direction,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        plan: StreamPlan,
    ) -> None:
        try:
            while True:
                await conn.running[direction].wait()
                data = await reader.read(READ)
                await conn.running[direction].wait()  # paused while it read: held
                if not data:
                    self._end(conn, "fin", count=False)
                    return
                data, cut = plan.feed(data)
                self.counts[f"{direction}_bytes"] += len(data)
                writer.write(data)
                if cut is not None:
                    if cut == "fin":
                        await writer.drain()
                    self._end(conn, cut)
                    return
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            self._end(conn, "fin", count=False)

    def _end(self, conn: _Connection, how: Cut, *, count: bool = True) -> None:
        if conn not in self._connections:
            return
        self._connections.remove(conn)
        if count:
            self.counts[how] += 1
        for writer in (conn.client, conn.server):
            if how == "rst":
                _reset(writer)
            else:
                writer.close()
        current = asyncio.current_task()
        for task in conn.tasks:
            if task is not current:
                task.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST, not a FIN (SO_LINGER 0)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
