"""Native identity: which name each device goes out under on a sink's wire.

A source of protocol P writes device ids that are P's own names (a VRPN `Tracker0/0`, a UgCS
serial, a VRSP drone id, a SpyGlass node id), and its table remembers P
(`SourceTable.protocol`). A sink of protocol P sends such a device under that id unchanged, so a
relay P -> P is transparent: a client configured for the original names sees them. Devices from
elsewhere get the sink's documented mapping (`foreign`). Two devices never share a name on one
wire: the first to be seen keeps it, and a later one is qualified with its source
(`source/device`, mapped again by `foreign`), said once in the log; a site file's `rename`
chooses another name.

Where one name on the wire holds several devices (a VRPN sender and its sensors, `Tracker0/0`
and `Tracker0/1`), `split` cuts a native id into that name and the rest: the name is what
collides and what is qualified, the rest is kept, so a sender's devices stay together.
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


def whole(device_id: str) -> tuple[str, str]:
    """The split of a wire on which each device has a name of its own."""
    return device_id, ""


class SinkNames:
    """The names a sink of `protocol` gives the world's devices, fixed once a device is seen.

    `foreign(name)` maps a name that is not native to this wire (a device of another protocol,
    or a qualified `source/device`) onto the names the wire allows; it should be one to one on
    the names it is given. `split(device_id)` gives a native id's (name on the wire, rest): the
    device goes out as name + rest, and two sources collide when they want the same name.
    Lookups are cached per source and slot, so a hot path pays one list index per device once
    the names are known.
    """

    def __init__(
        self,
        protocol: str,
        foreign: Callable[[str], str] = keep,
        *,
        where: str = "",
        split: Callable[[str], tuple[str, str]] = whole,
    ) -> None:
        self.protocol = protocol
        self.foreign = foreign
        self.split = split
        self.where = where or f"{protocol} sink"
        self._by_source: dict[str, list[str]] = {}
        self._by_id: dict[tuple[str, str], str] = {}  # (source, device id) -> name
        self._owner: dict[str, tuple[str, str]] = {}  # name -> (source, its id or head)

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
            known.append(self.name_of(table, table.ids[len(known)]))
        return [known[int(s)] for s in slots]

    def name_of(self, table: SourceTable, device_id: str) -> str:
        """The name of `table`'s device `device_id` on this wire, also for an id the table
        does not hold (the sender of a log event)."""
        found = self._by_id.get((table.source, device_id))
        if found is not None:
            return found
        if self.native(table):
            head, rest = self.split(device_id)
            wanted = head
        else:
            head, rest, wanted = device_id, "", self.foreign(device_id)
        key = (table.source, head)
        owner = self._owner.setdefault(wanted, key)
        if owner != key:
            qualified = self.foreign(f"{table.source}/{head}")
            if qualified not in self._owner:  # said once per name, for all its devices
                self._owner[qualified] = key
                log.warning(
                    "%s: %s of %s and %s of %s would both be %r; the second goes out as %r "
                    "(a site file's rename chooses another name)",
                    self.where,
                    owner[1],
                    owner[0],
                    head,
                    table.source,
                    wanted,
                    qualified,
                )
            wanted = qualified
        name = self._by_id[(table.source, device_id)] = wanted + rest
        return name
