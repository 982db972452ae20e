"""Nothing lost that arrived: a recording (`robowire record ... -o run.mcap`) made while its
sources' datagrams are lost, duplicated and reordered on the wire (the fault proxy) holds every
datagram its sessions received. Its raw channels, read with the `mcap` library, hold exactly
the datagrams the proxy delivered, and exactly what each session took in by its status (the
messages it took plus the errors it dropped: stale, duplicated). XRP (the gateway's WPILib
side; our robot, faults both ways) and VRSP (our sender) at once, in one recording, as a user
runs it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mcap.exceptions import EndOfFile
from mcap.records import Channel, Message
from mcap.stream_reader import StreamReader

from robowire.gateway import Gateway, open_recorder, open_source
from robowire.protocols.vrsp.codec import DATA_NAME, encode_identifier
from robowire.protocols.vrsp.services import VrspSim
from robowire.protocols.xrp.services import XrpSim
from robowire.service import SimOptions
from robowire.status_client import fetch_status
from robowire.world import World
from support import Process, free_udp_port, until

from .plan import DatagramFaults, DatagramPlan
from .proxy import UdpProxy

pytestmark = pytest.mark.timeout(90)
DATA = encode_identifier(DATA_NAME)  # a VRSP frame (one datagram each for 10 drones)
FAULTS = DatagramFaults(loss=0.1, duplicate=0.1, reorder=0.2, reorder_depth=8)


def raw_messages(path: Path) -> dict[str, list[bytes]]:
    """Each source's raw messages, by the `source` of its `/raw/` channels (the `mcap`
    library's stream reader: not robowire's)."""
    channels: dict[int, Channel] = {}
    out: dict[str, list[bytes]] = {}
    with path.open("rb") as stream, contextlib.suppress(EndOfFile):
        for record in StreamReader(stream, skip_magic=False).records:
            if isinstance(record, Channel):
                channels[record.id] = record
            elif isinstance(record, Message):
                channel = channels[record.channel_id]
                if channel.topic.startswith("/raw/"):
                    out.setdefault(channel.metadata["source"], []).append(record.data)
    return out


async def test_a_recording_through_a_faulty_wire_holds_every_datagram_the_sessions_received(
    tmp_path: Path,
) -> None:
    robot = XrpSim(SimOptions(port=0, count=1))
    robot_task = asyncio.create_task(robot.run(World()))
    await asyncio.wait_for(robot.ready.wait(), 5)
    assert robot.addresses[0] is not None
    xrp_up, xrp_down = (DatagramPlan(FAULTS, seed=s, enabled=False) for s in (51, 52))
    vrsp_port = free_udp_port()
    vrsp_plan = DatagramPlan(FAULTS, seed=53, enabled=False)
    xrp_proxy = await UdpProxy(robot.addresses[0], xrp_up, xrp_down).start()
    vrsp_proxy = await UdpProxy(("127.0.0.1", vrsp_port), vrsp_plan).start()
    proxies = (xrp_proxy, vrsp_proxy)
    assert xrp_proxy.address is not None and vrsp_proxy.address is not None
    output = tmp_path / "run.mcap"
    xrp, vrsp = f"xrp@127.0.0.1:{xrp_proxy.address[1]}", f"vrsp@127.0.0.1:{vrsp_port}"
    record = Process(
        "record", f"xrp://127.0.0.1:{xrp_proxy.address[1]}", f"vrsp://127.0.0.1:{vrsp_port}",
        "-o", str(output), "--status-port", "0",
    )  # fmt: skip
    sender: asyncio.Task[None] | None = None
    try:  # (the record process is waited for in threads: this loop runs the proxies)
        said = await asyncio.to_thread(record.wait_for, r"status on (http://\S+)")
        url = said.group(1)
        options = SimOptions(count=10, rate=100, target=f"127.0.0.1:{vrsp_proxy.address[1]}")
        sender = asyncio.create_task(VrspSim(options).run(World()))
        await until(lambda: vrsp_plan.counts["sent"] >= 50, "clean VRSP frames first")
        await until(lambda: xrp_down.counts["sent"] >= 20, "clean XRP statuses first")
        for proxy in proxies:
            proxy.set(enabled=True)
        await until(
            lambda: xrp_down.counts["received"] >= 100 and vrsp_plan.counts["received"] >= 500,
            lambda: f"faulty datagrams: XRP {xrp_down.counts}, VRSP {vrsp_plan.counts}",
        )
        for proxy in proxies:  # the held ones go, then nothing more: the counts are final
            proxy.set(enabled=False)
            proxy.set(outage=True)
        await asyncio.sleep(0.5)
        services = (await asyncio.to_thread(fetch_status, url))["services"]
        status: dict[str, Any] = {s["name"]: s for s in services}
        record.proc.send_signal(signal.SIGINT)  # the user's Ctrl-C: the file is finished
        await asyncio.to_thread(record.proc.wait, 30)
    finally:
        record.stop()
        for task in (sender, robot_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for proxy in proxies:
            proxy.close()

    raw = raw_messages(output)
    kinds = Counter("data" if m.startswith(DATA) else "def" for m in raw[vrsp])
    definitions = len({m for m in raw[vrsp] if not m.startswith(DATA)})  # (its 1 Hz repeats
    # are the same bytes: taken once, then passed over as repeats)
    did = {name: dict(plan.counts) for name, plan in (("xrp", xrp_down), ("vrsp", vrsp_plan))}
    taken = {name: status[name]["messages"] + status[name]["errors"] for name in (xrp, vrsp)}
    print(
        f"\nrecorded raw XRP {len(raw[xrp])}, VRSP {len(raw[vrsp])} ({kinds['def']} DEF);"
        f" the proxy delivered XRP {did['xrp']['sent']}, VRSP {did['vrsp']['sent']}; the"
        f" sessions took in XRP {taken[xrp]}, VRSP {taken[vrsp]} ({definitions} DEF parts);"
        f" faults XRP {did['xrp']}, VRSP {did['vrsp']}"
    )
    assert min(did["xrp"]["lost"], did["xrp"]["duplicated"], did["xrp"]["reordered"]) > 0
    assert min(did["vrsp"]["lost"], did["vrsp"]["duplicated"], did["vrsp"]["reordered"]) > 0
    assert len(raw[xrp]) == did["xrp"]["sent"] == taken[xrp]  # every status the robot's
    # wire delivered: taken (messages) or dropped as stale (errors), and recorded
    assert len(raw[vrsp]) == did["vrsp"]["sent"]  # every datagram delivered, DEFs too
    assert kinds["data"] + definitions == taken[vrsp], status[vrsp]  # every frame taken,
    # or dropped as stale or a duplicate; every part of the definition taken
    for name in (xrp, vrsp):  # the wire's faults are in the same status
        assert status[name]["duplicated"] > 0 and status[name]["reordered"] > 0, status[name]


async def test_a_recording_stopped_mid_stream_holds_every_datagram_its_sessions_took(
    tmp_path: Path,
) -> None:
    """Stopped while the datagrams still come (a user's Ctrl-C in the middle of a show):
    whatever a session took in before the end is in the file too, to the byte. Built as
    `record` builds it (`open_source`, `open_recorder`, one `Gateway`), in this process, so
    that each session's own counters can be read after the end: its raw channel's bytes are
    its `bytes_in`, its messages the datagrams it took or dropped."""
    robot = XrpSim(SimOptions(port=0, count=1))
    robot_task = asyncio.create_task(robot.run(World()))
    await asyncio.wait_for(robot.ready.wait(), 5)
    assert robot.addresses[0] is not None
    xrp_proxy = await UdpProxy(
        robot.addresses[0], DatagramPlan(FAULTS, seed=61), DatagramPlan(FAULTS, seed=62)
    ).start()
    vrsp_port = free_udp_port()
    frames = DatagramPlan(FAULTS, seed=63, only=lambda datagram: datagram.startswith(DATA))
    vrsp_proxy = await UdpProxy(("127.0.0.1", vrsp_port), frames).start()  # (DEFs untouched)
    assert xrp_proxy.address is not None and vrsp_proxy.address is not None
    urls = [f"xrp://127.0.0.1:{xrp_proxy.address[1]}", f"vrsp://127.0.0.1:{vrsp_port}"]
    sources = [open_source(url) for url in urls]
    output = tmp_path / "run.mcap"
    gateway = Gateway().add(*sources, open_recorder(str(output), urls, sources))
    run = asyncio.create_task(gateway.run())
    await asyncio.wait_for(sources[1].ready.wait(), 5)  # (listening: its first DEF is heard)
    options = SimOptions(count=10, rate=400, target=f"127.0.0.1:{vrsp_proxy.address[1]}")
    sender = asyncio.create_task(VrspSim(options).run(World()))
    try:
        await until(lambda: all(s.session.stats.bytes_in > 0 for s in sources), "both sources")
        await asyncio.sleep(2.0)
        gateway.stop()  # while 400 frames a second come
        await asyncio.gather(run, return_exceptions=True)
    finally:
        for task in (sender, robot_task):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        xrp_proxy.close()
        vrsp_proxy.close()
    raw = raw_messages(output)
    for source in sources:
        stats = source.session.stats
        recorded = raw[source.name]
        print(
            f"\n{source.name}: {len(recorded)} raw messages, {sum(map(len, recorded))} bytes;"
            f" its session took {stats.messages_in} and dropped {stats.dropped},"
            f" {stats.bytes_in} bytes"
        )
        assert sum(map(len, recorded)) == stats.bytes_in > 0
        assert len(recorded) == stats.messages_in + stats.dropped
