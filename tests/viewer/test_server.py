"""The viewer's server on real sockets (127.0.0.1), driven by a `websockets` client.

Expected values come from what the test wrote into the world (or from the world's own
columns for a live simulator), never from the frame encoder: the frames are decoded by
`robowire.viewer.frames.decode_frame`, whose layout is checked by hand in
test_server_frames.py.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
import websockets
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection

from robowire.access import Access
from robowire.gateway import Gateway, open_sim, open_source
from robowire.service import SimOptions
from robowire.transport.budget import Pressure
from robowire.viewer import server as viewer_server
from robowire.viewer.client import BEHIND_RATE, ViewerClient
from robowire.viewer.frames import Frame, decode_frame
from robowire.viewer.server import ViewerSink
from robowire.world import World

pytestmark = pytest.mark.timeout(60)

SUBPROTOCOL = "robowire.viewer.v1"
WAIT = 20.0  # seconds: generous, only a hang takes this long


@asynccontextmanager
async def viewer(
    world: World | None = None, *, rate: float = 30.0, extra: tuple[Any, ...] = ()
) -> AsyncIterator[tuple[ViewerSink, Gateway]]:
    """A gateway with a viewer on a free port (and `extra` services) running."""
    gateway = Gateway(world if world is not None else World())
    sink = ViewerSink("127.0.0.1", 0, rate)
    gateway.add(sink, *extra)
    task = asyncio.create_task(gateway.run())
    try:
        await asyncio.wait_for(sink.ready.wait(), WAIT)
        yield sink, gateway
    finally:
        gateway.stop()
        await asyncio.wait_for(task, WAIT)


def ws_url(sink: ViewerSink) -> str:
    assert sink.address is not None
    return f"ws://127.0.0.1:{sink.address[1]}/ws"


async def recv(ws: ClientConnection, timeout: float = WAIT) -> str | bytes:
    return await asyncio.wait_for(ws.recv(), timeout)


async def next_text(ws: ClientConnection, kind: str) -> dict[str, Any]:
    """The next text message of type `kind` (others are skipped)."""
    while True:
        message = await recv(ws)
        if isinstance(message, str) and json.loads(message)["type"] == kind:
            found: dict[str, Any] = json.loads(message)
            return found


async def next_frame(ws: ClientConnection, texts: list[dict[str, Any]] | None = None) -> Frame:
    """The next binary state frame (text messages before it go to `texts`)."""
    while True:
        message = await recv(ws)
        if isinstance(message, bytes):
            return decode_frame(message)
        if texts is not None:
            texts.append(json.loads(message))


def write_devices(world: World) -> None:
    """Three devices of two sources, with values chosen here."""
    world.update_device(
        "robots",
        "r1",
        kind="robot",
        receive_time=1000.0,
        position=(1.0, 2.0, 3.0),
        orientation=(math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)),  # facing north
        telemetry={"battery_voltage": (12.5, "V")},
    )
    world.update_device(
        "robots", "r2", kind="robot", receive_time=1000.0, position=(-4.0, 5.5, 0.0)
    )
    world.update_device(
        "show",
        "7",
        kind="drone",
        name="drone 7",
        receive_time=1000.0,
        position=(10.0, 20.0, 30.0),
        geodetic=(47.5, 8.25, 430.0),
        telemetry={
            "led_red": (255.0, "1"),
            "led_green": (128.0, "1"),
            "led_blue": (0.0, "1"),
            "heading": (45.0, "deg"),
        },
    )


def by_device(frame: Frame, catalogs: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """Each device of a frame, by (source, id), from the catalogs the browser got."""
    names = {c["index"]: c["source"] for c in catalogs}
    ids: dict[tuple[str, int], str] = {}
    for c in catalogs:
        for k, device in enumerate(c["devices"]):
            ids[(c["source"], c["start"] + k)] = device["id"]
    out = {}
    for block in frame.blocks:
        source = names[block.source_index]
        for i, slot in enumerate(block.slot):
            out[(source, ids[(source, int(slot))])] = (block, i)
    return out


# -- HTTP ------------------------------------------------------------------------------------


def get(port: int, path: str) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


async def test_http_serves_index_static_files_with_types_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<title>robowire viewer</title>")
    (static / "main.js").write_text("export const x = 1;\n")
    (static / "style.css").write_text("body { margin: 0 }\n")
    (static / "icon.svg").write_text("<svg/>")
    (static / "sub").mkdir()
    (tmp_path / "secret.txt").write_text("not for browsers")
    monkeypatch.setattr(viewer_server, "STATIC", static)
    async with viewer() as (sink, _):
        assert sink.address is not None
        port = sink.address[1]

        def fetch_all() -> dict[str, tuple[int, str, bytes]]:
            paths = [
                "/", "/static/main.js", "/static/style.css", "/static/icon.svg",
                "/static/missing.js", "/static/../secret.txt", "/static/%2e%2e/secret.txt",
                "/static/sub/../../secret.txt", "/static/", "/static/sub", "/other", "/ws",
            ]  # fmt: skip
            return {p: get(port, p) for p in paths}

        got = await asyncio.to_thread(fetch_all)
    assert got["/"][0] == 200
    assert got["/"][1].startswith("text/html")
    assert b"robowire viewer" in got["/"][2]
    assert got["/static/main.js"][:2] == (200, "text/javascript; charset=utf-8")
    assert got["/static/main.js"][2] == b"export const x = 1;\n"
    assert got["/static/style.css"][1].startswith("text/css")
    assert got["/static/icon.svg"][1] == "image/svg+xml"
    for path in [
        "/static/missing.js", "/static/../secret.txt", "/static/%2e%2e/secret.txt",
        "/static/sub/../../secret.txt", "/static/", "/static/sub", "/other",
    ]:  # fmt: skip
        assert got[path][0] == 404, path
        assert b"not for browsers" not in got[path][2]
    assert got["/ws"][0] == 426  # a plain GET of the WebSocket: "upgrade required"


async def test_the_shipped_placeholder_page_loads() -> None:
    async with viewer() as (sink, _):
        assert sink.address is not None
        status, kind, body = await asyncio.to_thread(get, sink.address[1], "/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert b"robowire viewer" in body


# -- WebSocket: hello, catalog, frames ------------------------------------------------------------


async def test_hello_then_catalog_then_a_frame_with_the_worlds_values() -> None:
    world = World()
    write_devices(world)
    async with viewer(world) as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        assert ws.subprotocol == SUBPROTOCOL
        hello = json.loads(await recv(ws))
        assert hello["type"] == "hello"
        assert hello["version"] == 1
        assert hello["control"] is False
        assert hello["commands"] == {}
        assert hello["rate"] == 30
        await ws.send(json.dumps({"type": "hello", "rate": 60}))
        await ws.send(json.dumps({"type": "ready"}))
        texts: list[dict[str, Any]] = []
        frame = await next_frame(ws, texts)
    catalogs = [t for t in texts if t["type"] == "catalog"]
    assert {c["source"] for c in catalogs} == {"robots", "show"}
    robots = next(c for c in catalogs if c["source"] == "robots")
    assert robots["start"] == 0
    assert robots["devices"] == [
        {"id": "r1", "name": "r1", "kind": "robot"},
        {"id": "r2", "name": "r2", "kind": "robot"},
    ]
    show = next(c for c in catalogs if c["source"] == "show")
    assert show["devices"] == [{"id": "7", "name": "drone 7", "kind": "drone"}]

    devices = by_device(frame, catalogs)
    assert set(devices) == {("robots", "r1"), ("robots", "r2"), ("show", "7")}
    block, i = devices[("robots", "r1")]
    assert block.position[i].tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_allclose(block.orientation[i], [0.70710678, 0, 0, 0.70710678], atol=1e-6)
    assert block.heading[i] == pytest.approx(0.0, abs=1e-4)  # facing north
    assert block.colour[i].tolist() == [255, 153, 26, 0]  # a robot's colour, no LED
    assert np.isnan(block.geodetic[i]).all()
    block, i = devices[("robots", "r2")]
    assert block.position[i].tolist() == [-4.0, 5.5, 0.0]
    assert block.orientation[i].tolist() == [1.0, 0.0, 0.0, 0.0]  # unknown: identity
    assert np.isnan(block.heading[i])
    block, i = devices[("show", "7")]
    assert block.position[i].tolist() == [10.0, 20.0, 30.0]
    assert block.colour[i].tolist() == [255, 128, 0, 255]  # its LED
    assert block.heading[i] == 45.0
    np.testing.assert_allclose(block.geodetic[i], [47.5, 8.25, 430.0], rtol=1e-6)
    assert frame.frame_number == 0


async def test_no_frame_without_ready_and_a_stalled_browser_costs_nothing() -> None:
    world = World()
    slots = np.arange(50)
    positions = np.zeros((50, 3))

    world.table("swarm").slots([str(k) for k in range(50)], "drone")
    world.update("swarm", slots, receive_time=0.0, position=positions)

    async def ingest() -> None:
        t = 0.0
        while True:
            t += 1.0
            positions[:, 0] = t
            world.update("swarm", slots, receive_time=t, position=positions)
            await asyncio.sleep(0.01)

    async with viewer(world, rate=100) as (sink, _):
        feeder = asyncio.create_task(ingest())
        try:
            async with (
                connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as stalled,
                connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as live,
            ):
                await stalled.send(json.dumps({"type": "hello", "rate": 30}))  # never ready
                # the live browser: a frame for each ready, and none without one
                xs = []
                for _ in range(10):
                    await live.send(json.dumps({"type": "ready"}))
                    frame = await next_frame(live)
                    xs.append(float(frame.blocks[0].position[0, 0]))
                assert xs == sorted(xs) and xs[-1] > xs[0]  # fresh states, in order
                with pytest.raises(TimeoutError):
                    while True:  # only text (status) may come while it is not ready
                        message = await recv(live, timeout=0.5)
                        assert isinstance(message, str)
                await live.send(json.dumps({"type": "ready"}))
                assert (await next_frame(live)).blocks[0].position[0, 0] > xs[-1]
                # the stalled browser got no frame at all, and only its hello/status texts
                received: list[str | bytes] = []
                with pytest.raises(TimeoutError):
                    while True:
                        received.append(await recv(stalled, timeout=0.5))
                assert not any(isinstance(m, bytes) for m in received)
                assert world.feed.published > 10  # ingest went on all along
        finally:
            feeder.cancel()


async def test_a_browser_may_ask_for_two_frames_ahead_and_no_more() -> None:
    world = World()
    slots = np.arange(5)
    world.table("swarm").slots([str(k) for k in range(5)], "drone")

    async def ingest() -> None:
        t = 0.0
        while True:
            t += 1.0
            world.update("swarm", slots, receive_time=t, position=np.full((5, 3), t))
            await asyncio.sleep(0.01)

    async with viewer(world, rate=100) as (sink, _):
        feeder = asyncio.create_task(ingest())
        try:
            async with connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
                for _ in range(3):  # the third is one more than the window: not granted
                    await ws.send(json.dumps({"type": "ready"}))
                first, second = await next_frame(ws), await next_frame(ws)
                was = np.nan_to_num(first.blocks[0].position[0, 0], nan=-1.0)  # (none yet)
                assert was < second.blocks[0].position[0, 0]  # a newer state
                with pytest.raises(TimeoutError):
                    while True:
                        assert isinstance(await recv(ws, timeout=0.5), str)
        finally:
            feeder.cancel()


async def test_a_browser_joining_mid_run_gets_every_device_in_its_first_frame() -> None:
    world = World()
    write_devices(world)  # these never move again
    receivers = open_source("vrsp://127.0.0.1:0")
    async with viewer(world, extra=(receivers,)) as (sink, gateway):
        await asyncio.wait_for(receivers.ready.wait(), WAIT)
        assert receivers.address is not None
        sim = open_sim("vrsp", SimOptions(count=20, target=f"127.0.0.1:{receivers.address[1]}"))
        gateway.add(sim)
        async with connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as first:
            await first.send(json.dumps({"type": "ready"}))
            await next_frame(first)
        while len(world.tables.get(receivers.name, ())) < 20:  # the show is running
            await asyncio.sleep(0.05)
        async with connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as second:
            await second.send(json.dumps({"type": "ready"}))
            texts: list[dict[str, Any]] = []
            frame = await next_frame(second, texts)
            table = world.tables[receivers.name]
            expected = table.position[: len(table)].copy()  # the world, read at receipt
        catalogs = [t for t in texts if t["type"] == "catalog"]
        devices = by_device(frame, catalogs)
    assert {("robots", "r1"), ("robots", "r2"), ("show", "7")} <= set(devices)
    drones = [key for key in devices if key[0] == receivers.name]
    assert len(drones) == 20
    for source, device in drones:
        block, i = devices[(source, device)]
        slot = int(block.slot[i])
        assert table.ids[slot] == device
        # the sim moves drones by centimetres per tick: the frame is at most a tick old
        np.testing.assert_allclose(block.position[i], expected[slot], atol=2.0)
        assert not np.isnan(block.position[i]).any()


async def test_select_gives_telemetry_with_units() -> None:
    world = World()
    write_devices(world)
    async with viewer(world) as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(json.dumps({"type": "ready"}))
        texts: list[dict[str, Any]] = []
        await next_frame(ws, texts)
        robots = next(t for t in texts if t["type"] == "catalog" and t["source"] == "robots")
        slot = next(k for k, d in enumerate(robots["devices"]) if d["id"] == "r1")
        await ws.send(json.dumps({"type": "select", "source": "robots", "slot": slot}))
        telemetry = await next_text(ws, "telemetry")
    assert telemetry["source"] == "robots"
    assert telemetry["slot"] == slot
    assert telemetry["id"] == "r1"
    assert telemetry["kind"] == "robot"
    assert telemetry["fields"] == {"battery_voltage": [12.5, "V"]}
    assert telemetry["position"] == [1.0, 2.0, 3.0]
    assert telemetry["orientation"] == pytest.approx([0.70710678, 0, 0, 0.70710678])
    assert telemetry["geodetic"] is None
    assert telemetry["time"] == 1000.0
    assert telemetry["source_time"] is None


async def test_status_lists_every_service_with_its_counters() -> None:
    world = World()
    receivers = open_source("vrsp://127.0.0.1:0")
    async with viewer(world, extra=(receivers,)) as (sink, gateway):
        await asyncio.wait_for(receivers.ready.wait(), WAIT)
        assert receivers.address is not None
        port = receivers.address[1]
        gateway.add(open_sim("vrsp", SimOptions(count=5, target=f"127.0.0.1:{port}")))
        while len(world.tables.get(receivers.name, ())) < 5:
            await asyncio.sleep(0.05)
        async with connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
            await next_text(ws, "status")  # the one sent at once
            status = await next_text(ws, "status")  # a second later: rates measured
    services = {s["name"]: s for s in status["services"]}
    source = services[receivers.name]
    assert source["role"] == "source"
    assert source["state"] == "connected"
    assert source["address"] == f"127.0.0.1:{port}"
    assert source["devices"] == 5
    assert source["messages"] > 0
    assert source["rate"] > 0
    assert source["errors"] == 0
    assert source["dropped"] == 0
    viewer_status = services[sink.name]
    assert viewer_status["role"] == "sink"
    assert viewer_status["state"] == "listening"
    assert any(s["role"] == "sim" for s in status["services"])
    assert status["time"] > 1.7e9


async def test_bad_messages_are_ignored_and_counted_and_the_browser_stays() -> None:
    world = World()
    write_devices(world)
    async with viewer(world) as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        for bad in ["not json", "[1, 2]", '{"type": "bogus"}', '{"no": "type"}', b"\x00\x01"]:
            await ws.send(bad)
        await ws.send(json.dumps({"type": "select", "source": "nowhere", "slot": 3}))
        await ws.send(json.dumps({"type": "ready"}))
        frame = await next_frame(ws)
        assert len(frame.blocks) == 2
        assert sink.ignored_messages == 6
        status = await next_text(ws, "status")
    viewer_status = next(s for s in status["services"] if s["name"] == sink.name)
    assert viewer_status["errors"] == 6


async def test_an_oversize_message_closes_that_browser_only() -> None:
    world = World()
    write_devices(world)
    async with (
        viewer(world) as (sink, _),
        connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as big,
        connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as other,
    ):
        await big.send(json.dumps({"type": "hello", "pad": "x" * (200 << 10)}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await recv(big)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1009  # message too big
        await other.send(json.dumps({"type": "ready"}))
        assert len((await next_frame(other)).blocks) == 2


async def test_commands_are_refused_without_control() -> None:
    async with viewer() as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        command = {"type": "command", "id": 7, "source": "xrp", "device": "xrp",
                   "command": "enable", "params": {}}  # fmt: skip
        await ws.send(json.dumps(command))
        status = await next_text(ws, "command_status")
    assert status == {
        "type": "command_status",
        "id": 7,
        "state": "refused",
        "message": "control is off: start with --allow-control",
    }


class FakeStatus:
    def __init__(self, state: str, message: str = "") -> None:
        self.state = state
        self.message = message


class FakeController:
    """Stands in for robowire.control.Controller: one command, three statuses."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, dict[str, Any]]] = []
        self.offered = {"ugcs@x": [{"name": "arm", "label": "Arm", "params": []}]}

    def catalog(self) -> dict[str, list[dict[str, Any]]]:
        return self.offered

    async def run(
        self, source: str, device: str, command: str, params: dict[str, Any]
    ) -> AsyncIterator[FakeStatus]:
        self.calls.append((source, device, command, params))
        yield FakeStatus("sent")
        await asyncio.sleep(0.01)
        yield FakeStatus("in_progress", "arming")
        yield FakeStatus("ok", "armed")


def allow_control(sink: ViewerSink, controller: FakeController) -> str:
    """What --allow-control does to the sink; the WebSocket URL with the token."""
    sink.controller = controller
    sink.gate.access = Access(token="t0ken")
    return f"{ws_url(sink)}?token=t0ken"


async def test_with_a_controller_commands_stream_their_statuses() -> None:
    controller = FakeController()
    async with (
        viewer() as (sink, _),
        connect(allow_control(sink, controller), subprotocols=[SUBPROTOCOL]) as ws,
    ):
        hello = json.loads(await recv(ws))
        command = {"type": "command", "id": 3, "source": "ugcs@x", "device": "SIM-1",
                   "command": "arm", "params": {"force": True}}  # fmt: skip
        await ws.send(json.dumps(command))
        states = [await next_text(ws, "command_status") for _ in range(3)]
    assert hello["control"] is True
    assert hello["commands"] == {"ugcs@x": [{"name": "arm", "label": "Arm", "params": []}]}
    assert controller.calls == [("ugcs@x", "SIM-1", "arm", {"force": True})]
    assert [(s["id"], s["state"], s["message"]) for s in states] == [
        (3, "sent", ""),
        (3, "in_progress", "arming"),
        (3, "ok", "armed"),
    ]


async def test_a_command_goes_out_in_the_turn_that_reads_it() -> None:
    """Not a round of the loop later (as a new task would: on a loaded gateway, tens of
    milliseconds): the controller has the command, and the browser's `sent` status is
    queued, when the message's handling returns; what comes after waiting goes on after."""
    controller = FakeController()
    sink = ViewerSink("127.0.0.1", 0, 30.0)
    sink.controller, sink.gate.access = controller, Access(token="t0ken")
    request = SimpleNamespace(path="/ws?token=t0ken")
    client = ViewerClient(sink, World(), cast(ServerConnection, SimpleNamespace(request=request)))
    command = {"type": "command", "id": 5, "source": "ugcs@x", "device": "SIM-1",
               "command": "arm", "params": {}}  # fmt: skip
    client._handle(json.dumps(command))
    assert controller.calls == [("ugcs@x", "SIM-1", "arm", {})]
    assert [json.loads(m)["state"] for m in client._outbox] == ["sent"]
    await asyncio.wait_for(asyncio.gather(*client._commands), WAIT)
    assert [json.loads(m)["state"] for m in client._outbox] == ["sent", "in_progress", "ok"]


async def test_a_command_catalog_that_changes_reaches_connected_browsers() -> None:
    """A UgCS vehicle that registers after a browser connected: its commands arrive in a
    `commands` message (within the 1 s status period), not only at the next page load."""
    controller = FakeController()
    async with viewer() as (sink, _):
        url = allow_control(sink, controller)
        async with (
            connect(url, subprotocols=[SUBPROTOCOL]) as ws,
            connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as tokenless,
        ):
            hello = json.loads(await recv(ws))
            assert json.loads(await recv(tokenless))["commands"] == {}
            later = [{"name": "land", "label": "Land", "params": []}]
            controller.offered = {"ugcs@x": later}
            update = await next_text(ws, "commands")
            kinds: list[str] = []  # a `commands` goes out right after a `status`, if at all
            while kinds.count("status") < 2:
                message = await recv(tokenless)
                if isinstance(message, str):
                    kinds.append(json.loads(message)["type"])
    assert "commands" not in kinds  # a browser without the token is not told
    assert hello["commands"] == {"ugcs@x": [{"name": "arm", "label": "Arm", "params": []}]}
    assert update == {"type": "commands", "commands": {"ugcs@x": later}}


async def test_logs_and_links_reach_the_browser() -> None:
    world = World()
    for node in ("a", "b", "c"):
        world.update_device("mesh", node, kind="sensor_node", receive_time=1.0)
    async with viewer(world) as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(json.dumps({"type": "ready"}))
        await next_frame(ws)
        world.set_links("mesh", "a", ["b", "c"], receive_time=2.0)
        world.log("mesh", "b", "battery low", time=3.0, level="warning")
        got: dict[str, dict[str, Any]] = {}
        while len(got) < 2:
            message = await recv(ws)
            assert isinstance(message, str)
            if json.loads(message)["type"] in ("links", "log"):
                got[json.loads(message)["type"]] = json.loads(message)
        links, log = got["links"], got["log"]
    assert links == {"type": "links", "source": "mesh", "pairs": [[0, 1], [0, 2]]}
    assert log == {
        "type": "log", "source": "mesh", "device": "b", "text": "battery low",
        "level": "warning", "time": 3.0,
    }  # fmt: skip


async def test_devices_added_later_get_a_catalog_before_the_frame_that_uses_them() -> None:
    world = World()
    world.update_device("robots", "r1", kind="robot", receive_time=1.0, position=(0, 0, 0))
    async with viewer(world) as (sink, _), connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(json.dumps({"type": "ready"}))
        await next_frame(ws)
        world.update_device("robots", "r9", kind="robot", receive_time=2.0, position=(9, 9, 9))
        await ws.send(json.dumps({"type": "ready"}))
        texts: list[dict[str, Any]] = []
        frame = await next_frame(ws, texts)
    catalog = next(t for t in texts if t["type"] == "catalog")
    assert catalog["source"] == "robots"
    assert catalog["start"] == 1
    assert catalog["devices"] == [{"id": "r9", "name": "r9", "kind": "robot"}]
    assert frame.blocks[0].slot.tolist() == [1]
    assert frame.blocks[0].position[0].tolist() == [9.0, 9.0, 9.0]


async def test_a_browser_gets_at_most_behind_rate_frames_a_second_while_the_gateway_is_behind(
    monkeypatch: Any,
) -> None:
    """The overload policy's viewer: fewer fresh frames, never none (BEHIND_RATE, not 100)."""
    monkeypatch.setattr("robowire.viewer.client.pressure", lambda: Pressure(until=math.inf))
    world = World()
    slots = np.arange(5)
    world.table("swarm").slots([str(k) for k in range(5)], "drone")

    async def ingest() -> None:
        t = 0.0
        while True:
            t += 1.0
            world.update("swarm", slots, receive_time=t, position=np.full((5, 3), t))
            await asyncio.sleep(0.005)

    async with viewer(world, rate=100) as (sink, _):
        feeder = asyncio.create_task(ingest())
        try:
            async with connect(ws_url(sink), subprotocols=[SUBPROTOCOL]) as ws:
                await ws.send(json.dumps({"type": "hello", "rate": 100}))
                await ws.send(json.dumps({"type": "ready"}))
                await ws.send(json.dumps({"type": "ready"}))
                await next_frame(ws)
                began, frames = time.monotonic(), 0
                while time.monotonic() - began < 2.0:
                    await ws.send(json.dumps({"type": "ready"}))
                    await next_frame(ws)
                    frames += 1
                seconds = time.monotonic() - began
        finally:
            feeder.cancel()
    assert 3 <= frames <= BEHIND_RATE * seconds + 1
