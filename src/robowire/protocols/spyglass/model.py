"""A simulated mobile sensor network: the pure model, in world units, no sockets, no clocks.

`SensorNetworkSim(rng, config).step(now)` advances the model to `now` and returns the
`Reports` that fall due, in metres (ENU: x East, y North, z Up) and degC; the adapter's
`network_packets` says them as SpyGlass packets (the one world -> wire conversion, the
sink's too), in the default semantic profile of the demo recording:

* sem 10, uint16 list: each node's neighbourhood (nodes within radio range), once a period;
* sem 20, uint8 list: each node's temperature reading (a smooth field plus noise), in degC;
* sem 40, int16 list: 3-D trajectories of flying objects, each reported by one node, a new
  trajectory when the last one ends;
* sem 30, int16 list: now and then a 2-D coordinates list (the network's bounding box).

Nodes do random-waypoint motion (pick a point, go at a random speed, pause, repeat) inside the
area. `now` is the Unix time stamped into headers (the caller's clock); the model only uses
differences of it. Everything random comes from the `numpy.random.Generator` passed in, so a
seed gives the same bytes every run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.errors import ConfigError

_EPSILON = 1e-6  # seconds
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    """The simulated network; distances in metres (1 SpyGlass unit at the default frame)."""

    nodes: int = 30
    area: tuple[float, float] = (200.0, 200.0)  # x from 0 to area[0], y from 0 to area[1]
    radio_range: float = 50.0
    speed: tuple[float, float] = (0.5, 2.0)  # units per second, uniform
    max_pause: float = 5.0  # seconds at each waypoint, uniform 0..max_pause
    neighborhood_period: float = 1.0
    data_period: float = 2.0
    objects: int = 2  # objects on 3-D trajectories (at most one per node)
    legs: int = 3  # legs per trajectory packet
    leg_seconds: tuple[int, int] = (5, 15)
    max_altitude: int = 40  # m
    coordinates_period: float = 10.0
    first_id: int = 1  # node ids are first_id .. first_id + nodes - 1
    clock_offset: float = 0.0  # s the sender's clock is ahead of ours (what its stamps say)

    @classmethod
    def from_options(
        cls, count: int | None = None, options: Mapping[str, str] | None = None
    ) -> SimConfig:
        """From `robowire sim` options: `count` = nodes; `--set` keys are the other field names
        (`SIM_SETTINGS`), pairs as "a,b" (e.g. area=400,300 speed=1,3). ConfigError on unknown
        keys or bad values."""
        values: dict[str, Any] = {}
        if count is not None:
            values["nodes"] = count
        for key, text in (options or {}).items():
            if key not in SIM_SETTINGS:
                known = ", ".join(sorted(SIM_SETTINGS))
                raise ConfigError(f"spyglass sim: unknown option {key!r} (known: {known})")
            default = getattr(cls(), key)
            try:
                if isinstance(default, tuple):
                    kind = type(default[0])
                    values[key] = tuple(kind(v) for v in text.split(","))
                    if len(values[key]) != 2:
                        raise ValueError("two values wanted")
                else:
                    values[key] = type(default)(text)
            except ValueError as exc:
                raise ConfigError(f"spyglass sim: bad value {text!r} for {key}: {exc}") from None
        try:
            return cls(**values)
        except ValueError as exc:
            raise ConfigError(f"spyglass sim: {exc}") from None

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 0xFFFF - self.first_id:
            raise ValueError("nodes must be between 1 and the uint16 id space")
        if not all(0 < a <= 0x7FFF for a in self.area):
            raise ValueError("the area must fit int16 coordinates")


SIM_SETTINGS = frozenset(f.name for f in dataclasses.fields(SimConfig)) - {"nodes"}
"""The `--set` keys of `robowire sim spyglass` (the node count is `--count`)."""


class SensorNetworkSim:
    """The model; see the module docstring."""

    def __init__(self, rng: np.random.Generator, config: SimConfig | None = None) -> None:
        self.config = cfg = config or SimConfig()
        self.rng = rng
        n = cfg.nodes
        self.ids = np.arange(cfg.first_id, cfg.first_id + n)
        self._area = np.array(cfg.area, dtype=np.float64)
        self.positions: FloatArray = rng.uniform(0.0, 1.0, (n, 2)) * self._area
        self._targets: FloatArray = rng.uniform(0.0, 1.0, (n, 2)) * self._area
        self._speeds: FloatArray = rng.uniform(*cfg.speed, n)
        self._pause_left: FloatArray = np.zeros(n)
        # Phases spread each node's packets over the period instead of one burst a second.
        self._next_neighborhood = rng.uniform(0.0, cfg.neighborhood_period, n)
        self._next_data = rng.uniform(0.0, cfg.data_period, n)
        self._objects = min(cfg.objects, n)
        self._object_at = [
            np.append(rng.uniform(0.0, 1.0, 2) * self._area, 0.0) for _ in range(self._objects)
        ]
        self._next_trajectory = np.zeros(self._objects)
        self._next_coordinates = 0.0
        self._start: float | None = None
        self._elapsed = 0.0

    # -- model -------------------------------------------------------------------------------

    def _move(self, dt: float) -> None:
        """Random waypoint, vectorised over nodes."""
        cfg, rng = self.config, self.rng
        pausing = self._pause_left > 0
        self._pause_left[pausing] = np.maximum(self._pause_left[pausing] - dt, 0.0)
        moving = ~pausing
        delta = self._targets - self.positions
        distance = np.hypot(delta[:, 0], delta[:, 1])
        travel = self._speeds * dt
        arrived = moving & (distance <= travel)
        going = moving & ~arrived
        step = (travel[going] / distance[going])[:, None] * delta[going]
        self.positions[going] += step
        self.positions[arrived] = self._targets[arrived]
        count = int(arrived.sum())
        if count:
            self._targets[arrived] = rng.uniform(0.0, 1.0, (count, 2)) * self._area
            self._speeds[arrived] = rng.uniform(*cfg.speed, count)
            self._pause_left[arrived] = rng.uniform(0.0, cfg.max_pause, count)

    def neighbors(self, rows: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.bool_]:
        """(k, n) adjacency of the nodes `rows` (default all: (n, n)): which nodes are within
        radio range of each. A step asks only for the nodes due, so its cost follows the
        packets it sends, not the square of the network's size."""
        rows = np.arange(len(self.positions)) if rows is None else rows
        delta = self.positions[rows, None, :] - self.positions[None, :, :]
        squared = np.einsum("ijk,ijk->ij", delta, delta)
        adjacent: npt.NDArray[np.bool_] = squared <= self.config.radio_range**2
        adjacent[np.arange(len(rows)), rows] = False  # a node is not its own neighbour
        return adjacent

    def temperature(self, positions: FloatArray) -> FloatArray:
        """The smooth temperature field (degC) at some positions, at the current sim time."""
        u = positions / self._area
        drift = 2.0 * math.sin(2.0 * math.pi * self._elapsed / 600.0)
        wave = np.sin(2.0 * math.pi * u[:, 0]) * np.cos(2.0 * math.pi * u[:, 1])
        return 20.0 + 6.0 * wave + 4.0 * u[:, 1] + drift

    # -- reports ---------------------------------------------------------------------------

    def step(self, now: float) -> Reports:
        """Advance to `now` and return what falls due, in time order per kind."""
        cfg = self.config
        if self._start is None:
            self._start = now
            dt = 0.0
        else:
            dt = max(0.0, now - self._start - self._elapsed)
        self._elapsed += dt
        if dt:
            self._move(dt)
        t = self._elapsed + _EPSILON  # a deadline from next_deadline() is due despite rounding
        positions = np.column_stack([self.positions, np.zeros(len(self.positions))])
        box = None
        if self._next_coordinates <= t:
            box = self._bounding_box()
            self._next_coordinates = _next(
                np.array([self._next_coordinates]), cfg.coordinates_period, t
            )[0]
        due = np.flatnonzero(self._next_trajectory <= t).tolist()
        return Reports(
            time=now,
            ids=self.ids,
            positions=positions,
            neighborhoods=self._neighborhoods(t),
            readings=self._readings(t),
            trajectories=[self._trajectory(k) for k in due],
            box=box,
        )

    def _neighborhoods(self, t: float) -> tuple[IntArray, list[list[int]]]:
        """The nodes whose neighbourhood falls due at `t`, and each one's current neighbours."""
        due = np.flatnonzero(self._next_neighborhood <= t)
        if not due.size:
            return due, []
        adjacent = self.neighbors(due)
        neighbors = [self.ids[adjacent[k]].tolist() for k in range(len(due))]
        period = self.config.neighborhood_period
        self._next_neighborhood[due] = _next(self._next_neighborhood[due], period, t)
        return due, neighbors

    def _readings(self, t: float) -> tuple[IntArray, FloatArray]:
        """The nodes whose temperature reading falls due at `t`, and the readings (the field
        plus noise, degC)."""
        due = np.flatnonzero(self._next_data <= t)
        if not due.size:
            return due, np.zeros(0)
        noise = self.rng.normal(0.0, 0.3, due.size)
        readings = self.temperature(self.positions[due]) + noise
        self._next_data[due] = _next(self._next_data[due], self.config.data_period, t)
        return due, readings

    def _bounding_box(self) -> FloatArray:
        """The swarm's bounding box as a closed polygon (ENU, m), out to whole metres so that
        it holds every node."""
        low = np.floor(self.positions.min(axis=0))
        high = np.ceil(self.positions.max(axis=0))
        corners = [(low[0], low[1]), (high[0], low[1]), (high[0], high[1]), (low[0], high[1])]
        return np.array([(x, y, 0.0) for x, y in (*corners, corners[0])])

    def next_deadline(self) -> float | None:
        """The `now` at which the next packet falls due (None before the first step): a server
        can sleep until then instead of polling."""
        if self._start is None:
            return None
        due = min(
            float(self._next_neighborhood.min()),
            float(self._next_data.min()),
            float(self._next_trajectory.min()) if self._objects else math.inf,
            self._next_coordinates,
        )
        return self._start + due

    def _trajectory(self, k: int) -> Trajectory:
        """A new trajectory for object k, starting where its last one ended."""
        cfg, rng = self.config, self.rng
        start = self._object_at[k]
        points = [start]
        for _ in range(cfg.legs):
            xy = rng.uniform(0.0, 1.0, 2) * self._area
            points.append(np.append(xy, rng.uniform(0.0, cfg.max_altitude)))
        durations = rng.integers(cfg.leg_seconds[0], cfg.leg_seconds[1] + 1, cfg.legs)
        self._object_at[k] = points[-1]
        self._next_trajectory[k] = self._elapsed + float(durations.sum())
        return Trajectory(reporter=k, path=np.array(points), durations=durations)


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A flying object's new trajectory: reported by node row `reporter`, its `path` (ENU, m)
    and each leg's duration (whole seconds)."""

    reporter: int
    path: FloatArray  # (legs + 1, 3)
    durations: IntArray  # (legs,)


@dataclass(frozen=True, slots=True)
class Reports:
    """What falls due at one step, in world units (`adapter.network_packets` says it as
    packets): every node's id and ENU position, the rows of the nodes whose neighbourhood
    falls due and their neighbours' ids, the rows with a temperature reading due and the
    readings (degC), the new trajectories, and the bounding box (reported by the last node)."""

    time: float  # Unix seconds, what the headers are stamped with
    ids: IntArray
    positions: FloatArray  # (n, 3) metres, z = 0
    neighborhoods: tuple[IntArray, list[list[int]]]
    readings: tuple[IntArray, FloatArray]
    trajectories: list[Trajectory]
    box: FloatArray | None  # (5, 3) a closed polygon, metres

    def __len__(self) -> int:
        """How many packets these reports make."""
        return (
            len(self.neighborhoods[0])
            + len(self.readings[0])
            + len(self.trajectories)
            + (self.box is not None)
        )


def _next(due: FloatArray, period: float, now: float) -> FloatArray:
    """The next due times after `now`, keeping each node's phase (no catch-up bursts)."""
    missed = np.floor((now - due) / period) + 1.0
    return due + missed * period
