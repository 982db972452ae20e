"""UDP driver: one socket, one `DatagramSession`, datagrams read in batches.

asyncio's datagram transport wakes the loop once per datagram, which tops out near 50k
datagrams/s on this class of machine. Here the socket is non-blocking and, on each readiness
wake-up, `recvfrom` is called until the kernel queue is empty (or `batch` datagrams were read),
so a burst costs one wake-up and one flush of the session's output, and one delivery of the
events. That receive loop is `DatagramReader` (`read_datagrams` its body), the one every UDP
socket of robowire is read with; a session that decodes a whole burst as one batch (a
`BatchDatagramSession`: VRSP's receiver, VRPN's session) takes the wake-up's datagrams at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import Any

from robowire.errors import TransportError
from robowire.timebase import monotonic
from robowire.transport.tap import RECEIVER
from robowire.transport.timer import DeadlineTimer
from robowire.wire import Address, BatchDatagramSession, DatagramSession

log = logging.getLogger("robowire.transport")

MAX_DATAGRAM = 65_535
RECEIVE_BUFFER = 4 << 20  # ask the kernel for room to absorb bursts while Python is busy

OnEvents = Callable[[list[Any]], None]


def read_datagrams(sock: socket.socket, limit: int) -> tuple[list[tuple[bytes, Address]], bool]:
    """What the kernel has queued on `sock` (at most `limit` datagrams): the body of the one
    receive loop every UDP socket of robowire is read with, `DatagramReader` (and where a
    recording taps the datagrams), and whether the socket reported an error meanwhile."""
    out: list[tuple[bytes, Address]] = []
    failed = False
    append, recvfrom = out.append, sock.recvfrom
    for _ in range(limit):
        try:
            data, addr = recvfrom(MAX_DATAGRAM)
        except BlockingIOError:
            break
        except OSError:  # ICMP port unreachable reported on a connected socket
            failed = True
            continue
        append((data, (str(addr[0]), int(addr[1]))))
    receiver = RECEIVER.get()
    if receiver is not None and out:
        now = receiver.last_heard = monotonic()  # the source's peer is alive
        tap = receiver.tap
        if tap is not None:
            for data, peer in out:
                tap(data, now, "udp", peer)
    return out, failed


def send_datagrams(sock: socket.socket, datagrams: list[tuple[bytes, Address | None]]) -> int:
    """Send a session's datagrams (None: to the connected peer); returns how many failed."""
    failed = 0
    for data, addr in datagrams:
        try:
            if addr is None:
                sock.send(data)
            else:
                sock.sendto(data, addr)
        except OSError:  # full buffer or unreachable peer: UDP may lose it, count it
            failed += 1
    return failed


Take = Callable[[list[tuple[bytes, Address]], float], None]
"""(a wake-up's datagrams with their senders, in order; the monotonic time they were read)"""


class DatagramReader:
    """The one UDP receive loop on the event loop: on each readiness wake-up of `sock`, every
    datagram the kernel has queued (at most `batch`, `read_datagrams`) goes to `take` as one
    list, with one `now`. `close` stops it and closes the socket."""

    def __init__(self, sock: socket.socket, take: Take, *, batch: int) -> None:
        self.sock = sock
        self._take = take
        self._batch = batch
        self._loop = asyncio.get_running_loop()
        self.wakeups = 0
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        self.wakeups += 1
        datagrams, failed = read_datagrams(self.sock, self._batch)
        if failed:  # uvloop polls a socket no more once it reported an error: poll it anew
            self._loop.remove_reader(self.sock.fileno())
            self._loop.add_reader(self.sock.fileno(), self._readable)
        if datagrams:
            self._take(datagrams, monotonic())

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):  # (a socket closed under it)
            self._loop.remove_reader(self.sock.fileno())
        self.sock.close()


class DatagramDriver:
    """Runs a datagram session on a bound (and optionally connected) UDP socket.

    A `BatchDatagramSession` gets each wake-up's datagrams at once (`feed_datagrams`: one
    batch, one delivery); any other session gets them one at a time (`feed_datagram`). Either
    way a wake-up's events are one call of `on_events`, after one flush."""

    def __init__(
        self,
        session: DatagramSession[Any],
        on_events: OnEvents,
        sock: socket.socket,
        *,
        batch: int = 1024,
    ) -> None:
        self.session = session
        self._on_events = on_events
        self.sock = sock
        self._loop = asyncio.get_running_loop()
        self._timer = DeadlineTimer(self._loop, self._tick)
        self.send_errors = 0
        take: Take = self._take
        if isinstance(session, BatchDatagramSession):  # (checked once: it is not cheap)
            self._feed_batch = session.feed_datagrams
            take = self._take_batch
        self._reader = DatagramReader(sock, take, batch=batch)

    @property
    def wakeups(self) -> int:
        """How many times the socket woke the loop up (a burst read at once is one)."""
        return self._reader.wakeups

    def _take(self, datagrams: list[tuple[bytes, Address]], now: float) -> None:
        events: list[Any] = []
        feed = self.session.feed_datagram
        for data, addr in datagrams:
            events.extend(feed(data, addr, now))
        self._after(events)

    def _take_batch(self, datagrams: list[tuple[bytes, Address]], now: float) -> None:
        self._after(self._feed_batch(datagrams, now))

    def _tick(self) -> None:
        self._after(self.session.tick(monotonic()))

    def _after(self, events: list[object]) -> None:
        self.flush()
        if events:
            self._on_events(events)

    def flush(self) -> None:
        """Send what the session has queued and re-arm its timer."""
        self.send_errors += send_datagrams(self.sock, self.session.datagrams_to_send())
        self._timer.arm(self.session.next_deadline())

    def close(self) -> None:
        self._timer.cancel()
        self._reader.close()


def open_udp_socket(local_addr: Address, remote_addr: Address | None = None) -> socket.socket:
    """A non-blocking UDP socket bound to `local_addr` (and connected to `remote_addr`)."""
    family = socket.AF_INET6 if ":" in local_addr[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.bind(local_addr)
        if remote_addr is not None:
            sock.connect(remote_addr)
    except OSError as exc:
        sock.close()
        where = f"{local_addr[0]}:{local_addr[1]}"
        raise TransportError(f"cannot open UDP {where}: {exc.strerror or exc}") from None
    return sock


async def run_datagram(
    session: DatagramSession[Any],
    on_events: OnEvents,
    *,
    local_addr: Address | None = None,
    remote_addr: Address | None = None,
    sock: socket.socket | None = None,
    on_listening: Callable[[Address], None] | None = None,
    on_open: Callable[[DatagramDriver], None] | None = None,
    batch: int = 1024,
) -> None:
    """Run `session` on a UDP socket until cancelled: one opened on `local_addr` (and
    connected to `remote_addr`), or `sock`, one already bound (closed at the end too)."""
    if sock is None:
        assert local_addr is not None
        sock = open_udp_socket(local_addr, remote_addr)
    driver = DatagramDriver(session, on_events, sock, batch=batch)
    try:
        if on_open is not None:
            on_open(driver)
        if on_listening is not None:
            name = sock.getsockname()
            on_listening((str(name[0]), int(name[1])))
        driver.flush()
        await asyncio.Future()  # until cancelled
    finally:
        driver.close()
