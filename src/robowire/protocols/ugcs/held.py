"""The UCS side's held telemetry as columns: a cache beside the session, not state logic.

`Held` keeps the latest value and time of every registered field of a session's devices (a
row per device and field, found by ids with numpy); `HeldView` is a device's `values` or
`times` read from it; `received` turns a `TelemetryColumns` back into the per-Device_status
`TelemetryReceived` events. `session_ucs` owns when they change.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

import numpy as np

from robowire.protocols.ugcs.codec import Kind, Value, column_value
from robowire.protocols.ugcs.device import DeviceInfo, FieldInfo
from robowire.protocols.ugcs.events import TelemetryColumns, TelemetryReceived, TelemetryValue

MISSION_KEYS = frozenset({"current_command", "current_mission_id"})
"""The fields whose values move a mission on (`Held.mission` marks their rows)."""


BY_FIELD = 1 << 20
"""Field ids below this are also found by id alone (`Held.by_field`, 4 bytes an id)."""


class HasFields(Protocol):
    """What `received` reads of a device: field id -> (registration, key, row in `Held`)."""

    @property
    def fields(self) -> Mapping[int, tuple[FieldInfo, str, int]]: ...


class Held:
    """The latest value and time of every registered field of a session's devices, as
    columns: a row per device and field, found by device id and field id (`find`, for many
    at once). `kind` is -1 for a field that has said nothing yet, else a `codec.Kind` (a
    string, bytes or list value is in `objects`)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.int64)  # device id << 32 | field id, sorted
        self.rows_of_keys = np.zeros(0, np.intp)
        self.devices = np.zeros(0, np.int64)  # registered device ids, sorted
        self.begins = np.zeros(0, np.int64)  # their begin_of_epoch
        self.kind = np.zeros(0, np.int8)
        self.number = np.zeros(0)
        self.integer = np.zeros(0, np.int64)
        self.time = np.zeros(0, np.int64)
        self.mission = np.zeros(0, bool)  # rows of current_command, current_mission_id
        self._last = np.zeros(0, np.intp)  # -1 a row (`set_many`'s scratch)
        self.device_of_row = np.full(1, -1, np.int64)  # -1: removed (and the last, a sentinel)
        self.by_field = np.full(1, -1, np.int32)  # field id -> the latest row of that id
        self.objects: dict[int, Value] = {}

    def add(self, info: DeviceInfo) -> dict[int, int]:
        """New rows for a device's fields (its old ones, if registered before, are dropped);
        returns field id -> row."""
        self.remove(info.device_id)
        first = len(self.kind)
        ids = np.array([f.field_id for f in info.fields], np.int64)
        rows = np.arange(first, first + len(ids))
        self.kind = np.concatenate((self.kind, np.full(len(ids), -1, np.int8)))
        self.number = np.concatenate((self.number, np.full(len(ids), np.nan)))
        self.integer = np.concatenate((self.integer, np.zeros(len(ids), np.int64)))
        self.time = np.concatenate((self.time, np.zeros(len(ids), np.int64)))
        self._last = np.concatenate((self._last, np.full(len(ids), -1, np.intp)))
        owner = np.full(len(ids), info.device_id, np.int64)
        self.device_of_row = np.concatenate((self.device_of_row[:-1], owner, [-1]))
        dense = ids[ids < BY_FIELD]
        if len(dense) and dense.max() >= len(self.by_field) - 1:  # the last: ids beyond
            grown = np.full(max(2 * len(self.by_field), int(dense.max()) + 2), -1, np.int32)
            grown[: len(self.by_field) - 1] = self.by_field[:-1]
            self.by_field = grown
        self.by_field[dense] = rows[ids < BY_FIELD]
        mission = np.array([f.key in MISSION_KEYS for f in info.fields], bool)
        self.mission = np.concatenate((self.mission, mission))
        keys = np.concatenate((self.keys, (info.device_id << 32) | ids))
        order = np.argsort(keys, kind="stable")
        self.keys, self.rows_of_keys = keys[order], np.concatenate((self.rows_of_keys, rows))[order]
        at = np.searchsorted(self.devices, info.device_id)
        self.devices = np.insert(self.devices, at, info.device_id)
        self.begins = np.insert(self.begins, at, info.begin_of_epoch)
        return dict(zip(ids.tolist(), rows.tolist(), strict=True))

    def remove(self, device_id: int) -> None:
        self.device_of_row[self.device_of_row == device_id] = -1
        keep = (self.keys >> 32) != device_id
        self.keys, self.rows_of_keys = self.keys[keep], self.rows_of_keys[keep]
        keep = self.devices != device_id
        self.devices, self.begins = self.devices[keep], self.begins[keep]

    def find_devices(self, device_ids: np.ndarray) -> np.ndarray:
        """The index in `devices` of each id, -1 for one not registered."""
        at = np.minimum(np.searchsorted(self.devices, device_ids), max(len(self.devices) - 1, 0))
        found = (self.devices[at] == device_ids) if len(self.devices) else np.zeros(0, bool)
        return np.where(found, at, -1) if len(self.devices) else np.full(len(device_ids), -1)

    def find(self, device_ids: np.ndarray, field_ids: np.ndarray) -> np.ndarray:
        """The row of each (device id, field id), -1 for one not registered. First by field
        id alone (`by_field`: a VSM that numbers fields across its devices gives each its
        own), checked against the row's device; the others by both ids."""
        if not len(self.keys):
            return np.full(len(device_ids), -1, np.intp)
        by_field = self.by_field
        rows: np.ndarray = by_field[np.minimum(field_ids, len(by_field) - 1)].astype(np.intp)
        good = self.device_of_row[rows] == device_ids
        if good.all():
            return rows
        other = np.flatnonzero(~good)
        keys = (device_ids[other].astype(np.int64) << 32) | field_ids[other]
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        rows[other] = np.where(self.keys[at] == keys, self.rows_of_keys[at], -1)
        return rows

    def set(self, row: int, value: Value, time_ms: int) -> None:
        """One value (as `_value` gives it)."""
        self.time[row] = time_ms
        if value is None:
            self.kind[row], self.number[row] = Kind.NONE, np.nan
        elif isinstance(value, bool):
            self.kind[row], self.integer[row], self.number[row] = Kind.BOOL, value, value
        elif isinstance(value, int):
            self.kind[row], self.integer[row], self.number[row] = Kind.INT, value, value
        elif isinstance(value, float):
            self.kind[row], self.number[row] = Kind.DOUBLE, value
        else:
            kind = Kind.STRING if isinstance(value, str) else Kind.BYTES
            self.kind[row] = Kind.LIST if isinstance(value, list) else kind
            self.number[row] = np.nan
            self.objects[row] = value

    def set_many(
        self, rows: np.ndarray, kind: np.ndarray, number: np.ndarray, integer: np.ndarray,
        time_ms: np.ndarray, objects: Mapping[int, Value],
    ) -> None:  # fmt: skip
        """Values in order (`objects`: the string and bytes ones, by index into `rows`):
        where a row comes more than once, the last one holds."""
        for i, value in objects.items():
            self.objects[int(rows[i])] = value
        if len(rows) > 1:
            order = np.arange(len(rows))
            np.maximum.at(self._last, rows, order)  # each row's last index
            last = self._last[rows] == order
            self._last[rows] = -1
            if not last.all():
                rows, kind, number, integer, time_ms = (
                    a[last] for a in (rows, kind, number, integer, time_ms)
                )
        self.kind[rows], self.number[rows], self.integer[rows] = kind, number, integer
        self.time[rows] = time_ms

    def get(self, row: int) -> Value:
        kind = int(self.kind[row])
        return column_value(kind, self.integer[row], self.number[row], self.objects.get(row))


class HeldView(Mapping[str, Value]):
    """A device's held values (or their times) by field key, read from its `Held` rows
    (`fields`: the device's field id -> (registration, key, row))."""

    __slots__ = ("_held", "_rows", "_times")

    def __init__(
        self, held: Held, fields: Mapping[int, tuple[FieldInfo, str, int]], *, times: bool
    ) -> None:
        self._held = held
        self._rows = {key: row for _, key, row in fields.values()}
        self._times = times

    def __getitem__(self, key: str) -> Value:
        row = self._rows[key]
        if self._held.kind[row] < 0:
            raise KeyError(key)
        return int(self._held.time[row]) if self._times else self._held.get(row)

    def __iter__(self) -> Iterator[str]:
        kind = self._held.kind
        return (key for key, row in self._rows.items() if kind[row] >= 0)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def received(
    columns: TelemetryColumns, devices: Mapping[int, HasFields]
) -> list[TelemetryReceived]:
    """`columns` as the `TelemetryReceived` events its frames would have given one message
    at a time (`UcsSession.received`); `devices`: the session's, by device id."""
    out: list[TelemetryReceived] = []
    frames = columns.frame.tolist()
    starts = [i for i in range(len(frames)) if not i or frames[i] != frames[i - 1]]
    for start, stop in zip(starts, [*starts[1:], len(frames)], strict=True):
        device_id = int(columns.device_id[start])
        device = devices.get(device_id)
        fields = {} if device is None else device.fields
        values = []
        for i in range(start, stop):
            field_id = int(columns.field_id[i])
            found = fields.get(field_id)
            value = column_value(
                int(columns.kind[i]), columns.integer[i], columns.number[i], columns.objects.get(i)
            )
            info = None if found is None else found[0]
            values.append(TelemetryValue(field_id, info, int(columns.time_ms[i]), value))
        events_values = tuple(values)
        out.append(TelemetryReceived(conn=columns.conn, device_id=device_id, values=events_values))
    return out
