"""What feeds a live view's readers, on the loop: `Hub` pulls the world's changes as
`Update`s; `VrpnEvents` sees each write as it happens and turns VRPN buttons, analogs, dials
and text (and every log event) into events.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence

import numpy as np

from robowire.live.devices import (
    AnalogEvent,
    ButtonEvent,
    DialEvent,
    Names,
    TextEvent,
    Update,
)
from robowire.live.fanout import Fanout
from robowire.world import LogEvent, World
from robowire.world.latest import LatestState
from robowire.world.model import Update as WorldUpdate
from robowire.world.table import SourceTable

__all__ = ["Hub", "VrpnEvents"]

log = logging.getLogger("robowire")


class Hub(Fanout[Update]):
    """On the loop: pulls what changed in the world and hands it to every outlet."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world
        self.names = Names(world.tables)
        self.count = 0  # updates so far
        self.cond = threading.Condition()  # `Live.wait` sleeps on it
        self.waiting = 0
        self.changes: LatestState | None = None
        self.wakeup: asyncio.Event | None = None  # for `AsyncLive.wait`

    async def run(self) -> None:
        subscription = self.world.subscribe()
        assert isinstance(subscription, LatestState)
        self.changes = subscription
        with subscription:
            while True:
                await subscription.wait()
                self.deliver(subscription.pull())

    def deliver(self, items: Sequence[object]) -> None:
        tables = self.world.tables
        new = 0
        for item in items:
            if not isinstance(item, WorldUpdate) or not len(item.slots):
                continue
            table = tables[item.source]
            update = Update(
                item.source,
                self.names.of(table, item.slots),
                item.fields,
                item.receive_time,
                item.values,
            )
            new += 1
            self.put(update)
        if new:
            self.count += new
            if self.wakeup is not None:
                self.wakeup.set()
            if self.waiting:
                with self.cond:
                    self.cond.notify_all()

    def finish(self) -> None:
        """The run is over: wake every waiter and end every reader."""
        if self.changes is not None:
            self.deliver(self.changes.pull())
        self.end()
        if self.wakeup is not None:
            self.wakeup.set()
        with self.cond:
            self.cond.notify_all()


# -- VRPN analogs, buttons, dials and text ----------------------------------------------------

CHANNEL, BUTTON, DIAL = "channel_", "button_", "dial_"
"""The VRPN adapter's names of a sender's fields (`channel_0`, `button_3`, ...; not imported
from it: that would load the VRPN package for every `connect`)."""


class VrpnEvents:
    """On the loop, from the first `on_button` (or analog, dial, text) callback on: attached to
    the world's feed, it sees each write as it happens (before the next one can merge it away)
    and turns what VRPN sources wrote into events, and every log event into a `TextEvent`.
    It costs the sources nothing until then, and a check of the fields written after."""

    def __init__(self, world: World, names: Names) -> None:
        self.world = world
        self.names = names
        self.analog: Fanout[AnalogEvent] = Fanout()
        self.button: Fanout[ButtonEvent] = Fanout()
        self.dial: Fanout[DialEvent] = Fanout()
        self.text: Fanout[TextEvent] = Fanout()
        self.attached = False
        self._last: dict[tuple[str, int, str], float] = {}  # button states and dial totals

    def attach(self) -> None:
        """(On the loop.) Start seeing writes; buttons and dials known so far are the state
        the first events change."""
        if self.attached:
            return
        self.attached = True
        for table in self.world.tables.values():
            if table.protocol != "vrpn":
                continue
            for field_, column in table.telemetry.items():
                if field_.startswith((BUTTON, DIAL)):
                    for slot in np.flatnonzero(~np.isnan(column[: len(table.ids)])).tolist():
                        self._last[(table.source, slot, field_)] = float(column[slot])
        self.world.feed.attach(self)

    def put(self, item: WorldUpdate | LogEvent) -> None:
        """(On the loop, inside the source's write.) Never raises into the source."""
        try:
            self._put(item)
        except Exception:
            log.exception("robowire: VRPN events of %s", getattr(item, "source", "?"))

    def _put(self, item: WorldUpdate | LogEvent) -> None:
        if isinstance(item, LogEvent):
            if self.text.outlets:
                name = self.names.name_of(item.source, item.device_id)
                self.text.put(TextEvent(name, item.text, item.level, item.time))
            return
        table = self.world.tables[item.source]
        if table.protocol != "vrpn" or not any(
            f.startswith((CHANNEL, BUTTON, DIAL)) for f in item.fields
        ):
            return
        names = self.names.of(table, item.slots)
        times = table.source_time[item.slots].tolist()
        channels = sorted((int(f[len(CHANNEL) :]), f) for f in item.fields if f.startswith(CHANNEL))
        for row, slot in enumerate(item.slots.tolist()):
            name, stamp = names[row], times[row]
            if channels and self.analog.outlets:
                values = tuple(float(table.telemetry[f][slot]) for _, f in channels)
                self.analog.put(AnalogEvent(name, values, stamp))
            for field_ in item.fields:
                if field_.startswith(BUTTON):
                    self._button(table, slot, field_, name, stamp)
                elif field_.startswith(DIAL):
                    self._dial(table, slot, field_, name, stamp)

    def _button(self, table: SourceTable, slot: int, field_: str, name: str, t: float) -> None:
        value = float(table.telemetry[field_][slot])
        key = (table.source, slot, field_)
        if self._last.get(key) != value:
            self._last[key] = value
            self.button.put(ButtonEvent(name, int(field_[len(BUTTON) :]), value != 0.0, t))

    def _dial(self, table: SourceTable, slot: int, field_: str, name: str, t: float) -> None:
        total = float(table.telemetry[field_][slot])
        key = (table.source, slot, field_)
        delta = total - self._last.get(key, 0.0)
        self._last[key] = total
        self.dial.put(DialEvent(name, int(field_[len(DIAL) :]), delta, total, t))

    def end(self) -> None:
        for fanout in (self.analog, self.button, self.dial, self.text):
            fanout.end()
