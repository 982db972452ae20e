"""The overload policy's arithmetic, once for every source and sink (pure: time is an argument).

A gateway on a busy machine cannot always keep up. The policy (docs/architecture.md, "Overload"):

* **Sessions see every byte at once.** The drivers read what the kernel queued and feed it to
  the session in the same wake-up, so keep-alives are answered, pings are timed and commands
  go out on time whatever the load. Only what follows, the world writes, is budgeted.
* **A source's world writes have a `Budget`**: a share of wall time, with a burst. While a
  source has credit its events are applied as they come; once it has spent its credit its
  events wait (merged, in order) until the credit is back, and then go in as one delivery. In
  that delivery a state report superseded by a newer one of the same kind (`Report`) is shed,
  the oldest first, and counted: a busy gateway shows fewer, fresher states.
* **A sink's turn is bounded** (`Turns`): a sink that takes every update (the recorder) is
  handed at most what it writes in `SINK_TURN` seconds per turn, then the loop goes round, so
  that neither ingest nor one output can hold the others off. What it cannot take waits in
  its bounded queue, whose oldest updates are dropped and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from robowire.protocols.base import Report

T = TypeVar("T")

SHARE = 0.15  # of wall time one source's world writes may take, sustained
BURST = 0.020  # seconds of world writes a source may do at once before its share applies
SINK_TURN = 0.030  # seconds one sink's turn takes, at most (one item at least)
FIRST = 16  # items in a sink's first turn, before their cost is known
SMOOTHING = 0.2  # weight of the newest measurement in a cost per item


@dataclass(slots=True)
class Budget:
    """A token bucket of seconds: `credit` grows at `share` seconds per second up to `burst`;
    what a source spends writing is taken off it, and may take it below zero (one delivery is
    never cut). `wait(now)` says how long until there is credit again."""

    share: float = SHARE
    burst: float = BURST
    credit: float = BURST
    shed: int = 0  # state reports shed, for the status
    _at: float | None = None  # when credit was last brought up to date

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self.credit = min(self.burst, self.credit + (now - self._at) * self.share)
        self._at = now if self._at is None else max(self._at, now)

    def wait(self, now: float) -> float:
        """Seconds from `now` until there is credit (0: write now)."""
        self._refill(now)
        return 0.0 if self.credit > 0 else -self.credit / self.share

    def spend(self, now: float, seconds: float) -> None:
        """A delivery that began at `now` took `seconds`."""
        self._refill(now)
        self.credit -= seconds


def supersede(events: Sequence[T]) -> tuple[list[T], int]:
    """The events in order without the state reports that a later report of the same class
    makes stale; and how many were shed."""
    latest: dict[type, int] = {}
    for i, event in enumerate(events):
        if isinstance(event, Report):
            latest[type(event)] = i
    if len(latest) == sum(isinstance(e, Report) for e in events):
        return list(events), 0
    kept = [e for i, e in enumerate(events) if not isinstance(e, Report) or latest[type(e)] == i]
    return kept, len(events) - len(kept)


@dataclass(slots=True)
class Turns:
    """How many items fit in a turn of `seconds`, from the measured cost per item (`FIRST`
    until a cost is measured)."""

    seconds: float = SINK_TURN
    cost: float = 0.0  # seconds per item, smoothed

    def size(self) -> int:
        if self.cost <= 0.0:
            return FIRST
        return max(1, int(self.seconds / self.cost))

    def took(self, items: int, seconds: float) -> None:
        """A turn of `items` items took `seconds`."""
        if items <= 0:
            return
        per = max(seconds, 0.0) / items
        self.cost = per if self.cost <= 0.0 else self.cost + SMOOTHING * (per - self.cost)
