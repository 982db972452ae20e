"""The closing check of ROS 2 bags: a bag written by rosbags' Writer, replayed by `robowire
replay BAG --to vrpn://…` into robowire's VRPN server, read by the mainline
`vrpn_print_devices` (VRPN 07.38, ../shared/peers/vrpn): every drone of the bag's /tf is a
tracker there, at the positions the bag holds."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

from rosbags.rosbag2 import StoragePlugin
from tests.ros2.test_bag_source import drone_xyz, write_flight

from mainline import needs_client, start_print_devices, stop_print_devices
from support import Process, free_port

_REPORT = re.compile(
    r"Tracker (\w+)@\S+, sensor 0:\n\s+pos \(\s*([-\d.]+),\s*([-\d.]+),\s*([-\d.]+)\)"
)


def accepting(port: int, seconds: float = 30.0) -> None:
    """Wait until the replay's VRPN server accepts connections on `port`."""
    end = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise AssertionError(f"nothing listens on {port}") from None
            time.sleep(0.1)


@needs_client
def test_a_rosbags_bag_replays_into_vrpn_for_the_mainline_client(tmp_path: Path) -> None:
    steps = 40
    write_flight(tmp_path / "flight", StoragePlugin.SQLITE3, steps=steps)
    port = free_port()
    replay = Process(
        "replay", str(tmp_path / "flight"), "--to", f"vrpn://127.0.0.1:{port}", "--loop", "--quiet"
    )
    try:
        accepting(port)
        client = start_print_devices(f"drone1@127.0.0.1:{port}", f"drone2@127.0.0.1:{port}")
        time.sleep(3.0)
        out = stop_print_devices(client)
    finally:
        replay.stop()
    seen: dict[str, set[tuple[float, float, float]]] = {}
    for name, *xyz in _REPORT.findall(out):
        seen.setdefault(name, set()).add(tuple(float(v) for v in xyz))  # type: ignore[arg-type]
    assert set(seen) == {"drone1", "drone2"}, out[-2000:]
    for n in (1, 2):
        recorded = {tuple(round(v, 2) for v in drone_xyz(n, i)) for i in range(steps)}
        printed = seen[f"drone{n}"]
        assert len(printed) >= 5  # the flight moves: many poses, each one the bag's
        assert all(
            any(
                all(abs(p - r) <= 0.0051 for p, r in zip(pos, rec, strict=True)) for rec in recorded
            )
            for pos in printed
        ), (printed, recorded)
