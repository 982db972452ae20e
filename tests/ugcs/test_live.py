"""Our VSM on real loopback sockets, against a raw-socket UCS written from the fact sheet."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from typing import Any

import pytest

from robowire.addresses import parse_endpoint
from robowire.protocols.ugcs import vsm_server
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb
from robowire.protocols.ugcs.services import UgcsSim, UgcsSink
from robowire.service import SimOptions
from robowire.transport.reconnect import Backoff
from robowire.world import World
from support import free_port, until

from .rawucs import INVALID_COMMAND, OK, RawUcs

pytestmark = pytest.mark.timeout(60)


async def start_sim(count: int = 2, **settings: str) -> tuple[UgcsSim, asyncio.Task[None]]:
    sim = UgcsSim(SimOptions(port=0, count=count, options=dict(settings)))
    task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 5)
    return sim, task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _names(msg: pb.Vsm_message) -> dict[str, int]:
    """command name -> id, field name -> id of a Register_device (flight controller)."""
    reg = msg.register_device
    out: dict[str, int] = {}
    for sub in reg.subsystems:
        if sub.type == 1:
            out.update({f"field:{f.name}": f.field_id for f in sub.telemetry_fields})
            out.update({f"command:{c.name}": c.id for c in sub.commands})
            for c in sub.commands:
                out.update({f"param:{c.name}.{p.name}": p.field_id for p in c.parameters})
    return out


async def handshake(ucs: RawUcs, count: int) -> list[pb.Vsm_message]:
    first = await ucs.read()
    assert first.device_id == 0
    assert first.HasField("register_peer")  # the VSM speaks first, at once
    assert first.register_peer.peer_type == 1  # PEER_TYPE_VSM
    assert (first.register_peer.version_major, first.register_peer.version_minor) == (4, 4)
    ucs.register_peer()
    regs = [await ucs.read() for _ in range(count)]
    for reg in regs:
        assert reg.HasField("register_device")
        assert reg.response_required
    assert len({r.message_id for r in regs}) == count
    for reg in regs:
        ucs.ack(reg.device_id, reg.message_id)
    return regs


async def test_handshake_ack_ping_commands_and_unknown_device() -> None:
    sim, task = await start_sim(count=2)
    try:
        assert sim.address is not None
        ucs = await RawUcs.connect(*sim.address)
        regs = await handshake(ucs, 2)
        reg = regs[0]
        device = reg.device_id
        names = _names(reg)
        props = {p.name: p.value for p in reg.register_device.properties}
        assert props["vehicle_type"].int_value == 2  # VEHICLE_TYPE_MULTICOPTER
        assert props["vehicle_serial"].string_value == "SIM-0001"
        fc = reg.register_device.subsystems[0]
        assert fc.properties[0].name == "autopilot_type"
        assert fc.properties[0].value.string_value == "emulator"
        # after the ACK: that device's telemetry arrives (the flush, then changes)
        status = await ucs.read_until(
            lambda m: m.device_id == device and m.HasField("device_status")
        )
        assert len(status.device_status.telemetry_fields) > 0
        # a ping is answered OK with its message id
        ping = ucs.ping()
        reply = await ucs.read_until(lambda m: m.HasField("device_response"))
        assert (reply.device_id, reply.message_id, reply.device_response.code) == (0, ping, OK)
        # a command for an unknown device gets no reply at all: the ping sent after it is
        # the next thing answered
        ucs.command(device + 1000, names["command:arm"])
        ping = ucs.ping()
        reply = await ucs.read_until(lambda m: m.HasField("device_response"))
        assert reply.message_id == ping
        # unknown command id
        bad = ucs.command(device, 99999)
        reply = await ucs.read_until(lambda m: m.HasField("device_response"))
        assert reply.message_id == bad
        assert reply.device_response.code == INVALID_COMMAND
        assert reply.device_response.status == "Unknown command id 99999"
        # a missing parameter (takeoff without relative_altitude)
        missing = ucs.command(device, names["command:takeoff_command"])
        reply = await ucs.read_until(lambda m: m.HasField("device_response"))
        assert (reply.message_id, reply.device_response.code) == (missing, INVALID_COMMAND)
        # arm (the GPS warms up in a few seconds: retry until the vehicle accepts)
        for _ in range(40):
            arm = ucs.command(device, names["command:arm"])
            reply = await ucs.read_until(lambda m: m.HasField("device_response"))
            assert reply.message_id == arm
            assert reply.device_id == device
            if reply.device_response.code == OK:
                break
            await asyncio.sleep(0.25)
        assert reply.device_response.code == OK
        takeoff = ucs.command(
            device,
            names["command:takeoff_command"],
            {names["param:takeoff_command.relative_altitude"]: 5.0},
        )
        reply = await ucs.read_until(lambda m: m.HasField("device_response"))
        assert (reply.message_id, reply.device_response.code) == (takeoff, OK)
        armed = names["field:is_armed"]
        seen = await ucs.read_until(
            lambda m: (
                m.device_id == device
                and any(
                    t.field_id == armed and t.value.bool_value
                    for t in m.device_status.telemetry_fields
                )
            )
        )
        assert seen.device_status.telemetry_fields
        await ucs.close()
    finally:
        await stop(task)


async def test_a_ucs_older_than_2_14_gets_silence_and_the_connection_stays() -> None:
    sim, task = await start_sim(count=1)
    try:
        assert sim.address is not None
        ucs = await RawUcs.connect(*sim.address)
        await ucs.read()  # the VSM's Register_peer
        ucs.register_peer(2, 13)
        ucs.ping()
        with pytest.raises(TimeoutError):
            await ucs.read(timeout=1.0)  # nothing: no registration, no ping reply
        assert not ucs.reader.at_eof()
        await ucs.close()
    finally:
        await stop(task)


async def test_telemetry_only_to_acked_and_only_to_the_primary() -> None:
    sim, task = await start_sim(count=1)
    try:
        assert sim.address is not None
        old = await RawUcs.connect(*sim.address)
        await handshake(old, 1)
        await old.read_until(lambda m: m.HasField("device_status"))
        new = await RawUcs.connect(*sim.address)
        await handshake(new, 1)  # same UCS peer id, also loopback: the newer becomes primary
        await new.read_until(lambda m: m.HasField("device_status"))
        # from now on the old connection gets no periodic telemetry; drain what was in flight
        await asyncio.sleep(0.5)
        while True:
            try:
                await old.read(timeout=0.3)
            except TimeoutError:
                break
        ping = old.ping()  # still alive, and only the ping's answer comes
        reply = await old.read()
        assert reply.message_id == ping
        with pytest.raises(TimeoutError):
            await old.read(timeout=1.0)
        await new.close()
        await old.close()
    finally:
        await stop(task)


async def test_shutdown_unregisters_the_vehicles() -> None:
    sim, task = await start_sim(count=2)
    assert sim.address is not None
    ucs = await RawUcs.connect(*sim.address)
    regs = await handshake(ucs, 2)
    ids = {r.device_id for r in regs}
    heard: set[int] = set()
    while heard != ids:  # both ACKs were taken: each device's telemetry flows
        msg = await ucs.read_until(lambda m: m.HasField("device_status"))
        heard.add(msg.device_id)
    await stop(task)
    gone: set[int] = set()
    while len(gone) < 2:
        msg = await ucs.read()
        if msg.HasField("unregister_device"):
            gone.add(msg.device_id)
    assert gone == {r.device_id for r in regs}
    await ucs.close()


async def test_reverse_mode_dials_the_ucs_and_redials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vsm_server, "REDIAL_SECONDS", 0.2)  # the first wait before a redial
    accepted: asyncio.Queue[RawUcs] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(RawUcs(reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sim = UgcsSim(SimOptions(count=1, target=f"127.0.0.1:{port}"))
    assert sim.announce == "connecting to"
    task = asyncio.create_task(sim.run(World()))
    try:
        ucs = await asyncio.wait_for(accepted.get(), 10)
        first = await ucs.read()
        assert first.HasField("register_peer")  # the VSM still speaks first
        await handshake_after_peer(ucs)
        await ucs.close()
        again = await asyncio.wait_for(accepted.get(), 10)  # it dials again
        assert (await again.read()).HasField("register_peer")
        await again.close()
    finally:
        await stop(task)
        server.close()


async def test_reverse_mode_redials_on_the_source_templates_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    default = UgcsSim(SimOptions(count=1, target="127.0.0.1:5556")).server.backoff
    assert default == Backoff(vsm_server.REDIAL_SECONDS, vsm_server.RETRY_SECONDS)  # 1 s .. 10 s
    sim = UgcsSim(SimOptions(count=1, target=f"127.0.0.1:{free_port()}"))  # nothing there
    sim.server.backoff = Backoff(0.05, 0.2, steady=0.0)  # doubling at once
    starts: list[float] = []  # when each attempt began (the backoff spaces the attempts)
    dial_once = sim.server._dial_once

    async def timed_dial_once(*args: Any) -> None:
        starts.append(time.monotonic())
        await dial_once(*args)

    sim.server._dial_once = timed_dial_once  # type: ignore[method-assign]

    def refused() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "cannot reach the UCS" in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="robowire.ugcs"):
        task = asyncio.create_task(sim.run(World()))
        try:
            await until(lambda: len(refused()) >= 5, "five refused attempts")
        finally:
            await stop(task)
    gaps = [b - a for a, b in itertools.pairwise(starts[:5])]
    # each attempt is refused: the next begins the backoff's wait after it began, doubling
    # from 0.05 s up to the 0.2 s cap (never sooner; a loaded machine may make them later)
    for gap, wait in zip(gaps, [0.05, 0.1, 0.2, 0.2], strict=True):
        assert gap >= wait - 0.005


async def handshake_after_peer(ucs: RawUcs) -> None:
    ucs.register_peer()
    reg = await ucs.read()
    assert reg.HasField("register_device")


async def test_serve_turns_world_devices_into_vehicles() -> None:
    world = World()
    sink = UgcsSink(parse_endpoint("ugcs://127.0.0.1:0"))
    task = asyncio.create_task(sink.run(world))
    try:
        await asyncio.wait_for(sink.ready.wait(), 5)
        assert sink.address is not None
        world.update_device("gps", "rover1", receive_time=0.0, geodetic=(56.95, 24.1, 12.5))
        ucs = await RawUcs.connect(*sink.address)
        await ucs.read()
        ucs.register_peer()
        reg = await ucs.read_until(lambda m: m.HasField("register_device"))
        props = {p.name: p.value for p in reg.register_device.properties}
        assert props["vehicle_serial"].string_value == "rover1"  # its own id: no collision
        ucs.ack(reg.device_id, reg.message_id)
        names = _names(reg)
        status = await ucs.read_until(lambda m: m.HasField("device_status"))
        values = {t.field_id: t.value for t in status.device_status.telemetry_fields}
        assert values[names["field:latitude"]].double_value == pytest.approx(math.radians(56.95))
        assert values[names["field:longitude"]].double_value == pytest.approx(math.radians(24.1))
        assert values[names["field:altitude_amsl"]].float_value == pytest.approx(12.5)
        # an ENU device: placed from the origin (the default one)
        world.update_device("mocap", "drone", receive_time=0.0, position=(0.0, 111.0, 0.0))
        reg = await ucs.read_until(lambda m: m.HasField("register_device"))
        ucs.ack(reg.device_id, reg.message_id)
        names = _names(reg)  # ids are per device: map by name
        status = await ucs.read_until(
            lambda m: m.device_id == reg.device_id and m.HasField("device_status")
        )
        values = {t.field_id: t.value for t in status.device_status.telemetry_fields}
        lat = math.degrees(values[names["field:latitude"]].double_value)
        assert lat == pytest.approx(56.9496 + 111.0 / 111_320, abs=2e-5)  # ~111 m north
        await ucs.close()
    finally:
        await stop(task)


async def test_a_ucs_that_never_registers_is_closed_after_10_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection is opened 9.8 s in the past (a fake `now` for the session's clock), so
    the 10 s Register_peer timeout falls 0.2 s from now: no real 10 s wait."""
    from robowire.timebase import monotonic

    monkeypatch.setattr(vsm_server, "monotonic", lambda: monotonic() - 9.8)
    sim, task = await start_sim(count=1)
    try:
        assert sim.address is not None
        silent = await RawUcs.connect(*sim.address)
        first = await silent.read()
        assert first.HasField("register_peer")
        with pytest.raises(asyncio.IncompleteReadError):  # closed by the VSM, nothing else sent
            await silent.read(timeout=10.0)
        await silent.close()
    finally:
        await stop(task)
