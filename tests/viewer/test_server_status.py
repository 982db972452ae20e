"""`Gateway.status()`: what each service is doing, as the viewer's `status` message shows it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from robowire.errors import TransportError
from robowire.gateway import Gateway, open_source
from robowire.viewer.server import ViewerSink

pytestmark = pytest.mark.timeout(60)

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "captures" / "vrpn" / "tcp_tracker.pcap"


def closed_tcp_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_file_read_to_its_end_is_finished_with_its_counts() -> None:
    assert CAPTURE.is_file()
    gateway = Gateway()
    source = open_source(f"vrpn:{CAPTURE}")
    gateway.add(source)
    assert [s.state for s in gateway.status()] == ["waiting"]  # not started yet
    await asyncio.wait_for(gateway.run(), 30)
    (status,) = gateway.status()
    assert status.name == source.name
    assert status.role == "source"
    assert status.state == "finished"
    assert status.messages > 0
    assert status.devices == len(gateway.world.tables[source.name]) > 0
    assert status.errors == 0
    assert status.address is None


async def test_a_source_that_cannot_connect_is_waiting_and_a_failed_sink_failed() -> None:
    gateway = Gateway()
    source = open_source(f"spyglass://127.0.0.1:{closed_tcp_port()}")
    gateway.add(source)
    task = asyncio.create_task(gateway.run(1.0))
    await asyncio.sleep(0.3)
    assert [(s.name, s.state) for s in gateway.status()] == [(source.name, "waiting")]
    await task

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        sink = ViewerSink("127.0.0.1", busy.getsockname()[1])
        failing = Gateway().add(sink)
        with pytest.raises(TransportError, match="cannot listen"):
            await asyncio.wait_for(failing.run(), 30)
    assert [(s.role, s.state) for s in failing.status()] == [("sink", "failed")]


async def test_rates_are_measured_between_calls() -> None:
    gateway = Gateway()
    sink = ViewerSink("127.0.0.1", 0)
    gateway.add(sink)
    task = asyncio.create_task(gateway.run())
    try:
        await asyncio.wait_for(sink.ready.wait(), 30)
        (first,) = gateway.status()
        assert first.rate == 0.0
        assert first.state == "listening"
        assert sink.address is not None
        assert first.address == f"127.0.0.1:{sink.address[1]}"
        sink.frames_sent += 50
        sink.stats.messages_out = sink.frames_sent
        await asyncio.sleep(0.6)
        (second,) = gateway.status()
        assert second.messages == 50
        assert 0 < second.rate <= 50 / 0.6
    finally:
        gateway.stop()
        await task
