"""World updates as JSON-ready rows (what `listen --json` prints and recordings hold), built
from the columns: each column is read for all of an update's slots at once and turned into
Python lists once; no `Device` view is built per row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from robowire.world.model import GEODETIC, ORIENTATION, POSITION, SOURCE_TIME, VELOCITY, Update
from robowire.world.table import SourceTable

VECTORS = (POSITION, ORIENTATION, VELOCITY, GEODETIC)


def _vectors(table: SourceTable, update: Update, name: str) -> list[Any]:
    """Rows of one vector column: the update's own values where it has them (as written),
    the table's otherwise (rounded to 9 digits, as a device view shows them); None if absent."""
    slots = update.slots
    own = update.values.get(name)
    data = own if own is not None else np.round(getattr(table, name)[slots], 9)
    absent = np.isnan(data).any(axis=1)
    if name == ORIENTATION:
        absent |= ~table.has_orientation[slots]
    rows: list[Any] = data.tolist()
    if absent.any():
        for row in np.flatnonzero(absent).tolist():
            rows[row] = None
    return rows


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
        line["changed"] = changed
        yield line
