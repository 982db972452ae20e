"""The drivers with small sessions: bytes flow both ways, timers fire, batches are batched."""

import asyncio
import socket
from collections.abc import Sequence

import pytest

from robowire.errors import TransportError
from robowire.timebase import monotonic
from robowire.transport import connect_stream, run_datagram, serve_stream
from robowire.transport.loop import start_now
from robowire.transport.udp import DatagramDriver
from robowire.wire import Address, SessionStats
from support import until


class LineEcho:
    """Echoes each line upper-cased; says 'tick' at a deadline; closes on 'bye'."""

    def __init__(self, tick_at: float | None = None) -> None:
        self.stats = SessionStats()
        self.buffer = b""
        self.out = b""
        self.closing = False
        self.tick_at = tick_at
        self.ticks = 0

    def feed(self, data: bytes, now: float) -> list[object]:
        self.buffer += data
        events: list[object] = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            events.append(line)
            if line == b"bye":
                self.closing = True
            self.out += line.upper() + b"\n"
        return events

    def feed_eof(self, now: float) -> list[object]:
        return ["eof"]

    def tick(self, now: float) -> list[object]:
        self.ticks += 1
        self.tick_at = None
        self.out += b"tick\n"
        return ["ticked"]

    def data_to_send(self) -> bytes:
        out, self.out = self.out, b""
        return out

    def next_deadline(self) -> float | None:
        return self.tick_at

    def close_expected(self) -> bool:
        return self.closing


class Script(LineEcho):
    """Client: says hello at once and 'later' at its deadline; says bye once it heard LATER."""

    def feed(self, data: bytes, now: float) -> list[object]:
        self.buffer += data
        lines = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            lines.append(line)
            if line == b"LATER":
                self.out += b"bye\n"
        return lines

    def tick(self, now: float) -> list[object]:
        self.tick_at = None
        self.out += b"later\n"
        return ["ticked"]


async def test_tcp_server_and_client_drive_sessions():
    server_events: list[object] = []
    listening: asyncio.Future[Address] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(
        serve_stream(
            "127.0.0.1",
            0,
            lambda peer: LineEcho(),
            lambda driver, events: server_events.extend(events),
            on_listening=listening.set_result,
        )
    )
    host, port = await listening

    loop = asyncio.get_running_loop()
    client = Script(tick_at=loop.time() + 0.05)
    client.out = b"hello\n"
    client_events: list[object] = []
    # returns when the server closes the connection after "bye"
    await asyncio.wait_for(
        connect_stream(host, port, client, lambda d, events: client_events.extend(events)), 5
    )
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)
    assert server_events == [b"hello", b"later", b"bye"]
    assert client_events == [b"HELLO", "ticked", b"LATER", b"BYE", "eof"]


async def test_tcp_connect_refused_is_one_transport_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(TransportError, match=f"cannot connect to 127.0.0.1:{port}"):
        await connect_stream("127.0.0.1", port, LineEcho(), lambda d, e: None)


class Counter:
    """Counts datagrams; answers each to its sender."""

    def __init__(self) -> None:
        self.stats = SessionStats()
        self.replies: list[tuple[bytes, Address | None]] = []
        self.batches: list[int] = []

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        self.stats.messages_in += 1
        self.replies.append((b"ack:" + data, addr))
        return [data]

    def tick(self, now: float) -> list[object]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        out, self.replies = self.replies, []
        return out

    def next_deadline(self) -> float | None:
        return None


async def test_udp_driver_reads_a_burst_in_few_wakeups_and_replies():
    session = Counter()
    events: list[object] = []
    opened: asyncio.Future[DatagramDriver] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_datagram(session, events.extend, local_addr=("127.0.0.1", 0), on_open=opened.set_result)
    )
    driver = await opened
    address = driver.sock.getsockname()

    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    sender.settimeout(2)
    for i in range(2000):  # a burst queued in the kernel before the loop gets to run
        sender.sendto(b"%d" % i, address)
    for _ in range(100):
        if len(events) == 2000:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert events == [b"%d" % i for i in range(2000)]
    assert driver.wakeups < 200  # batched: many datagrams per wake-up
    assert sender.recvfrom(100)[0] == b"ack:0"
    sender.close()


async def test_a_connected_udp_driver_hears_a_peer_that_came_up_after_it_sent():
    """An XRP source sends before its robot's port is bound (a simulator still starting): the
    kernel reports the ICMP "port unreachable" on the socket, and the driver must still read
    the peer's datagrams once the peer is there (uvloop stopped polling such a socket)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nobody there yet
    events: list[object] = []
    opened: asyncio.Future[DatagramDriver] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_datagram(Counter(), events.extend, local_addr=("127.0.0.1", 0),
                     remote_addr=("127.0.0.1", port), on_open=opened.set_result)
    )  # fmt: skip
    driver = await opened
    driver.sock.send(b"anyone?")
    await asyncio.sleep(0.1)  # the refusal comes back and is read
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", port))
    try:
        peer.sendto(b"here", driver.sock.getsockname())
        await until(lambda: events == [b"here"], "the peer's datagram read", seconds=5)
    finally:
        peer.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class Batches(Counter):
    """A batch session: records each `feed_datagrams` call (the datagrams, and `now`)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[list[tuple[bytes, Address]], float]] = []

    def feed_datagrams(
        self, datagrams: Sequence[tuple[bytes, Address]], now: float
    ) -> list[object]:
        self.calls.append((list(datagrams), now))
        return [len(datagrams)]


class Times(Counter):
    """A per-datagram session: records the `now` each datagram was fed with."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        self.times.append(now)
        return super().feed_datagram(data, addr, now)


async def burst(session: Counter, events: list[list[object]], count: int) -> tuple[Address, float]:
    """`count` datagrams queued on the driver's socket before the loop gets to read any;
    returns the sender's address and the time just before they were sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.bind(("127.0.0.1", 0))
    driver = DatagramDriver(session, events.append, sock)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.bind(("127.0.0.1", 0))
        before = monotonic()
        for i in range(count):  # no await in between: the loop cannot read before the last
            sender.sendto(b"datagram %d" % i, sock.getsockname())
        try:
            await until(lambda: bool(events), "the burst is read")
        finally:
            driver.close()
        name = sender.getsockname()
    return (str(name[0]), int(name[1])), before


async def test_a_batch_session_takes_a_wakeups_datagrams_in_one_call():
    session = Batches()
    events: list[list[object]] = []
    sender, before = await burst(session, events, 5)
    ((datagrams, now),) = session.calls  # one wake-up: one call, one `now`
    assert datagrams == [(b"datagram %d" % i, sender) for i in range(5)]  # bytes, order, peer
    assert before <= now <= monotonic()
    assert events == [[5]]  # and one delivery of its events
    assert session.stats.messages_in == 0  # not fed one at a time as well


async def test_a_session_without_batches_gets_a_wakeups_datagrams_one_by_one():
    session = Times()
    events: list[list[object]] = []
    await burst(session, events, 5)
    assert len(session.times) == 5 and len(set(session.times)) == 1  # one wake-up's `now`
    assert events == [[b"datagram %d" % i for i in range(5)]]  # one delivery for the wake-up


def test_drivers_work_on_the_loop_the_cli_uses():
    """The CLI runs on uvloop when installed; its transports are not asyncio's own classes."""
    from robowire.transport.loop import run

    run(test_tcp_server_and_client_drive_sessions())
    run(test_udp_driver_reads_a_burst_in_few_wakeups_and_replies())
    run(test_a_connected_udp_driver_hears_a_peer_that_came_up_after_it_sent())


# -- start_now: a coroutine run up to its first wait at once, the rest as a task --------------


async def test_start_now_runs_before_what_the_loop_already_had_queued() -> None:
    """A command started from a message handler goes out in that turn: before the callbacks
    queued meanwhile (a task would run after them: on a loaded loop, a whole round later)."""
    order: list[str] = []
    asyncio.get_running_loop().call_soon(order.append, "queued before")

    async def command() -> str:
        order.append("sent")
        return "ok"

    outcome = start_now(command())
    assert order == ["sent"] and outcome.done() and outcome.result() == "ok"
    await asyncio.sleep(0)
    assert order == ["sent", "queued before"]


async def test_start_now_finishes_what_waits_as_a_task_with_its_result() -> None:
    steps: list[str] = []
    reply: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def command() -> int:
        steps.append("sent")
        answer = await reply
        await asyncio.sleep(0)
        steps.append(f"answered {answer}")
        return answer * 2

    outcome = start_now(command())
    assert steps == ["sent"] and not outcome.done()
    reply.set_result(21)
    assert await asyncio.wait_for(outcome, 5) == 42
    assert steps == ["sent", "answered 21"]


async def test_start_now_gives_a_failure_before_or_after_the_wait_as_its_outcome() -> None:
    async def fails_at_once() -> None:
        raise TransportError("not connected")

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise TransportError("connection lost")

    with pytest.raises(TransportError, match="not connected"):
        await start_now(fails_at_once())
    with pytest.raises(TransportError, match="connection lost"):
        await start_now(fails_later())


async def test_cancelling_what_start_now_started_reaches_the_coroutine() -> None:
    """A browser that goes away cancels its commands: the coroutine sees the cancellation
    where it waits, and what it does then (its `finally`) runs."""
    seen: list[str] = []

    async def command() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleaned up")

    outcome = start_now(command())
    await asyncio.sleep(0)
    outcome.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outcome
    assert seen == ["cancelled", "cleaned up"]
