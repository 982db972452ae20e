"""SpyglassSession on real loopback TCP with the shared drivers: a server sends the demo
recording as a self-delimited stream, a client session decodes every packet."""

from __future__ import annotations

import asyncio

from spyglass_strategies import DEMO

from robowire.protocols.spyglass import rec
from robowire.protocols.spyglass.events import packets_of
from robowire.protocols.spyglass.session import SpyglassSession
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.wire import ConnectionLost


async def test_demo_recording_over_tcp() -> None:
    records = [r.data for r in rec.rec_records(DEMO)]
    listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()

    def opened(driver: StreamDriver) -> None:
        session = driver.session
        assert isinstance(session, SpyglassSession)
        for data in records:
            session.send_encoded(data)
        driver.flush()
        driver.close()  # the transport sends what is buffered, then closes

    server = asyncio.create_task(
        serve_stream(
            "127.0.0.1",
            0,
            lambda _peer: SpyglassSession(),
            lambda _driver, _events: None,
            on_listening=listening.set_result,
            on_open=opened,
        )
    )
    host, port = await listening
    received: list[object] = []
    client = SpyglassSession()
    await asyncio.wait_for(
        connect_stream(host, port, client, lambda _d, events: received.extend(events)), 10
    )
    server.cancel()
    packets = packets_of(received)
    assert len(packets) == 3773
    assert packets == list(rec.read_rec(DEMO))
    assert isinstance(received[-1], ConnectionLost) and client.stats.dropped == 0
