"""Unit-level regressions for what the bridge matrix found (the matrix checks them end to end)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robowire.protocols.vrsp.adapter import SwarmEncoder
from robowire.world import World


def test_the_vrsp_sink_sends_each_devices_led_colour(caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.update_device(
        "show", "lit", kind="drone", receive_time=1.0, position=(1.0, 2.0, 3.0),
        telemetry={"led_red": (255.0, "1"), "led_green": (127.6, "1"), "led_blue": (0.0, "1")},
    )  # fmt: skip
    world.update_device("show", "dark", kind="drone", receive_time=1.0, position=(0, 0, 1.0))
    with caplog.at_level(logging.WARNING, logger="robowire"):
        swarm = SwarmEncoder().swarm(world)
    assert swarm is not None
    rows = {int(i): k for k, i in enumerate(swarm.ids)}
    lit, dark = rows[0], rows[1]  # ids in order of first sight
    assert swarm.has_color[lit] and not swarm.has_color[dark]
    assert swarm.color[lit].tolist() == [255, 128, 0]
    assert np.allclose(swarm.position[lit], (1.0, 3.0, 2.0))  # x East, y Up, z North
    assert any("the DEF root is 0, 0, 0" in r.getMessage() for r in caplog.records)


def test_a_root_from_a_device_fix_is_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.update_device(
        "show", "1", kind="drone", receive_time=1.0, position=(0.0, 0.0, 0.0),
        geodetic=(47.0, 8.0, 400.0),
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="robowire"):
        encoder = SwarmEncoder()
        assert encoder.swarm(world) is not None
    assert encoder.root is not None and np.allclose(encoder.root, (47.0, 8.0, 400.0))
    assert not caplog.records
