"""The VSM's telemetry cache and Device_status encoder: `DeviceGroup`, devices as numpy rows.

Devices registered together (`VsmSession.register_group`, e.g. a simulated fleet) share one
field and command layout. Their values are columns (numeric as float64, NaN = NA; string-like
as objects, None = NA), with what was last sent and when, so that the session finds changes
and the 200 ms windows with array operations; `statuses` then builds one encoded
Device_status per device that has something. Which link gets what stays in the session.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import ValueKind, write_value
from robowire.protocols.ugcs.device import DeviceInfo, FieldInfo
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

__all__ = ["BoolArray", "DeviceGroup", "FloatArray", "IntArray", "ObjectArray"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
ObjectArray = npt.NDArray[np.object_]

_STRINGY = frozenset({ValueKind.STRING, ValueKind.BYTES, ValueKind.LIST, ValueKind.ANY})


class DeviceGroup:
    """Devices registered together with one field and command layout: rows are devices,
    columns are fields (`keys`, `FieldInfo.key`) and commands (`command_names`)."""

    def __init__(self, infos: Sequence[DeviceInfo]) -> None:
        if not infos:
            raise ValueError("ugcs: a device group needs at least one device")
        first = infos[0]
        layout = [f.key for f in first.fields]
        commands = [c.name for c in first.commands]
        for info in infos[1:]:
            if [f.key for f in info.fields] != layout or [
                c.name for c in info.commands
            ] != commands:
                raise ValueError("ugcs: the devices of a group must have the same layout")
        n = len(infos)
        self.infos = list(infos)
        self.device_ids: IntArray = np.array([i.device_id for i in infos], dtype=np.int64)
        self.begin: IntArray = np.array([i.begin_of_epoch for i in infos], dtype=np.int64)
        self.alive: BoolArray = np.ones(n, dtype=bool)
        self.fields: tuple[FieldInfo, ...] = first.fields
        self.keys = layout
        self.column = {key: j for j, key in enumerate(layout)}
        self.kinds = [f.kind for f in first.fields]
        self.stringy: BoolArray = np.array([k in _STRINGY for k in self.kinds], dtype=bool)
        self.string_cols: IntArray = np.flatnonzero(self.stringy).astype(np.int64)
        self.float32: BoolArray = np.array([k is ValueKind.FLOAT for k in self.kinds], dtype=bool)
        nf = len(layout)
        self.field_ids: IntArray = np.array(
            [[f.field_id for f in i.fields] for i in infos], dtype=np.int64
        ).reshape(n, nf)
        # numeric values (NaN = NA / never set) and string-like values (None = NA)
        self.cur: FloatArray = np.full((n, nf), np.nan)
        self.sent: FloatArray = np.full((n, nf), np.nan)
        self.scur: ObjectArray = np.full((n, nf), None, dtype=object)
        self.ssent: ObjectArray = np.full((n, nf), None, dtype=object)
        self.set_ms: IntArray = np.zeros((n, nf), dtype=np.int64)
        self.committed: FloatArray = np.full((n, nf), -math.inf)
        # commands
        self.command_names = commands
        self.command_column = {name: k for k, name in enumerate(commands)}
        nc = len(commands)
        self.command_ids: IntArray = np.array(
            [[c.command_id for c in i.commands] for i in infos], dtype=np.int64
        ).reshape(n, nc)
        self.available: BoolArray = np.ones((n, nc), dtype=bool)
        self.enabled: BoolArray = np.zeros((n, nc), dtype=bool)
        self.av_dirty: BoolArray = np.ones((n, nc), dtype=bool)  # the SDK sends all once
        self.messages: dict[int, list[tuple[str, int]]] = {}  # row -> queued status messages

    def __len__(self) -> int:
        return len(self.infos)

    def update(self, columns: Mapping[str, Any], wall_ms: int, rows: Any = None) -> None:
        """Set field values (wire units; NaN or None = NA) for all rows, or for `rows` (an
        index or mask). Keys not in the layout are ignored. Only changed values count as
        set (their time becomes `wall_ms`)."""
        where = slice(None) if rows is None else rows
        begin = self.begin[where]
        for key, values in columns.items():
            j = self.column.get(key)
            if j is None:
                continue
            if self.stringy[j]:
                new_s = np.asarray(values, dtype=object)
                old_s = self.scur[where, j]
                changed = np.asarray(new_s != old_s, dtype=bool)
                if changed.any():
                    col = self.scur[:, j]
                    col_rows = np.arange(len(self))[where][changed]
                    col[col_rows] = np.broadcast_to(new_s, old_s.shape)[changed]
                    self.set_ms[col_rows, j] = wall_ms - begin[changed]
                continue
            new = np.asarray(values, dtype=np.float64)
            if self.float32[j]:
                with np.errstate(over="ignore"):  # past float32: inf, as the wire carries it
                    new = new.astype(np.float32).astype(np.float64)
            old = self.cur[where, j]
            changed = ~((new == old) | (np.isnan(new) & np.isnan(old)))
            if changed.any():
                col_rows = np.arange(len(self))[where][changed]
                self.cur[col_rows, j] = np.broadcast_to(new, old.shape)[changed]
                self.set_ms[col_rows, j] = wall_ms - begin[changed]

    def set_enabled(
        self, enabled: Mapping[str, Any], available: Mapping[str, Any] | None = None
    ) -> None:
        """Command availability per row: `enabled` (usable now) and `available` (supported)."""
        for name, values in enabled.items():
            k = self.command_column.get(name)
            if k is not None:
                new = np.asarray(values, dtype=bool)
                self.av_dirty[:, k] |= new != self.enabled[:, k]
                self.enabled[:, k] = new
        for name, values in (available or {}).items():
            k = self.command_column.get(name)
            if k is not None:
                new = np.asarray(values, dtype=bool)
                self.av_dirty[:, k] |= new != self.available[:, k]
                self.available[:, k] = new

    # -- building Device_status messages ---------------------------------------------------

    def _value(self, fv: pb.Field_value, row: int, j: int) -> None:
        if self.stringy[j]:
            write_value(fv, self.scur[row, j], self.kinds[j])
            return
        x = float(self.cur[row, j])
        if math.isnan(x):
            fv.meta_value = defs.META_VALUE_NA
        elif self.kinds[j] is ValueKind.BOOL:
            fv.bool_value = x != 0.0
        elif self.kinds[j] is ValueKind.INT:
            fv.int_value = int(x)
        elif self.kinds[j] is ValueKind.DOUBLE:
            fv.double_value = x
        else:
            fv.float_value = x

    def status(
        self,
        row: int,
        columns: Iterable[int],
        commands: Iterable[int],
        messages: Sequence[tuple[str, int]] = (),
    ) -> pb.Vsm_message:
        msg = pb.Vsm_message(device_id=int(self.device_ids[row]))
        status = msg.device_status
        ids = self.field_ids[row]
        for j in columns:
            t = status.telemetry_fields.add(
                field_id=int(ids[j]), ms_since_epoch=int(self.set_ms[row, j])
            )
            self._value(t.value, row, j)
        cids = self.command_ids[row]
        for k in commands:
            status.command_availability.add(
                id=int(cids[k]),
                is_available=bool(self.available[row, k]),
                is_enabled=bool(self.enabled[row, k]),
            )
        for text, severity in messages:
            status.status_messages.append(text)
            status.messages_severity.append(defs.Severity_code.ValueType(severity))
        return msg

    def statuses(self, rows: IntArray, due: BoolArray, av: BoolArray) -> Iterator[bytes]:
        """One encoded Device_status per row of `rows`: its `due` values, its `av` commands'
        availability and its queued status messages. The cells are gathered as columns first;
        what is left per device is building its message."""
        ri, j = np.nonzero(due[rows])
        cells = rows[ri]
        field_ids = self.field_ids[cells, j].tolist()
        times = self.set_ms[cells, j].tolist()
        values = self.cur[cells, j].tolist()
        columns = j.tolist()
        bounds = np.searchsorted(ri, np.arange(len(rows) + 1)).tolist()
        ai, k = np.nonzero(av[rows])
        acells = rows[ai]
        command_ids = self.command_ids[acells, k].tolist()
        available = self.available[acells, k].tolist()
        enabled = self.enabled[acells, k].tolist()
        abounds = np.searchsorted(ai, np.arange(len(rows) + 1)).tolist()
        kinds, stringy = self.kinds, self.stringy.tolist()
        for r, row in enumerate(rows.tolist()):
            msg = pb.Vsm_message(device_id=int(self.device_ids[row]))
            status = msg.device_status
            add = status.telemetry_fields.add
            for c in range(bounds[r], bounds[r + 1]):
                fv = add(field_id=field_ids[c], ms_since_epoch=times[c]).value
                col = columns[c]
                if stringy[col]:
                    write_value(fv, self.scur[row, col], kinds[col])
                    continue
                x = values[c]
                kind = kinds[col]
                if x != x:  # NaN: not available
                    fv.meta_value = defs.META_VALUE_NA
                elif kind is ValueKind.FLOAT:
                    fv.float_value = x
                elif kind is ValueKind.DOUBLE:
                    fv.double_value = x
                elif kind is ValueKind.INT:
                    fv.int_value = int(x)
                else:
                    fv.bool_value = x != 0.0
            add_av = status.command_availability.add
            for c in range(abounds[r], abounds[r + 1]):
                add_av(id=command_ids[c], is_available=available[c], is_enabled=enabled[c])
            for text, severity in self.messages.get(row, ()):
                status.status_messages.append(text)
                status.messages_severity.append(defs.Severity_code.ValueType(severity))
            yield codec.encode(msg)

    def snapshot(self, row: int) -> pb.Vsm_message:
        """Every known (non-NA) value and every command's availability (the flush on ACK)."""
        known = ~np.isnan(self.cur[row]) & ~self.stringy
        known |= self.stringy & np.array([v is not None for v in self.scur[row]], dtype=bool)
        return self.status(row, np.flatnonzero(known).tolist(), range(len(self.command_names)))
