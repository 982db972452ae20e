"""What the world's change feed carries, and the column names: the leaf of `robowire.world`.

`model` (the `World`), `latest` (latest-state subscribers) and `rows` (JSON rows) all build on
these types, so they live apart from each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from robowire.world.table import FloatArray, SlotArray

# Field names used in Update.fields for the non-telemetry columns.
POSITION = "position"
ORIENTATION = "orientation"
VELOCITY = "velocity"
GEODETIC = "geodetic"
LINKS = "links"
SOURCE_TIME = "source_time"
ATTRIBUTES = "attributes"


@dataclass(frozen=True, slots=True)
class Update:
    """Some devices of one source changed. `fields` names what changed.

    `values` holds a copy of what was written, row i for `slots[i]` (position (n,3), orientation
    (n,4), velocity (n,3), geodetic (n,3), each telemetry field (n,), "source_time" (n,)), so a
    subscriber that falls behind still sees each update's own values, not only the latest state.
    """

    source: str
    slots: SlotArray
    fields: frozenset[str]
    receive_time: float
    values: Mapping[str, FloatArray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.slots)


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A text message from a source (VRPN text, a UgCS log line, a session problem)."""

    source: str
    device_id: str
    text: str
    level: str
    time: float


ARRAY_BYTES = 180  # what a small numpy array and its dict entry hold besides their data
# (measured with tracemalloc: a one-robot update of 31 columns holds 6.1 kB, not its 0.5 kB of
# data; counting only the data let a 64 MiB queue of them hold 13 times that)


def update_size(item: Update | LogEvent) -> int:
    """About what a queued feed item holds, in bytes (for queues bounded in bytes)."""
    if isinstance(item, LogEvent):
        return 200 + len(item.text)
    columns = item.values.values()
    data = item.slots.nbytes + sum(v.nbytes for v in columns)
    return 200 + ARRAY_BYTES * (1 + len(columns)) + data
