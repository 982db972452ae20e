"""Per-sink rules: what one sink sees of the world (filters, rates, renames, frame transforms).

A sink reads its world's tables directly, so the rules are applied by building a second world,
the sink's *view*: `Projector` takes what changed in the gateway's world (a latest-state pull)
and writes the kept devices, renamed and transformed, into the view; `ProjectedSink` runs a sink
on that view. No sink knows about rules.

Rules (`Rules`, all optional):

* `sources`, `devices`, `kinds`: glob patterns (fnmatch) a source name, device id or device
  kind must match one of; empty keeps every one. `fields`: globs of the telemetry fields kept
  (None keeps all); position, orientation, velocity and geodetic are kept unless `pose` is False.
* `device_rate`: at most this many updates per second per device; the changes in between are
  merged (the next update carries the latest values), and counted in `Projector.merged`.
* `rename`: device id -> the id the sink shows (its name too).
* `transform` (`Transform`): position and velocity become `scale * R v + offset` (velocity
  without the offset), orientation `r * q`, with R the rotation `r` (a unit quaternion w,x,y,z);
  with an `origin` (lat, lon, alt WGS84) the ENU result also gives the geodetic position of a
  device that has none, and a geodetic position gives the ENU one of a device that has none.

Per source the projector keeps one slot-indexed column per decision (kept or not, the slot in the
view, the next time a device may be sent, a pending mark), computed once per new device; every
update after that is numpy indexing, whatever the number of devices.
"""

from __future__ import annotations

import asyncio
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire import quaternions
from robowire.service import Service, Sink
from robowire.world import LogEvent, Update, World
from robowire.world.model import ATTRIBUTES, GEODETIC, LINKS, ORIENTATION, POSITION, VELOCITY
from robowire.world.table import FloatArray, SlotArray, SourceTable

POSE_FIELDS = frozenset({POSITION, ORIENTATION, VELOCITY, GEODETIC})
Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


def yaw_quaternion(degrees: float) -> Quaternion:
    """The rotation by `degrees` about the Up axis (counter-clockwise seen from above)."""
    half = math.radians(degrees) / 2
    return (math.cos(half), 0.0, 0.0, math.sin(half))


def rotation_matrix(q: Quaternion) -> FloatArray:
    """The 3x3 matrix of the unit quaternion q = (w, x, y, z)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Transform:
    """From the gateway's ENU frame to the sink's: `scale * R p + offset`, then `origin`."""

    offset: Vector3 = (0.0, 0.0, 0.0)
    rotation: Quaternion = (1.0, 0.0, 0.0, 0.0)
    scale: float = 1.0
    origin: Vector3 | None = None  # lat deg, lon deg, alt m of the sink frame's (0, 0, 0)

    def position(self, p: FloatArray) -> FloatArray:
        """Positions (n, 3) in the sink's frame (NaN rows stay NaN)."""
        out: FloatArray = self.scale * (p @ rotation_matrix(self.rotation).T)
        out += np.asarray(self.offset, dtype=np.float64)
        return out

    def velocity(self, v: FloatArray) -> FloatArray:
        out: FloatArray = self.scale * (v @ rotation_matrix(self.rotation).T)
        return out

    def orientation(self, q: FloatArray) -> FloatArray:
        return quaternions.multiply(np.asarray(self.rotation, dtype=np.float64), q)

    def geodetic(self, enu: FloatArray) -> FloatArray:
        """WGS84 lat, lon, alt (n, 3) of ENU points of the sink frame (needs `origin`)."""
        import pymap3d

        assert self.origin is not None
        lat0, lon0, alt0 = self.origin
        lat, lon, alt = pymap3d.enu2geodetic(enu[:, 0], enu[:, 1], enu[:, 2], lat0, lon0, alt0)
        return np.stack([np.asarray(lat), np.asarray(lon), np.asarray(alt)], axis=-1)

    def enu(self, geodetic: FloatArray) -> FloatArray:
        """ENU points of the sink frame (n, 3) of WGS84 lat, lon, alt (needs `origin`)."""
        import pymap3d

        assert self.origin is not None
        lat0, lon0, alt0 = self.origin
        e, n, u = pymap3d.geodetic2enu(
            geodetic[:, 0], geodetic[:, 1], geodetic[:, 2], lat0, lon0, alt0
        )
        return np.stack([np.asarray(e), np.asarray(n), np.asarray(u)], axis=-1)


def _matcher(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One compiled regular expression for a list of globs (None: everything matches)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one sink sees (see the module docstring)."""

    sources: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    fields: tuple[str, ...] | None = None
    pose: bool = True
    device_rate: float | None = None
    rename: Mapping[str, str] = field(default_factory=dict)
    transform: Transform | None = None

    def matchers(self) -> tuple[re.Pattern[str] | None, ...]:
        return tuple(_matcher(p) for p in (self.sources, self.devices, self.kinds))

    def keeps_field(self, name: str) -> bool:
        if name in POSE_FIELDS:
            return self.pose
        if self.fields is None:
            return True
        return any(fnmatch.fnmatchcase(name, p) for p in self.fields)

    @property
    def empty(self) -> bool:
        """Nothing to do: the sink can run on the gateway's world itself."""
        return self == Rules()


@dataclass(slots=True)
class _SourceState:
    """The projector's columns for one source table, indexed by its slots."""

    kept: bool  # the source matched `sources`
    known: int = 0  # slots decided so far
    keep: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    out: SlotArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    next_at: FloatArray = field(default_factory=lambda: np.zeros(0))
    pending: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    fields: set[str] = field(default_factory=set)


def _grown(column: Any, size: int, fill: Any) -> Any:
    if len(column) >= size:
        return column
    out = np.full(max(size, 2 * len(column)), fill, dtype=column.dtype)
    out[: len(column)] = column
    return out


class Projector:
    """Applies `rules` to what changed in a world, writing the result into `view`."""

    def __init__(self, rules: Rules, view: World | None = None) -> None:
        self.rules = rules
        self.view = view if view is not None else World()
        self.merged = 0  # device updates merged into a later one by `device_rate`
        self._sources, self._devices, self._kinds = rules.matchers()
        self._states: dict[str, _SourceState] = {}
        self._fields: dict[str, bool] = {}
        self._period = 1.0 / rules.device_rate if rules.device_rate else 0.0

    # -- deciding, once per device ---------------------------------------------------------

    def _state(self, table: SourceTable) -> _SourceState:
        state = self._states.get(table.source)
        if state is None:
            kept = self._sources is None or bool(self._sources.match(table.source))
            state = self._states[table.source] = _SourceState(kept)
        if state.kept and state.known < len(table):
            self._decide(table, state)
        return state

    def _decide(self, table: SourceTable, state: _SourceState) -> None:
        """Columns for the devices that are new since the last call (a loop over new ones)."""
        size = len(table)
        state.keep = _grown(state.keep, size, False)
        state.out = _grown(state.out, size, -1)
        state.next_at = _grown(state.next_at, size, -np.inf)
        state.pending = _grown(state.pending, size, False)
        out_table = self.view.table(table.source)
        for slot in range(state.known, size):
            device, kind = table.ids[slot], table.kinds[slot]
            keep = (self._devices is None or bool(self._devices.match(device))) and (
                self._kinds is None or bool(self._kinds.match(kind))
            )
            state.keep[slot] = keep
            if keep:
                renamed = self.rules.rename.get(device)
                name = renamed if renamed is not None else table.names[slot]
                state.out[slot] = out_table.slot(renamed or device, kind, name)
        state.known = size

    def _keeps_field(self, name: str) -> bool:
        kept = self._fields.get(name)
        if kept is None:
            kept = self._fields[name] = self.rules.keeps_field(name)
        return kept

    # -- the hot path -----------------------------------------------------------------------

    def take(self, world: World, items: Sequence[Update | LogEvent], now: float) -> None:
        """What a pull of `world` gave, at monotonic `now` seconds: mark, then send what is due."""
        for item in items:
            if isinstance(item, LogEvent):
                self._log(world, item)
                continue
            table = world.tables.get(item.source)
            if table is None:
                continue
            state = self._state(table)
            if not state.kept:
                continue
            slots = item.slots[state.keep[item.slots]]
            if len(slots):
                if self._period:
                    self.merged += int(np.count_nonzero(state.pending[slots]))
                state.pending[slots] = True
                state.fields |= item.fields
        self.flush(world, now)

    def next_due(self) -> float | None:
        """When a merged change is next allowed out (None: nothing waits)."""
        if not self._period:
            return None
        due = [
            float(s.next_at[: s.known][s.pending[: s.known]].min())
            for s in self._states.values()
            if s.kept and s.pending[: s.known].any()
        ]
        return min(due) if due else None

    def flush(self, world: World, now: float) -> None:
        """Write every pending device that is allowed out at `now` into the view."""
        for source, state in self._states.items():
            if not state.fields:
                continue
            table = world.tables[source]
            slots = np.flatnonzero(state.pending[: state.known])
            if self._period:
                slots = slots[state.next_at[slots] <= now]
                state.next_at[slots] = now + self._period
            if not len(slots):
                continue
            state.pending[slots] = False
            fields = state.fields
            if not state.pending.any():
                state.fields = set()
            self._write(table, state.out[slots], slots, fields)

    def _write(
        self, table: SourceTable, out: SlotArray, slots: SlotArray, fields: set[str]
    ) -> None:
        rules, transform = self.rules, self.rules.transform
        kwargs: dict[str, Any] = {}
        changed: set[str] = set()
        if rules.pose:
            position = table.position[slots] if POSITION in fields else None
            geodetic = table.geodetic[slots] if GEODETIC in fields else None
            velocity = table.velocity[slots] if VELOCITY in fields else None
            if transform is not None:
                if position is not None:
                    position = transform.position(position)
                if velocity is not None:
                    velocity = transform.velocity(velocity)
                if transform.origin is not None and (position is not None or geodetic is not None):
                    position, geodetic = self._fill(table, slots, transform)
            if ORIENTATION in fields:
                # only the devices that have an orientation get one in the view
                has = table.has_orientation[slots]
                orientation = table.orientation[slots[has]]
                if transform is not None:
                    orientation = transform.orientation(orientation)
                view = self.view.tables[table.source]
                view.orientation[out[has]] = orientation
                view.has_orientation[out[has]] = True
                changed.add(ORIENTATION)
            kwargs.update(position=position, geodetic=geodetic, velocity=velocity)
        telemetry = {
            name: (table.telemetry[name][slots], table.units[name])
            for name in fields
            if name in table.telemetry and self._keeps_field(name)
        }
        if LINKS in fields or ATTRIBUTES in fields:
            changed |= self._copy_rows(table, out, slots)
        receive_time = table.receive_time[slots]
        self.view.update(
            table.source,
            out,
            receive_time=float(np.nanmax(receive_time)),
            source_time=table.source_time[slots],
            telemetry=telemetry,
            changed=changed,
            **kwargs,
        )
        self.view.tables[table.source].receive_time[out] = receive_time  # each device's own

    def _fill(
        self, table: SourceTable, slots: SlotArray, transform: Transform
    ) -> tuple[FloatArray, FloatArray]:
        """ENU and geodetic positions, each filled from the other where a device lacks it."""
        position = transform.position(table.position[slots])
        geodetic = table.geodetic[slots].copy()
        no_geodetic = np.isnan(geodetic).any(axis=1) & ~np.isnan(position).any(axis=1)
        if no_geodetic.any():
            geodetic[no_geodetic] = transform.geodetic(position[no_geodetic])
        no_position = np.isnan(position).any(axis=1) & ~np.isnan(geodetic).any(axis=1)
        if no_position.any():
            position[no_position] = transform.enu(geodetic[no_position])
        return position, geodetic

    def _copy_rows(self, table: SourceTable, out: SlotArray, slots: SlotArray) -> set[str]:
        """Links and attributes of the devices (a loop, but only when those changed)."""
        view = self.view.tables[table.source]
        rename = self.rules.rename
        for slot, target in zip(slots.tolist(), out.tolist(), strict=True):
            view.links[target] = tuple(rename.get(link, link) for link in table.links[slot])
            view.attributes[target] = dict(table.attributes[slot])
        return {LINKS, ATTRIBUTES}

    def _log(self, world: World, event: LogEvent) -> None:
        table = world.tables.get(event.source)
        if table is not None:
            state = self._state(table)
            if not state.kept:
                return
            slot = table.index.get(event.device_id)
            if slot is not None and not state.keep[slot]:
                return
        elif self._sources is not None and not self._sources.match(event.source):
            return
        device = self.rules.rename.get(event.device_id, event.device_id)
        self.view.log(event.source, device, event.text, time=event.time, level=event.level)


class ProjectedSink(Service):
    """Runs `inner` on a view of the world that `rules` shape (see the module docstring).

    It is the sink as the gateway, the CLI and `status` see it: same name, readiness, address,
    counters. The view is fed from a latest-state subscription, so a stalled sink still holds
    at most one state per device.
    """

    role = "sink"

    def __init__(self, inner: Sink, rules: Rules) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.rules = rules
        self.stats = inner.stats
        self.announce = inner.announce
        self.view = World()
        self.projector = Projector(rules, self.view)

    @property
    def url(self) -> str | None:
        """The inner sink's clickable URL, if it has one (the web viewer)."""
        url: str | None = getattr(self.inner, "url", None)
        return url

    async def run(self, world: World) -> None:
        self.inner.gateway = self.gateway
        loop = asyncio.get_running_loop()
        inner: asyncio.Future[None] = asyncio.ensure_future(self.inner.run(self.view))
        mirror = asyncio.ensure_future(self._ready_when_inner_is())
        waiting: asyncio.Future[None] | None = None
        with world.subscribe() as changes:
            try:
                while True:
                    due = self.projector.next_due()
                    timeout = None if due is None else max(0.0, due - loop.time())
                    if waiting is None or waiting.done():
                        waiting = asyncio.ensure_future(changes.wait())
                    done, _ = await asyncio.wait(
                        {waiting, inner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                    if inner in done:
                        inner.result()  # raises what stopped the sink
                        return
                    self.projector.take(world, changes.pull(), loop.time())
            finally:
                if waiting is not None:
                    waiting.cancel()
                mirror.cancel()
                self.projector.take(world, changes.pull(), loop.time())  # what came while ending
                inner.cancel()
                await asyncio.gather(
                    *(t for t in (waiting, inner, mirror) if t is not None),
                    return_exceptions=True,
                )

    async def _ready_when_inner_is(self) -> None:
        await self.inner.ready.wait()
        if self.inner.address is not None:
            self.listening(self.inner.address)
        self.ready.set()
