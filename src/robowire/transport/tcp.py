"""TCP stream driver: one connection, one `StreamSession`, client or server side."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from typing import Any, cast

from robowire.errors import TransportError
from robowire.timebase import monotonic
from robowire.transport.tap import RECEIVER
from robowire.transport.timer import DeadlineTimer
from robowire.wire import Address, StreamSession

log = logging.getLogger("robowire.transport")

MAX_WRITE_BUFFER = 16 << 20
"""Bytes a connection may have written but unsent; past it the peer has stopped reading and is
dropped. Sinks skip a slow peer's updates long before (at about 1 MiB); this bounds what is
sent regardless (reliable messages)."""
READ_SIZE = 64 << 10  # bytes read at once at most (see StreamDriver)

SessionFactory = Callable[[Address], StreamSession[Any]]
OnEvents = Callable[["StreamDriver", list[Any]], None]
OnDriver = Callable[["StreamDriver"], None]
DriverFactory = Callable[[OnDriver, OnDriver], "StreamDriver"]
"""(on_open, on_close) -> a new driver that calls them: for drivers that are more than a
StreamDriver (a protocol that also needs a UDP socket)."""
Attach = Callable[[Address, OnDriver, OnDriver], Callable[[], None]]
"""Called once the server is bound, with its address and the (on_open, on_close) pair that
tracks a driver (for connections the server opens itself); returns what to call at the end."""


class StreamDriver(asyncio.BufferedProtocol):
    """Feeds one connection's bytes to its session and writes what the session wants sent.

    The session is built when the connection is made, from the peer's address. Code that gives
    the session something to send between reads (a sink pushing an update) calls `flush()`.
    A read is at most `READ_SIZE` bytes (the event loop's own reads are 256 KiB: a peer that
    sends faster than the session decodes would hold the loop that long each time).
    """

    def __init__(
        self,
        session_factory: SessionFactory,
        on_events: OnEvents,
        *,
        on_open: OnDriver | None = None,
        on_close: OnDriver | None = None,
    ) -> None:
        self._session_factory = session_factory
        self._on_events = on_events
        self._on_open = on_open
        self._on_close = on_close
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._timer = DeadlineTimer(self._loop, self._tick)
        self.session: StreamSession[Any] | None = None
        self.peer: Address = ("", 0)
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self._ended = False  # the peer's EOF was fed, or we closed the connection ourselves
        self._receiver = RECEIVER.get()  # the source this connection reads for (its tap)
        self._buffer = memoryview(bytearray(READ_SIZE))

    # asyncio.BufferedProtocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport implements asyncio.Transport without subclassing it
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # live telemetry: send each write now, not after Nagle's delay
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))
        self.session = self._new_session(transport)
        if self._on_open is not None:
            self._on_open(self)
        self._start()

    def _new_session(self, transport: asyncio.BaseTransport) -> StreamSession[Any]:
        """The session of this connection (subclasses with more sockets set those up here)."""
        return self._session_factory(self.peer)

    def _start(self) -> None:
        """Send what the new session queued (subclasses may start its clock instead)."""
        self.flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._buffer[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        now = monotonic()
        if self._receiver is not None and self._receiver.tap is not None:
            self._receiver.tap(data, now, "tcp", self.peer)
        if self.session is not None:
            self._after(self.session.feed(data, now))

    def eof_received(self) -> bool:
        self._ended = True
        if self.session is not None:
            self._after(self.session.feed_eof(monotonic()))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()
        self._transport = None
        session = self.session
        if session is not None and not self._ended and not session.close_expected():
            self._ended = True  # reset without an EOF: the session learns the peer is gone
            self._after(session.feed_eof(monotonic()))
        if not self.closed.done():
            self.closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    # driving the session

    def _tick(self) -> None:
        if self.session is not None:
            self._after(self.session.tick(monotonic()))

    def _after(self, events: list[Any]) -> None:
        self.flush()
        if events:
            self._on_events(self, events)

    def flush(self) -> None:
        """Write what the session has queued, close if it asks, and re-arm its timer."""
        transport, session = self._transport, self.session
        if transport is None or session is None:
            return
        data = session.data_to_send()
        if data:
            transport.write(data)
            if transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                log.warning("%s:%s stopped reading: connection dropped", *self.peer)
                self._ended = True
                transport.abort()  # close() would wait for a buffer that never drains
                return
        if session.close_expected():
            self.close()
            return
        self._timer.arm(session.next_deadline())

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def write_buffer_size(self) -> int:
        """Bytes written but not yet sent: a sink skips a peer whose buffer keeps growing."""
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    def close(self) -> None:
        self._ended = True
        self._timer.cancel()
        if self._transport is not None:
            self._transport.close()


async def connect_stream(
    host: str,
    port: int,
    session: StreamSession[Any],
    on_events: OnEvents,
    *,
    on_open: OnDriver | None = None,
    timeout: float = 5.0,
) -> None:
    """Run one client connection until the peer or the session closes it (or cancellation).

    Raises TransportError (one line) when the connection cannot be made.
    """
    loop = asyncio.get_running_loop()
    try:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation that
        # arrives as the connection fails, and the caller would then retry forever
        async with asyncio.timeout(timeout):
            _, driver = await loop.create_connection(
                lambda: StreamDriver(lambda _peer: session, on_events, on_open=on_open), host, port
            )
    except (OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise TransportError(f"cannot connect to {host}:{port}: {reason}") from None
    try:
        await asyncio.shield(driver.closed)
    finally:
        driver.close()


def listen_error(host: str, port: int, exc: OSError) -> TransportError:
    """The one-line error of a server that cannot bind `host:port` (raise it `from None`):
    asyncio's message repeats the address, so only the reason ("Address already in use")."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return TransportError(f"cannot listen on {host}:{port}: {reason}")


async def serve_stream(
    host: str,
    port: int,
    session_factory: SessionFactory,
    on_events: OnEvents,
    *,
    on_listening: Callable[[Address], None] | None = None,
    on_open: OnDriver | None = None,
    on_close: OnDriver | None = None,
    new_driver: DriverFactory | None = None,
    drivers: set[StreamDriver] | None = None,
    attach: Attach | None = None,
) -> None:
    """Accept connections, one session each, until cancelled; then close them all.

    By default each connection gets a `StreamDriver` of `session_factory` and `on_events`;
    `new_driver` builds another kind instead (then those two are not used). `drivers` is the
    set of open connections (the caller's, if it wants to see them). `attach` runs beside the
    server: it is called once the port is bound, before `on_listening`, and may open more
    connections with drivers that call the two callbacks it is given; they are tracked and
    closed like the accepted ones.
    """
    loop = asyncio.get_running_loop()
    tracked: set[StreamDriver] = set() if drivers is None else drivers

    def opened(driver: StreamDriver) -> None:
        tracked.add(driver)
        log.info("connection from %s:%s", *driver.peer)
        if on_open is not None:
            on_open(driver)

    def closed(driver: StreamDriver) -> None:
        tracked.discard(driver)
        if on_close is not None:
            on_close(driver)

    def make_driver() -> StreamDriver:
        if new_driver is not None:
            return new_driver(opened, closed)
        return StreamDriver(session_factory, on_events, on_open=opened, on_close=closed)

    try:
        server = await loop.create_server(make_driver, host, port)
    except OSError as exc:
        raise listen_error(host, port, exc) from None
    sockname = server.sockets[0].getsockname()
    bound = (str(sockname[0]), int(sockname[1]))
    detach: Callable[[], None] | None = None
    try:
        if attach is not None:
            detach = attach(bound, opened, closed)
        if on_listening is not None:
            on_listening(bound)
        await asyncio.Future()  # until cancelled
    finally:
        if detach is not None:
            detach()
        server.close()
        for driver in list(tracked):
            driver.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)
