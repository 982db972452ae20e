"""A source's links as the viewer sends them: pairs of slots, each pair once, in order.

A SpyGlass network of 1,000 nodes has some 175,000 links, and each is a neighbour's id to
find the slot of: 50-90 ms of a busy gateway's loop at once. `LinkPass` does it a part at a
time (`ENTRIES` links a step, the viewer's writes come ten times a second), so that the loop
goes round in between.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from robowire.world.table import SourceTable

ENTRIES = 20_000  # links resolved per step (a few ms)
DENSE = 4096  # devices of a source up to which pairs are told apart in a table of
# count x count flags (16 MiB at most) rather than sorted (slower)


class LinkPass:
    """One source's links, resolved a part at a time (`step`), then `pairs()`."""

    def __init__(self, table: SourceTable) -> None:
        self._begin(table)

    def _begin(self, table: SourceTable) -> None:
        self.count = len(table)  # devices when the pass began (keys are numbered by it)
        self._next = 0  # the first slot not resolved yet
        self._keys: list[np.ndarray[Any, Any]] = []

    def step(self, table: SourceTable, entries: int | None = ENTRIES) -> bool:
        """Resolve the next slots' links, about `entries` of them (None: all); True once every
        slot's are. A source that has new devices meanwhile is begun again."""
        if len(table) != self.count:
            self._begin(table)
        count, links = self.count, table.links
        start = stop = self._next
        taken = 0
        while stop < count and (entries is None or taken < entries):
            taken += len(links[stop])
            stop += 1
        part = links[start:stop]
        per_slot = np.fromiter(map(len, part), dtype=np.intp, count=len(part))
        peers = np.fromiter(  # the neighbours' slots (-1: not a device of this source)
            map(table.index.get, itertools.chain.from_iterable(part), itertools.repeat(-1)),
            dtype=np.intp,
            count=taken,
        )
        slots = np.repeat(np.arange(start, stop, dtype=np.intp), per_slot)
        keep = (peers >= 0) & (peers != slots)
        low, high = np.minimum(slots, peers)[keep], np.maximum(slots, peers)[keep]
        self._keys.append(low * count + high)
        self._next = stop
        return stop >= count

    def pairs(self) -> np.ndarray[Any, Any]:
        """The (n, 2) array of linked slots, lower first, each pair once, in order."""
        count = self.count
        keys = np.concatenate(self._keys) if self._keys else np.empty(0, dtype=np.intp)
        if count <= DENSE:
            marked = np.zeros(count * count, dtype=bool)
            marked[keys] = True
            keys = np.flatnonzero(marked)
        else:
            keys = np.sort(keys)
            keys = keys[np.flatnonzero(np.diff(keys, prepend=-1))]
        return np.stack(np.divmod(keys, count), axis=1)


def link_pairs(table: SourceTable) -> np.ndarray[Any, Any]:
    """Every link of `table` as pairs at once (see `LinkPass.pairs`)."""
    whole = LinkPass(table)
    whole.step(table, None)
    return whole.pairs()
