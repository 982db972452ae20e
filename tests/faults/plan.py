"""The fault proxy's decisions, sans I/O: what happens to each datagram, or to each chunk of a
byte stream, from a seeded RNG, and exact counts of what was done.

`DatagramPlan` (one direction of a UDP flow): `feed(data, now)` takes a datagram in, `due(now)`
gives what to send now, `next_due()` when to ask again. Its faults: loss (a fraction), bursts
(`burst` datagrams lost in a row, every `burst_every`), duplication, reordering (a datagram held
back behind 1..`reorder_depth` later ones), jitter (a delay uniform in 0..`jitter` s), truncation
(cut to a shorter random length) and a flipped bit. `counts` says what it did, in the terms a
receiver with sequence numbers sees: `lost` (never sent), `duplicated` (extra copies sent),
`reordered` (sent after a later one, not a copy), `truncated`, `flipped`.

`StreamPlan` (one direction of a TCP connection): passes bytes through, and cuts the connection
after `cut_after` bytes, in the middle of a chunk (`cut="rst"`: a reset) or at the end of the
chunk that crossed it (`cut="fin"`: a clean close at a message boundary, for a peer that writes
a message per chunk).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Cut = Literal["rst", "fin"]


@dataclass(frozen=True, slots=True)
class DatagramFaults:
    """What to do to datagrams; fractions are 0..1 (the CLI takes percent)."""

    loss: float = 0.0
    burst: int = 0  # datagrams lost in a row, ...
    burst_every: int = 0  # ... every this many datagrams (0: no bursts)
    duplicate: float = 0.0
    reorder: float = 0.0  # the share of datagrams held back ...
    reorder_depth: int = 8  # ... behind up to this many later ones
    jitter: float = 0.0  # seconds: each datagram is delayed by uniform(0, jitter)
    truncate: float = 0.0
    flip: float = 0.0

    @property
    def any(self) -> bool:
        return bool(
            self.loss or self.burst_every or self.duplicate or self.reorder or self.jitter
        ) or bool(self.truncate or self.flip)


@dataclass(slots=True)
class _Held:
    after: int  # released once this many later datagrams have gone
    index: int
    data: bytes


@dataclass(slots=True)
class DatagramPlan:
    """One direction's datagram faults (see the module docstring)."""

    faults: DatagramFaults = field(default_factory=DatagramFaults)
    seed: int = 0
    enabled: bool = True  # off: every datagram passes untouched (and is counted as passed)
    only: Callable[[bytes], bool] | None = None  # faults on these datagrams; the rest pass,
    # uncounted (a protocol's data, not its 1 Hz definitions)
    outage: bool = False  # on: every datagram is lost (a peer gone, a cable pulled)
    counts: Counter[str] = field(default_factory=Counter)
    rng: random.Random = field(init=False)
    _index: int = 0
    _queue: list[tuple[float, int, int, bytes]] = field(default_factory=list)  # due, order, i
    _order: int = 0
    _held: list[_Held] = field(default_factory=list)
    _sent: set[int] = field(default_factory=set)  # indexes sent (for copies vs reordering)
    _newest: int = -1  # the highest index sent

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        for name in ("received", "sent", "lost", "duplicated", "reordered", "truncated"):
            self.counts[name] = 0
        self.counts["flipped"] = 0

    def feed(self, data: bytes, now: float) -> None:
        """One datagram in, at monotonic `now`."""
        if self.only is not None and not self.only(data):
            self._schedule(now, -1, data)
            return
        index = self._index
        self._index += 1
        self.counts["received"] += 1
        f = self.faults
        if self.outage:
            self.counts["lost"] += 1
            return
        if not self.enabled or not f.any:
            self._schedule(now, index, data)
            self._release(now)
            return
        rng = self.rng
        if f.burst_every and index % f.burst_every >= f.burst_every - f.burst:
            self.counts["lost"] += 1
            return
        if f.loss and rng.random() < f.loss:
            self.counts["lost"] += 1
            return
        if f.truncate and len(data) > 1 and rng.random() < f.truncate:
            data = data[: rng.randrange(1, len(data))]
            self.counts["truncated"] += 1
        if f.flip and data and rng.random() < f.flip:
            bit = rng.randrange(len(data) * 8)
            mutable = bytearray(data)
            mutable[bit >> 3] ^= 1 << (bit & 7)
            data = bytes(mutable)
            self.counts["flipped"] += 1
        copies = 2 if f.duplicate and rng.random() < f.duplicate else 1
        if f.reorder and f.reorder_depth and rng.random() < f.reorder:
            after = rng.randint(1, f.reorder_depth)
            self._held.extend(_Held(after, index, data) for _ in range(copies))
            return
        for _ in range(copies):
            self._schedule(now + (rng.uniform(0.0, f.jitter) if f.jitter else 0.0), index, data)
        self._release(now)

    def release_all(self, now: float) -> None:
        """Send what is held back for reordering now (the end of a faulty phase)."""
        held, self._held = self._held, []
        for h in held:
            self._schedule(now, h.index, h.data)

    def due(self, now: float) -> list[bytes]:
        """The datagrams to send now, in order, each counted as it goes."""
        out: list[bytes] = []
        queue = self._queue
        while queue and queue[0][0] <= now:
            _, _, index, data = heapq.heappop(queue)
            out.append(data)
            if index < 0:  # not one of `only`'s
                continue
            if index in self._sent:
                self.counts["duplicated"] += 1
            elif index < self._newest:
                self.counts["reordered"] += 1
            self._sent.add(index)
            self._newest = max(self._newest, index)
            self.counts["sent"] += 1
        if len(self._sent) > 4096:  # only recent indexes can still be copied or reordered
            floor = self._newest - 2048
            self._sent = {i for i in self._sent if i >= floor}
        return out

    def next_due(self) -> float | None:
        return self._queue[0][0] if self._queue else None

    def _schedule(self, when: float, index: int, data: bytes) -> None:
        heapq.heappush(self._queue, (when, self._order, index, data))
        self._order += 1

    def _release(self, now: float) -> None:
        """One more datagram has gone: those held back behind it that are due follow it."""
        keep: list[_Held] = []
        for h in self._held:
            h.after -= 1
            if h.after <= 0:
                self._schedule(now, h.index, h.data)
            else:
                keep.append(h)
        self._held = keep


@dataclass(slots=True)
class StreamPlan:
    """One direction of a TCP connection (see the module docstring)."""

    cut_after: int | None = None  # bytes passed before the cut (None: never)
    cut: Cut = "rst"
    passed: int = 0

    def feed(self, data: bytes) -> tuple[bytes, Cut | None]:
        """A chunk read: what to pass on, and whether to cut the connection after it."""
        if self.cut_after is None or self.passed + len(data) < self.cut_after:
            self.passed += len(data)
            return data, None
        if self.cut == "fin":
            self.passed += len(data)
            return data, "fin"
        keep = max(0, self.cut_after - self.passed)
        self.passed += keep
        return data[:keep], "rst"
