"""Wire accounting from a peer's sequence numbers, sans I/O: what was lost, duplicated or
reordered on the way, counted exactly (the XRP robot's and client's u16 sequences, VRSP's u32
frame numbers).

`SequenceCounts.see(n)` takes each number received and says what it was: `NEW` (newer than
any before; the numbers it skipped count as `lost` until they come), `LATE` (one that was
skipped, come after a newer one: `lost` less one, `reordered` one more), `DUPLICATE` (one
already received) or `OLD` (too far behind to tell, more than `window` numbers). `lost` is
what has not come (yet): a datagram the wire dropped, as a relay counts it, once the ones it
held back have gone. `restart()` forgets the sequence (its sender restarted with a new one;
the counts stay). It keeps at most `window` numbers. A leap ahead of more than `window` is
taken only once the next number follows it (within `JUMP_FOLLOWS`): a single number far
ahead (a bit flipped where no checksum guards it) is `OLD`, not a loss of millions.

`DatagramOrder` is for datagrams numbered by their first message (VRPN's UDP): it says which
to take (only one newer than every one taken) and counts the copies and late ones it drops.
"""

from __future__ import annotations

import enum
import logging
import operator
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field


class Seen(enum.Enum):
    NEW = "new"
    LATE = "late"
    DUPLICATE = "duplicate"
    OLD = "old"


COUNTS = ("lost", "duplicated", "reordered")
SETTLE = 64  # numbers: a gap this recent may still be reordering, not loss
JUMP_FOLLOWS = 8  # a leap ahead is real once a number at most this far past it follows
RECENT = 64  # `DatagramOrder` tells copies among the numbers of this many recent reads
UNORDERED_AFTER = 3  # `DatagramOrder` restarts after which the numbers are not one channel's
UNORDERED_RUN = 64  # `DatagramOrder` drops in a row after which they are not either


@dataclass(frozen=True, slots=True)
class PeerRestarted:
    """A session's peer restarted with fresh state (an XRP robot's sequence began again, a
    VRSP sender's new instance): what it said before is not its state now. The `Source`
    template logs it and counts it as a reconnection; adapters take no notice of it."""

    reason: str


@dataclass(slots=True)
class SequenceCounts:
    """Exact loss, duplication and reordering counts from sequence numbers (module docstring)."""

    modulus: int = 1 << 16
    window: int = 1024
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    newest: int | None = None
    _missing: set[int] = field(default_factory=set)
    _jump: int | None = None  # a number far ahead, not yet followed

    def see(self, n: int) -> Seen:
        """Number `n` was received."""
        newest = self.newest
        if newest is None:
            self.newest = n
            self.received += 1
            return Seen.NEW
        modulus = self.modulus
        ahead = (n - newest) % modulus
        if 0 < ahead < modulus >> 1:
            if ahead > self.window:  # a leap: taken once the next number follows it (a bit
                jump, self._jump = self._jump, n  # flipped in one number is not a gap of
                if jump is None or not 0 < (n - jump) % modulus <= JUMP_FOLLOWS:  # millions)
                    return Seen.OLD
                self._advance(jump)
            self._advance(n)
            return Seen.NEW
        self._jump = None
        if n in self._missing:
            self._missing.discard(n)
            self.received += 1
            self.lost -= 1
            self.reordered += 1
            return Seen.LATE
        if ahead == 0 or (newest - n) % modulus <= self.window:
            self.duplicated += 1
            return Seen.DUPLICATE
        return Seen.OLD

    def see_run(self, first: int, count: int) -> bool:
        """Numbers `first`, `first` + 1, ... (`count` of them, in order) were received, the first
        right after the newest: taken at once, as `see` would take them one by one (each NEW,
        nothing lost). False, and nothing taken, if `first` does not follow the newest."""
        newest = self.newest
        if newest is None or (first - newest) % self.modulus != 1:
            return False
        self.received += count
        self._jump = None
        self.newest = (first + count - 1) % self.modulus
        return True

    def settled(self) -> int:
        """`lost`, less the numbers missing within `SETTLE` of the newest (those may still
        come, reordered): what a log line can say was lost."""
        newest, modulus = self.newest, self.modulus
        if newest is None or not self._missing:
            return self.lost
        recent = sum((newest - m) % modulus <= SETTLE for m in self._missing)
        return self.lost - recent

    def _advance(self, n: int) -> None:
        """`n`, ahead of the newest, is the newest now; the numbers between are missing."""
        newest, modulus = self.newest, self.modulus
        assert newest is not None
        ahead = (n - newest) % modulus
        self.received += 1
        self._jump = None
        if ahead > 1:
            self.lost += ahead - 1
            missing = self._missing
            missing.update(
                (newest + k) % modulus for k in range(max(1, ahead - self.window), ahead)
            )
            if len(missing) > 2 * self.window:  # forget those too old to come
                self._missing = {m for m in missing if (n - m) % modulus <= self.window}
        self.newest = n

    def restart(self) -> None:
        """The sender started a new sequence: the next number received is the first."""
        self.newest = None
        self._jump = None
        self._missing.clear()

    def into(self, extra: dict[str, int]) -> None:
        """Write the counts into a session's `stats.extra` (what the status reads)."""
        extra["lost"], extra["duplicated"], extra["reordered"] = (
            self.lost,
            self.duplicated,
            self.reordered,
        )


@dataclass(slots=True)
class Restart:
    """Tells a sender's sequence that began again from stale numbers: two in a row far behind
    the newest (more than `gap`, farther than any reordering), the second 1..`step` after the
    first. A single stale, duplicate or reordered number is no restart."""

    modulus: int = 1 << 32
    gap: int = 64
    step: int = 8
    _candidate: int | None = None

    def behind(self, n: int, newest: int) -> bool:
        """`n`, not newer than `newest`, came: whether the sequence began again."""
        candidate, self._candidate = self._candidate, None
        if (newest - n) % self.modulus <= self.gap:
            return False
        if candidate is not None and 0 < (n - candidate) % self.modulus <= self.step:
            return True
        self._candidate = n
        return False


@dataclass(slots=True)
class DatagramOrder:
    """Datagrams of consecutively numbered messages (VRPN's UDP: each message's header `seq`,
    one counter per channel), told apart by their first message's number. A datagram is taken
    only if it is newer than every one taken: a copy of one seen is `duplicated`, an older one
    come late is `reordered`, and both are dropped (the receiver already has newer messages).
    How many messages a lost datagram held is not known, so there is no `lost`. A leap ahead
    of more than `window` is taken only once the next datagram follows it within `window` (a
    flipped bit in a number is not a new sequence), and `resync` datagrams in a row behind
    the newest but ascending start it again from them (the newest was a damaged number). A
    sender whose numbers have not gone up yet may not number at all: its datagrams are all
    taken until they do. A sender that numbers otherwise (each device from 0, say) gives
    copies or late ones, `UNORDERED_RUN` in a row, or makes the count start again
    `UNORDERED_AFTER` times: from then on every datagram is taken as it comes (VRPN's own
    rule). No network does either (the kernel's UDP checksum drops damaged datagrams)."""

    modulus: int = 1 << 32
    window: int = 1 << 16
    resync: int = 8
    newest: int | None = None
    numbered: bool = False  # the sender's numbers went up: it numbers (till then, all taken)
    unordered: bool = False  # `resyncs` came: it does not number one channel (all taken)
    resyncs: int = 0
    duplicated: int = 0
    reordered: int = 0
    _seen: deque[list[int]] = field(default_factory=lambda: deque(maxlen=RECENT))  # the
    # recent numbers, a run of them (`take_run`) or one (`take`) each: copies of them are told
    _jump: int | None = None  # a number far ahead, not yet followed
    _behind: int | None = None  # the last number behind the newest ...
    _behind_run: int = 0  # ... and how many came in a row, each after the one before
    _dropped: int = 0  # datagrams dropped (copies, late ones) since the last one taken

    def take(self, n: int) -> bool:
        """A datagram whose first message is numbered `n` came: whether to take it."""
        newest, modulus = self.newest, self.modulus
        if newest is None or self.unordered:
            self._seen.append([n])
            return self._take(n)
        ahead = (n - newest) % modulus
        if not self.numbered:  # (VRPN reads no `seq`: a sender may write 0 in every one)
            self.numbered = 0 < ahead <= self.window
            self._seen.append([n])
            return self._take(n)
        if 0 < ahead < modulus >> 1:
            self._seen.append([n])
            if ahead > self.window:
                jump, self._jump = self._jump, n
                if jump is None or not 0 < (n - jump) % modulus <= self.window:
                    return False
            return self._take(n)
        self._jump = None
        self._dropped += 1
        if self._dropped >= UNORDERED_RUN:  # (the network never does that: the numbering)
            self.unordered = True
            return self._take(n)
        if any(n in run for run in self._seen):
            self.duplicated += 1
            return False
        self._seen.append([n])
        behind = self._behind
        ascending = behind is not None and 0 < (n - behind) % modulus <= self.window
        self._behind_run = self._behind_run + 1 if ascending else 1
        self._behind = n
        if self._behind_run >= self.resync:
            self.resyncs += 1
            self.unordered = self.resyncs >= UNORDERED_AFTER
            return self._take(n)
        self.reordered += 1
        return False

    def take_run(self, numbers: list[int]) -> bool:
        """Datagrams numbered `numbers`, in the order they came, all taken at once if each is
        newer than the one before and the first newer than the newest (within `window` in
        all), as `take` would take them one by one: the usual read, checked at C speed. False,
        and nothing changed, otherwise (then `take` each)."""
        newest = self.newest
        if self.unordered:
            return True
        if (
            newest is None
            or not self.numbered
            or not 0 < numbers[-1] - newest <= self.window  # (across the wrap: one by one)
            or not newest < numbers[0]
            or not all(map(operator.lt, numbers, numbers[1:]))
        ):
            return False
        self._seen.append(numbers)
        return self._take(numbers[-1])

    def _take(self, n: int) -> bool:
        self.newest, self._jump, self._behind, self._behind_run = n, None, None, 0
        self._dropped = 0
        return True


SUMMARY_SECONDS = 60.0
FAULTS = {  # a fault count's name -> how a log line says it
    "settled": "lost on the wire",
    "duplicated": "duplicated on the wire",
    "reordered": "reordered on the wire",
    "reconnected": "reconnections",
}


class FaultLog:
    """One log line per kind of fault (`FAULTS`) at its first occurrence, then at most one a
    kind every `every` seconds while it goes on, saying how many more: never a line per lost
    datagram. Fed the counts (what the status shows) and the time."""

    def __init__(self, name: str, logger: logging.Logger, every: float = SUMMARY_SECONDS) -> None:
        self.name, self.log, self.every = name, logger, every
        self._said: dict[str, tuple[int, float]] = {}  # kind -> (count said, when)

    def update(self, counts: Mapping[str, int], now: float) -> None:
        for kind, n in counts.items():
            said = self._said.get(kind)
            if said is None:
                if n > 0:
                    self.log.warning(
                        "%s: %d %s (the first; counted in its status, said again at most "
                        "every %g s)", self.name, n, FAULTS.get(kind, kind), self.every,
                    )  # fmt: skip
                    self._said[kind] = (n, now)
            elif n > said[0] and now - said[1] >= self.every:
                self.log.warning(
                    "%s: %d more %s in %.0f s (%d in all)",
                    self.name, n - said[0], FAULTS.get(kind, kind), now - said[1], n,
                )  # fmt: skip
                self._said[kind] = (n, now)
