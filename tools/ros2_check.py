"""The demo's world on ROS 2, as an independent subscriber sees it (docs/ros2.md).

    PYTHONPATH=src python tools/ros2_check.py [--seconds 10] [--count N]

Runs what `robowire demo` runs (every simulator on loopback and the gateway's sources, with
the demo's settings) with `serve ros2://` instead of the viewer, on a DDS domain of its own
and discovery on loopback, and meanwhile tests/ros2/subscriber.py in another process (types
and CDR from rosbags, no robowire code). Prints what the subscriber saw: the participant's
user data, the node in `ros_discovery_info`, and per topic (devices' own topics grouped) the
DDS type, the QoS offered, how many topics, samples and decode errors.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from robowire import protocols
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.service import SimOptions

ROOT = Path(__file__).resolve().parents[1]
SETTLE = 5.0  # seconds for the sources to connect and discovery to happen before listening


async def run(seconds: float, count: int | None, domain: int) -> dict[str, Any]:
    gateway = Gateway()
    sink = open_sink(f"ros2://?domain={domain}")
    # each protocol's `demo`, as `robowire demo` runs it: a simulator that listens and a
    # source that connects to it, or (a protocol that sends) a source bound first
    shown = {p.name: (p, p.demo) for p in protocols.landed() if p.demo is not None}
    sims = {
        name: open_sim(name, SimOptions(port=0, count=count, options={**demo.settings}))
        for name, (p, demo) in shown.items()
        if not p.sends
    }
    receivers = {
        name: open_source(demo.url.format(host="127.0.0.1", port=0))
        for name, (p, demo) in shown.items()
        if p.sends
    }
    gateway.add(sink, *sims.values(), *receivers.values())
    task = asyncio.create_task(gateway.run(SETTLE + seconds + 5))
    for service in [*sims.values(), *receivers.values(), sink]:
        await service.ready.wait()
    for name, sim in sims.items():
        assert sim.address is not None
        url = shown[name][1].url.format(host=sim.address[0], port=sim.address[1])
        gateway.add(open_source(url))
    for name, receiver in receivers.items():
        assert receiver.address is not None
        target = f"{receiver.address[0]}:{receiver.address[1]}"
        settings = {**shown[name][1].settings}
        gateway.add(open_sim(name, SimOptions(count=count, target=target, options=settings)))
    await asyncio.sleep(SETTLE)
    subscriber = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests" / "ros2" / "subscriber.py"),
        "--domain", str(domain), "--duration", str(seconds), "--localhost",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await subscriber.communicate()
    gateway.stop()
    await task
    seen: dict[str, Any] = json.loads(out)
    seen["sink"] = {"renamed": sink.stats.extra.get("renamed", 0), "dropped": sink.stats.dropped}
    return seen


def grouped(topic: str) -> str:
    """`rt/robowire/drone_12/pose` -> `rt/robowire/drone_<N>/pose`."""
    parts = topic.split("/")
    if len(parts) == 4 and parts[1] == "robowire":
        head, _, tail = parts[2].rpartition("_")
        if head and tail.isdigit():
            parts[2] = f"{head}_<N>"
    return "/".join(parts)


def report(seen: dict[str, Any], seconds: float) -> str:
    lines = [f"participant user data: {[p['user_data'] for p in seen['participants'].values()]}"]
    nodes = [n for info in seen["discovery_info"] for n in info["node_entities_info_seq"]]
    listed = len(nodes[-1]["writer_gid_seq"]) if nodes else 0
    writers = sum(
        len(t["writers"]) for name, t in seen["topics"].items() if name != "ros_discovery_info"
    )
    names = sorted({n["node_namespace"].rstrip("/") + "/" + n["node_name"] for n in nodes})
    lines.append(
        f"nodes in ros_discovery_info: {names}; writers it lists: {listed}, seen: {writers}"
    )
    lines.append(f"sink: {seen['sink']}")
    groups: dict[str, dict[str, Any]] = collections.OrderedDict()
    for name, topic in sorted(seen["topics"].items()):
        q = topic["qos"]
        qos = f"{q['reliability']}, {q['durability']}, keep last {q['depth']}"
        group = groups.setdefault(
            grouped(name), {"type": topic["type"], "qos": qos, "n": 0, "samples": 0, "errors": 0}
        )
        group["n"] += 1
        group["samples"] += topic["samples"]
        group["errors"] += len(topic["errors"]) + (topic.get("mcap_ros2", "ok") != "ok")
    lines.append(f"| DDS topic | type | QoS offered | topics | samples in {seconds:g} s | errors |")
    lines.append("|---|---|---|---|---|---|")
    for name, g in groups.items():
        lines.append(
            f"| {name} | {g['type']} | {g['qos']} | {g['n']} | {g['samples']} | {g['errors']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the subscriber reads")
    parser.add_argument("--count", type=int, default=None, help="devices per simulator")
    args = parser.parse_args()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    domain = random.randrange(100, 230)
    seen = asyncio.run(run(args.seconds, args.count, domain))
    print(report(seen, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
