"""`listen ros2://` at 1,000 transforms at 100 Hz: the share of a core it takes (goal: ≤ 20%).

A child process publishes `/tf` as tf2's broadcaster does (reliable, keep last 100): one
TFMessage of `FRAMES` moving transforms `RATE` times a second, on loopback (DDS discovery
range LOCALHOST). This process listens, and its CPU time (every thread: cyclonedds' receive
threads too) over `WINDOW` seconds of wall time is the share of a core:

    robowire    a gateway with `listen ros2://` and no sink: discovery, the raw reader, the
                columnar /tf decoder, the TF tree and the world's writes
    peer        cyclonedds-python's own reader of the same topic (its IdlStruct of
                tf2_msgs/TFMessage) taking every sample as Python objects in its listener,
                and nothing more: what reading /tf through cyclonedds' own deserialisation
                costs, before anything is done with it

Each runs `ROUNDS` times in turn (the machine is shared); the medians are compared. It is
the listen half of bench/bench_ros2.py (`measure`, figures `listen_*`): run
`PYTHONPATH=src:. python -m bench ros2`.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

FRAMES = 1000
RATE = 100.0
WINDOW = 5.0  # seconds measured
SETTLE = 2.0  # seconds after the first sample before measuring (discovery, first layouts)
ROUNDS = 3
GOAL = 0.20  # of a core
ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
}


def child(domain: int) -> None:
    """Publish /tf: FRAMES transforms, every one moving, RATE times a second."""
    from robowire.ros2 import cdr, dds

    node = dds.Node(domain, dds.discovery_range(), "bench_tf")
    writer = node.writer("/tf", "tf2_msgs/msg/TFMessage", dds.TF)
    names = cdr.Names()
    names.extend([f"body{i}" for i in range(FRAMES)])
    messages = cdr.TfMessages("world", names)
    slots = np.arange(FRAMES)
    angle = np.linspace(0, 2 * np.pi, FRAMES)
    rotation = np.tile([1.0, 0.0, 0.0, 0.0], (FRAMES, 1))
    print("ready", flush=True)
    period = 1.0 / RATE
    due = time.monotonic()
    k = 0
    while True:
        turned = angle + k * 0.01
        position = np.stack([np.cos(turned) * 5, np.sin(turned) * 5, np.full(FRAMES, 1.0)], 1)
        writer.write(messages.encode(slots, np.full(FRAMES, time.time()), position, rotation))
        k += 1
        due += period
        time.sleep(max(0.0, due - time.monotonic()))


def _cpu_share(count: Any) -> tuple[float, int]:
    """This process's CPU seconds per wall second over WINDOW, and what `count()` grew by."""
    wall, cpu, before = time.perf_counter(), time.process_time(), count()
    time.sleep(WINDOW)
    share = (time.process_time() - cpu) / (time.perf_counter() - wall)
    return share, count() - before


async def robowire_listen(domain: int) -> tuple[float, int]:
    from robowire.gateway import Gateway, open_source

    source = open_source(f"ros2://?domain={domain}")
    gateway = Gateway().add(source)
    task = asyncio.create_task(gateway.run())
    try:
        for _ in range(600):
            table = gateway.world.tables.get(source.name)
            if table is not None and len(table) >= FRAMES:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("robowire saw no /tf")
        await asyncio.sleep(SETTLE)
        return await asyncio.to_thread(_cpu_share, lambda: source.stats.messages_in)
    finally:
        gateway.stop()
        await task


def peer_listen(domain: int) -> tuple[float, int]:
    from cyclonedds.core import DDSException, Listener
    from cyclonedds.domain import Domain, DomainParticipant
    from cyclonedds.qos import Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from robowire.ros2 import dds, types

    config = dds.cyclone_config("LOCALHOST")
    try:
        _domain = Domain(domain, config) if config else None
    except DDSException:  # robowire's run made it already (dds.Node keeps it): shared as it is
        _domain = None
    participant = DomainParticipant(domain)
    topic = Topic(participant, "rt/tf", types.idl_class("tf2_msgs/msg/TFMessage"))
    reader = DataReader(participant, topic, qos=Qos(*dds.TF.policies()))
    taken = [0]
    reading = [True]  # False once measured: a late callback takes nothing
    lock = threading.Lock()
    got_one = threading.Event()

    def on_data(_: Any) -> None:
        with lock:
            if reading[0]:
                taken[0] += len(reader.take(N=256))  # every sample as a Python object
        got_one.set()

    reader.set_listener(Listener(on_data_available=on_data))
    try:
        if not got_one.wait(30):
            raise RuntimeError("the peer saw no /tf")
        time.sleep(SETTLE)
        return _cpu_share(lambda: taken[0])
    finally:
        with lock:
            reading[0] = False
        reader.set_listener(None)
        del _domain


def measure() -> dict[str, float]:
    domain = random.randint(100, 232)
    publisher = subprocess.Popen(
        [sys.executable, "-m", "bench.ros2_listen", "--child", str(domain)],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    try:
        assert publisher.stdout is not None and publisher.stdout.readline().strip() == "ready"
        ours, theirs = [], []
        for _ in range(ROUNDS):  # in turn: a busy spell of this shared machine hits both
            ours.append(asyncio.run(robowire_listen(domain)))
            theirs.append(peer_listen(domain))
    finally:
        publisher.terminate()
        publisher.wait(timeout=10)
    share = statistics.median(s for s, _ in ours)
    peer = statistics.median(s for s, _ in theirs)
    rate = statistics.median(n for _, n in ours) / WINDOW
    peer_rate = statistics.median(n for _, n in theirs) / WINDOW
    print(
        f"   /tf: {FRAMES} transforms at {RATE:.0f} Hz, {WINDOW:.0f} s windows, median of {ROUNDS}"
    )
    print(
        f"     listen ros2:// (decode, TF tree, world): {share:6.1%} of a core"
        f"  ({rate:5.1f} samples/s)  goal <= {GOAL:.0%}: {'met' if share <= GOAL else 'NOT met'}"
    )
    print(
        f"     cyclonedds' own typed reader (peer):     {peer:6.1%} of a core"
        f"  ({peer_rate:5.1f} samples/s)"
    )
    per_sample = share / max(rate, 1e-9)
    peer_per_sample = peer / max(peer_rate, 1e-9)
    print(
        f"     CPU per sample: robowire {per_sample * 1e3:.2f} ms,"
        f" peer {peer_per_sample * 1e3:.2f} ms ({peer_per_sample / per_sample:.1f}x;"
        " the peer's share is of the samples it kept up with)"
    )
    return {
        "listen_cpu": share,
        "listen_peer_cpu": peer,
        "listen_peer_ratio": peer_per_sample / per_sample,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]))
    else:
        measure()
