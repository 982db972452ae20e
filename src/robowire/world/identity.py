"""Native identity: which name each device goes out under on a sink's wire.

A source of protocol P writes device ids that are P's own names (a VRPN `Tracker0/0`, a UgCS
serial, a VRSP drone id, a SpyGlass node id), and its table remembers P
(`SourceTable.protocol`). A sink of protocol P sends such a device under that id unchanged, so a
relay P -> P is transparent: a client configured for the original names sees them. Devices from
elsewhere get the sink's documented mapping (`foreign`). Two devices never share a name on one
wire: the first to be seen keeps it, and a later one is qualified with its source
(`source/device`, mapped again by `foreign`), said once in the log; a site file's `rename`
chooses another name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from robowire.world.table import SlotArray, SourceTable

log = logging.getLogger(__name__)


def keep(device_id: str) -> str:
    """The mapping of a sink whose wire takes any name as it is."""
    return device_id


class SinkNames:
    """The names a sink of `protocol` gives the world's devices, fixed once a device is seen.

    `foreign(name)` maps a name that is not native to this wire (a device of another protocol,
    or a qualified `source/device`) onto the names the wire allows; it should be one to one on
    the names it is given. Lookups are cached per source and slot, so a hot path pays one list
    index per device once the names are known.
    """

    def __init__(
        self, protocol: str, foreign: Callable[[str], str] = keep, *, where: str = ""
    ) -> None:
        self.protocol = protocol
        self.foreign = foreign
        self.where = where or f"{protocol} sink"
        self._by_source: dict[str, list[str]] = {}
        self._owner: dict[str, tuple[str, str]] = {}  # name -> (source, device id)

    def native(self, table: SourceTable) -> bool:
        """Whether `table`'s device ids are this wire's own names."""
        return table.protocol == self.protocol

    def taken(self, name: str) -> bool:
        """Whether a device already goes out as `name` (for a `foreign` that picks free names)."""
        return name in self._owner

    def name(self, table: SourceTable, slot: int) -> str:
        """The name of `table`'s device in `slot` on this wire."""
        known = self._by_source.get(table.source)
        if known is not None and slot < len(known):
            return known[slot]
        return self.names(table, [slot])[0]

    def names(self, table: SourceTable, slots: Sequence[int] | SlotArray) -> list[str]:
        """The names of `table`'s devices in `slots` on this wire (new ones named now)."""
        known = self._by_source.setdefault(table.source, [])
        top = int(np.max(slots)) + 1 if len(slots) else 0
        while len(known) < min(top, len(table.ids)):
            known.append(self._new(table, len(known)))
        return [known[int(s)] for s in slots]

    def _new(self, table: SourceTable, slot: int) -> str:
        device_id = table.ids[slot]
        key = (table.source, device_id)
        wanted = device_id if self.native(table) else self.foreign(device_id)
        owner = self._owner.setdefault(wanted, key)
        if owner == key:
            return wanted
        qualified = self.foreign(f"{table.source}/{device_id}")
        log.warning(
            "%s: %s of %s and %s of %s would both be %r; the second goes out as %r "
            "(a site file's rename chooses another name)",
            self.where,
            owner[1],
            owner[0],
            device_id,
            table.source,
            wanted,
            qualified,
        )
        self._owner.setdefault(qualified, key)
        return qualified
