"""The bridge matrix's machinery: a source's simulator -> gateway -> sink -> the far end.

Each far end is a client of the sink's own protocol: our protocol sources (in a gateway of their
own, with a world of their own), a Foxglove WebSocket client (subprotocol `foxglove.sdk.v1`,
protobuf decoded with the schema the server advertised) and a viewer client (subprotocol
`robowire.viewer.v1`, frames decoded by `robowire.viewer.frames.decode_frame`). Every far end
reduces what it saw to `Seen`: far-end device id -> `Obs`, so the test compares one shape.

One `run_source` per source: the sinks and their far ends start first (so each far end sees
everything from the first update), then the simulator and the source; once the source world
holds everything the simulator makes (`complete`) and every far end has seen devices, the
simulator stops (the source world freezes) and each far end is polled until it agrees with what
the test expects from the frozen world (or a deadline passes; the test then says what differs).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import math
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import websockets
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from robowire import protocols
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.service import SimOptions, Sink, Source
from robowire.sinks import names as sink_names
from robowire.viewer.frames import decode_frame
from robowire.world import World
from support import free_port


def sources() -> tuple[str, ...]:
    """Every protocol with a simulator, in the registry's order."""
    return tuple(p.name for p in protocols.landed() if p.open_sim is not None)


def sinks() -> tuple[str, ...]:
    """Every protocol's server, then the sinks that are not a protocol's (Foxglove, the
    viewer, Zenoh)."""
    return (*(p.name for p in protocols.landed() if p.open_sink is not None), *sink_names())


SOURCES = sources()
SINKS = sinks()
WAIT = 25.0  # seconds: generous, only a hang takes this long

UGCS_ORIGIN = (56.9496, 24.1052, 10.0)  # the UgCS sink's documented default origin
SPYGLASS_SCALE = 0.01  # metres per SpyGlass unit, on the sink and on the far end


@dataclass
class Obs:
    """What a far end knows of one device."""

    position: tuple[float, float, float] | None = None
    geodetic: tuple[float, float, float] | None = None
    orientation: tuple[float, float, float, float] | None = None
    telemetry: dict[str, tuple[float, str]] = field(default_factory=dict)
    kind: str = ""
    velocity: tuple[float, float, float] | None = None


Seen = dict[str, Obs]


def seen_of_world(world: World) -> Seen:
    """Every device of a far-end world, by device id (a far end has one source)."""
    out: Seen = {}
    for d in world.devices():
        telemetry = dict(d.telemetry)
        out[d.device_id] = Obs(d.position, d.geodetic, d.orientation, telemetry, d.kind, d.velocity)
    return out


@dataclass
class Leg:
    """One sink of the source's gateway and the far end that reads it."""

    name: str
    sink: Sink
    seen: Callable[[], Seen]
    close: Callable[[], Awaitable[None]]
    ready: Callable[[], bool] = lambda: True  # the far end is connected


async def gateway_far_end(url: str) -> tuple[Gateway, Source, asyncio.Task[None]]:
    gateway = Gateway()
    source = open_source(url)
    gateway.add(source)
    return gateway, source, asyncio.create_task(gateway.run())


async def stop(gateway: Gateway, task: asyncio.Task[None]) -> None:
    gateway.stop()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, WAIT)


async def until(condition: Callable[[], bool], seconds: float = WAIT) -> bool:
    """Poll `condition` every 20 ms; False if it never held within `seconds`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not condition():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.02)
    return True


# -- far ends that are our own protocol sources ---------------------------------------------------

# A protocol's far end is its own source: `NAME://127.0.0.1:{port}` reading the sink, or for
# a protocol whose sink sends (`WireProtocol.sends`), bound first with the sink sending to it.
# The options below are the expectations' own (an origin, a scale the test computes with).
SOURCE_URL = {
    "vrpn": "vrpn://127.0.0.1:{port}",
    # the far end drives as the XRP source does: through an xrp -> xrp relay it is the
    # WPILib side that drives the robot (encoders count only while enabled)
    "xrp": "xrp://127.0.0.1:{port}?enable=1&left=0.6&right=0.3",
    "ugcs": "ugcs://127.0.0.1:{port}?origin={o[0]},{o[1]},{o[2]}",
    "spyglass": "spyglass://127.0.0.1:{port}?scale={scale}",
}
SINK_URL = {
    "xrp": "xrp://127.0.0.1:0?device={device}",
    "vrsp": "vrsp://127.0.0.1:{port}?rate=50",
    "spyglass": "spyglass://127.0.0.1:0?scale={scale}",
    "foxglove": "foxglove://127.0.0.1:0?rate=50",
    "http": "http://127.0.0.1:0?rate=50",
}


async def protocol_leg(name: str, front: Gateway, xrp_device: str) -> Leg:
    """A sink in `front` read by our own source of its protocol (for VRSP the far end binds
    first: the sink sends to it; the others' far ends connect to the sink)."""
    if name not in sink_names() and protocols.get(name).sends:
        far, source, task = await gateway_far_end(f"{name}://127.0.0.1:0")
        await asyncio.wait_for(source.ready.wait(), WAIT)
        assert source.address is not None
        url = SINK_URL.get(name, "{name}://127.0.0.1:{port}")
        sink = open_sink(url.format(name=name, port=source.address[1]))
        front.add(sink)
        await asyncio.wait_for(sink.ready.wait(), WAIT)
    elif name == "zenoh":
        port = free_port()
        sink = open_sink(f"zenoh://127.0.0.1:{port}")
        front.add(sink)
        await asyncio.wait_for(sink.ready.wait(), WAIT)
        far, source, task = await gateway_far_end(f"zenoh://127.0.0.1:{port}")
    else:
        url = SINK_URL.get(name, "{name}://127.0.0.1:0")
        sink = open_sink(url.format(name=name, device=xrp_device, scale=SPYGLASS_SCALE))
        front.add(sink)
        await asyncio.wait_for(sink.ready.wait(), WAIT)
        assert sink.address is not None
        url = SOURCE_URL.get(name, "{name}://127.0.0.1:{port}")
        url = url.format(name=name, port=sink.address[1], o=UGCS_ORIGIN, scale=SPYGLASS_SCALE)
        far, source, task = await gateway_far_end(url)

    async def close() -> None:
        await stop(far, task)

    return Leg(name, sink, lambda: seen_of_world(far.world), close, lambda: source.up)


# -- Foxglove ------------------------------------------------------------------------------------


def _decoder(channel: dict[str, Any]) -> Any:
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))


async def foxglove_leg(front: Gateway) -> Leg:
    """A Foxglove WebSocket client subscribed to every channel: /tf translations are positions
    (frame "<source>/<device>"), /location fixes geodetic, /telemetry/<source> the fields (its
    JSON columns carry no units: unit "" here)."""
    sink = open_sink(SINK_URL["foxglove"])
    front.add(sink)
    await asyncio.wait_for(sink.ready.wait(), WAIT)
    assert sink.address is not None
    seen: Seen = {}
    connected = asyncio.Event()

    def obs(key: str) -> Obs:
        return seen.setdefault(key, Obs())

    async def read() -> None:
        url = f"ws://127.0.0.1:{sink.address[1]}" if sink.address else ""
        async with websockets.connect(url, subprotocols=["foxglove.sdk.v1"]) as ws:
            subscribed: dict[int, tuple[str, Any]] = {}
            next_id = 1
            connected.set()
            async for message in ws:
                if isinstance(message, str):
                    op = json.loads(message)
                    if op["op"] != "advertise":
                        continue
                    subscriptions = []
                    for channel in op["channels"]:
                        parse = _decoder(channel) if channel["encoding"] == "protobuf" else None
                        subscribed[next_id] = (channel["topic"], parse)
                        subscriptions.append({"id": next_id, "channelId": channel["id"]})
                        next_id += 1
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
                    continue
                if message[0] != 0x01:
                    continue
                sub, _ = struct.unpack_from("<IQ", message, 1)
                topic, parse = subscribed[sub]
                payload = message[13:]
                if topic == "/tf":
                    for tf in parse.FromString(payload).transforms:
                        t, r = tf.translation, tf.rotation
                        o = obs(tf.child_frame_id)
                        o.position = (t.x, t.y, t.z)
                        o.orientation = (r.w, r.x, r.y, r.z)
                elif topic == "/location":  # foxglove.LocationFixes
                    for fix in parse.FromString(payload).fixes:
                        obs(fix.frame_id).geodetic = (fix.latitude, fix.longitude, fix.altitude)
                elif topic.startswith("/telemetry/"):
                    source = topic.removeprefix("/telemetry/")
                    columns = json.loads(payload)
                    devices, units = columns.pop("device"), columns.pop("units")
                    for i, device in enumerate(devices):
                        o = obs(f"{source}/{device}")
                        for name, values in columns.items():
                            if values[i] is not None:
                                o.telemetry[name] = (float(values[i]), units[name])

    task = asyncio.create_task(read())

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    return Leg("foxglove", sink, lambda: seen, close, connected.is_set)


# -- the web viewer ------------------------------------------------------------------------------


async def viewer_leg(front: Gateway) -> Leg:
    """A viewer client: says ready after every frame, keeps each device's latest position and
    geodetic fix (float32 on the wire), and selects every device it learns of in turn, round
    and round (the next on each telemetry message), to get each one's telemetry with units.
    Device keys are "<source>/<id>"."""
    sink = open_sink(SINK_URL["http"])
    front.add(sink)
    await asyncio.wait_for(sink.ready.wait(), WAIT)
    assert sink.address is not None
    seen: Seen = {}
    connected = asyncio.Event()

    async def read() -> None:
        url = f"ws://127.0.0.1:{sink.address[1]}/ws" if sink.address else ""
        names: dict[int, str] = {}
        ids: dict[tuple[str, int], str] = {}
        devices: list[tuple[str, int]] = []  # selected in turn, round and round
        turn = 0

        async def select_next() -> None:
            nonlocal turn
            if devices:
                source, slot = devices[turn % len(devices)]
                turn += 1
                await ws.send(json.dumps({"type": "select", "source": source, "slot": slot}))

        async with websockets.connect(url, subprotocols=["robowire.viewer.v1"]) as ws:
            await ws.send(json.dumps({"type": "ready"}))
            connected.set()
            async for message in ws:
                if isinstance(message, str):
                    text = json.loads(message)
                    if text["type"] == "catalog":
                        names[text["index"]] = text["source"]
                        for k, device in enumerate(text["devices"]):
                            slot = text["start"] + k
                            ids[(text["source"], slot)] = device["id"]
                            devices.append((text["source"], slot))
                        if turn == 0:
                            await select_next()
                    elif text["type"] == "telemetry":
                        o = seen.setdefault(f"{text['source']}/{text['id']}", Obs())
                        fields = text["fields"].items()  # (JSON has no inf nor NaN: null)
                        o.telemetry = {
                            k: (math.nan if v is None else float(v), u) for k, (v, u) in fields
                        }
                        await select_next()
                    continue
                frame = decode_frame(message)
                for block in frame.blocks:
                    source = names[block.source_index]
                    for i, slot in enumerate(block.slot.tolist()):
                        o = seen.setdefault(f"{source}/{ids[(source, slot)]}", Obs())
                        p, g = block.position[i], block.geodetic[i]
                        o.position = None if any(map(math.isnan, p)) else tuple(map(float, p))
                        o.geodetic = None if any(map(math.isnan, g)) else tuple(map(float, g))
                await ws.send(json.dumps({"type": "ready"}))

    task = asyncio.create_task(read())

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    return Leg("http", sink, lambda: seen, close, connected.is_set)


# -- sources -------------------------------------------------------------------------------------


MIRRORED = {"spyglass": "2", "vrpn": "Tracker0/1", "xrp": "xrp", "ugcs": "SIM-0002", "vrsp": "2"}
"""The device the XRP sink mirrors (`?device=`) for each source."""


SIM_COUNT = 3
SIM_OPTIONS = {
    "spyglass": SimOptions(port=0, count=4, rate=5),
    "ugcs": SimOptions(port=0, count=3, rate=20, options={"gps_warmup": "0,0"}),
    "vrsp": SimOptions(port=0, count=4, rate=20),
}
"""Simulators run otherwise than `SIM_COUNT` devices at 20 Hz (what `complete` waits for)."""


async def start_source(name: str, front: Gateway) -> tuple[Gateway, asyncio.Task[None]]:
    """The simulator of `name` (in a gateway of its own, so it can be stopped alone) and the
    source reading it (in `front`) as `robowire demo` does (`WireProtocol.demo`: the XRP
    source drives its robot in a curve)."""
    sims = Gateway()
    options = SIM_OPTIONS.get(name, SimOptions(port=0, count=SIM_COUNT, rate=20))
    if protocols.get(name).sends:  # the source binds first, the simulator sends to it
        source = open_source(f"{name}://127.0.0.1:0")
        front.add(source)
        await asyncio.wait_for(source.ready.wait(), WAIT)
        assert source.address is not None
        target = f"127.0.0.1:{source.address[1]}"
        sims.add(open_sim(name, dataclasses.replace(options, port=None, target=target)))
        return sims, asyncio.create_task(sims.run())
    sim = open_sim(name, options)
    sims.add(sim)
    task = asyncio.create_task(sims.run())
    await asyncio.wait_for(sim.ready.wait(), WAIT)
    assert sim.address is not None
    demo = protocols.get(name).demo  # the source as the demo reads the simulator
    url = demo.url if demo is not None else "{name}://{host}:{port}"
    front.add(open_source(url.format(name=name, host="127.0.0.1", port=sim.address[1])))
    return sims, task


def complete(name: str, world: World) -> bool:
    """The source world holds everything its simulator makes (so every run maps the same)."""
    devices = {d.device_id: d for d in world.devices()}
    if name == "spyglass":
        return len(devices) >= 4 and all(
            d.position is not None and "data.20" in d.telemetry for d in devices.values()
        )
    if name == "vrpn":
        names = {"Tracker0/0", "Tracker0/1", "Tracker0/2", "Button0", "Analog0", "Dial0"}
        return names <= set(devices)
    if name == "xrp":
        robot = devices.get("xrp")
        return robot is not None and robot.position is not None and abs(robot.position[0]) > 0.02
    if name == "ugcs":
        return len(devices) == 3 and all(d.geodetic is not None for d in devices.values())
    if name == "vrsp":
        return len(devices) == 4 and all("led_red" in d.telemetry for d in devices.values())
    # any other protocol: its simulator's devices, each placed
    return len(devices) >= SIM_COUNT and all(d.position is not None for d in devices.values())


class Said(logging.Handler):
    """What was logged at `level` or above."""

    def __init__(self, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class Outcome:
    """What one source's run left: the frozen source world and each far end's view."""

    source: str
    world: World
    seen: dict[str, Seen]
    agreed: dict[str, bool]
    said: list[str]  # what the gateways logged


async def run_source(
    name: str,
    sinks: tuple[str, ...],
    agrees: Callable[[str, str, World, Seen], bool],
) -> Outcome:
    """Sinks and far ends first, then the simulator and source; once every far end has seen
    devices the simulator stops, and each far end is polled until `agrees(source, sink, world,
    seen)` (at most WAIT seconds)."""
    said = Said()
    logger = logging.getLogger("robowire")
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    front = Gateway()
    front_task = asyncio.create_task(front.run())
    legs: list[Leg] = []
    sims: tuple[Gateway, asyncio.Task[None]] | None = None
    try:
        for sink in sinks:
            if sink == "foxglove":
                legs.append(await foxglove_leg(front))
            elif sink == "http":
                legs.append(await viewer_leg(front))
            else:
                legs.append(await protocol_leg(sink, front, MIRRORED.get(name, "")))
        await until(lambda: all(leg.ready() for leg in legs))
        sims = await start_source(name, front)
        await until(lambda: complete(name, front.world))
        await until(lambda: all(leg.seen() for leg in legs))
        await stop(*sims)
        sims = None
        frozen = front.world
        agreed = {}
        for leg in legs:
            agreed[leg.name] = await until(
                lambda leg=leg: agrees(name, leg.name, frozen, leg.seen())
            )
        seen = {leg.name: leg.seen() for leg in legs}
        return Outcome(name, frozen, seen, agreed, said.lines)
    finally:
        if sims is not None:
            await stop(*sims)
        for leg in legs:
            await leg.close()
        await stop(front, front_task)
        logger.removeHandler(said)
        logger.setLevel(level)
