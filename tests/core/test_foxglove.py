"""`robowire serve foxglove://…` as a real process, read by a Foxglove WebSocket client written
here with `websockets` (subprotocol `foxglove.sdk.v1`): serverInfo, advertise, subscribe, then
binary message frames (opcode 1, `<IQ` subscription id and log time, the payload). Protobuf
payloads are decoded with the schema the server advertised (a FileDescriptorSet), not with
robowire's code. The data comes from `robowire sim vrsp` (a drone show with a geodetic root).
Foxglove's own npm client (`@foxglove/ws-protocol`, tests/js) reads it too, offering each of
the protocol's two subprotocol names alone."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import websockets
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from support import free_udp_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]

pytestmark = pytest.mark.timeout(120)


def decoder(channel: dict[str, Any]) -> Any:
    """The protobuf message class of an advertised channel, built from its own schema."""
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))


async def read_topics(port: int, topics: list[str], count: int) -> dict[str, list[Any]]:
    """Subscribe to `topics`; return the decoded messages once each has `count` of them."""
    got: dict[str, list[Any]] = {t: [] for t in topics}
    url = f"ws://127.0.0.1:{port}"
    async with websockets.connect(url, subprotocols=["foxglove.sdk.v1"]) as ws:
        info = json.loads(await ws.recv())
        assert info["op"] == "serverInfo"
        channels: dict[str, dict[str, Any]] = {}
        while not all(t in channels for t in topics):
            message = await asyncio.wait_for(ws.recv(), 30)
            if isinstance(message, str) and json.loads(message)["op"] == "advertise":
                for channel in json.loads(message)["channels"]:
                    channels[channel["topic"]] = channel
        subscriptions = {i: channels[t] for i, t in enumerate(topics, start=1)}
        decoders = {
            i: decoder(c) if c["encoding"] == "protobuf" else None for i, c in subscriptions.items()
        }
        await ws.send(
            json.dumps(
                {
                    "op": "subscribe",
                    "subscriptions": [
                        {"id": i, "channelId": c["id"]} for i, c in subscriptions.items()
                    ],
                }
            )
        )
        while any(len(v) < count for v in got.values()):
            message = await asyncio.wait_for(ws.recv(), 30)
            if not isinstance(message, bytes):
                continue
            assert message[0] == 0x01
            sub, _log_time = struct.unpack_from("<IQ", message, 1)
            payload = message[13:]
            parse = decoders[sub]
            value = json.loads(payload) if parse is None else parse.FromString(payload)
            got[subscriptions[sub]["topic"]].append(value)
    return got


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ROBOWIRE, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def listening_port(process: subprocess.Popen[str]) -> int:
    """The port the `foxglove sink listening on 127.0.0.1:PORT` line names."""
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    assert found, line
    return int(found.group(1))


def test_serve_foxglove_transforms_locations_and_telemetry() -> None:
    udp = free_udp_port()
    serve = start(
        ["serve", "foxglove://127.0.0.1:0?rate=20", "--from", f"vrsp://127.0.0.1:{udp}",
         "--duration", "90"]
    )  # fmt: skip
    sim = start(
        ["sim", "vrsp", "--drones", "6", "--to", f"127.0.0.1:{udp}", "--set", "lat=10",
         "--set", "lon=20", "--set", "alt=5", "--duration", "90"]
    )  # fmt: skip
    failure: BaseException | None = None
    try:
        port = listening_port(serve)
        source = f"vrsp@127.0.0.1:{udp}"
        topics = ["/tf", "/location", "/scene", f"/telemetry/{source}"]
        got = asyncio.run(read_topics(port, topics, count=4))
    except Exception as exc:  # say what the server said, not only what the client saw
        failure = exc
    finally:
        sim.kill()
        serve.kill()
        sim.communicate(timeout=30)
        _, said = serve.communicate(timeout=30)
    if failure is not None:
        raise AssertionError(f"client: {failure!r}; serve said:\n{said}") from failure
    frames = {f"{source}/{i}" for i in range(1, 7)}
    moves: dict[str, set[tuple[float, float, float]]] = {f: set() for f in frames}
    for message in got["/tf"]:
        for tf in message.transforms:
            assert tf.parent_frame_id == "world"
            assert tf.child_frame_id in frames
            t = tf.translation
            moves[tf.child_frame_id].add((t.x, t.y, t.z))
            assert abs(t.z) < 500 and abs(t.x) < 500 and abs(t.y) < 500  # a show near its root
    seen = {f for f, positions in moves.items() if positions}
    assert seen == frames
    assert any(len(positions) > 1 for positions in moves.values())  # they fly
    for fix in (fix for message in got["/location"] for fix in message.fixes):
        assert fix.frame_id in frames
        assert abs(fix.latitude - 10) < 0.01 and abs(fix.longitude - 20) < 0.01
        assert fix.altitude > 5
    cubes = [e for update in got["/scene"] for e in update.entities]
    assert {e.frame_id for e in cubes} <= frames and cubes
    assert all(e.frame_locked and len(e.cubes) == 1 for e in cubes)
    for message in got[f"/telemetry/{source}"]:
        devices = message.pop("device")
        assert message.pop("units")["led_red"] == "1"
        assert devices and set(devices) <= {str(i) for i in range(1, 7)}
        assert {"led_red", "led_green", "led_blue"} <= set(message)
        for name, values in message.items():
            assert len(values) == len(devices)
            if name.startswith("led_"):  # the show's colours, 0..255
                assert all(v is None or 0 <= v <= 255 for v in values)


def test_busy_port_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [*ROBOWIRE, "serve", f"foxglove://127.0.0.1:{port}", "--from",
             f"vrsp://127.0.0.1:{free_udp_port()}", "--duration", "20"],
            env=ENV, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1, run.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in run.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["listen", "foxglove://127.0.0.1:8765"], "can only be served to"),
        (["serve", "foxglove://127.0.0.1:0?colour=red", "--from", "vrsp://127.0.0.1:9"],
         "unknown option 'colour'"),
        (["serve", "foxglove://127.0.0.1:0?rate=fast", "--from", "vrsp://127.0.0.1:9"],
         "rate must be a number"),
        (["serve", "foxglove://127.0.0.1:0?location=all", "--from", "vrsp://127.0.0.1:9"],
         "location must be one of fixes, fix"),
    ],
)  # fmt: skip
def test_foxglove_url_mistakes_are_one_line(args: list[str], said: str) -> None:
    run = subprocess.run(
        [*ROBOWIRE, *args, "--duration", "5"], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1 and said in run.stderr, run.stderr


def test_a_client_joining_late_sees_devices_that_stand_still() -> None:
    """Latest state sends only what changed; a client that subscribes later still gets every
    device once (here: a robot written once, before the client connected)."""
    from robowire.gateway import Gateway, open_sink

    async def go() -> dict[str, list[Any]]:
        gateway = Gateway()
        sink = open_sink("foxglove://127.0.0.1:0?rate=50")
        gateway.add(sink)
        run = asyncio.create_task(gateway.run(60))
        await sink.ready.wait()
        gateway.world.update_device(
            "lab", "r1", kind="robot", receive_time=0.0, position=(1.0, 2.0, 3.0),
            orientation=(0.0, 0.0, 0.0, 1.0), telemetry={"battery": (11.5, "V")},
        )  # fmt: skip
        await asyncio.sleep(0.3)  # pulled and sent before anyone listened
        assert sink.address is not None
        try:
            return await read_topics(sink.address[1], ["/tf", "/scene", "/telemetry/lab"], 1)
        finally:
            gateway.stop()
            await run

    got = asyncio.run(go())
    (tf,) = got["/tf"][0].transforms
    assert tf.child_frame_id == "lab/r1" and tf.parent_frame_id == "world"
    assert (tf.translation.x, tf.translation.y, tf.translation.z) == (1.0, 2.0, 3.0)
    assert (tf.rotation.w, tf.rotation.x, tf.rotation.y, tf.rotation.z) == (0.0, 0.0, 0.0, 1.0)
    (entity,) = got["/scene"][0].entities
    assert entity.frame_id == "lab/r1" and len(entity.cubes) == 1
    assert got["/telemetry/lab"][0] == {
        "device": ["r1"],
        "units": {"battery": "V"},
        "battery": [11.5],
    }


def test_bridge_to_foxglove_says_where_it_listens() -> None:
    udp = free_udp_port()
    bridge = start(
        ["bridge", f"vrsp://127.0.0.1:{udp}", "--to", "foxglove://127.0.0.1:0", "--duration", "60"]
    )
    try:
        port = listening_port(bridge)
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # it is really listening there
    finally:
        bridge.kill()
        bridge.communicate(timeout=30)


async def test_foxglove_own_client_decodes_every_channel_offering_either_subprotocol() -> None:
    """Foxglove's npm client (`@foxglove/ws-protocol` FoxgloveClient on `ws`), offering one
    subprotocol at a time, subscribes to every channel `serve foxglove://` advertises and
    decodes each message with the advertised schema (protobufjs from the FileDescriptorSet,
    JSON checked against its JSON schema). What it decodes is what the gateway read from a
    real `robowire sim vrsp` show: every drone's position, orientation, fix and telemetry;
    the fixes in one `LocationFixes` (the default) or one `LocationFix` each (`?location=fix`,
    a second sink on the same world, read offering the protocol's first name)."""
    from npm_consumers import run_node
    from robowire.gateway import Gateway, open_sink, open_source
    from support import until

    udp = free_udp_port()
    reading = Gateway()  # the source's gateway, stopped once the world holds the show
    serving = Gateway(world=reading.world)  # the Foxglove sink's, on the same world
    source = open_source(f"vrsp://127.0.0.1:{udp}")
    sink = open_sink("foxglove://127.0.0.1:0?rate=20")
    each = open_sink("foxglove://127.0.0.1:0?rate=20&location=fix")
    reading.add(source)
    serving.add(sink)
    serving.add(each)
    runs = [asyncio.create_task(reading.run(90)), asyncio.create_task(serving.run(90))]
    sim = start(
        ["sim", "vrsp", "--drones", "6", "--to", f"127.0.0.1:{udp}", "--set", "lat=10",
         "--set", "lon=20", "--set", "alt=5", "--duration", "90"]
    )  # fmt: skip
    world = reading.world
    try:
        await until(
            lambda: source.name in world.tables and len(world.tables[source.name]) == 6,
            "the show's six drones in the world",
        )
        reading.stop()  # from here the world stands still: what the client gets is exact
        await runs[0]
        assert sink.address is not None and each.address is not None
        url = f"ws://127.0.0.1:{sink.address[1]}"
        got = {
            subprotocol: await run_node("foxglove_client.mjs", url, subprotocol, "1", "60")
            for subprotocol in ("foxglove.websocket.v1", "foxglove.sdk.v1")
        }  # a message of each topic: a subscription sends every drone
        got["location=fix"] = await run_node(
            "foxglove_client.mjs", f"ws://127.0.0.1:{each.address[1]}",
            "foxglove.websocket.v1", "1,/location=6", "60",
        )  # fmt: skip
        refused = await run_node("foxglove_client.mjs", url, "foxglove.other.v1", "1", "60")
    finally:
        sim.kill()
        sim.communicate(timeout=30)
        reading.stop()
        serving.stop()
        await asyncio.gather(*runs)
    assert refused["errors"] == ["Unexpected server response: 400"]  # neither name: refused
    table = world.tables[source.name]
    frames = [f"{source.name}/{d}" for d in table.ids]
    telemetry = f"/telemetry/{source.name}"
    for name, result in got.items():
        print(name, result["server"], result["errors"])
        for c in result["channels"]:
            print(f"  {c['topic']} {c['encoding']} {c['schemaName']}: {c['messages']} messages, "
                  f"{c['errors']} errors")  # fmt: skip
        batched = name != "location=fix"
        assert result["subprotocol"] == (name if batched else "foxglove.websocket.v1")
        assert result["server"] == "robowire"
        assert result["complete"] and result["errors"] == [], result["errors"]
        schemas = {c["topic"]: (c["encoding"], c["schemaName"]) for c in result["channels"]}
        assert schemas == {
            "/tf": ("protobuf", "foxglove.FrameTransforms"),
            "/scene": ("protobuf", "foxglove.SceneUpdate"),
            "/location": (
                "protobuf",
                "foxglove.LocationFixes" if batched else "foxglove.LocationFix",
            ),
            telemetry: ("json", "robowire.Telemetry"),
        }
        decoded = result["decoded"]
        transforms = {t["childFrameId"]: t for m in decoded["/tf"] for t in m["transforms"]}
        located = (
            [f for m in decoded["/location"] for f in m["fixes"]]
            if batched
            else decoded["/location"]
        )
        fixes = {f["frameId"]: f for f in located}
        cubes = {e["frameId"] for m in decoded["/scene"] for e in m["entities"]}
        assert set(transforms) == set(fixes) == cubes == set(frames)
        for slot, frame in enumerate(frames):
            t = transforms[frame]
            assert t["parentFrameId"] == "world"
            position = [t["translation"][k] for k in "xyz"]
            assert position == table.position[slot].tolist()
            assert [t["rotation"][k] for k in "wxyz"] == table.orientation[slot].tolist()
            fix = fixes[frame]
            assert [fix["latitude"], fix["longitude"], fix["altitude"]] == table.geodetic[
                slot
            ].tolist()
        columns = decoded[telemetry][-1]
        assert columns["device"] == list(table.ids)
        assert columns["units"] == {name: table.units[name] for name in table.telemetry}
        for name, values in table.telemetry.items():
            assert columns[name] == [None if v != v else v for v in values[: len(table)]]
