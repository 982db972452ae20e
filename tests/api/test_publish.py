"""robowire.publish: our own devices served in a protocol, read back by a client of it."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from tests.support import free_port, free_udp_port

import robowire
from mainline import needs_client, start_print_devices, stop_print_devices
from robowire.errors import RobowireError


def _send_show(n: int) -> robowire.Device:
    """A show of `n` drones (ids 1..n) on a grid sent until a VRSP receiver has them all;
    the receiver's view of drone 17."""
    port = free_udp_port()
    n = 1000
    ids = np.arange(1, n + 1)
    with (
        robowire.connect(f"vrsp://127.0.0.1:{port}") as live,
        robowire.publish(f"vrsp://127.0.0.1:{port}") as show,
    ):
        positions = np.zeros((n, 3))
        positions[:, 0] = np.arange(n) % 32
        positions[:, 1] = np.arange(n) // 32
        colors = np.tile([255.0, 128.0, 0.0], (n, 1))
        deadline = time.monotonic() + 20
        while len(live.devices) < n and time.monotonic() < deadline:
            positions[:, 2] += 0.1
            show.set_many(ids, positions=positions, colors=colors)
            live.wait(timeout=0.2)
        assert len(live.devices) == n
        return live.devices["17"]


def test_a_thousand_drone_show_reaches_a_vrsp_receiver() -> None:
    drone = _send_show(1000)
    assert drone.telemetry["led_red"].value == 255.0
    assert drone.telemetry["led_green"].value == 128.0


def test_drones_keep_their_ids_on_the_wire() -> None:
    drone = _send_show(100)
    assert drone.position is not None
    assert drone.position[:2] == pytest.approx((16.0, 0.0), abs=0.01)  # the 17th of the grid


def _vehicle_seen_by_a_ucs() -> robowire.Device:
    """A vehicle published as "ROVER-7", as our UCS side sees it once its position came."""
    with robowire.publish("ugcs://127.0.0.1:0") as vsm:
        assert vsm.address is not None
        host, port = vsm.address
        vsm.set("ROVER-7", geodetic=(47.3769, 8.5417, 420.0), telemetry={"speed": (2.5, "m/s")})
        with robowire.connect(f"ugcs://{host}:{port}") as ucs:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                for device in ucs.devices.values():
                    if device.geodetic is not None:
                        return device
                ucs.wait(timeout=1)
    raise AssertionError("no vehicle with a position reached the UCS")


def test_a_vsm_of_our_own_vehicle_reaches_a_ucs() -> None:
    rover = _vehicle_seen_by_a_ucs()
    assert rover.attributes["vehicle_name"] == "ROVER-7"
    assert rover.geodetic == pytest.approx((47.3769, 8.5417, 420.0), abs=1e-6)


def test_the_vehicle_goes_by_its_serial() -> None:
    assert _vehicle_seen_by_a_ucs().name == "ROVER-7"


def test_a_port_in_use_is_the_cli_error_line() -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(RobowireError, match=f"127.0.0.1:{port}"):
            robowire.publish(f"vrpn://127.0.0.1:{port}")


def test_set_many_checks_shapes() -> None:
    with (
        robowire.publish(f"vrsp://127.0.0.1:{free_udp_port()}") as show,
        pytest.raises(ValueError, match=r"positions must be shaped \(3, 3\)"),
    ):
        show.set_many([1, 2, 3], positions=np.zeros((2, 3)))


@needs_client
def test_mainline_vrpn_client_reads_our_tracker_by_its_native_name() -> None:
    with robowire.publish("vrpn://127.0.0.1:0") as server:
        assert server.address is not None
        port = server.address[1]
        client = start_print_devices(f"Tracker0@tcp://127.0.0.1:{port}")
        try:
            for k in range(30):
                server.set("Tracker0/0", position=(1.0, 2.0, 0.5 + k), orientation=(1, 0, 0, 0))
                time.sleep(0.05)
        finally:
            out = stop_print_devices(client)
    assert "Tracker Tracker0@tcp" in out and "sensor 0" in out, out
