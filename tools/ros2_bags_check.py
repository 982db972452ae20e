"""The closing check of ROS 2 bags (docs/ros2.md, "Bags"), with third-party readers only.

    PYTHONPATH=src python tools/ros2_bags_check.py [--seconds 3]

1. `robowire sim vrpn` and `robowire sim spyglass` on loopback, `robowire record … -o DIR
   --format rosbag2` of both: rosbags' Reader prints the bag's topics, types and counts.
2. A bag written by rosbags' Writer (SQLite storage; /tf with drone1 and drone2 at 10 Hz),
   `robowire replay BAG --to vrpn://…` into robowire's VRPN server, read by the mainline
   `vrpn_print_devices` (../shared/peers/vrpn): its first reports, and how many per tracker.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

ROOT = Path(__file__).resolve().parents[1]
PRINT_DEVICES = ROOT.parent / "shared" / "peers" / "vrpn" / "vrpn_print_devices"
STORE = get_typestore(Stores.ROS2_KILTED)
TF = "tf2_msgs/msg/TFMessage"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def robowire(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def recorded(seconds: float, where: Path) -> str:
    """Step 1: what rosbags reads in the bag robowire recorded."""
    vrpn, spyglass = free_port(), free_port()
    sims = [
        robowire("sim", "vrpn", "--port", str(vrpn), "--count", "2", "--rate", "50"),
        robowire("sim", "spyglass", "--port", str(spyglass), "--count", "5"),
    ]
    try:
        time.sleep(1.5)
        bag = where / "recorded"
        record = robowire(
            "record", f"vrpn://Tracker0@127.0.0.1:{vrpn}", f"spyglass://127.0.0.1:{spyglass}",
            "-o", str(bag), "--format", "rosbag2", "--duration", str(seconds),
        )  # fmt: skip
        _, said = record.communicate(timeout=seconds + 60)
    finally:
        for sim in sims:
            sim.terminate()
            sim.wait(10)
    lines = [f"$ robowire record vrpn://… spyglass://… -o {bag.name} --format rosbag2 "
             f"--duration {seconds:g}", *said.strip().splitlines()]  # fmt: skip
    with Reader(bag) as reader:
        lines.append(
            f"rosbags Reader: {reader.message_count} messages, {reader.duration / 1e9:.2f} s"
        )
        lines.append("| topic | type | messages |")
        lines.append("|---|---|---|")
        for c in sorted(reader.connections, key=lambda c: c.topic):
            lines.append(f"| {c.topic} | {c.msgtype} | {c.msgcount} |")
    return "\n".join(lines)


def flight(path: Path, steps: int = 40) -> None:
    """A bag by rosbags' Writer: /tf with drone1 and drone2 at 10 Hz."""
    t = STORE.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3) as writer:
        connection = writer.add_connection("/tf", TF, typestore=STORE)
        for i in range(steps):
            stamp = t["builtin_interfaces/msg/Time"](sec=1_700_000_000 + i // 10, nanosec=0)
            transforms = [
                t["geometry_msgs/msg/TransformStamped"](
                    header=t["std_msgs/msg/Header"](stamp=stamp, frame_id="world"),
                    child_frame_id=f"drone{n}",
                    transform=t["geometry_msgs/msg/Transform"](
                        translation=t["geometry_msgs/msg/Vector3"](x=n + 0.1 * i, y=-n, z=1.5),
                        rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
                    ),
                )
                for n in (1, 2)
            ]
            message = STORE.serialize_cdr(t[TF](transforms=transforms), TF)
            writer.write(connection, 1_700_000_000 * 10**9 + i * 10**8, message)


def replayed(where: Path) -> str:
    """Step 2: a rosbags bag replayed into VRPN, as the mainline client prints it."""
    bag = where / "flight"
    flight(bag)
    port = free_port()
    replay = robowire("replay", str(bag), "--to", f"vrpn://127.0.0.1:{port}", "--loop", "--quiet")
    try:
        end = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        names = [f"drone{n}@127.0.0.1:{port}" for n in (1, 2)]
        client = subprocess.Popen(
            ["stdbuf", "-oL", str(PRINT_DEVICES), *names], stdout=subprocess.PIPE, text=True
        )
        time.sleep(3.0)
        client.send_signal(signal.SIGINT)
        out = client.communicate(timeout=10)[0]
    finally:
        replay.terminate()
        replay.wait(10)
    reports = re.findall(r"Tracker (\w+)@\S+, sensor 0:\n(\s+pos .*)", out)
    lines = [f"$ robowire replay {bag.name} --to vrpn://127.0.0.1:{port} --loop",
             f"$ vrpn_print_devices {' '.join(names)}"]  # fmt: skip
    for name, pos in reports[:4]:
        lines += [f"Tracker {name}@127.0.0.1:{port}, sensor 0:", pos.rstrip()]
    counts = collections.Counter(name for name, _ in reports)
    lines.append(f"reports in 3 s: {dict(sorted(counts.items()))}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to record")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(recorded(args.seconds, Path(tmp)))
        print()
        if PRINT_DEVICES.is_file():
            print(replayed(Path(tmp)))
        else:
            print(f"(no mainline vrpn_print_devices at {PRINT_DEVICES}: step 2 not run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
