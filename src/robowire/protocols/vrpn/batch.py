"""VRPN's batch decoder: tracker reports read as numpy columns, no object per report.

Pure (bytes in, events out), below the session: `VrpnSession` owns the state (who is
described, what order messages came in) and hands each read to a `ReportBatcher`:

* `run(work, start, events, order, ...)` -- the fast path: a repeating pattern of unpadded
  tracker reports of described senders (a *record*: one sender and kind, or e.g. the pose,
  velocity and acceleration of one sensor, as a C++ tracker interleaves them). Their headers
  are checked at once and each kind's bodies become one zero-copy strided view.
* `gather(buf, index, first, stop, order, events)` -- the general path's reports: the report
  messages among scanned frames, one `TrackerReports` per kind and sender.

Both give the same events, in the same order (by type id, then sender id), and count what
they drop or ignore in the session's `SessionStats`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from robowire.protocols.vrpn.codec import HEADER_SIZE, PROTOCOL, FrameIndex
from robowire.protocols.vrpn.events import TrackerReports, VrpnEvent
from robowire.protocols.vrpn.registry import REPORT_FRAMES, REPORT_KINDS, gather_reports
from robowire.wire import PacketDropped, SessionStats

__all__ = ["MAX_PERIOD", "MAX_RUN", "ReportBatcher", "count_undescribed"]

MAX_RUN = 64  # reads of at most this many report records are checked by one struct call

_RUN_HEAD = struct.Struct(">I8xii")  # length, sender, type of one message
_RUN_HEADS: dict[tuple[tuple[int, ...], int], struct.Struct] = {}  # (lengths, count) -> heads
MAX_PERIOD = 16  # the most messages a repeating record of reports may have


def _run_heads(lengths: tuple[int, ...], count: int) -> struct.Struct:
    """A struct reading (length, sender, type) of every message of `count` back-to-back
    records, each the unpadded messages of `lengths`."""
    found = _RUN_HEADS.get((lengths, count))
    if found is None:
        record = "".join(f"I8xii{size - 20}x" for size in lengths)
        if len(_RUN_HEADS) >= 256:
            _RUN_HEADS.clear()
        found = _RUN_HEADS[(lengths, count)] = struct.Struct(">" + record * count)
    return found


class _Record:
    """A repeating pattern of unpadded tracker report messages (see `ReportBatcher.run`): their
    headers' (length, sender id, type id), names, and one numpy dtype for the whole record
    (a `REPORT_FRAMES` dtype, or fields m0, m1, ... of them)."""

    __slots__ = (
        "bounds",
        "by_type",
        "checks",
        "dtype",
        "heads",
        "kinds",
        "lengths",
        "pattern",
        "period",
        "senders",
        "size",
    )

    def __init__(
        self, pattern: list[tuple[int, int, int]], kinds: list[str], senders: list[str]
    ) -> None:
        self.pattern = tuple(pattern)
        self.period = len(pattern)
        self.heads = tuple(v for head in pattern for v in head)
        self.lengths = tuple(length for length, _, _ in pattern)
        self.bounds = frozenset(sum(self.lengths[:j]) for j in range(self.period))
        self.kinds = kinds
        self.senders = senders
        # the general path's event order: by type id, then sender id
        self.by_type = sorted(range(self.period), key=lambda j: (pattern[j][2], pattern[j][1]))
        frames = [REPORT_FRAMES[kind] for kind in kinds]
        if self.period == 1:
            self.dtype = frames[0]
        else:
            offsets = [sum(self.lengths[:j]) for j in range(self.period)]
            self.dtype = np.dtype(
                {
                    "names": [f"m{j}" for j in range(self.period)],
                    "formats": frames,
                    "offsets": offsets,
                    "itemsize": sum(self.lengths),
                }
            )
        self.size = int(self.dtype.itemsize)
        # record count -> (unpack of all their headers, what it must give), see `check`
        self.checks: dict[int, tuple[Callable[[bytes, int], tuple[int, ...]], tuple[int, ...]]]
        self.checks = {}

    def check(self, count: int) -> tuple[Callable[[bytes, int], tuple[int, ...]], tuple[int, ...]]:
        """(unpack, expected): the headers of `count` records and what they must read."""
        found = self.checks[count] = (
            _run_heads(self.lengths, count).unpack_from,
            self.heads * count,
        )
        return found

    def count(self, work: bytes, start: int, whole: bool, cuts: Sequence[int]) -> int:
        """How many of these records follow from `start` (0: none, or not all of `work` when
        `whole`, or a cut inside a message). Headers are checked with one struct call up to
        MAX_RUN records, with a few numpy ones beyond."""
        rest = len(work) - start
        size = self.size
        count = rest // size
        if (
            not count
            or (whole and rest != count * size)
            or (cuts and not all((cut - start) % size in self.bounds for cut in cuts))
        ):
            return 0
        if count <= MAX_RUN:
            if count > 1 or self.period > 1:
                unpack, expected = self.checks.get(count) or self.check(count)
                if unpack(work, start) != expected:
                    return 0
            return count
        rows = np.frombuffer(work, self.dtype, count, start)
        same: npt.NDArray[np.bool_] | None = None
        for j, (length, sender_id, type_id) in enumerate(self.pattern):
            part = rows[f"m{j}"] if self.period > 1 else rows
            ok = (
                (part["length"] == length)
                & (part["sender"] == sender_id)
                & (part["type"] == type_id)
            )
            same = ok if same is None else same & ok
        assert same is not None
        if not same.all():  # the run ends at the first other record
            return 0 if whole else int(same.argmin())
        return count

    def reports(
        self, work: bytes, start: int, count: int, order: int, events: list[VrpnEvent]
    ) -> None:
        """`count` records from `start` as one `TrackerReports` per message of the pattern
        (zero-copy views, strided over the records), by type id then sender id."""
        rows = np.frombuffer(work, self.dtype, count, start)
        period = self.period
        if period == 1:
            events.append(TrackerReports.of_frames(self.senders[0], self.kinds[0], rows, order))
            return
        for j in self.by_type:
            events.append(
                TrackerReports.of_frames(
                    self.senders[j], self.kinds[j], rows[f"m{j}"], order + j, period
                )
            )


def count_undescribed(stats: SessionStats, count: int) -> None:
    """Count messages of a type or sender never described: VRPN silently ignores them."""
    stats.extra["undescribed"] = stats.extra.get("undescribed", 0) + count


class ReportBatcher:
    """Tracker reports of one session as columns. `senders` and `types` are the session's
    peer id -> name maps (read, never changed here); call `forget` when they change."""

    def __init__(
        self, senders: Mapping[int, str], types: Mapping[int, str], stats: SessionStats
    ) -> None:
        self._senders = senders
        self._types = types
        self._stats = stats
        self._records: dict[tuple[int, int, int], _Record] = {}  # first header -> its record

    def forget(self) -> None:
        """The peer's descriptions changed: the cached records may no longer hold."""
        self._records.clear()

    def run(
        self,
        work: bytes,
        start: int,
        events: list[VrpnEvent],
        order: int,
        whole: bool,
        cuts: Sequence[int] = (),
        record: _Record | None = None,
    ) -> tuple[int, int]:
        """The fast path: from `start` on, unpadded tracker reports of described senders in a
        repeating pattern (a record: one sender and kind, or e.g. the pose, velocity and
        acceleration of one sensor, as a C++ tracker interleaves them), all of `work` if
        `whole`. Their headers are checked at once (one struct call for a live-sized read, a
        few numpy ones for a long read) and each kind's bodies are one zero-copy numpy view
        (strided over the records). The events are those the general path gives: one batch
        per kind and sender, by type id then sender id. Returns where the run ends (`start`:
        no run) and how many messages it read. `order` is the arrival order of the first;
        `cuts` are offsets that must fall between messages (where datagrams joined); `record`
        is the pattern to try (else the one cached for the first header, or found)."""
        cached = record is None
        if record is None:
            if len(work) - start < HEADER_SIZE:
                return start, 0
            first = _RUN_HEAD.unpack_from(work, start)
            record = self._records.get(first)
            if record is None:
                record = self._find_record(work, start, first)
                if record is None:
                    return start, 0
                cached = False
        count = record.count(work, start, whole, cuts)
        if not count:
            if cached:  # the cached pattern did not hold: look again from here
                found = self._find_record(work, start, _RUN_HEAD.unpack_from(work, start))
                if found is not None and found.pattern != record.pattern:
                    return self.run(work, start, events, order, whole, cuts, found)
            return start, 0
        record.reports(work, start, count, order, events)
        return start + count * record.size, count * record.period

    def _find_record(self, work: bytes, start: int, first: tuple[int, int, int]) -> _Record | None:
        """The repeating pattern of report messages that starts at `start`: the messages up to
        the next one with the same header as the first (at most MAX_PERIOD), each an unpadded
        report of a described sender and type, no (sender, type) twice. Cached by `first`."""
        pattern: list[tuple[int, int, int]] = []
        offset, limit = start, len(work) - HEADER_SIZE
        head = first
        while True:
            length, sender_id, type_id = head
            frame = REPORT_FRAMES.get(self._types.get(type_id, ""))
            if frame is None or length != frame.itemsize:
                return None
            if self._senders.get(sender_id) is None or head in pattern:
                return None
            pattern.append(head)
            offset += length
            if offset > limit or len(pattern) >= MAX_PERIOD:
                closed = False  # the pattern may go on: a record for this read, not cached
                break
            head = _RUN_HEAD.unpack_from(work, offset)
            if head == first:
                closed = True
                break
        record = _Record(
            pattern,
            [self._types[t] for _, _, t in pattern],
            [self._senders[s] for _, s, _ in pattern],
        )
        if closed:
            if len(self._records) >= 64:
                self._records.clear()
            self._records[first] = record
        return record

    def gather(
        self,
        buf: bytes,
        index: FrameIndex,
        first: int,
        stop: int,
        order: int,
        events: list[VrpnEvent],
    ) -> npt.NDArray[np.bool_]:
        """The reports among user frames `first`..`stop` of `index` (no system message among
        them) as one batch per kind and sender; `order` is the arrival order of frame 0.
        Returns which of the frames were reports of a described type (the rest are not)."""
        types = index.type[first:stop]
        handled = np.zeros(stop - first, dtype=bool)
        for type_id in sorted(set(types.tolist())):  # (np.unique costs more on short runs)
            name = self._types.get(type_id)
            if name is None or name not in REPORT_KINDS:
                continue
            mask = types == type_id
            handled |= mask
            rows = np.flatnonzero(mask) + first
            self._kind(buf, index, rows, name, order, events)
        return handled

    def _kind(
        self,
        buf: bytes,
        index: FrameIndex,
        rows: npt.NDArray[np.intp],
        name: str,
        order: int,
        events: list[VrpnEvent],
    ) -> None:
        """The reports of kind `name` in frames `rows` of `index`: the short ones dropped, the
        rest gathered at once, then one batch per sender (views of these)."""
        size, _ = REPORT_KINDS[name]
        short = index.lengths[rows] < HEADER_SIZE + size
        if short.any():
            bad = int(short.sum())
            self._stats.drop(f"{name} body shorter than {size} bytes")
            events.append(
                PacketDropped(
                    protocol=PROTOCOL,
                    reason=f"{bad} {name} bodies shorter than {size} bytes",
                    offset=int(index.offsets[rows[short][0]]),
                )
            )
            rows = rows[~short]
            if not rows.size:
                return
        sensor, values = gather_reports(buf, index.offsets[rows], name)
        time = index.sec[rows] + index.usec[rows] * 1e-6
        arrival = rows.astype(np.int64) + order
        senders = index.sender[rows]
        ids = sorted(set(senders.tolist()))
        parts: list[tuple[int, slice]] = [(ids[0], slice(None))]
        if len(ids) > 1:  # group the rows by sender, each group in arrival order
            by_sender = np.argsort(senders, kind="stable")
            sensor, values = sensor[by_sender], values[by_sender]
            time, arrival = time[by_sender], arrival[by_sender]
            bounds = [*np.searchsorted(senders[by_sender], ids).tolist(), len(rows)]
            parts = [
                (sender_id, slice(bounds[i], bounds[i + 1])) for i, sender_id in enumerate(ids)
            ]
        for sender_id, part in parts:
            sender = self._senders.get(sender_id)
            if sender is None:
                count_undescribed(self._stats, len(sensor[part]))
                continue
            part_values = values[part]
            events.append(
                TrackerReports(
                    sender=sender,
                    kind=name,
                    sensor=sensor[part],
                    vector=part_values[:, 0:3],
                    quaternion=part_values[:, 3:7],
                    dt=part_values[:, 7] if values.shape[1] > 7 else None,
                    time=time[part],
                    order=arrival[part],
                )
            )
