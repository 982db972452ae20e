import asyncio
import io
import json
import logging
import socket
import time

from robowire.errors import TransportError
from robowire.gateway import Gateway
from robowire.service import Source
from robowire.sinks import JsonLinesSink
from robowire.transport.udp import DatagramReader
from robowire.world import World
from support import until


class Ticker(Source):
    """Writes `n` updates of one device, `every` seconds apart, then ends (like a file)."""

    def __init__(self, name: str, n: int, every: float = 0.0) -> None:
        super().__init__(name)
        self.n, self.every = n, every

    async def run(self, world: World) -> None:
        for i in range(self.n):
            world.update_device(self.name, "d", receive_time=float(i), position=(i, 0, 0))
            await asyncio.sleep(self.every)


class Broken(Source):
    async def run(self, world: World) -> None:
        raise TransportError("cannot connect to 127.0.0.1:1: Connection refused")


class Forever(Source):
    async def run(self, world: World) -> None:
        await asyncio.Future()


async def test_run_ends_when_every_source_finished_and_sinks_drained():
    out = io.StringIO()
    gateway = Gateway().add(Ticker("a", 5), Ticker("b", 3), JsonLinesSink(out))
    await asyncio.wait_for(gateway.run(), 5)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted((x["source"], x["position"][0]) for x in lines) == (
        [("a", float(i)) for i in range(5)] + [("b", float(i)) for i in range(3)]
    )
    assert not gateway.failures


async def test_one_broken_source_does_not_stop_the_others(caplog):
    out = io.StringIO()
    gateway = Gateway().add(Broken("bad"), Ticker("good", 20, 0.01), JsonLinesSink(out))
    with caplog.at_level(logging.ERROR, logger="robowire"):
        await asyncio.wait_for(gateway.run(), 5)
    assert len(out.getvalue().splitlines()) == 20
    assert [s.name for s, _ in gateway.failures] == ["bad"]
    assert caplog.messages == ["bad: cannot connect to 127.0.0.1:1: Connection refused"]


async def test_duration_ends_a_run_of_endless_sources():
    gateway = Gateway().add(Forever("x"))
    loop = asyncio.get_running_loop()
    start = loop.time()
    await gateway.run(duration=0.2)
    assert 0.15 < loop.time() - start < 2


async def test_json_count_stops_the_run():
    out = io.StringIO()
    gateway = Gateway()
    gateway.add(Ticker("a", 1000, 0.001), JsonLinesSink(out, count=7, on_done=gateway.stop))
    await asyncio.wait_for(gateway.run(), 5)
    assert len(out.getvalue().splitlines()) == 7


async def test_services_added_while_running_are_started():
    gateway = Gateway()
    out = io.StringIO()
    gateway.add(Forever("x"))
    task = asyncio.create_task(gateway.run(duration=1.0))
    await asyncio.sleep(0.05)
    gateway.add(JsonLinesSink(out), Ticker("late", 2))
    await task
    assert len(out.getvalue().splitlines()) == 2


async def test_a_server_on_port_0_is_named_after_the_port_it_got():
    """Status lines and logs name the port a server really listens on, not `:0`."""
    from robowire.gateway import open_sink

    sink = open_sink("vrpn://127.0.0.1:0")
    gateway = Gateway().add(sink)
    run = asyncio.create_task(gateway.run(duration=5))
    await asyncio.wait_for(sink.ready.wait(), 5)
    assert sink.address is not None and sink.address[1] != 0
    assert sink.name.endswith(f":{sink.address[1]}")
    gateway.stop()
    await run


class Datagrams(Source):
    """Counts the datagrams sent to its socket, and the wake-ups they took to read."""

    def __init__(self) -> None:
        super().__init__("datagrams")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.received = 0
        self.reader: DatagramReader | None = None

    def take(self, datagrams: list[tuple[bytes, tuple[str, int]]], now: float) -> None:
        self.received += len(datagrams)

    async def run(self, world: World) -> None:
        self.reader = DatagramReader(self.sock, self.take, batch=1024)
        try:
            await asyncio.Future()
        finally:
            self.reader.close()


async def test_a_paced_gateway_reads_a_stream_of_datagrams_in_few_wakeups_and_misses_none():
    source = Datagrams()
    source.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # (a busy machine)
    gateway = Gateway(pace=0.05)  # at most 20 turns a second
    gateway.add(source)
    began = time.monotonic()
    run = asyncio.create_task(gateway.run())
    address = source.sock.getsockname()

    def send() -> None:  # 1,000 datagrams a second for a second, from outside the loop
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            for _ in range(50):
                for _ in range(20):
                    out.sendto(b"x" * 100, address)
                time.sleep(0.02)

    await asyncio.to_thread(send)
    await until(lambda: source.received == 1000, "every datagram read")
    gateway.stop()
    await run
    assert source.reader is not None
    assert source.reader.wakeups <= (time.monotonic() - began) / 0.05 + 2
