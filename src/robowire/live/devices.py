"""What a live view hands out: devices by their own names, updates and VRPN events.

Plain values (frozen dataclasses, copies the caller keeps), and `Names`/`Devices`: every
device's name across the world's tables (qualified where two sources share one), read on the
loop's thread.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from robowire.world.model import Quaternion, Vector3
from robowire.world.table import FloatArray, SourceTable

__all__ = [
    "AnalogEvent",
    "ButtonEvent",
    "Device",
    "Devices",
    "DialEvent",
    "Names",
    "Reading",
    "TextEvent",
    "Update",
    "device_at",
]


class Reading(NamedTuple):
    """A telemetry value with its unit (`"m/s"`, `"deg"`, `"V"`, `"1"` for none)."""

    value: float
    unit: str


@dataclass(frozen=True, slots=True)
class Device:
    """One device as it is now: world frame ENU metres, quaternions (w, x, y, z).

    `name` is the key in `Live.devices`; `id` is its name within its `source`. `time` is when
    the source says the latest value happened (Unix seconds; the receive time where the
    protocol has no stamps). Absent quantities are None.
    """

    name: str
    source: str
    id: str
    kind: str
    position: Vector3 | None
    orientation: Quaternion | None
    velocity: Vector3 | None
    geodetic: Vector3 | None
    """latitude and longitude in degrees, altitude in metres (WGS84)"""
    telemetry: Mapping[str, Reading]
    time: float | None
    receive_time: float | None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Update:
    """Devices of one source that changed together, with the values written.

    `values` has one array per changed quantity, row i for `names[i]`: `"position"` (n, 3),
    `"orientation"` (n, 4), `"velocity"` (n, 3), `"geodetic"` (n, 3), each telemetry field
    (n,), and `"source_time"` (n,).
    """

    source: str
    names: tuple[str, ...]
    fields: frozenset[str]
    time: float
    """when robowire received it (Unix seconds)"""
    values: Mapping[str, FloatArray]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def positions(self) -> FloatArray | None:
        """(n, 3) positions written, or None if this update did not move its devices."""
        return self.values.get("position")

    @property
    def orientations(self) -> FloatArray | None:
        """(n, 4) orientations written, or None."""
        return self.values.get("orientation")


@dataclass(frozen=True, slots=True)
class ButtonEvent:
    """A VRPN button changed (`on_button`): `name` is its device (`"Button0"`), `button` its
    number, `pressed` its new state, `time` when the sender says it happened (Unix seconds)."""

    name: str
    button: int
    pressed: bool
    time: float


@dataclass(frozen=True, slots=True)
class AnalogEvent:
    """A VRPN analog report (`on_analog`): `channels[i]` is channel i's value."""

    name: str
    channels: tuple[float, ...]
    time: float


@dataclass(frozen=True, slots=True)
class DialEvent:
    """A VRPN dial turned (`on_dial`) by `delta` revolutions; `total` is every turn since the
    source connected."""

    name: str
    dial: int
    delta: float
    total: float
    time: float


@dataclass(frozen=True, slots=True)
class TextEvent:
    """A text message (`on_text`): VRPN text (`level` "info", "warning" or "error") and the
    other sources' log lines (a UgCS VSM's, a session's problems)."""

    name: str
    text: str
    level: str
    time: float


def device_at(name: str, table: SourceTable, slot: int) -> Device:
    source_time = float(table.source_time[slot])
    receive_time = float(table.receive_time[slot])
    stamp = source_time if not math.isnan(source_time) else receive_time
    return Device(
        name=name,
        source=table.source,
        id=table.ids[slot],
        kind=table.kinds[slot],
        **table.vectors_of(slot),
        telemetry={k: Reading(v, u) for k, (v, u) in table.telemetry_of(slot).items()},
        time=None if math.isnan(stamp) else stamp,
        receive_time=None if math.isnan(receive_time) else receive_time,
        attributes=dict(table.attributes[slot]),
    )


class Names:
    """Every device's name across the world's tables, rebuilt when a device appears."""

    def __init__(self, tables: Mapping[str, SourceTable]) -> None:
        self._tables = tables
        self._lock = threading.Lock()
        self._sizes: tuple[tuple[str, int], ...] = ()
        self.where: dict[str, tuple[SourceTable, int]] = {}
        self.by_source: dict[str, list[str]] = {}
        self.shared: dict[str, tuple[str, ...]] = {}

    def refresh(self) -> None:
        tables = list(self._tables.values())
        sizes = tuple((t.source, len(t.ids)) for t in tables)
        if sizes == self._sizes:
            return
        with self._lock:
            if sizes == self._sizes:
                return
            owners: dict[str, list[SourceTable]] = {}
            for table, (_, n) in zip(tables, sizes, strict=True):
                for device_id in table.ids[:n]:
                    owners.setdefault(device_id, []).append(table)
            where: dict[str, tuple[SourceTable, int]] = {}
            by_source: dict[str, list[str]] = {}
            shared: dict[str, tuple[str, ...]] = {}
            for table, (_, n) in zip(tables, sizes, strict=True):
                names = by_source[table.source] = []
                for slot, device_id in enumerate(table.ids[:n]):
                    qualified = f"{table.source}/{device_id}"
                    name = device_id if len(owners[device_id]) == 1 else qualified
                    if name != device_id:
                        shared[device_id] = (*shared.get(device_id, ()), qualified)
                    names.append(name)
                    where[name] = (table, slot)
                    where.setdefault(qualified, (table, slot))
            self.where, self.by_source, self.shared = where, by_source, shared
            self._sizes = sizes

    def name_of(self, source: str, device_id: str) -> str:
        """The name of `device_id` of `source` (qualified when another source has it too)."""
        self.refresh()
        return f"{source}/{device_id}" if device_id in self.shared else device_id

    def of(self, table: SourceTable, slots: npt.NDArray[np.intp]) -> tuple[str, ...]:
        names = self.by_source.get(table.source)
        top = int(slots.max()) if len(slots) else -1
        if names is None or top >= len(names):
            self.refresh()
            names = self.by_source[table.source]
        return tuple(names[s] for s in slots.tolist())


class Devices(Mapping[str, Device]):
    """The live devices by name (see the module docstring); each lookup reads the current
    state, on the loop's thread. `shared` maps a name two sources share to the qualified
    names they go by."""

    def __init__(self, names: Names, read: Callable[[Callable[[], Any]], Any]) -> None:
        self._names = names
        self._read = read

    @property
    def shared(self) -> Mapping[str, tuple[str, ...]]:
        self._names.refresh()
        return dict(self._names.shared)

    def __getitem__(self, name: str) -> Device:
        device: Device = self._read(lambda: self._device(name))
        return device

    def _device(self, name: str) -> Device:
        self._names.refresh()
        found = self._names.where.get(name)
        if found is None:
            shared = self._names.shared.get(name)
            if shared:
                raise KeyError(f"{name!r} is in {len(shared)} sources: use {' or '.join(shared)}")
            raise KeyError(name)
        table, slot = found
        return device_at(name, table, slot)

    def __iter__(self) -> Iterator[str]:
        self._names.refresh()
        for names in list(self._names.by_source.values()):
            yield from names

    def items(self) -> list[tuple[str, Device]]:  # type: ignore[override]
        """Every (name, device) now, built in one hop to the loop."""
        items: list[tuple[str, Device]] = self._read(
            lambda: [(name, self._device(name)) for name in self]
        )
        return items

    def values(self) -> list[Device]:  # type: ignore[override]
        """Every device now, built in one hop to the loop."""
        return [device for _, device in self.items()]

    def __len__(self) -> int:
        self._names.refresh()
        return sum(len(n) for n in self._names.by_source.values())

    def __contains__(self, name: object) -> bool:
        self._names.refresh()
        return name in self._names.where

    def __repr__(self) -> str:
        return f"<Devices {list(self)}>"
