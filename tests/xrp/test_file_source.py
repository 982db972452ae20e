"""XRP captures as sources: the world ends with the robot status and commands the capture
ends with (read independently from the capture's JSON twin)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from robowire.gateway import Gateway, open_source


def last_of(captures: Path) -> tuple[dict[int, int], dict[int, float], float]:
    """From capture_normal.jsonl: the last encoder counts the robot reported (after the
    WPILib side's sequence rule, which drops the first status), the last motor values and
    the last yaw angle (degrees)."""
    counts: dict[int, int] = {}
    motors: dict[int, float] = {}
    yaw = 0.0
    last_seq = 0
    for line in (captures / "capture_normal.jsonl").read_text().splitlines():
        packet = json.loads(line)
        if packet["dir"] == "W>R":
            motors.update({b["id"]: b["value"] for b in packet["blocks"] if b["tag"] == "0x12"})
            continue
        if packet["seq"] <= last_seq:
            continue
        last_seq = packet["seq"]
        for block in packet["blocks"]:
            if block["tag"] == "0x18":
                counts[block["id"]] = block["count"]
            elif block["tag"] == "0x16":
                yaw = block["v"][5]
    return counts, motors, yaw


async def test_text_capture_fills_the_world_like_the_live_robot(captures):
    source = open_source(f"xrp:{captures / 'capture_normal.txt'}")
    gateway = Gateway().add(source)
    await asyncio.wait_for(gateway.run(), 20)  # ends by itself at the end of the file
    assert not gateway.failures
    counts, motors, yaw = last_of(captures)
    device = gateway.world.device(source.name, "xrp")
    assert device is not None and device.position is not None
    for i, count in counts.items():
        assert device.telemetry[f"encoder_{i}_count"][0] == count
    for i, value in motors.items():
        assert device.telemetry[f"motor_{i}"][0] == pytest.approx(value, abs=1e-6)
    assert device.telemetry["gyro_angle_z"][0] == pytest.approx(yaw, abs=1e-3)
    # every status but the first (sequence 0, dropped by WPILib's rule) reached the world
    statuses = sum(1 for line in (captures / "capture_normal.txt").read_text().split("\n")
                   if " R>W " in line)  # fmt: skip
    assert source.stats.messages_in == statuses - 1
    assert source.stats.dropped == 1


async def test_bad_lines_are_counted_and_skipped(captures, tmp_path):
    lines = (captures / "capture_normal.txt").read_text().splitlines()
    broken = tmp_path / "broken.txt"
    broken.write_text("\n".join([lines[0], "not a datagram", "1.0 R>W 3 00ff", *lines[1:]]) + "\n")
    source = open_source(f"xrp:{broken}")
    gateway = Gateway().add(source)
    await asyncio.wait_for(gateway.run(), 20)
    assert not gateway.failures
    assert source.stats.dropped == 3  # two lines that are not datagrams, status seq 0
    assert source.stats.messages_in > 100
