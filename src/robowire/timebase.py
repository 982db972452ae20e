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

import itertools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

monotonic = time.monotonic
RATE_TOLERANCE = 0.5  # a sender clock's rate outside 1 +- this is broken (`ClockOffset.rate`)
RATE_SLOPES = 4  # bucket-to-bucket slopes `ClockOffset.rate` needs
"""Monotonic seconds, the `now` every driver gives its sessions (the one clock for intervals)."""


@dataclass(slots=True)
class WallClock:
    """Maps `time.monotonic()` readings to Unix epoch seconds, anchored once at creation."""

    _epoch_at_zero: float = field(init=False)

    def __post_init__(self) -> None:
        self._epoch_at_zero = _epoch_at_zero()

    def wall(self, monotonic: float) -> float:
        """Unix epoch seconds for a `time.monotonic()` / `loop.time()` reading."""
        return self._epoch_at_zero + monotonic

    def monotonic(self, wall: float) -> float:
        """The monotonic reading that corresponds to a Unix epoch time."""
        return wall - self._epoch_at_zero

    def now(self) -> float:
        """Unix epoch seconds now, on this clock's monotonic base."""
        return self.wall(time.monotonic())


ANCHOR_READINGS = 5  # readings of both clocks a `WallClock` takes its anchor from


def _epoch_at_zero() -> float:
    """`time.time() - time.monotonic()` as of one instant. A process paused between the two
    readings (a loaded machine) would be off by the pause for its whole run, a shift no
    receiver could tell from a network delay: so the wall reading is taken between two
    monotonic ones, `ANCHOR_READINGS` times, and the tightest pair anchors it."""
    best, span = math.nan, math.inf
    for _ in range(ANCHOR_READINGS):
        before = time.monotonic()
        wall = time.time()
        after = time.monotonic()
        if after - before < span:
            best, span = wall - (before + after) / 2.0, after - before
    return best


def split_seconds(t: float) -> tuple[int, int]:
    """Unix seconds as (whole seconds, milliseconds), milliseconds rounded to nearest."""
    whole = int(t // 1)
    millis = round((t - whole) * 1000.0)
    if millis >= 1000:
        whole, millis = whole + 1, millis - 1000
    return whole, millis


# -- the sender's clock ------------------------------------------------------------------------

TIME_MODES = ("sender", "receive", "corrected")
"""What a source's `?time=` option may say (see `SourceClock`)."""


@dataclass(frozen=True, slots=True)
class OffsetEstimate:
    """How far a sender's clock is ahead of ours: `offset` seconds (sender minus receiver,
    the smallest network delay seen in the window included), give or take `uncertainty`
    (the spread of the delay floor over the window; inf until two buckets have samples), from
    `samples` batches with stamps since the last reset."""

    offset: float
    uncertainty: float
    samples: int


class ClockOffset:
    """Estimates a sender's clock offset from pairs (source time, receive time).

    Pure: it is fed times and reads no clock. Every pair gives a lag, receive - source =
    delay - offset; the delay is never negative, so the smallest lag seen is the best view of
    the offset (the delay's floor). Lags are kept as one minimum per `bucket` seconds of receive
    time, `buckets` of them: the estimate is -(the smallest of the live minima), so it follows
    a slowly drifting clock (it lags a drift by at most drift x window) and forgets old data
    at the window's end. A gap in the data keeps the last estimate until new data comes; after
    a gap longer than the window, the new data alone makes the estimate.

    A stepped sender clock restarts the estimate: a lag more than `jump` seconds below the
    floor at once (the sender jumped ahead: the minimum would adopt it anyway), a floor more
    than `jump` above the estimate once it has lasted `confirm` seconds of receive time (a
    burst of late packets after a stall drains faster than that and is ignored).

    `rate` is how fast the sender's clock runs against ours: the median of its slopes from one
    bucket's newest pair (receive time, source time) to the next's over the window (kept
    through the resets: a step is one slope among several, not the median). A clock that
    runs backwards or at a wrong rate (outside `RATE_TOLERANCE`; a real clock's drift is
    parts per million) makes every offset estimate wrong at once: `broken` says so.

    `observe` takes one batch: arrays (or floats) broadcast against each other; NaN source
    times (no stamp) are ignored. One numpy reduction per batch, no loop per device: with one
    receive time for the batch (the usual case) the smallest lag is that of the newest stamp.
    """

    def __init__(
        self,
        *,
        bucket: float = 1.0,
        buckets: int = 10,
        jump: float = 1.0,
        confirm: float = 2.0,
    ) -> None:
        if bucket <= 0 or buckets < 1:
            raise ValueError("ClockOffset needs bucket > 0 and buckets >= 1")
        self.bucket = bucket
        self.jump = jump
        self.confirm = confirm
        self._index = [-(1 << 62)] * buckets  # which bucket of time each slot holds
        self._floor = [math.inf] * buckets  # its smallest lag
        self._lag = math.inf  # the smallest live lag: -offset
        self._newest = -(1 << 62)  # the newest bucket seen
        self._high_since: float | None = None  # receive time a floor above `jump` began
        self.samples = 0
        self.resets = 0
        self._pairs: dict[int, tuple[float, float]] = {}  # bucket -> its newest (received, source)
        self._rate: float | Literal[False] | None = False  # False: not computed for this bucket

    @property
    def offset(self) -> float:
        """Sender clock minus ours, in seconds; NaN until a stamped pair was seen."""
        return -self._lag if self.samples else math.nan

    def estimate(self) -> OffsetEstimate | None:
        """The current estimate, or None before any stamped pair."""
        if not self.samples:
            return None
        live = self._live_floors()
        spread = max(live) - min(live) if len(live) > 1 else math.inf
        return OffsetEstimate(-self._lag, spread, self.samples)

    def observe(self, source_times: FloatArray | float, receive_times: FloatArray | float) -> None:
        """Take one batch of pairs (received at about the same time)."""
        if isinstance(receive_times, float):  # the usual batch: one receive time, many stamps
            newest = (
                source_times
                if isinstance(source_times, float)
                else float(np.fmax.reduce(source_times, axis=None))  # fmax: NaN only if all are
            )
            lag, received = receive_times - newest, receive_times
        else:
            lags = np.subtract(receive_times, source_times, dtype=np.float64)
            lag, received = float(np.fmin.reduce(lags, axis=None)), float(np.max(receive_times))
        if lag == lag:  # not NaN: at least one stamp
            self._add(lag, received)

    @property
    def rate(self) -> float | None:
        """The sender's clock seconds per second of ours (class docstring); None until the
        window has `RATE_SLOPES` slopes."""
        if self._rate is not False:  # (computed once a bucket: `retime` asks every batch)
            return self._rate
        pairs = sorted(self._pairs.items())
        slopes = [
            (s1 - s0) / (r1 - r0)
            for (_, (r0, s0)), (_, (r1, s1)) in itertools.pairwise(pairs)
            if r1 - r0 >= 0.5 * self.bucket
        ]
        self._rate = statistics.median(slopes) if len(slopes) >= RATE_SLOPES else None
        return self._rate

    @property
    def broken(self) -> bool:
        """The sender's clock runs backwards or at a wrong rate (see `rate`)."""
        rate = self.rate
        return rate is not None and abs(rate - 1.0) > RATE_TOLERANCE

    def reset(self) -> None:
        """Forget the offset (the sender's clock is not the one it was)."""
        n = len(self._index)
        self._index = [-(1 << 62)] * n
        self._floor = [math.inf] * n
        self._lag = math.inf
        self._high_since = None
        self.samples = 0

    def _live_floors(self) -> list[float]:
        """The minima of the buckets inside the window (the newest bucket's and older)."""
        oldest = self._newest - len(self._index)
        return [f for i, f in zip(self._index, self._floor, strict=True) if i > oldest]

    def _add(self, lag: float, received: float) -> None:
        k = int(received // self.bucket)
        pairs = self._pairs
        if k not in pairs:
            self._rate = False
        pairs[k] = (received, received - lag)
        if len(pairs) > len(self._index):  # the window's buckets only
            del pairs[min(pairs)]
        if self.samples and k - self._newest >= len(self._index):
            self.reset()  # nothing for longer than the window: start from what comes now
        if self.samples:
            if lag < self._lag - self.jump:
                self.resets += 1
                self.reset()
            elif lag > self._lag + self.jump:
                if self._high_since is None:
                    self._high_since = received
                if received - self._high_since < self.confirm:
                    return  # late packets, or a step not yet confirmed
                self.resets += 1
                self.reset()
            else:
                self._high_since = None
        slot = k % len(self._index)
        rolled = k > self._newest
        if self._index[slot] != k:
            self._index[slot], self._floor[slot] = k, lag
        elif lag < self._floor[slot]:
            self._floor[slot] = lag
        self._newest = max(self._newest, k)
        if rolled:  # a bucket fell out of the window: the minimum over the live ones again
            self._lag = min(self._live_floors())
        elif lag < self._lag:
            self._lag = lag
        self.samples += 1


class SourceClock:
    """One source's time policy (`?time=`) and its sender's clock offset.

    * `sender`: the source time is the sender's stamp, as it came.
    * `receive`: the source time is the receive time.
    * `corrected`: the sender's stamp minus the estimated offset, so a sender whose clock is
      minutes off lines up with the others (the delay floor is counted as offset: a stamp
      becomes about its receive time on a fast network). While the sender's clock runs
      backwards or at a wrong rate (`ClockOffset.broken`), the receive time: on our clock,
      and never going back, where the stamps would.

    In every mode the sender's stamps feed `offset` (shown by `Gateway.status()`).
    """

    def __init__(self, mode: str = "sender") -> None:
        self.mode = mode
        self.offset = ClockOffset()

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in TIME_MODES:
            raise ValueError(f"time must be one of {', '.join(TIME_MODES)}, not {mode!r}")
        self._mode = mode

    def retime(
        self, source_time: FloatArray | float | None, receive_time: float
    ) -> FloatArray | float | None:
        """The source time to write for a batch with these stamps received at `receive_time`
        (a scalar or one per row; None: the sender gave none)."""
        if source_time is not None:
            self.offset.observe(source_time, receive_time)
        if self._mode == "receive":
            return receive_time
        if self._mode == "sender" or source_time is None or not self.offset.samples:
            return source_time
        if self.offset.broken:  # no offset makes such stamps ours: when they came is
            return receive_time
        return source_time - self.offset.offset
