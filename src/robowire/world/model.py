"""The live world model: every source's devices in one ENU frame, plus a change feed.

Frame: ENU (x East, y North, z Up), right-handed, metres; orientations are unit quaternions
(w, x, y, z) rotating body axes into ENU. Adapters convert each protocol's frame into this one.

Writers call `World.update` (vectorised over slots) or `World.update_device` (one device);
every write publishes one `Update` on `World.feed`. Readers build `Device` views on demand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robowire.world.feed import DEFAULT_BYTES, ChangeFeed, Subscription
from robowire.world.latest import LatestState
from robowire.world.rows import update_rows
from robowire.world.table import FloatArray, SlotArray, SourceTable, run_of
from robowire.world.update import (
    ATTRIBUTES,
    GEODETIC,
    LINKS,
    ORIENTATION,
    POSITION,
    SOURCE_TIME,
    VELOCITY,
    LogEvent,
    Update,
    update_size,
)

__all__ = [  # the column names, Update and LogEvent live in world/update.py (a leaf)
    "ATTRIBUTES",
    "GEODETIC",
    "LINKS",
    "ORIENTATION",
    "POSITION",
    "SOURCE_TIME",
    "VELOCITY",
    "Device",
    "LogEvent",
    "Update",
    "World",
]

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Device:
    """A read-only view of one device, built from the columns when asked for."""

    source: str
    device_id: str
    kind: str
    name: str
    position: Vector3 | None
    orientation: Quaternion | None
    velocity: Vector3 | None
    geodetic: Vector3 | None
    telemetry: Mapping[str, tuple[float, str]]
    attributes: Mapping[str, Any]
    links: tuple[str, ...]
    source_time: float | None
    receive_time: float | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.device_id)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; absent quantities are left out."""
        out: dict[str, Any] = {"source": self.source, "device": self.device_id, "kind": self.kind}
        if self.name != self.device_id:
            out["name"] = self.name
        for key in ("position", "orientation", "velocity", "geodetic"):
            value = getattr(self, key)
            if value is not None:
                out[key] = [round(v, 9) for v in value]
        if self.telemetry:
            out["telemetry"] = {k: {"value": v, "unit": u} for k, (v, u) in self.telemetry.items()}
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        if self.links:
            out["links"] = list(self.links)
        if self.source_time is not None:
            out["source_time"] = self.source_time
        if self.receive_time is not None:
            out["receive_time"] = self.receive_time
        return out


def _vector(row: np.ndarray) -> Any:
    if np.isnan(row).any():
        return None
    return tuple(float(v) for v in row)


def _optional(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _written(
    table: SourceTable, index: slice | SlotArray, fields: set[str], timed: bool
) -> dict[str, FloatArray]:
    """Copies of what an update wrote, for the subscribers that queue every update."""
    columns = {
        POSITION: table.position,
        ORIENTATION: table.orientation,
        VELOCITY: table.velocity,
        GEODETIC: table.geodetic,
        **table.telemetry,
    }
    if timed:
        columns[SOURCE_TIME] = table.source_time
        fields = fields | {SOURCE_TIME}
    if isinstance(index, slice):  # a view: copied, as a gather would have
        return {name: columns[name][index].copy() for name in fields if name in columns}
    return {name: columns[name][index] for name in fields if name in columns}


@dataclass
class World:
    """All sources' tables and the feed of their changes."""

    tables: dict[str, SourceTable] = field(default_factory=dict)
    feed: ChangeFeed[Update | LogEvent] = field(default_factory=lambda: ChangeFeed(update_size))

    # -- writing -----------------------------------------------------------------------------

    def table(self, source: str) -> SourceTable:
        """The table of `source`, created empty on first use."""
        table = self.tables.get(source)
        if table is None:
            table = self.tables[source] = SourceTable(source)
        return table

    def update(
        self,
        source: str,
        slots: SlotArray | Sequence[int],
        *,
        receive_time: float,
        source_time: FloatArray | float | None = None,
        position: FloatArray | None = None,
        orientation: FloatArray | None = None,
        velocity: FloatArray | None = None,
        geodetic: FloatArray | None = None,
        telemetry: Mapping[str, tuple[FloatArray | float, str]] | None = None,
        changed: Iterable[str] = (),
    ) -> Update:
        """Write columns for `slots` of `source` (arrays shaped (len(slots), k)) and publish.

        `changed` names fields the caller already wrote into the table itself (links, attributes).
        """
        table = self.tables.get(source) or self.table(source)
        index = slots if isinstance(slots, np.ndarray) else np.asarray(slots, dtype=np.intp)
        at = run_of(index)  # what the columns are written at
        fields: set[str] = set(changed)
        if position is not None:
            table.position[at] = position
            fields.add(POSITION)
        if orientation is not None:
            table.orientation[at] = orientation
            table.has_orientation[at] = True
            fields.add(ORIENTATION)
        if velocity is not None:
            table.velocity[at] = velocity
            fields.add(VELOCITY)
        if geodetic is not None:
            table.geodetic[at] = geodetic
            fields.add(GEODETIC)
        if telemetry:
            for name, (values, unit) in telemetry.items():
                table.column(name, unit)[at] = values
                fields.add(name)
        if source_time is not None:
            table.source_time[at] = source_time
        table.receive_time[at] = receive_time
        # only queue subscribers (the recorder) need each update's own values: copy them then
        written = _written(table, at, fields, source_time is not None) if self.feed.queues else {}
        update = Update(source, index, frozenset(fields), receive_time, written)
        self.feed.publish(update)
        return update

    def subscribe(
        self, *, every_update: bool = False, max_bytes: int = DEFAULT_BYTES
    ) -> LatestState | Subscription[Update | LogEvent]:
        """A latest-state subscriber (the default), or with `every_update` a queue of every
        update bounded at `max_bytes` (its drops counted)."""
        if every_update:
            return self.feed.subscribe(maxlen=1 << 30, max_bytes=max_bytes)
        return LatestState(self.tables, self.feed)

    def update_device(
        self,
        source: str,
        device_id: str,
        *,
        receive_time: float,
        kind: str = "device",
        name: str | None = None,
        source_time: float | None = None,
        position: Sequence[float] | None = None,
        orientation: Sequence[float] | None = None,
        velocity: Sequence[float] | None = None,
        geodetic: Sequence[float] | None = None,
        telemetry: Mapping[str, tuple[float, str]] | None = None,
        attributes: Mapping[str, Any] | None = None,
        links: Iterable[str] | None = None,
    ) -> Update:
        """Write one device (creating it if new) and publish; the convenient, slower path."""
        table = self.table(source)
        slot = table.slot(device_id, kind, name)
        if name is not None:
            table.names[slot] = name
        fields: set[str] = set()
        if attributes:
            table.attributes[slot].update(attributes)
            fields.add(ATTRIBUTES)
        if links is not None:
            table.links[slot] = tuple(links)
            fields.add(LINKS)

        def row(values: Sequence[float] | None) -> FloatArray | None:
            return None if values is None else np.asarray(values, dtype=np.float64)[None, :]

        return self.update(
            source,
            np.array([slot], dtype=np.intp),
            receive_time=receive_time,
            source_time=source_time,
            position=row(position),
            orientation=row(orientation),
            velocity=row(velocity),
            geodetic=row(geodetic),
            telemetry=telemetry,
            changed=fields,
        )

    def set_links(
        self,
        source: str,
        device_id: str,
        links: Iterable[str],
        *,
        receive_time: float,
        kind: str = "device",
    ) -> Update:
        """Replace the neighbour links of one device (ids of devices of the same source)."""
        return self.update_device(
            source, device_id, receive_time=receive_time, kind=kind, links=links
        )

    def log(
        self, source: str, device_id: str, text: str, *, time: float, level: str = "info"
    ) -> LogEvent:
        event = LogEvent(source, device_id, text, level, time)
        self.feed.publish(event)
        return event

    # -- reading -----------------------------------------------------------------------------

    def device(self, source: str, device_id: str) -> Device:
        table = self.tables[source]
        return self._view(table, table.index[device_id])

    def devices(self, source: str | None = None) -> Iterator[Device]:
        tables = [self.tables[source]] if source is not None else list(self.tables.values())
        for table in tables:
            for slot in range(len(table)):
                yield self._view(table, slot)

    def devices_of(self, update: Update) -> Iterator[Device]:
        """The current views of the devices an update touched."""
        table = self.tables[update.source]
        for slot in update.slots:
            yield self._view(table, int(slot))

    def update_json(self, update: Update) -> Iterator[dict[str, Any]]:
        """One JSON-ready dict per device of an update, with the values that update wrote."""
        return update_rows(self.tables[update.source], update)

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables.values())

    @staticmethod
    def _view(table: SourceTable, slot: int) -> Device:
        return Device(
            source=table.source,
            device_id=table.ids[slot],
            kind=table.kinds[slot],
            name=table.names[slot],
            position=_vector(table.position[slot]),
            orientation=_vector(table.orientation[slot]) if table.has_orientation[slot] else None,
            velocity=_vector(table.velocity[slot]),
            geodetic=_vector(table.geodetic[slot]),
            telemetry=table.telemetry_of(slot),
            attributes=dict(table.attributes[slot]),
            links=table.links[slot],
            source_time=_optional(float(table.source_time[slot])),
            receive_time=_optional(float(table.receive_time[slot])),
        )
