"""Record real simulators with `robowire record` (a process, on loopback), then read the file
with the `mcap` package and with `@mcap/core` (npm, the reader Foxglove's app uses; every
message decoded from the schemas in the file, not with robowire's code), replay it at world
and raw level, re-emit it to real receivers, and kill a recording with SIGKILL."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader, make_reader

from npm_consumers import run_node_sync
from robowire.addresses import parse_endpoint
from robowire.gateway import Gateway
from robowire.recording import McapSource, contents, raw_sources
from support import free_port, mcap_schema_class

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {
    **os.environ,
    "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    "COLUMNS": "160",
}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
CAPTURES = Path(__file__).parents[1] / "data" / "captures"
DRONES = 12

pytestmark = pytest.mark.timeout(180)


def robowire(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


@contextmanager
def started(*args: str, announce: bool = True) -> Iterator[str]:
    """A robowire process; yields the "host:port" it announced (or "" when told not to wait)."""
    process = subprocess.Popen([*ROBOWIRE, *args], stderr=subprocess.PIPE, text=True, env=ENV)
    assert process.stderr is not None
    try:
        address = ""
        if announce:
            line = process.stderr.readline()
            found = re.search(r"(127\.0\.0\.1:\d+)", line)
            assert found, line
            address = found.group(1)
        threading.Thread(target=process.stderr.read, daemon=True).start()  # never block it
        yield address
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def last_states(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The last JSON line of each device (what the world ended with)."""
    return {(x["source"], x["device"]): x for x in lines(text) if "device" in x and "log" not in x}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seconds of a VRSP show, an XRP robot and a SpyGlass network, recorded."""
    path = tmp_path_factory.mktemp("rec") / "run.mcap"
    vrsp = free_port()
    with (
        started("sim", "xrp", "--port", "0", "--duration", "20") as xrp,
        started("sim", "spyglass", "--port", "0", "--count", "4", "--duration", "20") as spyglass,
    ):
        record = subprocess.Popen(
            [
                *ROBOWIRE, "record", f"vrsp://127.0.0.1:{vrsp}",
                f"xrp://{xrp}?enable=1&left=0.3&right=0.2", f"spyglass://{spyglass}",
                "-o", str(path), "--duration", "3",
            ],
            stderr=subprocess.PIPE, text=True, env=ENV,
        )  # fmt: skip
        time.sleep(0.5)  # the recorder's VRSP port is bound before the show starts sending
        with started(
            "sim", "vrsp", "--count", str(DRONES), "--to", f"127.0.0.1:{vrsp}", "--duration", "20"
        ):
            _, err = record.communicate(timeout=60)
    assert record.returncode == 0, err
    assert re.search(r"record: \d+ messages and \d+ raw messages written", err), err
    return path


def test_foxglove_channels_hold_the_positions_the_world_had(recorded: Path) -> None:
    with open(recorded, "rb") as stream:
        reader = make_reader(stream)
        schemas = {c.topic: reader.get_summary().schemas.get(c.schema_id) for c in
                   reader.get_summary().channels.values()}  # fmt: skip
        assert schemas["/tf"].name == "foxglove.FrameTransforms"
        assert schemas["/scene"].name == "foxglove.SceneUpdate"
        assert schemas["/location"].name == "foxglove.LocationFixes"  # one per pass, not per drone
        classes = {t: mcap_schema_class(schemas[t]) for t in ("/tf", "/scene", "/location")}
        transforms: dict[str, Any] = {}
        fixes: dict[str, Any] = {}
        entities: set[str] = set()
        for _schema, channel, message in reader.iter_messages(topics=list(classes)):
            decoded = classes[channel.topic].FromString(message.data)
            if channel.topic == "/tf":
                transforms.update((t.child_frame_id, t) for t in decoded.transforms)
            elif channel.topic == "/location":
                fixes.update((fix.frame_id, fix) for fix in decoded.fixes)
            else:
                entities.update(e.id for e in decoded.entities)
    # the world the recording ends with, replayed from robowire's own channel
    world = robowire("replay", str(recorded), "--json", "--speed", "50")
    assert world.returncode == 0, world.stderr
    final = last_states(world.stdout)
    drones = {f"{s}/{d}": x for (s, d), x in final.items() if s.startswith("vrsp@")}
    assert len(drones) == DRONES
    robots = {f"{s}/{d}": x for (s, d), x in final.items() if s.startswith("xrp@")}
    assert len(robots) == 1
    for frame, device in {**drones, **robots}.items():
        t = transforms[frame]
        assert t.parent_frame_id == "world" and frame in entities
        got = [t.translation.x, t.translation.y, t.translation.z]
        assert got == pytest.approx(device["position"], abs=1e-6)
    for frame, drone in drones.items():
        fix = fixes[frame]
        got = [fix.latitude, fix.longitude, fix.altitude]
        assert got == pytest.approx(drone["geodetic"], abs=1e-6)


def front_to_back(path: Path) -> dict[str, int]:
    """Messages per topic, read front to back with the `mcap` package (up to a cut end)."""
    counts: dict[str, int] = {}
    with open(path, "rb") as stream:
        try:
            for _schema, channel, _message in NonSeekingReader(stream).iter_messages(
                log_time_order=False
            ):
                counts[channel.topic] = counts.get(channel.topic, 0) + 1
        except (McapError, EOFError, ValueError):  # the cut end; what came before it counts
            pass
    return counts


def test_mcap_core_indexed_reader_reads_every_message(recorded: Path) -> None:
    """`@mcap/core`'s McapIndexedReader (what Foxglove's app seeks with) finds the summary,
    the chunk and message indexes and the statistics, and reads every message the file
    holds, each decoded with its channel's schema; its last transforms are the positions the
    world ended with."""
    got = run_node_sync("mcap_read.mjs", "indexed", str(recorded))
    print({k: v for k, v in got.items() if k != "transforms"})
    assert got["errors"] == []
    counts = {topic: t["messages"] for topic, t in got["topics"].items()}
    assert counts == front_to_back(recorded)
    assert got["statistics"]["messages"] == sum(counts.values())
    span = got["lastLogTime"] - got["firstLogTime"]
    assert got["statistics"]["chunks"] == got["chunks"] >= max(2, int(span))  # small chunks:
    assert got["longestChunk"] <= 1.5  # each closed 1 s after its first message (+ scheduling)
    assert all(t["errors"] == 0 for t in got["topics"].values())
    assert {t["schema"] for t in got["topics"].values()} == {
        None,  # the raw channels: the protocols' own bytes
        "robowire.Update",
        "robowire.Telemetry",
        "foxglove.FrameTransforms",
        "foxglove.SceneUpdate",
        "foxglove.LocationFixes",
    }
    world = robowire("replay", str(recorded), "--json", "--speed", "50")
    final = last_states(world.stdout)
    moved = {f"{s}/{d}": x["position"] for (s, d), x in final.items() if "position" in x}
    assert moved and set(got["transforms"]) == set(moved)
    for frame, position in moved.items():
        assert got["transforms"][frame] == pytest.approx(position, abs=1e-6)


def test_world_and_raw_replay_give_the_same_devices_and_values(recorded: Path) -> None:
    world = robowire("replay", str(recorded), "--json", "--speed", "50")
    raw = robowire("replay", str(recorded), "--json", "--speed", "50", "--level", "raw")
    assert world.returncode == 0 and raw.returncode == 0, world.stderr + raw.stderr
    a, b = last_states(world.stdout), last_states(raw.stdout)
    assert set(a) == set(b)
    assert {s.split("@")[0] for s, _ in a} == {"vrsp", "xrp", "spyglass"}
    for key, device in a.items():
        other = b[key]
        assert (device["kind"], device.get("name")) == (other["kind"], other.get("name"))
        for field in ("position", "orientation", "geodetic"):
            assert other.get(field) == pytest.approx(device.get(field)), (key, field)
        # what the robot reported (not what the recording client itself sent it)
        reported = {k: v for k, v in device.get("telemetry", {}).items() if "motor" not in k}
        for name, value in reported.items():
            if name not in ("enabled", "packets_per_second"):
                assert other["telemetry"][name] == value, (key, name)


async def test_replay_keeps_the_recorded_timing(recorded: Path) -> None:
    span = contents(str(recorded)).duration
    assert 2.0 < span < 4.0

    async def took(speed: float) -> float:
        start = time.monotonic()
        source = McapSource(parse_endpoint(str(recorded)), speed=speed)
        await asyncio.wait_for(Gateway().add(source).run(), 60)
        assert source.stats.messages_in > 50
        return time.monotonic() - start

    one, two = await took(1.0), await took(2.0)
    assert one >= 0.95 * span  # never faster than recorded; generous above (a slow machine)
    assert two >= 0.95 * span / 2 and two < one

    start = time.monotonic()  # raw level: every source paced from the recording's start
    sources = raw_sources(parse_endpoint(str(recorded)), 2.0)
    await asyncio.wait_for(Gateway().add(*sources).run(), 60)
    assert time.monotonic() - start >= 0.95 * span / 2
    assert all(s.stats.messages_in > 0 for s in sources)


def test_a_killed_recording_is_readable_up_to_the_cut_and_replays(tmp_path: Path) -> None:
    """SIGKILL a real `record` process: the file has no summary, and `@mcap/core`'s
    McapStreamReader reads every message of its whole chunks, the last within about a second
    of the kill (a chunk is written at most 1 s after its first message); the `mcap` package
    reads the same, and replay plays it at both levels."""
    path = tmp_path / "killed.mcap"
    vrsp = free_port()
    record = subprocess.Popen(
        [*ROBOWIRE, "record", f"vrsp://127.0.0.1:{vrsp}", "-o", str(path)],
        stderr=subprocess.DEVNULL, env=ENV,
    )  # fmt: skip
    try:
        time.sleep(0.5)
        with started("sim", "vrsp", "--count", "5", "--to", f"127.0.0.1:{vrsp}", announce=False):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (
                not path.exists() or path.stat().st_size < 5_000
            ):
                time.sleep(0.1)
            time.sleep(2.5)  # two and a half seconds of show more, then the kill
            killed = time.time()
            record.send_signal(signal.SIGKILL)
            record.wait(10)
    finally:
        if record.poll() is None:
            record.kill()
    got = run_node_sync("mcap_read.mjs", "stream", str(path))
    print({k: v for k, v in got.items() if k != "transforms"}, f"killed at {killed:.3f}")
    assert got["errors"] == [] and not got["done"]  # no error: a cut, not damage
    counts = {topic: t["messages"] for topic, t in got["topics"].items()}
    assert counts == front_to_back(path)
    assert sum(counts.values()) > 20 and all(t["errors"] == 0 for t in got["topics"].values())
    assert any(t.startswith("/raw/vrsp@") for t in counts) and "/tf" in counts
    assert killed - got["lastLogTime"] < 1.5, "more than about a second lost"
    for level in ("world", "raw"):
        replay = robowire("replay", str(path), "--json", "--speed", "50", "--level", level)
        assert replay.returncode == 0, replay.stderr
        assert len({d for s, d in last_states(replay.stdout)}) == 5


def test_raw_datagrams_are_sent_again_to_a_real_receiver(recorded: Path) -> None:
    port = free_port()
    listen = subprocess.Popen(
        [*ROBOWIRE, "listen", f"vrsp://127.0.0.1:{port}", "--json", "--count", "40"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV,
    )  # fmt: skip
    try:
        time.sleep(1.0)  # bound before the replay sends
        replay = robowire("replay", str(recorded), "--to", f"vrsp://127.0.0.1:{port}")
        assert replay.returncode == 0, replay.stderr
        assert re.search(r"replay: [1-9]\d* raw messages sent", replay.stderr)
        out, _ = listen.communicate(timeout=30)
    finally:
        if listen.poll() is None:
            listen.kill()
    got = {x["device"] for x in lines(out)}
    assert got == {str(i) for i in range(1, DRONES + 1)}


def test_a_raw_stream_is_played_to_each_client_that_connects(recorded: Path) -> None:
    port = free_port(socket.SOCK_STREAM)
    with started("replay", str(recorded), "--to", f"spyglass://127.0.0.1:{port}", "--quiet"):
        for _ in range(2):  # each client gets the stream from its start
            listen = robowire(
                "listen", f"spyglass://127.0.0.1:{port}", "--json", "--count", "4", timeout=60
            )
            assert listen.returncode == 0, listen.stderr
            assert len({x["device"] for x in lines(listen.stdout)}) >= 2


@pytest.mark.parametrize(
    ("file", "speed", "span"),
    [("vrpn:" + str(CAPTURES / "vrpn" / "tcp_tracker.pcap"), 1.0, 1.5),
     (str(CAPTURES / "vrpn" / "log_server_out.vrpn"), 2.0, 2.8),
     (str(CAPTURES.parent / "spyglass" / "recording-2009-05-28.rec"), 200.0, 380.0)],
)  # fmt: skip
def test_replay_of_a_capture_keeps_its_recorded_timing(file: str, speed: float, span: float):
    start = time.monotonic()
    replay = robowire("replay", file, "--json", "--speed", str(speed))
    took = time.monotonic() - start
    assert replay.returncode == 0, replay.stderr
    assert lines(replay.stdout)
    assert took >= 0.9 * span / speed


@pytest.fixture(scope="module")
def vrpn_recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two seconds of the VRPN simulator's Tracker0, recorded over TCP only."""
    path = tmp_path_factory.mktemp("vrpn") / "vrpn.mcap"
    with started("sim", "vrpn", "--port", "0", "--duration", "20") as server:
        record = robowire(
            "record", f"vrpn+tcp://Tracker0@{server}", "-o", str(path), "--duration", "2"
        )
    assert record.returncode == 0, record.stderr
    return path


def test_a_vrpn_stream_is_played_to_our_client_and_the_real_one(vrpn_recorded: Path) -> None:
    world = robowire("replay", str(vrpn_recorded), "--json", "--speed", "50")
    positions = [x["position"] for x in lines(world.stdout) if "position" in x]
    assert positions
    port = free_port(socket.SOCK_STREAM)
    with started("replay", str(vrpn_recorded), "--to", f"vrpn://127.0.0.1:{port}", "--quiet"):
        listen = robowire("listen", f"vrpn+tcp://Tracker0@127.0.0.1:{port}", "--json",
                          "--count", "6")  # fmt: skip
        assert listen.returncode == 0, listen.stderr
        got = lines(listen.stdout)
        assert {x["device"] for x in got} == {"Tracker0/0", "Tracker0/1"}
        for x in got:  # the recorded reports, in their recorded order
            assert x["position"] in positions
        if importlib.util.find_spec("motioncapture") is None:
            return  # the real C++ client (PyPI motioncapture) is an optional extra
        client = Path(__file__).parents[1] / "vrpn" / "mc_client.py"
        real = subprocess.run(
            [sys.executable, str(client), f"tcp://127.0.0.1:{port}", "0", "1.5"],
            capture_output=True, text=True, timeout=30, env=ENV,
        )  # fmt: skip
        seen = [x["bodies"]["Tracker0"] for x in lines(real.stdout) if x["bodies"]]
        assert seen, real.stderr[-2000:]
        xyz = seen[-1][:3]  # float32 in the client
        assert any(p == pytest.approx(xyz, abs=1e-5) for p in positions)


def test_vrpn_udp_reports_replay_at_raw_level_as_at_world_level(tmp_path: Path) -> None:
    """VRPN's UDP reports (recorded on their own channel beside the TCP stream) go through
    the session of that connection at raw level."""
    path = tmp_path / "udp.mcap"
    with started("sim", "vrpn", "--port", "0", "--duration", "20") as server:
        record = robowire("record", f"vrpn://Tracker0@{server}", "-o", str(path), "--duration", "2")
    assert record.returncode == 0, record.stderr
    with open(path, "rb") as stream:
        transports = {
            c.metadata.get("transport")
            for c in make_reader(stream).get_summary().channels.values()
            if c.topic.startswith("/raw/")
        }
    assert transports == {"tcp", "udp"}
    world = robowire("replay", str(path), "--json", "--speed", "50")
    raw = robowire("replay", str(path), "--json", "--speed", "50", "--level", "raw")
    a, b = last_states(world.stdout), last_states(raw.stdout)
    assert set(a) == set(b) == {(k[0], d) for k in a for d in ("Tracker0/0", "Tracker0/1")}
    for key, device in a.items():
        assert b[key]["position"] == pytest.approx(device["position"])
        assert b[key]["orientation"] == pytest.approx(device["orientation"])
