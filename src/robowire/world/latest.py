"""Latest-state subscribers: what changed since the last pull, pulled as its latest values.

Publishing an update only marks its slots (one vectorised write into a boolean mask per
source) and remembers which fields changed. A pull turns the marks into one `Update` per source
whose `values` are the columns' current values for the changed slots. A subscriber that is slow,
or stalled, therefore holds at most one mask per source and a bounded list of log events, never
a copy of every update: it sees fewer, fresher states.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from robowire.world.feed import ChangeFeed, Waiting
from robowire.world.table import FloatArray, SourceTable, run_of
from robowire.world.update import (
    GEODETIC,
    ORIENTATION,
    POSITION,
    SOURCE_TIME,
    VELOCITY,
    LogEvent,
    Update,
)

MAX_LOGS = 10_000  # log events held for one subscriber before the oldest are dropped
RUN_MARKS = 2048  # slots marked at once from which checking for a run pays (below, a scatter)


@dataclass(slots=True)
class _Changes:
    """What changed in one source since the last pull."""

    mask: npt.NDArray[np.bool_]
    fields: set[str] = field(default_factory=set)
    receive_time: float = float("-inf")
    any: bool = False


class LatestState(Waiting):
    """A latest-state subscriber of a world's feed (see the module docstring)."""

    def __init__(
        self,
        tables: Mapping[str, SourceTable],
        feed: ChangeFeed[Update | LogEvent],
        max_logs: int = MAX_LOGS,
    ) -> None:
        self._tables = tables
        self._feed = feed
        self._changes: dict[str, _Changes] = {}
        self._logs: deque[LogEvent] = deque(maxlen=max_logs)
        self._pending = False
        self.dropped = 0  # log events lost to the bound (state is never lost, only merged)
        feed.attach(self)

    def put(self, item: Update | LogEvent) -> None:
        if isinstance(item, Update):
            changes = self._changes.get(item.source)
            capacity = len(self._tables[item.source].receive_time)
            if changes is None:
                changes = self._changes[item.source] = _Changes(np.zeros(capacity, dtype=bool))
            elif len(changes.mask) < capacity:  # the table grew
                grown = np.zeros(capacity, dtype=bool)
                grown[: len(changes.mask)] = changes.mask
                changes.mask = grown
            slots = item.slots  # a long run is a block write (a scatter of 10,000 is ~4x that)
            changes.mask[run_of(slots) if len(slots) >= RUN_MARKS else slots] = True
            changes.fields |= item.fields
            changes.any = True
            if item.receive_time > changes.receive_time:
                changes.receive_time = item.receive_time
        else:
            if len(self._logs) == self._logs.maxlen:
                self.dropped += 1
            self._logs.append(item)
        self._pending = True
        self.notify()

    def __len__(self) -> int:
        """How many items a pull would give now."""
        return len(self._logs) + sum(1 for c in self._changes.values() if c.any)

    def pending(self) -> bool:
        """Something changed since the last pull."""
        return self._pending

    def pull(self, copy: bool = True) -> list[Update | LogEvent]:
        """Log events since the last pull, then one Update per changed source with the latest
        values of its changed slots; the marks are cleared. With `copy` False, values that are
        a run of a column are views of it, for a caller done with them before the world is
        written again (a sink that encodes them at once): one pass less over them."""
        items: list[Update | LogEvent] = list(self._logs)
        self._logs.clear()
        for source, changes in self._changes.items():
            if not changes.any:
                continue
            slots = np.flatnonzero(changes.mask)
            at = run_of(slots, increasing=True)
            changes.mask[at] = False
            items.append(
                Update(
                    source,
                    slots,
                    frozenset(changes.fields),
                    changes.receive_time,
                    _values(self._tables[source], at, changes.fields, copy),
                )
            )
            changes.fields = set()
            changes.receive_time = float("-inf")
            changes.any = False
        self._pending = False
        return items

    def close(self) -> None:
        self.closed = True
        self._feed.unsubscribe(self)
        self.notify()

    def __enter__(self) -> LatestState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _values(
    table: SourceTable, at: slice | npt.NDArray[np.intp], fields: set[str], copy: bool = True
) -> dict[str, FloatArray]:
    """The current values of the changed columns (and the source time) at `at`, copied
    (a run's views with `copy` False)."""
    columns: dict[str, FloatArray] = {
        POSITION: table.position,
        ORIENTATION: table.orientation,
        VELOCITY: table.velocity,
        GEODETIC: table.geodetic,
        SOURCE_TIME: table.source_time,
    }
    for name in fields:
        column = table.telemetry.get(name)
        if column is not None:
            columns[name] = column
    wanted = [name for name in columns if name in fields or name == SOURCE_TIME]
    if isinstance(at, slice) and copy:
        return {name: columns[name][at].copy() for name in wanted}
    return {name: columns[name][at] for name in wanted}
