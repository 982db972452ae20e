"""The bridge matrix's machinery: a source's simulator -> gateway -> sink -> the far end.

Each far end is a client of the sink's own protocol: our protocol sources (in a gateway of their
own, with a world of their own), a Foxglove WebSocket client (subprotocol `foxglove.sdk.v1`,
protobuf decoded with the schema the server advertised), a viewer client (subprotocol
`robowire.viewer.v1`, frames decoded by `robowire.viewer.frames.decode_frame`) and, for
`ros2://`, the independent ROS 2 subscriber (tests/ros2/subscriber.py in another process: DDS
discovery, types and CDR from rosbags) and, for `ros2+zenoh://`, a subscriber made of zenoh
alone at a router of its own (`Ros2ZenohFarEnd`: rmw_zenoh's keys and attachments checked, CDR
from rosbags). Every far end reduces what it saw to `Seen`: far-end device id -> `Obs`, so the
test compares one shape.

The sources are every protocol with a simulator and `ros2://`, fed by the independent ROS 2
publisher (tests/ros2/publisher.py in another process, the robots `listen ros2://` is tested
against): a ROS 2 robot into every sink; and `ros2+zenoh://`, the same robots put at a
router by a publisher made of zenoh alone (`start_ros2_zenoh_robots`).

One `run_source` per source: the sinks and their far ends start first (so each far end sees
everything from the first update), then the simulator (or the publisher) and the source; once
the source world holds everything the simulator makes (`complete`) and every far end has seen
devices (and the ROS 2 far end has had a sample of each device's topics since it found them: DDS
does not keep what a volatile writer sent before a reader matched), the simulator stops (the
source world freezes) and each far end is polled until it agrees with what the test expects from
the frozen world (or a deadline passes; the test then says what differs). Each `ros2://` has a
DDS domain of its own (`domain`), on loopback, so tests running at once never meet.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import re
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import websockets
import xxhash
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tests.ros2 import publisher, subscriber
from tests.ros2.test_listen import spec as ros2_robots
from tests.ros2.test_zenoh_listen import attachment as zenoh_attachment
from tests.ros2.test_zenoh_listen import key as zenoh_key
from tests.ros2.test_zenoh_listen import transient_local as zenoh_transient_local
from tests.ros2.test_zenoh_node import session as zenoh_session

from robowire import protocols
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.service import SimOptions, Sink, Source
from robowire.sinks import names as sink_names
from robowire.viewer.frames import decode_frame
from robowire.world import World
from support import free_port


def sources() -> tuple[str, ...]:
    """Every protocol with a simulator, in the registry's order, then the sources fed by an
    independent peer (`PEERS`)."""
    return (*(p.name for p in protocols.landed() if p.open_sim is not None), *PEERS)


def sinks() -> tuple[str, ...]:
    """Every protocol's server, then the sinks that are not a protocol's (Foxglove, the
    viewer, Zenoh)."""
    return (*(p.name for p in protocols.landed() if p.open_sink is not None), *sink_names())


PEERS = ("ros2", "ros2+zenoh")  # sources with no simulator, fed by an independent peer
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
    # ROS 2: what the device's own pose topic says (position, orientation), beside /tf's
    own_pose: tuple[tuple[float, ...], tuple[float, ...]] | None = None


Seen = dict[str, Obs]
Stop = Callable[[], Awaitable[None]]


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
    caught_up: Callable[[World], bool] = lambda world: True  # has had what `world` holds
    errors: Callable[[], list[str]] = list  # what it could not read


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


# -- ROS 2 ---------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
WORLD_FRAME = "world"  # the ROS 2 sink's parent frame (its default)
_OWN_TOPIC = re.compile(r"/[^/]+/(?P<frame>.+)/(?P<what>pose|twist)(?P<sensor>\d*)")
_KEY_UNIT = re.compile(r"(?P<name>.*) \[(?P<unit>.*)\]")
_domains: list[int] = []


def domain() -> int:
    """A DDS domain no other `ros2://` of this process had: 1..99 (their ports lie below the
    ephemeral range other tests bind in, and tests/ros2 takes 100 and up)."""
    if not _domains:
        _domains.extend(random.sample(range(1, 100), 99))
    return _domains.pop()


@contextlib.contextmanager
def loopback() -> Iterator[None]:
    """DDS discovery on loopback only, as a ROS 2 user sets it (read as a ros2:// opens)."""
    with mock.patch.dict(os.environ, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}):
        os.environ.pop("CYCLONEDDS_URI", None)
        yield


def _multiply(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def _rotate(q: tuple[float, ...], v: tuple[float, ...]) -> tuple[float, ...]:
    turned = _multiply(_multiply(q, (0.0, *v)), (q[0], -q[1], -q[2], -q[3]))
    return turned[1:]


def _xyz(value: dict[str, Any]) -> tuple[float, ...]:
    return tuple(float(value[k]) for k in "xyz")  # (the subscriber's JSON: inf as "inf")


def _wxyz(value: dict[str, Any]) -> tuple[float, ...]:
    return tuple(float(value[k]) for k in "wxyz")


class Ros2FarEnd:
    """What the independent ROS 2 subscriber printed (a JSON line per sample, rosbags'
    decoding), read as a ROS 2 user reads it, by the devices' TF frames: the pose from /tf
    (and /tf_static) composed to `world`, the device's own pose topic beside it (`<ns>/<frame>
    /pose`, vrpn_mocap's `pose<N>` for frame `<tracker>_<N>`), the velocity from its twist,
    the fix from NavSatFix, telemetry from /diagnostics (`name [unit]` keys, the status's
    message its kind) and BatteryState (`battery.voltage`, `battery.current`,
    `battery.percentage`)."""

    def __init__(self) -> None:
        self.tf: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = {}
        self.poses: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self.velocity: dict[str, tuple[float, ...]] = {}
        self.fix: dict[str, tuple[float, ...]] = {}
        self.diagnostics: dict[str, tuple[str, dict[str, tuple[float, str]]]] = {}
        self.battery: dict[str, dict[str, tuple[float, str]]] = {}
        self.errors: list[str] = []

    def read(self, sample: dict[str, Any]) -> None:
        topic, message = sample["topic"], sample.get("message")
        if message is None:
            self.errors.extend(f"{topic}: {e}" for e in sample.get("errors", ()))
        elif topic in ("/tf", "/tf_static"):
            for t in message["transforms"]:
                parent, child = t["header"]["frame_id"], t["child_frame_id"]
                at = t["transform"]
                self.tf[child] = (parent, _xyz(at["translation"]), _wxyz(at["rotation"]))
        elif topic == "/diagnostics":
            for status in message["status"]:
                fields = {}
                for pair in status["values"]:
                    found = _KEY_UNIT.fullmatch(pair["key"])
                    name, unit = (found["name"], found["unit"]) if found else (pair["key"], "")
                    fields[name] = (float(pair["value"]), unit)
                frame = status["name"].removeprefix("robowire: ")
                self.diagnostics[frame] = (status["message"], fields)
        elif sample["type"] == "sensor_msgs/msg/NavSatFix":
            fix = (message[k] for k in ("latitude", "longitude", "altitude"))
            self.fix[message["header"]["frame_id"]] = tuple(map(float, fix))
        elif sample["type"] == "sensor_msgs/msg/BatteryState":
            self.battery[message["header"]["frame_id"]] = {
                "battery.voltage": (float(message["voltage"]), "V"),
                "battery.current": (float(message["current"]), "A"),
                "battery.percentage": (float(message["percentage"]), "1"),
            }
        elif (own := _OWN_TOPIC.fullmatch(topic)) is not None:
            frame = own["frame"] + (f"_{own['sensor']}" if own["sensor"] else "")
            if own["what"] == "pose":
                pose = message["pose"]
                self.poses[frame] = (_xyz(pose["position"]), _wxyz(pose["orientation"]))
            else:
                self.velocity[frame] = _xyz(message["twist"]["linear"])

    def placed(self, frame: str) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
        """The frame's pose in `world`, through its parents (None: no path to `world`)."""
        chain = []
        while frame != WORLD_FRAME:
            if frame not in self.tf or len(chain) > len(self.tf):
                return None
            parent, translation, rotation = self.tf[frame]
            chain.append((translation, rotation))
            frame = parent
        position, orientation = chain.pop()
        while chain:
            translation, rotation = chain.pop()
            turned = _rotate(orientation, translation)
            position = tuple(p + t for p, t in zip(position, turned, strict=True))
            orientation = _multiply(orientation, rotation)
        return position, orientation

    def seen(self) -> Seen:
        out: Seen = {}
        for frame in self.tf:
            pose = self.placed(frame)
            o = out.setdefault(frame, Obs())
            if pose is not None:
                o.position, o.orientation = pose  # type: ignore[assignment]
        for frame, pose in self.poses.items():
            out.setdefault(frame, Obs()).own_pose = pose
        for frame, velocity in self.velocity.items():
            out.setdefault(frame, Obs()).velocity = velocity  # type: ignore[assignment]
        for frame, fix in self.fix.items():
            out.setdefault(frame, Obs()).geodetic = fix  # type: ignore[assignment]
        for frame, (kind, fields) in self.diagnostics.items():
            o = out.setdefault(frame, Obs())
            o.kind, o.telemetry = kind, dict(fields)
        for frame, fields in self.battery.items():
            out.setdefault(frame, Obs()).telemetry.update(fields)
        return out

    def caught_up(self, world: World) -> bool:
        """Each sort of thing (a pose, a velocity, a fix, telemetry) has come for as many
        devices as `world` has it: a device's topics were found and read since."""
        seen = list(self.seen().values())
        devices = list(world.devices())

        def as_many(far: Callable[[Obs], object], near: Callable[[Any], object]) -> bool:
            return sum(1 for o in seen if far(o)) >= sum(1 for d in devices if near(d))

        return (
            as_many(lambda o: o.position and o.own_pose, lambda d: d.position)
            and as_many(lambda o: o.velocity, lambda d: d.velocity)
            and as_many(lambda o: o.geodetic, lambda d: d.geodetic)
            and as_many(lambda o: o.kind, lambda d: d.telemetry)
        )


async def ros2_leg(front: Gateway) -> Leg:
    """`serve ros2://?domain=N` (a domain of its own) read by the independent ROS 2
    subscriber, tests/ros2/subscriber.py, in another process (`--stream`: a JSON line per
    sample), reduced by `Ros2FarEnd`."""
    number = domain()
    with loopback():
        sink = open_sink(f"ros2://?domain={number}")
    front.add(sink)
    await asyncio.wait_for(sink.ready.wait(), WAIT)
    process = await asyncio.create_subprocess_exec(
        sys.executable, subscriber.__file__, "--domain", str(number), "--localhost", "--stream",
        "--duration", "600", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )  # fmt: skip
    far = Ros2FarEnd()
    connected = asyncio.Event()

    async def read() -> None:
        assert process.stdout is not None and process.stderr is not None
        if (await process.stderr.readline()).strip() == b"ready":
            connected.set()
        async for line in process.stdout:
            far.read(json.loads(line))
        said = (await process.stderr.read()).decode(errors="replace")
        far.errors.append(f"the subscriber ended ({process.returncode}): {said[-2000:]}")

    task = asyncio.create_task(read())

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if process.returncode is None:
            process.terminate()
        await process.wait()

    return Leg("ros2", sink, far.seen, close, connected.is_set, far.caught_up, lambda: far.errors)


async def start_ros2_robots(front: Gateway) -> Stop:
    """The ROS 2 robots `listen ros2://` is tested against (tests/ros2/test_listen.py's
    `spec`: /tf with a frame below a rotated parent, /tf_static, vrpn_mocap's pose and twist,
    a PoseWithCovarianceStamped, an Odometry, a NavSatFix; beside them a type listen does not
    read and a sample that does not decode), written 20 times a second by the independent
    publisher (tests/ros2/publisher.py, rosbags' types and bytes) in another process, on a
    DDS domain of its own, and read into `front` by `listen ros2://?domain=N`."""
    number = domain()
    folder = tempfile.TemporaryDirectory()
    path = Path(folder.name) / "spec.json"
    path.write_text(json.dumps(ros2_robots(number)))
    env = {**os.environ, "CYCLONEDDS_URI": subscriber.LOOPBACK, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.ros2.publisher", str(path),
        stdout=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip

    async def stop_publishing() -> None:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        folder.cleanup()

    assert process.stdout is not None
    if (await asyncio.wait_for(process.stdout.readline(), WAIT)).strip() != b"ready":
        await stop_publishing()
        raise RuntimeError("the ROS 2 publisher did not start")
    with loopback():
        front.add(open_source(f"ros2://?domain={number}"))
    return stop_publishing


# -- ROS 2 over rmw_zenoh -------------------------------------------------------------------------

ZENOH_DOMAIN = 0  # what `ros2+zenoh://HOST:PORT` uses when no ?domain= (and no ROS_DOMAIN_ID)


class Ros2ZenohFarEnd(Ros2FarEnd):
    """A subscriber made of zenoh alone, as a ROS 2 node on rmw_zenoh_cpp subscribes (its
    docs/design.md): every data key of the domain (`0/**`), read as `Ros2FarEnd` reads the
    DDS subscriber's samples. Each sample is checked as rmw_zenoh would take it, independently
    of robowire's ROS 2 code: the key is `<domain>/<topic>/<DDS type>/<hash>` with rosbags'
    RIHS01 hash of the type; the attachment is there (sequence number, source time, a 16-byte
    GID), the sequence numbers of each publisher rise, the source time is that of sending, and
    the GID is the XXH3-128 of a publisher token in the graph (`@ros2_lv/…/MP/…`) for that
    very topic, type and hash; the bytes are decoded by rosbags. What fails is an error.

    Zenoh delivers on its own threads: samples wait in a list until the event loop reads them
    (`seen`, `caught_up`)."""

    def __init__(self, session: Any) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._came: list[tuple[str, bytes, bytes | None, int]] = []
        self._publishers: dict[bytes, str] = {}  # GID -> the publisher token it hashes
        self._sent_by: dict[tuple[str, bytes], int] = {}  # (data key, GID) -> samples
        self._sequence: dict[bytes, int] = {}  # GID -> the last sequence number
        self._declared = [
            session.declare_subscriber(f"{ZENOH_DOMAIN}/**", self._received),
            session.liveliness().declare_subscriber(
                f"@ros2_lv/{ZENOH_DOMAIN}/**", self._token, history=True
            ),
        ]

    def _received(self, sample: Any) -> None:
        extra = sample.attachment
        came = (str(sample.key_expr), sample.payload.to_bytes(), extra and extra.to_bytes())
        with self._lock:
            self._came.append((*came, time.time_ns()))

    def _token(self, sample: Any) -> None:
        token = str(sample.key_expr)
        if token.split("/")[5:6] == ["MP"]:  # (kept when it goes: samples may still be read)
            gid = xxhash.xxh3_128_intdigest(token.encode()).to_bytes(16, "little")
            with self._lock:
                self._publishers[gid] = token

    def _take(self) -> None:
        with self._lock:
            came, self._came = self._came, []
        for key, payload, extra, received in came:
            self.take(key, payload, extra, received)

    def take(self, key: str, payload: bytes, extra: bytes | None, received: int) -> None:
        _, *topic, dds_type, type_hash = key.split("/")
        parsed = subscriber.DDS_TYPE.fullmatch(dds_type)
        ros_type = f"{parsed[1]}/msg/{parsed[3]}" if parsed else ""
        if not topic or ros_type not in subscriber.STORE.fielddefs:
            self.errors.append(f"{key}: not a data key of a type rosbags knows")
            return
        if type_hash != subscriber.STORE.hash_rihs01(ros_type):
            self.errors.append(f"{key}: not rosbags' hash of {ros_type}")
        if extra is None or len(extra) != 33 or extra[16] != 16:
            self.errors.append(f"{key}: attachment {extra!r} is not rmw_zenoh's")
            return
        sequence, nanos = struct.unpack_from("<qq", extra)
        gid = extra[17:]
        if sequence <= self._sequence.get(gid, 0):
            self.errors.append(f"{key}: sequence {sequence} after {self._sequence[gid]}")
        if not 0 <= received - nanos < 10**10:
            self.errors.append(f"{key}: source time {nanos} for a sample that came at {received}")
        self._sequence[gid] = sequence
        self._sent_by[(key, gid)] = self._sent_by.get((key, gid), 0) + 1
        try:
            message = subscriber.STORE.deserialize_cdr(payload, ros_type)
        except Exception as exc:
            self.errors.append(f"{key}: rosbags: {exc}")
            return
        sample = {"topic": "/" + "/".join(topic), "type": ros_type}
        self.read({**sample, "message": subscriber.to_json(message, limit=10**6)})

    def graph_errors(self) -> list[str]:
        """Each publisher (GID) that sent samples, and what its token says: a publisher of
        that key's topic, type and hash."""
        out = []
        with self._lock:
            publishers = dict(self._publishers)
        for (key, gid), count in self._sent_by.items():
            _, *topic, dds_type, type_hash = key.split("/")
            token = publishers.get(gid, "")
            named = token.split("/")[9:12]
            if named != ["%" + "%".join(topic), dds_type, type_hash]:
                out.append(f"{key}: {count} samples from GID {gid.hex()}, whose token is {token!r}")
        return out

    def seen(self) -> Seen:
        self._take()
        return super().seen()

    def caught_up(self, world: World) -> bool:
        self._take()
        return super().caught_up(world)

    def close(self) -> None:
        for declared in self._declared:
            declared.undeclare()


async def ros2_zenoh_leg(front: Gateway) -> Leg:
    """`serve ros2+zenoh://127.0.0.1:PORT` at a router of its own (zenoh's router mode on a
    free loopback port, as tests/ros2/test_zenoh_*.py play rmw_zenohd), read by a
    `Ros2ZenohFarEnd` at that router. The sink writes a device when it changes (a parked UgCS
    vehicle once): the source starts only once the sink's session knows the subscription (a
    probe publisher of a key under it, declared on that session, matches)."""
    port = free_port()
    router = zenoh_session(port, "router")
    reader = zenoh_session(port, "peer")
    far = Ros2ZenohFarEnd(reader)
    sink = open_sink(f"ros2+zenoh://127.0.0.1:{port}")
    front.add(sink)

    async def close() -> None:
        far.close()
        for opened in (reader, router):
            opened.close()

    try:
        await asyncio.wait_for(sink.ready.wait(), WAIT)
        session = getattr(sink, "session", None)
        assert session is not None, "the sink is up with no Zenoh session"
        probe = session.declare_publisher(f"{ZENOH_DOMAIN}/robowire_matrix_probe")
        known = await until(lambda: probe.matching_status.matching)
        probe.undeclare()
        assert known, "the sink's session never learnt of the far end's subscription"
    except BaseException:
        await close()
        raise

    def errors() -> list[str]:
        return far.errors + far.graph_errors()

    return Leg("ros2+zenoh", sink, far.seen, close, lambda: True, far.caught_up, errors)


async def start_ros2_zenoh_robots(front: Gateway) -> Stop:
    """The robots of `start_ros2_robots` (tests/ros2/test_listen.py's `spec`) on rmw_zenoh:
    put 20 times a second at a router of their own (zenoh's router mode, a free loopback port)
    by a publisher made of zenoh alone, as test_zenoh_listen.py's publisher puts them (its
    keys and attachments, the /tf_static publisher cached as rmw_zenoh declares a
    transient-local one, put once; CDR from rosbags, tests/ros2/publisher.py), and read into
    `front` by `listen ros2+zenoh://127.0.0.1:PORT`."""
    port = free_port()
    router = zenoh_session(port, "router")
    peer = zenoh_session(port, "peer")
    topics = []
    for entry in ros2_robots(ZENOH_DOMAIN)["topics"]:
        raw = entry.get("raw")
        data = bytes.fromhex(raw) if raw else publisher.serialize(entry["type"], entry["message"])
        key = zenoh_key(entry["topic"].lstrip("/"), entry["type"])
        if entry["qos"] == "tf_static":
            declared = zenoh_transient_local(peer, key)
        else:
            declared = peer.declare_publisher(key)
        topics.append((declared, data, entry["qos"] == "tf_static"))
    source = open_source(f"ros2+zenoh://127.0.0.1:{port}")
    front.add(source)

    async def publish() -> None:
        sequence = 0
        while True:
            sequence += 1
            for declared, data, once in topics:
                if sequence == 1 or not once:
                    declared.put(data, attachment=zenoh_attachment(sequence))
            await asyncio.sleep(0.05)

    task = asyncio.create_task(publish())

    async def stop_publishing() -> None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        for declared, _, _ in topics:
            declared.undeclare()
        for opened in (peer, router):
            opened.close()

    return stop_publishing


async def open_leg(name: str, front: Gateway, mirrored: str) -> Leg:
    """The sink `name` in `front` and its far end (the XRP sink mirrors `mirrored`)."""
    if name == "foxglove":
        return await foxglove_leg(front)
    if name == "http":
        return await viewer_leg(front)
    if name == "ros2":
        return await ros2_leg(front)
    if name == "ros2+zenoh":
        return await ros2_zenoh_leg(front)
    return await protocol_leg(name, front, mirrored)


# -- sources -------------------------------------------------------------------------------------


MIRRORED = {
    "spyglass": "2",
    "vrpn": "Tracker0/1",
    "xrp": "xrp",
    "ugcs": "SIM-0002",
    "vrsp": "2",
    "ros2": "robot1",
    "ros2+zenoh": "robot1",
}
"""The device the XRP sink mirrors (`?device=`) for each source."""


SIM_COUNT = 3
SIM_OPTIONS = {
    "spyglass": SimOptions(port=0, count=4, rate=5),
    "ugcs": SimOptions(port=0, count=3, rate=20, options={"gps_warmup": "0,0"}),
    "vrsp": SimOptions(port=0, count=4, rate=20),
}
"""Simulators run otherwise than `SIM_COUNT` devices at 20 Hz (what `complete` waits for)."""


async def start_source(name: str, front: Gateway) -> Stop:
    """The simulator of `name` (in a gateway of its own, so it can be stopped alone) and the
    source reading it (in `front`) as `robowire demo` does (`WireProtocol.demo`: the XRP
    source drives its robot in a curve); for `ros2`, the independent publisher and `listen
    ros2://`. Returns what stops the simulator."""
    if name == "ros2":
        return await start_ros2_robots(front)
    if name == "ros2+zenoh":
        return await start_ros2_zenoh_robots(front)
    sims = Gateway()
    options = SIM_OPTIONS.get(name, SimOptions(port=0, count=SIM_COUNT, rate=20))
    if protocols.get(name).sends:  # the source binds first, the simulator sends to it
        source = open_source(f"{name}://127.0.0.1:0")
        front.add(source)
        await asyncio.wait_for(source.ready.wait(), WAIT)
        assert source.address is not None
        target = f"127.0.0.1:{source.address[1]}"
        sims.add(open_sim(name, dataclasses.replace(options, port=None, target=target)))
        task = asyncio.create_task(sims.run())
        return lambda: stop(sims, task)
    sim = open_sim(name, options)
    sims.add(sim)
    task = asyncio.create_task(sims.run())
    await asyncio.wait_for(sim.ready.wait(), WAIT)
    assert sim.address is not None
    demo = protocols.get(name).demo  # the source as the demo reads the simulator
    url = demo.url if demo is not None else "{name}://{host}:{port}"
    front.add(open_source(url.format(name=name, host="127.0.0.1", port=sim.address[1])))
    return lambda: stop(sims, task)


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
    if name in PEERS:  # the publisher's robots, each as its topics make it
        names = {"robot1", "robot1/arm", "dock", "vrpn_mocap/rb1", "rover", "car", "boat"}
        return (
            names <= set(devices)
            and all(devices[n].velocity is not None for n in ("vrpn_mocap/rb1", "car"))
            and devices["boat"].geodetic is not None
        )
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
    errors: dict[str, list[str]]  # what each far end could not read


async def settle(gateway: Gateway, quiet: float = 0.2) -> None:
    """Wait until `gateway`'s world is frozen: its simulator stopped, the sources have written
    what they still held and nothing changed for `quiet` seconds. While the gateway is behind
    (shedding), a source's reads wait for credit (`Source.deliver`) and went into the world
    up to seconds after the simulator stopped, or only as the source ended (after the far ends
    were read): a far end read before then held a value the world no longer had (a SpyGlass
    node's telemetry, once in ~22 matrix runs, in the sinks whose far end is read as a copy)."""
    sources = [s for s in gateway.services if isinstance(s, Source)]
    end = asyncio.get_running_loop().time() + WAIT  # (a world that keeps moving: the test
    with gateway.world.subscribe() as changes:  # then says what differs)
        while asyncio.get_running_loop().time() < end:
            for source in sources:
                source.apply(everything=True)  # (as a source does when it ends)
            changes.pull()
            await asyncio.sleep(quiet)
            if not changes.pending():
                return


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
    stop_sims: Stop | None = None
    try:
        for sink in sinks:
            legs.append(await open_leg(sink, front, MIRRORED.get(name, "")))
        await until(lambda: all(leg.ready() for leg in legs))
        stop_sims = await start_source(name, front)
        await until(lambda: complete(name, front.world))
        await until(lambda: all(leg.seen() for leg in legs))
        await until(lambda: all(leg.caught_up(front.world) for leg in legs))
        await stop_sims()
        stop_sims = None
        await settle(front)
        frozen = front.world
        agreed = {}
        for leg in legs:
            agreed[leg.name] = await until(
                lambda leg=leg: agrees(name, leg.name, frozen, leg.seen())
            )
        seen = {leg.name: leg.seen() for leg in legs}
        errors = {leg.name: list(leg.errors()) for leg in legs}
        return Outcome(name, frozen, seen, agreed, said.lines, errors)
    finally:
        if stop_sims is not None:
            await stop_sims()
        # the servers first, then their clients (the ROS 2 sink's end, its writers deleted,
        # took a second per writer when its reader's process had just been killed)
        await stop(front, front_task)
        for leg in legs:
            await leg.close()
        logger.removeHandler(said)
        logger.setLevel(level)
