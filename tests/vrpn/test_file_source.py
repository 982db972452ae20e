"""VRPN captures as sources: the world ends where the real C++ client saw the trackers end."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import numpy as np

from robowire.endpoints import parse_endpoint
from robowire.gateway import Gateway, open_source
from robowire.world import Update

NUMBER = r"\s*(-?\d+\.\d+)"
POSE = re.compile(
    r"sensor (\d+):\n\s+pos \(" + f"{NUMBER},{NUMBER},{NUMBER}" + r"\); quat \("
    f"{NUMBER},{NUMBER},{NUMBER},{NUMBER}"
)


def printed_poses(captures: Path) -> tuple[int, dict[str, tuple[list[float], list[float]]]]:
    """What vrpn_print_devices printed: how many poses, and each sensor's last pose (the
    quaternion reordered from its x, y, z, w to the world's w, x, y, z)."""
    text = (captures / "tcp_tracker.client.txt").read_text()
    last: dict[str, tuple[list[float], list[float]]] = {}
    found = POSE.findall(text)
    for sensor, *numbers in found:
        x, y, z, qx, qy, qz, qw = map(float, numbers)
        last[f"Tracker0/{sensor}"] = ([x, y, z], [qw, qx, qy, qz])
    return len(found), last


async def read_into_world(path: Path, **options: str) -> tuple[Gateway, int]:
    endpoint = parse_endpoint(f"vrpn:{path}")
    source = open_source(dataclasses.replace(endpoint, options=options))
    gateway = Gateway().add(source)
    poses = 0
    subscription = gateway.world.feed.subscribe()

    async def count() -> None:
        nonlocal poses
        async for item in subscription:
            if isinstance(item, Update) and "position" in item.fields:
                poses += len(item)

    counting = asyncio.create_task(count())
    await asyncio.wait_for(gateway.run(), 20)  # ends by itself at the end of the file
    counting.cancel()
    poses += sum(
        len(i) for i in subscription.drain() if isinstance(i, Update) and "position" in i.fields
    )
    assert not gateway.failures
    return gateway, poses


def assert_world_matches_client(gateway: Gateway, captures: Path, poses: int) -> None:
    (source,) = gateway.services
    count, last = printed_poses(captures)
    assert poses == count
    assert source.stats.dropped == 0
    for device_id, (position, quaternion) in last.items():
        device = gateway.world.device(source.name, device_id)
        assert device is not None
        assert np.allclose(device.position, position, atol=0.005)  # printed with 2 decimals
        assert np.allclose(device.orientation, quaternion, atol=0.005)


async def test_pcap_source_ends_where_the_real_client_saw_the_trackers(captures):
    gateway, poses = await read_into_world(captures / "tcp_tracker.pcap")
    assert_world_matches_client(gateway, captures, poses)


async def test_raw_server_stream_gives_the_same(captures):
    gateway, poses = await read_into_world(captures / "tcp_tracker.s2c.bin")
    assert_world_matches_client(gateway, captures, poses)


async def test_garbled_capture_is_counted_and_dropped_not_fatal(captures, tmp_path):
    data = bytearray((captures / "tcp_tracker.s2c.bin").read_bytes())
    data[3000:3040] = b"\xff" * 40
    broken = tmp_path / "broken.bin"
    broken.write_bytes(bytes(data[: len(data) - 7]))
    gateway, poses = await read_into_world(broken)
    (source,) = gateway.services
    assert source.stats.dropped >= 1
    assert 0 < poses < printed_poses(captures)[0]


async def test_paced_replay_follows_the_capture_clock(captures):
    loop = asyncio.get_running_loop()
    start = loop.time()
    await read_into_world(captures / "tcp_tracker.pcap", speed="4")
    elapsed = loop.time() - start
    assert 1.58 / 4 * 0.9 <= elapsed < 1.58 / 4 + 1.5  # the capture spans 1.59 s
