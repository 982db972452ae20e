"""World updates as JSON-ready rows (what `listen --json` prints and recordings hold), built
from the columns: each column is read for all of an update's slots at once and turned into
Python lists once; no `Device` view is built per row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from robowire.world.table import SourceTable
from robowire.world.update import GEODETIC, ORIENTATION, POSITION, SOURCE_TIME, VELOCITY, Update

VECTORS = (POSITION, ORIENTATION, VELOCITY, GEODETIC)


def _vectors(table: SourceTable, update: Update, name: str) -> list[Any]:
    """Rows of one vector column: the update's own values where it has them, the table's
    otherwise; None if absent. Both as stored, never rounded: a row that did not write a
    field prints it exactly as the row that wrote it did (a device view rounds to 9 digits;
    a line of `listen --json` is a log, where one number must always print the same)."""
    slots = update.slots
    own = update.values.get(name)
    data = own if own is not None else getattr(table, name)[slots]
    absent = np.isnan(data).any(axis=1)
    if name == ORIENTATION:
        absent |= ~table.has_orientation[slots]
    rows: list[Any] = data.tolist()
    if absent.any():
        for row in np.flatnonzero(absent).tolist():
            rows[row] = None
    return rows


def _changed_per_row(
    table: SourceTable, update: Update, changed: list[str]
) -> list[list[str]] | None:
    """A telemetry field an update wrote as NaN for some of its devices (a payload they do not
    have) did not change for those: their rows get a `changed` list without it. None when every
    row shares `changed`. Rows are grouped by which fields they lack (a few patterns, e.g. one
    per VRSP definition), so the cost is per pattern, not per row."""
    partial = [
        (name, np.isnan(update.values.get(name, table.telemetry[name][update.slots])))
        for name in changed
        if name in table.telemetry
    ]
    partial = [(name, absent) for name, absent in partial if absent.any()]
    if not partial:
        return None
    absent = np.stack([mask for _, mask in partial], axis=1)  # (rows, fields)
    patterns, which = np.unique(absent, axis=0, return_inverse=True)
    lists = []
    for pattern in patterns:
        lacking = {partial[k][0] for k in np.flatnonzero(pattern).tolist()}
        lists.append([name for name in changed if name not in lacking])
    return [lists[i] for i in which.reshape(-1).tolist()]


def update_rows(table: SourceTable, update: Update) -> Iterator[dict[str, Any]]:
    """One JSON-ready dict per device of `update` (see the module docstring)."""
    slots = update.slots
    index = slots.tolist()
    vectors = [(name, _vectors(table, update, name)) for name in VECTORS]
    telemetry = [
        (name, table.units[name], update.values.get(name, column[slots]).tolist())
        for name, column in table.telemetry.items()
    ]
    times = update.values.get(SOURCE_TIME)
    source_times = (times if times is not None else table.source_time[slots]).tolist()
    changed = sorted(update.fields)
    changes = _changed_per_row(table, update, changed)
    ids, kinds, names = table.ids, table.kinds, table.names
    links, attributes = table.links, table.attributes
    for row, slot in enumerate(index):
        device = ids[slot]
        line: dict[str, Any] = {"source": update.source, "device": device, "kind": kinds[slot]}
        if names[slot] != device:
            line["name"] = names[slot]
        for name, values in vectors:
            if values[row] is not None:
                line[name] = values[row]
        fields = {
            name: {"value": values[row], "unit": unit}
            for name, unit, values in telemetry
            if values[row] == values[row]  # NaN is never equal to itself: absent
        }
        if fields:
            line["telemetry"] = fields
        if attributes[slot]:
            line["attributes"] = dict(attributes[slot])
        if links[slot]:
            line["links"] = list(links[slot])
        if source_times[row] == source_times[row]:
            line["source_time"] = source_times[row]
        line["receive_time"] = update.receive_time
        line["changed"] = changed if changes is None else changes[row]
        yield line
