"""Gateways meeting over Zenoh on loopback: `serve zenoh://…` in one, `listen zenoh://…` in
another, directly (the publisher listens) and through a router-mode Zenoh session; late
joiners, bad URLs as one error line, and a stalled subscriber that does not slow the publisher.
Scouting is off everywhere; every port is a free one."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.service import SimOptions, Sink, Source
from robowire.world import LogEvent, World
from support import free_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
WAIT = 60.0  # seconds a condition may take on a busy machine before the test fails

pytestmark = pytest.mark.timeout(180)


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(int(WAIT / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {WAIT} s: {what}")


@asynccontextmanager
async def running(*services: Any) -> AsyncIterator[Gateway]:
    """A gateway running `services` (servers ready before this yields)."""
    gateway = Gateway().add(*services)
    task = asyncio.create_task(gateway.run())
    try:
        for service in services:
            if not isinstance(service, Source):
                await until(lambda s=service: s.ready.is_set() or task.done(), f"{service} ready")
        assert not task.done(), gateway.failures
        yield gateway
    finally:
        gateway.stop()
        await task


def comparable(world: World) -> dict[tuple[str, str], dict[str, Any]]:
    """Every device as JSON, without the time this gateway received it."""
    out = {}
    for device in world.devices():
        view = device.to_json()
        view.pop("receive_time", None)
        out[device.key] = view
    return out


def write_site(world: World) -> None:
    """Two devices with everything a device can have, written once (they stand still)."""
    world.update_device(
        "site",
        "d1",
        receive_time=1.0,
        kind="drone",
        name="Drone 1",
        source_time=5.0,
        position=(1.0, 2.0, 3.0),
        orientation=(0.5, 0.5, 0.5, 0.5),
        velocity=(0.1, 0.0, -0.1),
        geodetic=(47.5, 8.25, 412.0),
        telemetry={"battery": (11.1, "V"), "rssi": (-60.0, "dBm")},
        attributes={"model": "X4", "leds": [1, 2]},
        links=["d2"],
    )
    world.update_device(
        "site", "d2", receive_time=1.0, kind="sensor_node", position=(4.0, 5.0, 0.0)
    )


async def test_a_late_subscriber_gets_every_device_with_everything_it_has() -> None:
    """Direct mode: the publisher listens, the subscriber (started later) connects and gets
    the devices that stand still through the snapshot query; then changes and log events."""
    port = free_port()
    sink = open_sink(f"zenoh://127.0.0.1:{port}")
    async with running(sink) as a:
        write_site(a.world)
        a.world.tables["site"].protocol = "vrsp"  # its ids are VRSP drone ids
        source = open_source(f"zenoh://127.0.0.1:{port}")
        async with running(source) as b:
            await until(lambda: comparable(b.world) == comparable(a.world), "the same world")
            assert b.world.tables["site"].protocol == "vrsp"  # a VRSP sink there keeps them
            seen = comparable(b.world)
            assert seen[("site", "d1")] == {
                "source": "site",
                "device": "d1",
                "kind": "drone",
                "name": "Drone 1",
                "position": [1.0, 2.0, 3.0],
                "orientation": [0.5, 0.5, 0.5, 0.5],
                "velocity": [0.1, 0.0, -0.1],
                "geodetic": [47.5, 8.25, 412.0],
                "telemetry": {
                    "battery": {"value": 11.1, "unit": "V"},
                    "rssi": {"value": -60.0, "unit": "dBm"},
                },
                "attributes": {"model": "X4", "leds": [1, 2]},
                "links": ["d2"],
                "source_time": 5.0,
            }
            assert b.world.device("site", "d2").orientation is None
            with b.world.feed.subscribe() as feed:
                a.world.log("site", "d1", "armed", time=7.0, level="warning")
                a.world.update_device("site", "d2", receive_time=2.0, position=(9.0, 9.0, 1.0))
                await until(lambda: b.world.device("site", "d2").position == (9, 9, 1), "a move")
                logs = [e for e in feed.drain() if isinstance(e, LogEvent)]
            assert [(e.source, e.device_id, e.text, e.level, e.time) for e in logs] == [
                ("site", "d1", "armed", "warning", 7.0)
            ]
            assert source.stats.dropped == 0
            replies = await asyncio.to_thread(ask_as_json, port, "robowire/site/d$*")
            assert sorted(replies) == ["robowire/site/d1", "robowire/site/d2"]
            assert replies["robowire/site/d2"] == {
                "source": "site",
                "device": "d2",
                "kind": "sensor_node",
                "position": [9.0, 9.0, 1.0],
                "receive_time": 2.0,
            }


def ask_as_json(port: int, selector: str) -> dict[str, Any]:
    """What another Zenoh program gets from `z_get -s SELECTOR`: key -> JSON."""
    import zenoh

    config = {
        "mode": "client",
        "connect": {"endpoints": [f"tcp/127.0.0.1:{port}"]},
        "scouting": {"multicast": {"enabled": False}},
    }
    with zenoh.open(zenoh.Config.from_json5(json.dumps(config))) as session:
        replies = session.get(selector, timeout=WAIT)
        return {str(r.ok.key_expr): json.loads(r.ok.payload.to_bytes()) for r in replies if r.ok}


@pytest.mark.parametrize("tick", ["200", "0"])
async def test_small_frames_of_one_tick_go_in_one_put_and_each_arrives_in_order(tick: str) -> None:
    """Three sources moving together: each pull's STATE frames go in one BATCH put (a plain
    Zenoh subscriber sees it on `robowire/=batch/=state`), pulls within the 200 ms tick of the
    last put wait for its end (counted in `held`), and the far world gets every round of
    every source, in order. With `?batch=0`, every frame goes on its own key, as subscribers
    from before batching read them."""
    import zenoh

    from robowire.zenoh import codec

    port = free_port()
    sink = open_sink(f"zenoh://127.0.0.1:{port}?batch={tick}")
    sources = ("s1", "s2", "s3")
    async with running(sink) as a:
        for name in sources:
            a.world.update_device(name, "d", receive_time=1.0, kind="drone", position=(0, 0, 0))
        source = open_source(f"zenoh://127.0.0.1:{port}")
        async with running(source) as b:
            await until(lambda: comparable(b.world) == comparable(a.world), "the same world")
            config = {
                "mode": "client",
                "connect": {"endpoints": [f"tcp/127.0.0.1:{port}"]},
                "scouting": {"multicast": {"enabled": False}},
            }
            heard: list[tuple[str, bytes]] = []
            with zenoh.open(zenoh.Config.from_json5(json.dumps(config))) as session:
                plain = session.declare_subscriber(
                    "robowire/**", lambda s: heard.append((str(s.key_expr), s.payload.to_bytes()))
                )
                await asyncio.sleep(1.0)  # the subscription reaches the publisher
                for k in range(1, 6):
                    for name in sources:
                        a.world.update_device(name, "d", receive_time=1.0 + k, position=(k, 0, 0))
                    await asyncio.sleep(0.005)  # the sink pulls each round
                moved = {(name, "d"): (5.0, 0.0, 0.0) for name in sources}
                await until(
                    lambda: (
                        {k: tuple(v["position"]) for k, v in comparable(b.world).items()} == moved
                    ),
                    "every source's last move",
                )
                await until(lambda: len(heard) >= 2, "the plain subscriber's frames")
                plain.undeclare()
    rounds: dict[str, list[float]] = {name: [] for name in sources}
    batches = []
    for key, payload in heard:
        frame = codec.decode(payload)
        if isinstance(frame, codec.Batch):
            assert key == "robowire/=batch/=state"
            batches.append(frame)
            for name, state in frame.states:
                rounds[name] += state.columns["position"].values[:, 0].tolist()
        elif isinstance(frame, codec.State):
            name = key.split("/")[1]
            assert key == f"robowire/{name}/=state"
            rounds[name] += frame.columns["position"].values[:, 0].tolist()
    assert rounds == {name: [1.0, 2.0, 3.0, 4.0, 5.0] for name in sources}  # none lost or merged
    if tick == "0":
        assert not batches and sink.held.frames == 0
    else:
        assert batches and all(len(batch.states) >= 3 for batch in batches)
        assert sink.held.frames >= 3 and sink.held.longest <= 2.0
    assert source.stats.dropped == 0


def open_router(port: int) -> Any:
    import zenoh

    config = {
        "mode": "router",
        "listen": {"endpoints": [f"tcp/127.0.0.1:{port}"]},
        "scouting": {"multicast": {"enabled": False}},
    }
    return zenoh.open(zenoh.Config.from_json5(json.dumps(config)))


async def test_two_gateways_meet_at_a_router() -> None:
    """sim -> gateway A -> `serve zenoh://…?mode=connect` -> router <- gateway B `listen`:
    B's world holds A's devices with A's positions and telemetry."""
    port = free_port()
    router = open_router(port)
    try:
        sim = open_sim("spyglass", SimOptions(port=0, count=4, rate=20))
        async with running(sim) as a:
            assert sim.address is not None
            a.add(open_source(f"spyglass://127.0.0.1:{sim.address[1]}"))
            await until(lambda: len(a.world) == 4, "the simulator's devices in A")
            sink = open_sink(f"zenoh://127.0.0.1:{port}?mode=connect")
            assert sink.announce == "publishing to"
            a.add(sink)
            source = open_source(f"zenoh://127.0.0.1:{port}?prefix=far/")
            async with running(source) as b:

                def same() -> bool:
                    here = {
                        (s.removeprefix("far/"), d): v for (s, d), v in comparable(b.world).items()
                    }
                    there = comparable(a.world)
                    for view in here.values():
                        view["source"] = view["source"].removeprefix("far/")
                    return len(here) == 4 and all(
                        here[k]["position"] == there[k]["position"]
                        and here[k].get("telemetry") == there[k].get("telemetry")
                        for k in here
                    )

                await until(same, "A's devices in B, with A's positions and telemetry")
                assert {s for s, _ in comparable(b.world)} == {f"far/{s}" for s in a.world.tables}
    finally:
        router.close()


async def test_gateways_whose_sources_share_a_name_publish_under_prefixes() -> None:
    """Two sites publish a source of the same name to one router, each under its own
    `?prefix=`; a third gateway sees both, apart."""
    port = free_port()
    router = open_router(port)
    try:
        east = open_sink(f"zenoh://127.0.0.1:{port}?mode=connect&prefix=east/")
        west = open_sink(f"zenoh://127.0.0.1:{port}?mode=connect&prefix=west/")
        async with running(east) as a, running(west) as c:
            write_site(a.world)
            c.world.update_device("site", "d1", receive_time=1.0, position=(-1.0, -2.0, -3.0))
            async with running(open_source(f"zenoh://127.0.0.1:{port}")) as b:
                await until(
                    lambda: (
                        {name for name, table in b.world.tables.items() if len(table)}
                        == {"east/site", "west/site"}
                        and len(b.world) == 3
                        and b.world.device("west/site", "d1").position == (-1, -2, -3)
                    ),
                    "both sites, apart",
                )
                assert b.world.device("east/site", "d1").position == (1, 2, 3)
                assert b.world.device("east/site", "d1").name == "Drone 1"
    finally:
        router.close()


async def test_a_subscriber_started_first_gets_the_publisher_once_it_is_up() -> None:
    port = free_port()
    source = open_source(f"zenoh://127.0.0.1:{port}")
    async with running(source) as b:
        sink = open_sink(f"zenoh://127.0.0.1:{port}")
        async with running(sink) as a:
            write_site(a.world)
            await until(lambda: comparable(b.world) == comparable(a.world), "the same world")


async def test_a_restarted_publisher_is_seen_afresh() -> None:
    """The publisher restarts with its devices in another order (other slots): the
    subscriber reconnects by itself and ends with the new publisher's world, not a mix."""
    port = free_port()
    source = open_source(f"zenoh://127.0.0.1:{port}")
    async with running(source) as b:
        async with running(open_sink(f"zenoh://127.0.0.1:{port}")) as first:
            write_site(first.world)
            await until(lambda: comparable(b.world) == comparable(first.world), "the first world")
        async with running(open_sink(f"zenoh://127.0.0.1:{port}")) as second:
            second.world.update_device("site", "d2", receive_time=3.0, position=(7.0, 7.0, 7.0))
            second.world.update_device("site", "d1", receive_time=3.0, position=(8.0, 8.0, 8.0))
            await until(
                lambda: (
                    b.world.device("site", "d2").position == (7, 7, 7)
                    and b.world.device("site", "d1").position == (8, 8, 8)
                ),
                "the second world",
            )
            for step in range(1, 4):  # moves of the second publisher land on the right devices
                second.world.update_device("site", "d2", receive_time=4.0, position=(step, 0, 0))
                await until(
                    lambda s=step: b.world.device("site", "d2").position == (s, 0, 0),
                    f"move {step}",
                )
                assert b.world.device("site", "d1").position == (8, 8, 8)


class Stalled:
    """A raw Zenoh subscriber whose callback blocks until released: its session stops
    reading, so the publisher's link to it fills up."""

    def __init__(self, port: int) -> None:
        import zenoh

        config = {
            "mode": "peer",
            "connect": {"endpoints": [f"tcp/127.0.0.1:{port}"]},
            "listen": {"endpoints": []},
            "scouting": {"multicast": {"enabled": False}},
        }
        self.release = threading.Event()
        self.received = 0
        self.session = zenoh.open(zenoh.Config.from_json5(json.dumps(config)))
        self.subscriber = self.session.declare_subscriber("robowire/**", self._stall)

    def _stall(self, sample: Any) -> None:
        self.received += 1
        self.release.wait(WAIT)

    def close(self) -> None:
        self.release.set()
        self.subscriber.undeclare()
        self.session.close()


async def test_a_stalled_subscriber_does_not_slow_the_publisher() -> None:
    """A publishes 2,000 devices as fast as it can while one subscriber has stopped reading:
    A's event loop keeps going (every step is written and pulled) and a healthy subscriber
    still ends with A's last state."""
    port = free_port()
    sink = open_sink(f"zenoh://127.0.0.1:{port}")
    async with running(sink) as a:
        stalled = Stalled(port)
        try:
            source = open_source(f"zenoh://127.0.0.1:{port}")
            async with running(source) as b:
                n, steps = 2000, 300
                table = a.world.table("swarm")
                slots = table.slots([f"d{i}" for i in range(n)], "drone")
                with b.world.feed.subscribe() as feed:
                    for step in range(steps):
                        if step == steps // 2:  # never dropped: it waits for the stalled peer
                            a.world.log("swarm", "d1", "half way", time=1.0)
                        position = np.zeros((n, 3))
                        position[:, 0] = step
                        a.world.update("swarm", slots, receive_time=float(step), position=position)
                        await asyncio.sleep(0)  # the sink pulls between steps
                        if step == 0:
                            await until(lambda: stalled.received > 0, "the subscriber stalls")
                    assert stalled.received < sink.stats.messages_out  # it stopped reading
                    await until(
                        lambda: (
                            "swarm" in b.world.tables
                            and len(b.world.tables["swarm"]) == n
                            and (b.world.tables["swarm"].position[:n, 0] == steps - 1).all()
                        ),
                        "the healthy subscriber has A's last state",
                    )
                    logs = [e.text for e in feed.drain() if isinstance(e, LogEvent)]
                assert logs == ["half way"]
        finally:
            stalled.close()


def robowire(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


@contextmanager
def process(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A robowire command running until the block ends (its first stderr line read)."""
    proc = subprocess.Popen(
        [*ROBOWIRE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "Ctrl-C" in first, first
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_cli_sim_to_zenoh_to_listen() -> None:
    """Three processes: a SpyGlass simulator, `serve zenoh://` from it, `listen zenoh://`."""
    sim_port, port = free_port(), free_port()
    with (
        process("sim", "spyglass", "--port", str(sim_port), "--count", "3", "--rate", "20"),
        process("serve", f"zenoh://127.0.0.1:{port}", "--from", f"spyglass://127.0.0.1:{sim_port}"),
    ):
        run = robowire("listen", f"zenoh://127.0.0.1:{port}", "--json", "--count", "10")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 10
    assert {line["source"] for line in lines} == {f"spyglass@127.0.0.1:{sim_port}"}
    assert {line["device"] for line in lines} <= {"1", "2", "3"}
    assert all(line["kind"] == "sensor_node" and len(line["position"]) == 3 for line in lines)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["serve", "zenoh://127.0.0.1:7999?mode=sideways"], "mode must be listen or connect"),
        (["listen", "zenoh://127.0.0.1:7999?mode=both"], "mode must be listen or connect"),
        (["serve", "zenoh://127.0.0.1:7999?scout=maybe"], "scout must be 0 or 1"),
        (["serve", "zenoh://127.0.0.1:7999?colour=red"], "unknown option 'colour'"),
        (["serve", "zenoh://127.0.0.1:0"], "zenoh needs a port"),
        (["serve", "zenoh://127.0.0.1:99999"], "port"),
    ],
)
def test_bad_zenoh_urls_are_one_error_line(args: list[str], says: str) -> None:
    if args[0] == "serve":
        args = [*args, "--from", "spyglass://127.0.0.1:1"]
    run = robowire(*args, "--duration", "5")
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1 and says in run.stderr, run.stderr


@pytest.mark.parametrize("command", ["serve", "listen"])
def test_a_busy_port_is_one_error_line(command: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        if command == "serve":
            args = ["serve", f"zenoh://127.0.0.1:{port}", "--from", "spyglass://127.0.0.1:1"]
        else:
            args = ["listen", f"zenoh://127.0.0.1:{port}?mode=listen", "--json"]
        run = robowire(*args, "--duration", "20")
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1, run.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in run.stderr


def test_zenoh_sink_and_source_are_registered() -> None:
    assert isinstance(open_sink("zenoh://127.0.0.1:7447"), Sink)
    assert isinstance(open_source("zenoh://127.0.0.1:7447"), Source)


def test_slots_described_anew_take_the_next_states_of_those_slots() -> None:
    """A publisher that restarts numbers its devices afresh: after its new DEVICES frame, a
    STATE frame with the very same slots as before writes the devices now at those slots."""
    from robowire.zenoh import codec
    from robowire.zenoh.source import Received, ZenohAdapter

    world = World()
    adapter = ZenohAdapter(world)

    def devices(ids: tuple[str, ...]) -> Received:
        frame = codec.Devices(
            slots=(0, 1), ids=ids, kinds=("drone",) * 2, names=ids, links=((), ()),
            attributes=({}, {}),
        )  # fmt: skip
        return Received("show", frame)

    def state(x: float) -> Received:
        position = np.array([[x, 0.0, 0.0], [x + 1, 0.0, 0.0]])
        columns = {"position": codec.Column(values=position)}
        frame = codec.State(receive_time=1.0, slots=np.array([0, 1], np.uint32), columns=columns)
        return Received("show", codec.decode(codec.encode(frame)))

    adapter.apply([devices(("a", "b")), state(1.0), state(2.0)], 1.0)
    adapter.apply([devices(("c", "d")), state(5.0)], 2.0)
    positions = {d.device_id: d.position for d in world.devices("show")}
    assert positions == {
        "a": (2.0, 0.0, 0.0), "b": (3.0, 0.0, 0.0), "c": (5.0, 0.0, 0.0), "d": (6.0, 0.0, 0.0)
    }  # fmt: skip
