"""`serve ros2://` read by an independent ROS 2 subscriber in another process
(tests/ros2/subscriber.py: cyclonedds discovery, types and CDR from rosbags' typestore, a
second decode by mcap-ros2-support): topics, DDS type names, QoS, user data, the node in
`ros_discovery_info`, and values equal to the world's.

Discovery stays on loopback (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, as a ROS 2 user sets
it) and each test has a DDS domain of its own, so tests running at once never meet."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from robowire.errors import ConfigError
from robowire.gateway import Gateway, open_sink
from robowire.ros2.sink import Ros2Sink
from robowire.world import World
from support import Process, until

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
STORE = get_typestore(Stores.LATEST)
LISTEN = 6.0  # seconds the subscriber listens (discovery on a busy machine takes a few)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def domain(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.delenv("CYCLONEDDS_URI", raising=False)
    return random.Random(os.getpid() * 1000 + id(monkeypatch)).randrange(100, 230)


@asynccontextmanager
async def running(sink: Any) -> AsyncIterator[Gateway]:
    gateway = Gateway().add(sink)
    task = asyncio.create_task(gateway.run())
    try:
        await until(lambda: sink.ready.is_set() or task.done(), "the sink ready")
        assert not task.done(), gateway.failures
        yield gateway
    finally:
        gateway.stop()
        await task


async def subscribe(domain: int, world_writer: Callable[[float], None]) -> dict[str, Any]:
    """Run the subscriber for `LISTEN` seconds while `world_writer(t)` writes at 20 Hz."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "subscriber.py"),
        "--domain",
        str(domain),
        "--duration",
        str(LISTEN),
        "--localhost",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None and process.stdout is not None
    assert (await process.stderr.readline()).strip() == b"ready"
    output = asyncio.ensure_future(process.communicate())
    t = 0.0
    while not output.done():
        world_writer(t)
        t += 0.05
        await asyncio.sleep(0.05)
    out, err = await output
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


def write_world(world: World, t: float) -> None:
    """Devices of every sort: a VRPN tracker with two sensors, a swarm with LEDs, a UgCS
    vehicle with a fix and a battery, linked sensor nodes, a static device and one whose
    name is not a legal ROS name."""
    now = 1_700_000_000.0 + t
    vrpn = world.table("vrpn@lab")
    vrpn.protocol = "vrpn"
    for sensor in (0, 1):
        world.update_device(
            "vrpn@lab",
            f"Tracker0/{sensor}",
            receive_time=now,
            kind="tracker",
            position=(t, 1.0 + sensor, 2.0),
            orientation=(1.0, 0.0, 0.0, 0.0),
            velocity=(1.0, 0.0, 0.0),
        )
    slots = world.table("show").slots(["1", "2", "3"], kind="drone")
    world.update(
        "show",
        slots,
        receive_time=now,
        position=np.array([[0.0, 0.0, t], [1.0, 0.0, t], [2.0, 0.0, t]]),
        telemetry={
            "led_red": (np.array([255.0, 0.0, 0.0]), ""),
            "led_green": (np.array([0.0, 255.0, 0.0]), ""),
            "led_blue": (np.array([0.0, 0.0, 255.0]), ""),
        },
    )
    world.update_device(
        "ugcs@sim",
        "UAV-7",
        receive_time=now,
        kind="ugcs",
        position=(5.0, 5.0, 10.0),
        orientation=(1.0, 0.0, 0.0, 0.0),
        geodetic=(47.5, 8.25, 412.0),
        telemetry={
            "main_voltage": (15.2, "V"),
            "main_current": (12.0, "A"),
            "remaining_power_level": (0.8, "1"),
            "altitude_agl": (10.0, "m"),
        },
    )
    for node, links in (("n1", ["n2"]), ("n2", ["n1", "n3"]), ("n3", [])):
        world.update_device(
            "net",
            node,
            receive_time=now,
            kind="sensor_node",
            position=(float(node[1]), -1.0, 0.0),
            links=links,
        )
    world.update_device(
        "site",
        "base",
        receive_time=now,
        kind="object",
        position=(0.0, 0.0, 0.0),
        attributes={"static": True},
    )
    world.update_device(
        "site", "rigid body.left", receive_time=now, kind="rigid_body", position=(9.0, 9.0, 9.0)
    )
    world.log("ugcs@sim", "UAV-7", f"battery at {80 - t:.0f} %", time=now, level="warning")


def topic(seen: dict[str, Any], name: str) -> dict[str, Any]:
    got = seen["topics"].get("rt" + name)
    assert got is not None, f"{name} not seen; seen: {sorted(seen['topics'])}"
    assert got["errors"] == [], got["errors"]
    assert got["samples"] > 0
    return dict(got)


async def test_a_stock_ros2_subscriber_reads_every_topic(domain: int) -> None:
    sink = open_sink(f"ros2://?domain={domain}")
    assert isinstance(sink, Ros2Sink)
    async with running(sink) as gateway:
        seen = await subscribe(domain, lambda t: write_world(gateway.world, t))
    # the participant says it is a ROS 2 one
    assert [p["user_data"] for p in seen["participants"].values()] == ["enclave=/;"]
    expected = {
        "/tf": "tf2_msgs/msg/TFMessage",
        "/tf_static": "tf2_msgs/msg/TFMessage",
        "/vrpn_mocap/Tracker0/pose": "geometry_msgs/msg/PoseStamped",
        "/vrpn_mocap/Tracker0/pose1": "geometry_msgs/msg/PoseStamped",
        "/vrpn_mocap/Tracker0/twist": "geometry_msgs/msg/TwistStamped",
        "/vrpn_mocap/Tracker0/twist1": "geometry_msgs/msg/TwistStamped",
        "/robowire/drone_1/pose": "geometry_msgs/msg/PoseStamped",
        "/robowire/UAV_7/pose": "geometry_msgs/msg/PoseStamped",
        "/robowire/UAV_7/fix": "sensor_msgs/msg/NavSatFix",
        "/robowire/UAV_7/battery": "sensor_msgs/msg/BatteryState",
        "/robowire/rigid_body_left/pose": "geometry_msgs/msg/PoseStamped",
        "/robowire/markers": "visualization_msgs/msg/MarkerArray",
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
        "/rosout": "rcl_interfaces/msg/Log",
    }
    for name, ros_type in expected.items():
        got = topic(seen, name)
        package, _, message = ros_type.split("/")
        assert got["type"] == f"{package}::msg::dds_::{message}_"
        assert got["qos"]["user_data"] == f"typehash={STORE.hash_rihs01(ros_type)};"
        assert got["qos"]["xcdr2"] is False
        assert got["mcap_ros2"] == "ok"
    qos = {name: topic(seen, name)["qos"] for name in expected}
    assert qos["/tf"] | {"user_data": ""} == {
        "reliability": "reliable",
        "durability": "volatile",
        "history": "keep_last",
        "depth": 100,
        "xcdr2": False,
        "user_data": "",
    }
    assert (qos["/tf_static"]["durability"], qos["/tf_static"]["depth"]) == ("transientlocal", 1)
    assert qos["/vrpn_mocap/Tracker0/pose"]["reliability"] == "reliable"
    assert (qos["/rosout"]["durability"], qos["/rosout"]["depth"]) == ("transientlocal", 1000)
    log = topic(seen, "/rosout")["last"]
    assert (log["level"], log["name"]) == (30, "robowire.ugcs_sim")
    assert log["msg"].startswith("UAV-7: battery at")

    # values: as the world holds them
    transforms = topic(seen, "/tf")["last"]["transforms"]
    assert {t["header"]["frame_id"] for t in transforms} == {"world"}
    children = {t["child_frame_id"] for t in transforms}
    assert children <= {"Tracker0", "Tracker0_1", "drone_1", "drone_2", "drone_3", "UAV_7"} | {
        "n1",
        "n2",
        "n3",
        "rigid_body_left",
    }
    static = topic(seen, "/tf_static")["last"]["transforms"]
    assert [t["child_frame_id"] for t in static] == ["base"]
    pose = topic(seen, "/vrpn_mocap/Tracker0/pose1")["last"]
    assert pose["header"]["frame_id"] == "world"
    assert pose["pose"]["position"]["y"] == 2.0 and pose["pose"]["orientation"]["w"] == 1.0
    fix = topic(seen, "/robowire/UAV_7/fix")["last"]
    assert (fix["latitude"], fix["longitude"], fix["altitude"]) == (47.5, 8.25, 412.0)
    battery = topic(seen, "/robowire/UAV_7/battery")["last"]
    assert battery["voltage"] == pytest.approx(15.2) and battery["current"] == -12.0
    assert battery["percentage"] == pytest.approx(0.8) and battery["serial_number"] == "UAV-7"
    keys = {
        value["key"]
        for status in topic(seen, "/diagnostics")["last"]["status"]
        for value in status["values"]
    }
    assert {"main_voltage [V]", "altitude_agl [m]"} <= keys
    assert topic(seen, "/robowire/markers")["samples"] > 10  # (contents: the next test)

    # the node: /robowire, naming every writer robowire made
    nodes = [n for info in seen["discovery_info"] for n in info["node_entities_info_seq"]]
    assert {(n["node_namespace"], n["node_name"]) for n in nodes} == {("/", "robowire")}
    last = nodes[-1]
    gids = {bytes(g["data"]).hex() for g in last["writer_gid_seq"]}
    writers = {
        w.replace("-", "")
        for name, t in seen["topics"].items()
        if name.startswith("rt/")
        for w in t["writers"]
    }
    assert writers <= gids

    # names that are not ROS names (`UAV-7`, `rigid body.left`): renamed, counted, named
    assert sink.stats.extra["renamed"] == 2
    status = {s.name: s for s in gateway.status()}["ros2://"]
    assert status.errors == 2 and "rigid body.left" in (status.last_drop or "")
    assert "rigid body.left" in sink.stats.last_drop_reason


async def test_a_subscriber_that_joins_later_gets_devices_that_no_longer_change(
    domain: int,
) -> None:
    """DDS gives a volatile topic's new reader nothing written before it: the world is
    written once (every writer made, every sample sent to nobody), and a subscriber that
    starts after that still gets every device's pose, fix, battery and diagnostics."""
    sink = open_sink(f"ros2://?domain={domain}")
    async with running(sink) as gateway:
        write_world(gateway.world, 0.0)
        await until(lambda: "/robowire/UAV_7/battery" in sink.writers, "the writers made")
        seen = await subscribe(domain, lambda t: None)  # (nothing changes any more)
    tf = topic(seen, "/tf")
    assert tf["samples"] >= len(gateway.world.tables)  # a TFMessage per source; the last, site's:
    [moving] = tf["last"]["transforms"]
    assert moving["child_frame_id"] == "rigid_body_left"
    assert moving["transform"]["translation"] == {"x": 9.0, "y": 9.0, "z": 9.0}
    assert topic(seen, "/vrpn_mocap/Tracker0/pose1")["last"]["pose"]["position"]["y"] == 2.0
    assert topic(seen, "/robowire/UAV_7/fix")["last"]["latitude"] == 47.5
    assert topic(seen, "/robowire/UAV_7/battery")["last"]["current"] == -12.0
    statuses = {s["name"]: s for s in topic(seen, "/diagnostics")["last"]["status"]}
    values = {v["key"]: v["value"] for v in statuses["robowire: UAV_7"]["values"]}
    assert values["main_voltage [V]"] == "15.2" and values["remaining_power_level [1]"] == "0.8"


async def test_markers_show_the_swarm_in_its_colours_and_the_links(domain: int) -> None:
    from robowire.ros2.topics import Topics

    world = World()
    write_world(world, 0.0)
    topics = Topics()
    built = {}
    for table in world.tables.values():
        update = world.update(
            table.source,
            np.arange(len(table)),
            receive_time=1.0,
            position=table.position[: len(table)],
        )
        for message in topics.build(table, update):
            built.setdefault(message.topic, []).append(message)
    arrays = [STORE.deserialize_cdr(m.data, m.type) for m in built["/robowire/markers"]]
    markers = {(m.ns, m.id): m for array in arrays for m in array.markers}
    swarm = markers[("show/drone", 0)]
    assert swarm.type == 7  # SPHERE_LIST
    assert [(p.x, p.y, p.z) for p in swarm.points] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert [(c.r, c.g, c.b, c.a) for c in swarm.colors] == [
        (1, 0, 0, 1),
        (0, 1, 0, 1),
        (0, 0, 1, 1),
    ]
    links = markers[("net/links", 0)]
    assert links.type == 5  # LINE_LIST
    ends = [(p.x, p.y) for p in links.points]
    assert ends == [(1, -1), (2, -1), (2, -1), (3, -1)]
    tracker = markers[("vrpn@lab", 0)]
    assert tracker.type == 0 and tracker.header.frame_id == "world"  # an ARROW at its pose


async def test_options_prefix_frame_and_sensor_qos(domain: int) -> None:
    sink = open_sink(f"ros2://?domain={domain}&prefix=lab&frame=map&qos=sensor")
    async with running(sink) as gateway:
        seen = await subscribe(domain, lambda t: write_world(gateway.world, t))
    pose = topic(seen, "/lab/Tracker0/pose")
    assert (pose["qos"]["reliability"], pose["qos"]["depth"]) == ("best_effort", 5)
    assert pose["last"]["header"]["frame_id"] == "map"
    assert "rt/lab/markers" in seen["topics"]
    assert topic(seen, "/tf")["qos"]["reliability"] == "reliable"  # /tf keeps tf2's QoS
    assert {t["header"]["frame_id"] for t in topic(seen, "/tf")["last"]["transforms"]} == {"map"}


@pytest.mark.parametrize(
    ("url", "env", "message"),
    [
        ("ros2://?qos=fast", {}, "qos must be one of reliable, sensor"),
        ("ros2://host:7400", {}, "takes no host or port"),
        ("ros2://?domain=300", {}, "not a ROS 2 domain id"),
        ("ros2://", {"ROS_DOMAIN_ID": "abc"}, "ROS_DOMAIN_ID=abc: not a number"),
        ("ros2://", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "MOON"}, "not one of SUBNET"),
        ("ros2://?frame=a b", {}, "not a legal ROS frame name"),
        ("ros2://?colour=red", {}, "unknown option 'colour'"),
    ],
)
def test_bad_urls_and_settings_are_one_line_errors(
    url: str, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        open_sink(url)


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


def test_the_command_line_says_where_it_publishes(domain: int) -> None:
    url = f"ros2://?domain={domain}"
    result = robowire("serve", url, "--from", "vrsp://127.0.0.1:0", "--duration", "2")
    assert result.returncode == 0, result.stderr
    assert f"publishing on ROS 2 domain {domain} (discovery localhost)" in result.stderr
    bad = robowire("serve", "ros2://?qos=fast", "--from", "vrsp://127.0.0.1:0")
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr and "qos must be one of" in bad.stderr


def test_ctrl_c_ends_serve_at_once_after_its_subscriber_was_killed(domain: int) -> None:
    """A ROS 2 node killed while reading (its reliable readers never acknowledge again): the
    gateway still ends within 2 s of Ctrl-C. (Cyclone DDS holds each reliable writer with
    unacknowledged samples for its linger duration when it is deleted, one writer after
    another: 1 s each by default, 7 s for this gateway's topics.)"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with Process("sim", "vrpn", "--port", "0", "--count", "2", "--rate", "50") as sim:
        port = sim.wait_for(r"listening on 127\.0\.0\.1:(\d+)")[1]
        gateway = Process(
            "bridge", f"vrpn://Tracker0@127.0.0.1:{port}", "--to", f"ros2://?domain={domain}"
        )
        with gateway:
            gateway.wait_for("publishing on ROS 2 domain")
            reader = subprocess.Popen(
                [sys.executable, str(HERE / "subscriber.py"), "--domain", str(domain),
                 "--duration", "60", "--localhost", "--stream"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            )  # fmt: skip
            try:
                assert reader.stdout is not None
                for _ in range(20):  # some samples read: its readers are matched
                    assert reader.stdout.readline(), "the subscriber ended"
            finally:
                reader.kill()
                reader.wait()
            gateway.proc.send_signal(signal.SIGINT)
            began = time.monotonic()
            gateway.proc.wait(30)
            took = time.monotonic() - began
    print(f"\nserve ros2:// ended {took:.2f} s after Ctrl-C")
    assert gateway.proc.returncode == 130, gateway.lines  # Ctrl-C's, after a clean end
    assert not any("Traceback" in line for line in gateway.lines), gateway.lines
    assert took < 2.0, f"ended {took:.1f} s after Ctrl-C"
