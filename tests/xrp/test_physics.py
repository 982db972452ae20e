from __future__ import annotations

import math

import numpy as np
import pytest

from robowire.errors import ConfigError
from robowire.protocols.xrp.events import Outputs
from robowire.protocols.xrp.model import (
    COUNTS_PER_METRE,
    MAX_WHEEL_SPEED,
    TRACK_WIDTH,
    Arena,
    Fleet,
)


def test_figures_of_the_real_xrp() -> None:
    assert pytest.approx(585 / (math.pi * 0.060)) == COUNTS_PER_METRE
    assert pytest.approx(0.2827, abs=1e-4) == MAX_WHEEL_SPEED
    assert TRACK_WIDTH == 0.155


def test_many_robots_step_independently() -> None:
    fleet = Fleet(50, quantum=0.0)
    fleet.advance(0.0)
    fleet.counting[:] = True
    fleet.command[:, 0] = np.linspace(-1, 1, 50)
    fleet.command[:, 1] = -np.linspace(-1, 1, 50)  # mirrored right motor: straight lines
    fleet.advance(2.0)
    distance = fleet.counts[:, 0] / COUNTS_PER_METRE
    lag_loss = 0.1 * (1 - math.exp(-20))  # integral of the first-order lag
    expected = np.linspace(-1, 1, 50) * MAX_WHEEL_SPEED * (2.0 - lag_loss)
    assert distance == pytest.approx(expected, abs=1e-6)
    assert fleet.pose[:, 0] == pytest.approx(expected, abs=1e-6)
    assert np.all(fleet.pose[:, 2] == 0)


def test_encoder_periods_and_no_period() -> None:
    fleet = Fleet(1, quantum=0.0)
    fleet.advance(0.0)
    values = fleet.status_values(0, 0.0, 9_375_000)
    periods = values[1:12:3]  # count, period numerator, divisor per encoder
    assert periods == [0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF]  # not counting
    fleet.counting[0] = True
    fleet.command[0] = (0.5, 0.5, 0.0, 0.0)  # left forward, right backward: spin clockwise
    left, right = fleet.status_values(0, 1.0, 9_375_000)[1:5:3]
    assert left & 1 == 1 and right & 1 == 0
    rate = fleet.count_rate[0, 0]
    assert (left >> 1) / 9_375_000 == pytest.approx(1 / rate, rel=1e-3)
    assert fleet.encoder_periods()[0, 1] == pytest.approx(1 / fleet.count_rate[0, 1])  # < 0
    assert fleet.gyro()[0, 5] < 0  # clockwise is negative yaw


def test_rangefinder_against_walls() -> None:
    fleet = Fleet(3, arena=Arena(width=2.0, height=1.0), quantum=0.0)
    fleet.place(0, 0.0, 0.0, 0.0)  # facing the east wall 1 m away
    fleet.place(1, 0.0, 0.0, math.pi / 2)  # facing the north wall 0.5 m away
    fleet.place(2, 5.0, 5.0, 0.0)  # outside the arena
    distance = fleet.rangefinder()
    assert distance[0] == pytest.approx(1.0 - 0.070)
    assert distance[1] == pytest.approx(0.5 - 0.070)
    assert distance[2] == 0.0
    assert fleet.analog()[0, 2] == pytest.approx((1.0 - 0.070) / 4.0 * 5.0)


def test_reflectance_over_the_line() -> None:
    arena = Arena(line_radius=0.5)
    fleet = Fleet(2, arena=arena, quantum=0.0)
    # robot 0 drives along the circle: sensors 65 mm ahead sit right over the tape
    fleet.place(0, 0.5, -arena.reflect_forward, math.pi / 2)
    fleet.place(1, 0.0, 0.0, 0.0)  # in the middle, all white
    volts = fleet.reflectance()
    assert volts[0].min() > 3.0
    assert volts[1].tolist() == [arena.white_volts, arena.white_volts]


def test_accelerometer_rests_at_one_g() -> None:
    fleet = Fleet(1)
    assert fleet.accelerometer()[0].tolist() == [0.0, 0.0, 1.0]


def test_arena_settings_are_numbers() -> None:
    arena = Arena.from_settings({"arena_width": "3", "line_radius": "0"})
    assert (arena.width, arena.height, arena.line_radius) == (3.0, 2.4, 0.0)
    with pytest.raises(ConfigError, match="arena_height must be a number"):
        Arena.from_settings({"arena_height": "wide"})
    with pytest.raises(ConfigError, match="line_width must not be negative"):
        Arena.from_settings({"line_width": "-1"})


def test_follow_turns_pose_changes_into_wheel_counts_while_counting() -> None:
    fleet = Fleet(1, quantum=0.0)
    fleet.frozen = True
    fleet.drive(0, 0.0, Outputs(enabled=True))
    fleet.follow(0, 0.0, 0.0, 0.0, 0.0)
    fleet.follow(0, 0.1, 0.0, 0.0, 0.5)  # 0.1 m straight ahead in 0.5 s
    assert fleet.counts[0, :2] == pytest.approx([0.1 * COUNTS_PER_METRE] * 2)
    assert fleet.count_rate[0, :2] == pytest.approx([0.2 * COUNTS_PER_METRE] * 2)
    fleet.follow(0, 0.1, 0.0, math.pi / 2, 1.0)  # a quarter turn on the spot
    turn = math.pi / 4 * TRACK_WIDTH * COUNTS_PER_METRE
    assert fleet.counts[0, 1] - fleet.counts[0, 0] == pytest.approx(2 * turn)
    assert fleet.gyro()[0, 5] == pytest.approx(90.0)
    fleet.drive(0, 1.0, Outputs(enabled=False))
    fleet.follow(0, 0.5, 0.0, math.pi / 2, 1.5)
    assert fleet.counts[0, 0] == pytest.approx(0.1 * COUNTS_PER_METRE - turn)  # not counting
