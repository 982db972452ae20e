"""Time helpers.

Two times travel with every world update:

* **source time**: when the source says the thing happened, in Unix epoch seconds (float).
  Protocols carry it in their own way (SpyGlass s + ms, VRPN timeval, ...); adapters convert.
* **receive time**: when robowire got the bytes, in Unix epoch seconds.

Sans-I/O cores never read a clock: they are given `now`, monotonic seconds from the caller,
read with `monotonic()` (microsecond resolution; the event loop's own `loop.time()` is only
millisecond-resolution under uvloop, and cached per loop turn). It is the clock `loop.call_at`
runs on, so deadlines computed from it can be armed directly. The drivers convert between the
monotonic clock and wall-clock time with one `WallClock`, so that receive times are monotonic
within a run even if the system clock is stepped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

monotonic = time.monotonic
"""Monotonic seconds, the `now` every driver gives its sessions (the one clock for intervals)."""


@dataclass(slots=True)
class WallClock:
    """Maps `time.monotonic()` readings to Unix epoch seconds, anchored once at creation."""

    _epoch_at_zero: float = field(init=False)

    def __post_init__(self) -> None:
        self._epoch_at_zero = time.time() - time.monotonic()

    def wall(self, monotonic: float) -> float:
        """Unix epoch seconds for a `time.monotonic()` / `loop.time()` reading."""
        return self._epoch_at_zero + monotonic

    def monotonic(self, wall: float) -> float:
        """The monotonic reading that corresponds to a Unix epoch time."""
        return wall - self._epoch_at_zero

    def now(self) -> float:
        """Unix epoch seconds now, on this clock's monotonic base."""
        return self.wall(time.monotonic())


def split_seconds(t: float) -> tuple[int, int]:
    """Unix seconds as (whole seconds, milliseconds), milliseconds rounded to nearest."""
    whole = int(t // 1)
    millis = round((t - whole) * 1000.0)
    if millis >= 1000:
        whole, millis = whole + 1, millis - 1000
    return whole, millis
