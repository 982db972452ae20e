"""The overload policy, once for every source and sink (the arithmetic is pure: time is an
argument; `pressure()` is the one timer).

A gateway on a busy machine cannot always keep up. The policy (docs/architecture.md, "Overload"):

* **Nothing is shed while the gateway keeps up.** Whether it does is measured, once
  per event loop (`pressure()`): a timer every `PROBE` seconds, and how late it runs. The loop
  is `behind` once its probe ran late for at least `LATE_SHARE` of the last `WINDOW` seconds
  or so (a time-weighted mean: a loop with more to do than time, whose turns are long, or a
  process the machine cannot give its share; one stall shorter than about half of `WINDOW`
  is not enough), and stays behind until that share was under half as much for `CALM`
  seconds (shedding makes it keep up: it does not stop at once for that).
  Only while it is behind do the budgets below apply.
* **Sessions see every byte at once.** The drivers read what the kernel queued and feed it to
  the session in the same wake-up, so keep-alives are answered, pings are timed and commands
  go out on time whatever the load. Only what follows, the world writes, is budgeted.
* **A source's world writes have a `Budget`** while the loop is behind: a share of wall time,
  with a burst, and at most one write every `INTERVAL`. While a source has credit its events
  are applied as they come; once it has spent its credit its events wait (`Held`, in order)
  until the credit is back, and then go in (a turn at a time, below). While they wait, a
  state report (`Report`) is shed as soon as a newer one covering the same comes, and
  counted: a busy gateway shows fewer, fresher states. What waits is bounded in events
  (`MAX_PENDING`) and, for a source whose events are big (a Zenoh frame), in bytes
  (`MAX_PENDING_BYTES`): past either, the oldest go in at once, as many as it is over by
  (`Held.overflow`; a delivery that overflows it writes about as much as it brought).
* **A delivery is a turn at a time**, as a sink's is: events that would take longer than a
  turn (`Turns`, by their measured cost per event) are written a slice at a time until
  `SINK_TURN` seconds have gone (`CALM_TURN` while the loop keeps up), and the rest when the
  loop has gone round (behind: and the credit is back), so that no source's burst or backlog
  holds the viewer or a keep-alive for longer than a sink's turn. What comes while a backlog
  waits joins it, and sheds the reports it makes stale, as while behind.
* **A sink's turn is bounded** (`Turns`): a sink that takes every update (the recorder) is
  handed its queue a slice at a time (`SLICE` seconds of writing, by its measured costs)
  until its turn is `SINK_TURN` seconds old while the loop is behind (`CALM_TURN` while it
  keeps up: a backlog left by a busy spell does not hold the loop for long either), then the
  loop goes round, so that neither ingest nor one output can hold the others off; while
  behind, its turns also take at most `SINK_SHARE` of wall time (a `Budget`). What it cannot
  take waits in its bounded queue, whose oldest updates are dropped and counted.
* **No read holds the loop long**: a TCP read is at most `READ_SIZE` bytes
  (`transport.tcp`), a UDP wake-up at most its driver's batch of datagrams; what is left is
  read when the loop comes round.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from robowire.timebase import monotonic
from robowire.wire import Report

T = TypeVar("T")

SHARE = 0.15  # of wall time one source's world writes may take, sustained
BURST = 0.020  # seconds of world writes a source may do at once before its share applies
MAX_WAIT = 1.0  # seconds a source waits at most for its next write, however costly its last
# (one big batch must not silence a source for seconds: its readers would see it stop)
INTERVAL = 0.1  # seconds between one source's world writes, at least (10 a second: what a
# viewer at its 10 frames/s floor shows; fifty XRP robots at 50 Hz each cost little alone,
# a lot together)
SINK_TURN = 0.005  # seconds a sink's or a source's turn takes while the loop is behind (one
# item at least): a command waits for every turn of a loop's round (10 ms turns: the soak's
# commands at a p99 of 100-117 ms, 5 ms: 77 ms)
CALM_TURN = 0.005  # seconds a turn takes at most while it keeps up (a backlog left by a busy
# spell must not hold a command or a keep-alive for longer than that either)
SLICE = 0.002  # seconds of writing a sink is handed at once; the clock is read between slices
SINK_SHARE = 0.25  # of wall time the turns of one sink that takes every update take, behind
SMOOTHING = 0.2  # weight of the newest measurement in a cost per item
PROBE = 0.025  # seconds between the loop-lag probe's timers
LATE_SHARE = 0.5  # of its recent time the probe ran late: the loop is behind
WINDOW = 2.0  # seconds the late share is a mean over (time-weighted)
CALM = 2.0  # seconds with the late share under half of LATE_SHARE: it has caught up

log = logging.getLogger("robowire")


@dataclass(slots=True)
class Pressure:
    """Whether an event loop is behind, from how late its probe timer runs (pure: `probed`
    is given the times; see the module docstring)."""

    late: float = 0.0  # the share of recent time the probe ran late (a time-weighted mean)
    until: float = -math.inf  # behind until then (monotonic seconds)
    entered: int = 0  # times it fell behind (for tests and the log)

    def probed(self, now: float, lag: float) -> None:
        """A probe ran at `now`, `lag` seconds after it was due (`PROBE` after the last)."""
        was = self.behind(now)
        span = PROBE + lag  # the time since the last probe, of which `lag` late
        self.late += min(1.0, span / WINDOW) * (lag / span - self.late)
        if self.late >= LATE_SHARE or (was and self.late >= LATE_SHARE / 2):
            self.until = now + CALM
            if not was:
                self.entered += 1
                log.info("gateway behind (its loop ran %.0f%% late): shedding", 100 * self.late)

    def behind(self, now: float) -> bool:
        return now < self.until


class _Probe:
    """`pressure()`'s timer chain on one loop (holds no reference to the loop)."""

    def __init__(self) -> None:
        self.pressure = Pressure()
        self.due = monotonic() + PROBE
        asyncio.get_running_loop().call_later(PROBE, self.fire)

    def fire(self) -> None:
        now = monotonic()
        self.pressure.probed(now, max(0.0, now - self.due))
        self.due = now + PROBE
        asyncio.get_running_loop().call_later(PROBE, self.fire)


_probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Probe] = weakref.WeakKeyDictionary()


def pressure() -> Pressure:
    """The running loop's `Pressure` (its probe starts with the first call on a loop)."""
    loop = asyncio.get_running_loop()
    probe = _probes.get(loop)
    if probe is None:
        probe = _probes[loop] = _Probe()
    return probe.pressure


@dataclass(slots=True)
class Budget:
    """A token bucket of seconds: `credit` grows at `share` seconds per second up to `burst`;
    what a source spends writing is taken off it, and may take it below zero (a turn is
    never cut), but never so far that the next write waits more than `MAX_WAIT`. And writes
    at least `interval` seconds apart. `wait(now)` says how long until
    both allow the next one."""

    share: float = SHARE
    burst: float = BURST
    interval: float = INTERVAL
    credit: float = BURST
    shed: int = 0  # state reports shed, for the status
    _at: float | None = None  # when credit was last brought up to date
    _last: float = -math.inf  # when the last write began

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self.credit = min(self.burst, self.credit + (now - self._at) * self.share)
        self._at = now if self._at is None else max(self._at, now)

    def wait(self, now: float) -> float:
        """Seconds from `now` until the next write (0: write now)."""
        self._refill(now)
        credit = 0.0 if self.credit > 0 else -self.credit / self.share
        return max(credit, self._last + self.interval - now)

    def spend(self, now: float, seconds: float) -> None:
        """A delivery that began at `now` took `seconds`."""
        self._refill(now)
        self.credit = max(self.credit - seconds, -MAX_WAIT * self.share)
        self._last = max(self._last, now)


class Held:
    """Events waiting for credit, in order, without the state reports that a later report
    covering the same (its class and `Report.covers()`) made stale: those are shed as the
    newer one comes, so what waits is at most one report of each thing (and the rest). With
    `size_of`, `bytes` is what the events held hold, and `peak` the most it was."""

    __slots__ = ("_events", "_head", "_latest", "_live", "_size_of", "bytes", "peak")

    def __init__(self, size_of: Callable[[object], int] | None = None) -> None:
        self._events: list[object] = []
        self._head = 0  # `_events[:_head]` were taken (None; dropped now and then: a take
        # is O(taken))
        self._latest: dict[Hashable, int] = {}  # a report's key -> its index in `_events`
        self._live = 0
        self._size_of = size_of
        self.bytes = 0
        self.peak = 0

    def __len__(self) -> int:
        return self._live

    def add(self, events: Sequence[object], shed: bool = True) -> tuple[int, int]:
        """Append `events` (shedding the reports they make stale, unless `shed` is False:
        newer ones may still shed them); how many reports were shed, and the messages they
        counted (`Report.message_count`)."""
        held, latest, size_of = self._events, self._latest, self._size_of
        dropped = messages = freed = 0
        for event in events:
            if isinstance(event, Report):
                key = (type(event), event.covers())
                old = latest.get(key) if shed else None
                if old is not None:
                    stale = held[old]
                    assert isinstance(stale, Report)
                    messages += stale.message_count()
                    if size_of is not None:
                        freed += size_of(stale)
                    held[old] = _SHED
                    dropped += 1
                latest[key] = len(held)
            held.append(event)
        self._live += len(events) - dropped
        if size_of is not None:
            self.bytes += sum(map(size_of, events)) - freed
            self.peak = max(self.peak, self.bytes)
        return dropped, messages

    def overflow(self, max_events: int, max_bytes: int) -> list[object]:
        """The oldest events, off the hold, that must go for the rest to be within
        `max_events` and `max_bytes` (none if it is)."""
        count = self._live - max_events
        over = self.bytes - max_bytes
        if over > 0 and self._size_of is not None:
            size_of, taken = self._size_of, 0
            for event in itertools.islice(self._events, self._head, None):
                if event is not _SHED:
                    over -= size_of(event)
                    taken += 1
                    if over <= 0:
                        break
            count = max(count, taken)
        return self.take(count) if count > 0 else []

    def take(self, count: int | None = None) -> list[object]:
        """The oldest `count` events held (None: all), oldest first, off the hold."""
        held, at = self._events, self._head
        if count is None or count >= self._live:
            taken = [e for e in itertools.islice(held, at, None) if e is not _SHED]
            self._events, self._head, self._latest, self._live, self.bytes = [], 0, {}, 0, 0
            return taken
        latest = self._latest
        taken = []
        while len(taken) < count:
            event, held[at] = held[at], None  # (the list no longer keeps what it gave up)
            if event is not _SHED:
                taken.append(event)
                if latest and isinstance(event, Report):
                    key = (type(event), event.covers())
                    if latest.get(key) == at:  # (a newer one of its kind no longer sheds it)
                        del latest[key]
            at += 1
        self._live -= len(taken)
        if self._size_of is not None:
            self.bytes -= sum(map(self._size_of, taken))
        if at > len(held) // 2:  # what was taken goes, once it is most of the list
            del held[:at]
            self._latest = {key: i - at for key, i in latest.items()}
            at = 0
        self._head = at
        return taken


_SHED = object()  # a held event's place once a newer report made it stale


def supersede(events: Sequence[T]) -> tuple[list[T], int]:
    """`events` in order without the state reports a later one makes stale (see `Held`);
    and how many were shed."""
    held = Held()
    shed, _ = held.add(events)
    return held.take(), shed  # type: ignore[return-value]


@dataclass(slots=True)
class Turns:
    """How much of a sink's queue to hand it at once (a slice): about `SLICE` seconds of
    writing by both its measured cost per item and per byte (one robot's status and ten
    thousand drones are items of very unlike cost; one of the two measures holds for each), at
    least one item, one alone until a cost is measured. A cost measured higher is believed at
    once, a lower one slowly (`SMOOTHING`). A turn is slices until its time is up or the queue
    is empty (`Sink.run`): the clock, read between slices, bounds it."""

    per_item: float = 0.0  # seconds
    per_byte: float = 0.0  # seconds

    def slice(self) -> tuple[int, int | None]:
        """Items and bytes of queued updates to hand over next (None: any size)."""
        if self.per_item <= 0.0:
            return 1, None
        items = max(1, int(SLICE / self.per_item))
        return items, (max(1, int(SLICE / self.per_byte)) if self.per_byte > 0.0 else None)

    def within(self, items: int, seconds: float) -> bool:
        """Whether `items` items take at most `seconds`, by the measured cost (while none is
        measured, only one item does: a VRSP source's first read, the first frames of 10,000
        drones, took 413 ms in one go in the soak)."""
        if self.per_item <= 0.0:
            return items <= 1
        return self.per_item * items <= seconds

    def took(self, items: int, size: int, seconds: float) -> None:
        """A slice of `items` items and `size` bytes took `seconds`."""
        if items <= 0:
            return
        seconds = max(seconds, 1e-9)  # measured, however coarse the clock: 0 is "not yet"
        self.per_item = _learn(self.per_item, seconds / items)
        if size > 0:
            self.per_byte = _learn(self.per_byte, seconds / size)


def _learn(cost: float, measured: float) -> float:
    """A cost estimate after a measurement: up at once, down by `SMOOTHING` of the gap."""
    return measured if measured >= cost else cost + SMOOTHING * (measured - cost)
