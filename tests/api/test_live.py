"""robowire.connect / robowire.open against the simulators, as a script would use them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tests.api.simulators import simulator

import robowire
from robowire.errors import ConfigError

DATA = Path(__file__).parent.parent / "data"


def test_import_robowire_loads_no_gateway() -> None:
    code = "import sys, robowire; print('robowire.gateway' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_connect_reads_trackers_by_their_vrpn_names() -> None:
    with (
        simulator("vrpn", count=2, rate=100) as (host, port),
        robowire.connect(f"vrpn://Tracker0@{host}:{port}") as live,
    ):
        assert live.wait(timeout=10)
        device = live.wait_for("Tracker0/1", timeout=10)
        assert sorted(live.devices) == ["Tracker0/0", "Tracker0/1"]
        assert device.kind == "tracker"
        assert device.position is not None and len(device.position) == 3
        assert device.orientation is not None
        assert abs(np.linalg.norm(device.orientation) - 1.0) < 1e-9
        assert device.telemetry["acceleration_x"].unit == "m/s2"
        assert device.time is not None and abs(device.time - time.time()) < 5
        ids, positions, orientations = live.snapshot()
        assert ids.tolist() == list(live.devices)
        assert positions.shape == (2, 3) and orientations.shape == (2, 4)
        assert not np.isnan(positions).any()
        first = live.devices["Tracker0/0"].position
        assert live.wait(timeout=10)
        live.wait(timeout=10)
        assert live.devices["Tracker0/0"].position != first  # the trackers circle
        [status] = live.status()
        assert status.state == "connected" and status.devices == 2


def test_updates_carry_names_and_values() -> None:
    with (
        simulator("vrpn", count=3, rate=200) as (host, port),
        robowire.connect(f"vrpn://Tracker0@{host}:{port}") as live,
    ):
        updates = []
        for update in live.updates(timeout=10):
            updates.append(update)
            if len(updates) == 5:
                break
        assert len(updates) == 5
        last = updates[-1]
        assert set(last.names) <= {"Tracker0/0", "Tracker0/1", "Tracker0/2"}
        assert last.positions is not None and last.positions.shape == (len(last), 3)
        assert last.source == f"vrpn@{host}:{port}"


def test_a_blocked_callback_stalls_neither_sources_nor_other_readers() -> None:
    with (
        simulator("vrpn", count=2, rate=500) as (host, port),
        robowire.connect(f"vrpn://Tracker0@{host}:{port}") as live,
    ):
        release = threading.Event()
        seen: list[int] = []
        blocked = live.on_update(lambda _: release.wait(), maxlen=10)
        counting = live.on_update(lambda u: seen.append(len(u)))
        assert live.wait(timeout=10)
        deadline = time.monotonic() + 20
        while (blocked.dropped < 50 or len(seen) < 100) and time.monotonic() < deadline:
            live.wait(timeout=1)
        assert blocked.dropped >= 50  # its queue stayed bounded: oldest dropped, counted
        assert len(seen) >= 100  # the other reader went on
        assert blocked.calls == 0
        release.set()
        blocked.cancel()
        counting.cancel()
        assert live.status()[0].dropped == 0  # the source lost nothing


def test_devices_of_two_sources_sharing_a_name_are_qualified() -> None:
    with simulator("vrpn", count=1) as (h1, p1), simulator("vrpn", count=1) as (h2, p2):
        first, second = f"vrpn@{h1}:{p1}", f"vrpn@{h2}:{p2}"
        with robowire.connect(f"vrpn://Tracker0@{h1}:{p1}", f"vrpn://Tracker0@{h2}:{p2}") as live:
            live.wait_for(f"{first}/Tracker0/0", timeout=10)
            live.wait_for(f"{second}/Tracker0/0", timeout=10)
            assert live.devices.shared == {
                "Tracker0/0": (f"{first}/Tracker0/0", f"{second}/Tracker0/0")
            }
            assert sorted(live.devices) == sorted([f"{first}/Tracker0/0", f"{second}/Tracker0/0"])
            with pytest.raises(KeyError, match="is in 2 sources: use"):
                live.devices["Tracker0/0"]
            assert live.devices[f"{second}/Tracker0/0"].source == second


def test_errors_are_the_cli_one_line_messages() -> None:
    with pytest.raises(ConfigError) as caught:
        robowire.connect("bogus://127.0.0.1")
    cli = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "listen", "bogus://127.0.0.1"],
        capture_output=True,
        text=True,
    )
    assert cli.stderr.strip() == f"robowire: error: {caught.value}"
    with pytest.raises(ConfigError, match="no such file"):
        robowire.connect("missing.mcap")


def test_a_file_is_read_to_its_end() -> None:
    capture = DATA / "captures" / "vrpn" / "tcp_tracker.pcap"
    with robowire.connect(f"vrpn:{capture}") as live:
        while live.wait(timeout=10):
            pass
        assert live.finished
        assert "Tracker0/0" in live.devices
        assert not live.wait(timeout=0.1)  # over: no update will come


def test_record_then_read_back(tmp_path: Path) -> None:
    out = tmp_path / "run.mcap"
    with (
        simulator("vrpn", count=2, rate=100) as (host, port),
        robowire.connect(f"vrpn://Tracker0@{host}:{port}", record=str(out)) as live,
    ):
        for _ in range(20):
            live.wait(timeout=10)
    with robowire.connect(str(out)) as replay:
        while replay.wait(timeout=10):
            pass
        assert sorted(replay.devices) == ["Tracker0/0", "Tracker0/1"]


async def test_the_same_view_in_asyncio() -> None:
    with simulator("vrpn", count=2, rate=100) as (host, port):
        async with robowire.open(f"vrpn://Tracker0@{host}:{port}") as live:
            assert await live.wait(timeout=10)
            count = 0
            async for update in live:
                assert update.names
                count += 1
                if count == 3:
                    break
            assert "Tracker0/0" in live.devices
            assert live.status()[0].state == "connected"


def test_a_device_is_one_consistent_state_while_the_source_writes() -> None:
    """Each pose written has x = k and a yaw of k degrees: every Device read while they pour
    in has a position and an orientation of the same write (they are built on the loop)."""
    with robowire.publish("vrpn://127.0.0.1:0") as pub:
        assert pub.address is not None
        host, port = pub.address
        with robowire.connect(f"vrpn+tcp://Tracker0@{host}:{port}") as live:
            stop = threading.Event()

            def write() -> None:
                k = 0
                while not stop.is_set():
                    half = np.radians(k % 360) / 2
                    pub.set("Tracker0/0", position=(k % 360, 0, 0),
                            orientation=(np.cos(half), 0, 0, np.sin(half)))  # fmt: skip
                    k += 1
                    time.sleep(0.0005)

            writer = threading.Thread(target=write)
            writer.start()
            try:
                live.wait_for("Tracker0/0", timeout=30)
                checked = 0
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    device = live.devices["Tracker0/0"]
                    assert device.position is not None and device.orientation is not None
                    w, _, _, z = device.orientation
                    yaw = np.degrees(2 * np.arctan2(z, w)) % 360
                    assert abs(yaw - device.position[0]) < 1e-6 or abs(yaw - 360) < 1e-6
                    checked += 1
            finally:
                stop.set()
                writer.join()
    assert checked > 100
