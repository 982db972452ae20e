"""`serve ros2://`: the cost of a 10,000-drone show at 30 Hz on /tf and the markers, against
the same messages written through cyclonedds' own per-object serialisation (the peer).

The world holds 10,000 drones (position, orientation, LED colour) all moving every step. One
pull of robowire is `Ros2Sink.write` of one update touching all of them, with no per-device
topics (`?device_topics=0`): a TFMessage of 10,000 transforms built from the columns
(`cdr.TfMessages`) and a MarkerArray (the swarm as one SPHERE_LIST in its LED colours), each
written as bytes (`dds.RawWriter`); /diagnostics, once a second, is in it too. The peer, in
the same run and the same DDS participant: the same two messages made as cyclonedds
`IdlStruct` objects from the same columns (10,000 TransformStamped, 10,000 Points and
ColorRGBAs: one Python object each, as a ROS 2 Python node or a cyclonedds program makes
them) and written with `DataWriter.write`, which serialises them. The first pull checks that
both write the same bytes.

A reader in another process (a robowire `dds.RawReader` that takes and drops) subscribes to
both, so every sample goes out on loopback as it would to RViz. Times are this process's CPU
time (`time.process_time`, DDS's own threads included) per pull, the best of `ROUNDS` runs of
`PULLS` pulls each, in turn; the share of a core is that x 30 Hz. Printed: both, and the
ratio peer / robowire (the table's "vs peer": >= 3 is the target; the CPU share's <= 30%).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import ros2_listen
from robowire.ros2 import dds, names, types
from robowire.ros2.sink import Ros2Sink
from robowire.ros2.topics import MARKERS, TF, Topics
from robowire.world import Update, World

DRONES = 10_000
RATE = 30.0
PULLS = 20
ROUNDS = 3
ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
}
READER = """
import sys, time
from robowire.ros2 import dds
node = dds.Node(int(sys.argv[1]), "LOCALHOST")
readers = [
    node.reader(topic, kind, profile)
    for topic, kind, profile in (
        ("rt/tf", "tf2_msgs/msg/TFMessage", dds.TF),
        ("rt/robowire/markers", "visualization_msgs/msg/MarkerArray", dds.RELIABLE),
        ("rt/peer/tf", "tf2_msgs/msg/TFMessage", dds.TF),
        ("rt/peer/markers", "visualization_msgs/msg/MarkerArray", dds.RELIABLE),
    )
]
print("ready", flush=True)
while True:
    for reader in readers:
        reader.take(64)
    time.sleep(0.002)
"""


def show(world: World, step: int) -> Update:
    table = world.tables.get("show") or world.table("show")
    if len(table) < DRONES:
        table.slots([str(i + 1) for i in range(DRONES)], "drone")
    slots = np.arange(DRONES, dtype=np.intp)
    angle = np.linspace(0, 2 * np.pi, DRONES) + step * 0.01
    position = np.stack([np.cos(angle) * 50, np.sin(angle) * 50, np.full(DRONES, 20.0)], axis=1)
    level = np.full(DRONES, float(step * 10 % 256))
    return world.update(
        "show",
        slots,
        receive_time=time.time(),
        position=position,
        orientation=np.tile([1.0, 0.0, 0.0, 0.0], (DRONES, 1)),
        telemetry={name: (level, "1") for name in ("led_red", "led_green", "led_blue")},
    )


class Peer:
    """The same /tf and markers, as cyclonedds IdlStruct objects written by `DataWriter`."""

    def __init__(self, node: dds.Node, frames: list[str]) -> None:
        from cyclonedds.pub import DataWriter

        self.frames = frames
        self.cls = {name: types.idl_class(name) for name in types.MESSAGES}
        self.tf = DataWriter(
            node.publisher, node.topic("rt/peer/tf", TF), qos=node._qos(dds.TF, TF)
        )
        self.markers = DataWriter(
            node.publisher,
            node.topic("rt/peer/markers", MARKERS),
            qos=node._qos(dds.RELIABLE, MARKERS),
        )

    def messages(self, world: World) -> tuple[Any, Any]:
        c = self.cls
        table = world.tables["show"]
        position = table.position[:DRONES].tolist()
        orientation = table.orientation[:DRONES].tolist()
        stamp = time.time()
        sec, nanosec = int(stamp), int((stamp % 1) * 1e9)
        transforms = [
            c["geometry_msgs/msg/TransformStamped"](
                header=c["std_msgs/msg/Header"](
                    stamp=c["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                    frame_id="world",
                ),
                child_frame_id=frame,
                transform=c["geometry_msgs/msg/Transform"](
                    translation=c["geometry_msgs/msg/Vector3"](x=p[0], y=p[1], z=p[2]),
                    rotation=c["geometry_msgs/msg/Quaternion"](x=q[1], y=q[2], z=q[3], w=q[0]),
                ),
            )
            for frame, p, q in zip(self.frames, position, orientation, strict=True)
        ]
        tf = c[TF](transforms=transforms)
        led = [table.telemetry[f][:DRONES] / 255.0 for f in ("led_red", "led_green", "led_blue")]
        rgb = np.stack(led, axis=1).tolist()
        marker = c["visualization_msgs/msg/Marker"](
            header=c["std_msgs/msg/Header"](
                stamp=c["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                frame_id="world",
            ),
            ns="show/drone",
            id=0,
            type=7,
            action=0,
            pose=c["geometry_msgs/msg/Pose"](
                position=c["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0),
                orientation=c["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
            ),
            scale=c["geometry_msgs/msg/Vector3"](x=0.2, y=0.2, z=0.2),
            color=c["std_msgs/msg/ColorRGBA"](r=1.0, g=1.0, b=1.0, a=1.0),
            lifetime=c["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
            frame_locked=False,
            points=[c["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]) for p in position],
            colors=[c["std_msgs/msg/ColorRGBA"](r=r, g=g, b=b, a=1.0) for r, g, b in rgb],
            texture_resource="",
            texture=c["sensor_msgs/msg/CompressedImage"](
                header=c["std_msgs/msg/Header"](
                    stamp=c["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""
                ),
                format="",
                data=[],
            ),
            uv_coordinates=[],
            text="",
            mesh_resource="",
            mesh_file=c["visualization_msgs/msg/MeshFile"](filename="", data=[]),
            mesh_use_embedded_materials=False,
        )
        return tf, c[MARKERS](markers=[marker])

    def write(self, world: World) -> None:
        tf, markers = self.messages(world)
        self.tf.write(tf)
        self.markers.write(markers)


def same_bytes(sink: Ros2Sink, peer: Peer, world: World) -> None:
    """Robowire's and the peer's messages of one state, compared (stamps aside)."""
    from robowire.ros2 import cdr

    update = show(world, 0)
    table = world.tables["show"]
    ours = {m.topic: m.data for m in sink.topics.build(table, update)}
    tf, markers = peer.messages(world)
    sec, nanosec = cdr.stamps(np.array([table.receive_time[0]]))[0].tolist()
    stamped = [t.header for t in tf.transforms] + [markers.markers[0].header]
    for header in stamped:  # robowire stamps with the world's time
        header.stamp.sec, header.stamp.nanosec = sec, nanosec
    assert ours["/tf"] == tf.serialize(use_version_2=False), "the peer's /tf differs"
    mine = ours["/robowire/markers"]
    assert mine == markers.serialize(use_version_2=False), "the peer's markers differ"


def cpu_per_pull(work: Any) -> float:
    start = time.process_time()
    due = time.perf_counter()
    for _ in range(PULLS):
        work()
        due += 1.0 / RATE
        time.sleep(max(0.0, due - time.perf_counter()))
    return (time.process_time() - start) / PULLS


def main() -> dict[str, float]:
    figures = serve()
    figures.update(ros2_listen.measure())  # `listen ros2://` (bench/ros2_listen.py)
    return figures


def serve() -> dict[str, float]:
    domain = random.randrange(150, 230)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(domain)],
        stdout=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        world = World()
        show(world, 0)
        sink = Ros2Sink(domain, "LOCALHOST", Topics(devices=0))
        node = sink.node = dds.Node(domain, "LOCALHOST")
        table = world.tables["show"]
        frames = [names.ros_name(i, "drone") for i in table.ids]
        peer = Peer(node, frames)
        same_bytes(sink, peer, world)
        step = iter(range(1, 1 << 30))
        ours: list[float] = []
        theirs: list[float] = []
        time.sleep(2.0)  # discovery: the reader matched before the clock starts
        for _ in range(ROUNDS):
            ours.append(cpu_per_pull(lambda: sink.write(world, [show(world, next(step))])))
            theirs.append(cpu_per_pull(lambda: (show(world, next(step)), peer.write(world))))
        mine, peers = min(ours), min(theirs)
        samples = {w.ros_topic: w.samples for w in sink.writers.values()}
        print(f"  robowire: {mine * 1e3:.2f} ms CPU a pull = {mine * RATE:.1%} of a core at 30 Hz")
        print(f"  peer (cyclonedds IdlStruct objects): {peers * 1e3:.1f} ms a pull")
        print(f"  peer / robowire: {peers / mine:.2f}x (target >= 3); samples {samples}")
        return {"cpu": mine * RATE, "pull_ms": mine * 1e3, "peer_ms": peers * 1e3,
                "peer_ratio": peers / mine}  # fmt: skip
    finally:
        reader.kill()
        reader.wait()


if __name__ == "__main__":
    main()
