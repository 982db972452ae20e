"""`robowire listen zenoh://HOST:PORT`: the world of publishing gateways, subscribed into ours.

Sources keep the publisher's names (`?prefix=site-a/` puts a prefix before each, for gateways
whose source names would clash); devices, kinds, names, links, attributes, poses, geodetic
fixes, telemetry with units and log events arrive as the publisher has them.

Zenoh delivers on its own threads; each sample is put, as bytes, into an inbox and the event
loop is woken once per batch (and takes at most `READ_FRAMES` at once, as a TCP read is
bounded: the rest at its next turn). The inbox holds at most `INBOX_BYTES` of payloads (and
`INBOX_FRAMES` frames): past that, the oldest STATE frame goes first (the oldest frame if none
is), counted in the source's drops, so a subscriber whose loop stalls keeps its memory and
never holds up Zenoh.

Overload (`robowire.transport.budget`, as for every source): a STATE frame is a `Report`
(`StateReceived`) that covers its source's slots and columns (a frame carries the changed
devices' columns only, so a newer one makes an older one stale only when both name the same
slots and the same columns, and the same devices by them: no DEVICES frame of that source
between them described a new device or numbered them afresh, `Identities`). A DEVICES frame
that only describes known devices again (their names, links and attributes, which a
SpyGlass network changes many times a second) is a `Report` of its slots too
(`DevicesDescribed`). While the gateway is behind, the frames wait for the source's credit
and a stale one is shed (counted in `shed`) as the newer one comes; a DEVICES frame that says
who a slot is, and LOG frames, are never shed. A STATE frame's columns are read only when it
is written (`codec.unpack`): a shed one costs its check alone.

A BATCH frame (a publisher's small STATE frames of one tick, `robowire/=batch/=state`) is
taken apart into a `StateReceived` per frame, each of the source it names, in order: from
there on they are as frames from separate puts.

Late joining: when a publishing gateway's liveliness token appears (at start, after a
reconnect, a new gateway at the router) this side asks `robowire/*/=snapshot`, and it asks
again for a source whose STATE names devices it has not been told about (a DEVICES frame
still on its way, or lost with a link).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import operator
import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from robowire.endpoints import Endpoint
from robowire.errors import DecodeError, RobowireError, TransportError
from robowire.service import Source
from robowire.timebase import monotonic
from robowire.wire import PacketDropped, Report
from robowire.world import World
from robowire.world.model import ATTRIBUTES, LINKS, ORIENTATION, SOURCE_TIME
from robowire.zenoh import codec, keys
from robowire.zenoh.net import Link, link_of, open_session

if TYPE_CHECKING:
    import zenoh

log = logging.getLogger("robowire")

SOURCE_OPTIONS = frozenset({"mode", "scout", "prefix"})
INBOX_BYTES = 64 << 20  # payload bytes waiting for the event loop before frames are dropped
INBOX_FRAMES = 4096  # frames waiting for the event loop before frames are dropped
READ_FRAMES = 64  # frames decoded at one wake-up at most (a few milliseconds: see `Inbox.wait`)
ASK_AGAIN = 1.0  # seconds between two snapshot queries for the same source
QUERY_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Received:
    """One frame of a publishing gateway's source."""

    source: str
    frame: codec.Frame
    size: int = 0  # its payload's bytes


@dataclass(frozen=True, slots=True)
class StateReceived(Report):
    """One STATE frame of a publishing gateway's source, read when it is written (see the
    module docstring: what it covers)."""

    source: str
    epoch: int  # the source's identity epoch (`Identities`): which device each slot is
    packed: codec.Packed

    def covers(self) -> Hashable:
        return (self.source, self.epoch, self.packed.slots, self.packed.names)


@dataclass(frozen=True, slots=True)
class DevicesDescribed(Report):
    """A DEVICES frame that describes again devices already described, at the same slots (new
    names, links or attributes): a newer one of the same slots states all of that anew, so
    it makes this one stale."""

    source: str
    epoch: int
    frame: codec.Devices
    size: int = 0

    def covers(self) -> Hashable:
        return (self.source, self.epoch, self.frame.slots)


class Identities:
    """Which device each publisher's slot is, as the DEVICES frames read so far said, and an
    epoch per source that moves on when a frame says a slot is a device it was not before (a
    new device, or a restarted publisher numbering its devices afresh). Reports of one epoch
    name the same devices by the same slots, so a newer one may make an older one stale;
    across epochs, never."""

    def __init__(self) -> None:
        self._ids: dict[str, dict[int, str]] = {}
        self.epochs: dict[str, int] = {}

    def epoch(self, source: str) -> int:
        return self.epochs.get(source, 0)

    def describe(self, source: str, frame: codec.Devices) -> bool:
        """Take a DEVICES frame in; True if it changed no slot's device (an epoch moved on
        otherwise)."""
        ids = self._ids.setdefault(source, {})
        if all(map(operator.eq, map(ids.get, frame.slots), frame.ids)):
            return True
        ids.update(zip(frame.slots, frame.ids, strict=True))
        self.epochs[source] = self.epoch(source) + 1
        return False


class ZenohAdapter:
    """Frames -> world. Publisher slots map to ours through one array per source.

    It writes only into tables it made: a source the world has already (this gateway's own,
    published and heard back through a router, or another subscriber's) is left alone and
    its frames are counted in `foreign`, so two gateways can publish and subscribe on one bus
    without echoing each other's sources back and forth.
    """

    def __init__(self, world: World, prefix: str = "") -> None:
        self.world = world
        self.prefix = prefix
        self.slot_maps: dict[str, npt.NDArray[np.intp]] = {}  # remote slot -> ours (-1: unknown)
        self.unknown: set[str] = set()  # sources whose STATE named undescribed slots
        self.unknown_rows = 0
        self.owned: set[str] = set()  # the world's tables this adapter made
        self.foreign: set[str] = set()  # sources heard that belong to someone else here
        # per source, the slots of its last STATE frame (bytes) and ours, while all are known
        self._same_slots: dict[str, tuple[bytes, npt.NDArray[np.intp]]] = {}

    def _mine(self, source: str) -> bool:
        name = self.prefix + source
        if name in self.owned:
            return True
        if name in self.world.tables:
            self.foreign.add(name)
            return False
        self.owned.add(name)
        return True

    def apply(self, events: Sequence[object], receive_time: float) -> int:
        taken = 0
        for event in events:
            if isinstance(event, StateReceived):
                if self._mine(event.source):
                    taken += 1
                    self._state(event.source, event.packed.state(), receive_time)
            elif isinstance(event, DevicesDescribed):
                if self._mine(event.source):
                    taken += 1
                    self._devices(event.source, event.frame, receive_time)
            elif isinstance(event, Received):
                if not self._mine(event.source):
                    continue
                taken += 1
                match event.frame:
                    case codec.State() as state:
                        self._state(event.source, state, receive_time)
                    case codec.Devices() as devices:
                        self._devices(event.source, devices, receive_time)
                    case codec.Log() as entry:
                        self.world.log(
                            self.prefix + event.source,
                            entry.device,
                            entry.text,
                            time=entry.time,
                            level=entry.level,
                        )
        return taken

    def _devices(self, source: str, frame: codec.Devices, receive_time: float) -> None:
        table = self.world.table(self.prefix + source)
        if frame.protocol is not None:  # the devices keep their native names' protocol
            table.protocol = frame.protocol
        known = len(table)  # slots below this existed before this frame
        ours = []
        for device, kind, name, links, attributes in zip(
            frame.ids, frame.kinds, frame.names, frame.links, frame.attributes, strict=True
        ):
            slot = table.slot(device, kind, name)
            table.names[slot] = name
            table.links[slot] = links
            table.attributes[slot] = dict(attributes)
            ours.append(slot)
        if not ours:
            return
        remote = np.asarray(frame.slots, dtype=np.intp)
        mapping = self.slot_maps.get(source, np.empty(0, dtype=np.intp))
        if len(mapping) <= remote.max():
            grown = np.full(int(remote.max()) + 1, -1, dtype=np.intp)
            grown[: len(mapping)] = mapping
            mapping = self.slot_maps[source] = grown
        mapping[remote] = ours
        self._same_slots.pop(source, None)
        changed = np.asarray(ours, dtype=np.intp)
        changed = changed[changed < known]  # new devices are published with their first state
        if len(changed):
            self.world.update(
                table.source, changed, receive_time=receive_time, changed={LINKS, ATTRIBUTES}
            )

    def _ours(self, source: str, remote: codec.SlotArray) -> npt.NDArray[np.intp]:
        """Our slots of a publisher's (-1: not described yet)."""
        mapping = self.slot_maps.get(source, np.empty(0, dtype=np.intp))
        if len(remote) and int(remote.max()) < len(mapping):  # the usual case: one gather
            return mapping[remote]
        inside = remote < len(mapping)
        ours = np.full(len(remote), -1, dtype=np.intp)
        ours[inside] = mapping[remote[inside]]
        return ours

    def _state(self, source: str, frame: codec.State, receive_time: float) -> None:
        remote = frame.slots.tobytes()  # a publisher sends the same slots again and again
        same = self._same_slots.get(source)
        if same is not None and same[0] == remote:
            ours, rows = same[1], None
        else:
            ours = self._ours(source, frame.slots)
            known = ours >= 0
            if known.all():
                ours.flags.writeable = False  # held for the next frames, and by the Updates
                self._same_slots[source] = (remote, ours)
                rows = None
            else:
                self.unknown.add(source)
                self.unknown_rows += int((~known).sum())
                if not known.any():
                    return
                rows = np.flatnonzero(known)

        def take(values: codec.FloatArray) -> codec.FloatArray:
            return values if rows is None else values[rows]

        slots = ours if rows is None else ours[rows]
        table = self.world.table(self.prefix + source)
        vectors: dict[str, Any] = {}
        telemetry: dict[str, tuple[codec.FloatArray, str]] = {}
        changed: set[str] = set()
        source_time = None
        for name, column in frame.columns.items():
            values = take(column.values)
            if column.telemetry:
                telemetry[name] = (values, column.unit)
            elif name == SOURCE_TIME:
                source_time = values
            elif name == ORIENTATION:  # a NaN row means "no orientation": not written
                has = ~np.isnan(values[:, 0])
                if has.all():
                    vectors[name] = values
                else:
                    table.orientation[slots[has]] = values[has]
                    table.has_orientation[slots[has]] = True
                    changed.add(ORIENTATION)
            else:
                vectors[name] = values
        self.world.update(
            table.source,
            slots,
            receive_time=receive_time,
            source_time=source_time,
            telemetry=telemetry,
            changed=changed,
            **vectors,
        )


class Inbox:
    """Samples from Zenoh's threads, handed to the event loop in batches (bounded: see the
    module docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        max_bytes: int = INBOX_BYTES,
        max_frames: int = INBOX_FRAMES,
    ) -> None:
        self._loop = loop
        self.max_bytes = max_bytes
        self.max_frames = max_frames
        self._frames: deque[tuple[str, bytes]] = deque()
        self._lock = threading.Lock()  # Zenoh's threads put, the event loop takes
        self._wake = asyncio.Event()
        self._signalled = False
        self.bytes = 0  # of the payloads waiting
        self.peak = 0  # the most `bytes` was
        self.dropped = 0

    def sample(self, sample: zenoh.Sample) -> None:
        """A subscriber's callback (a Zenoh thread)."""
        self.put(str(sample.key_expr), sample.payload.to_bytes())

    def reply(self, reply: zenoh.Reply) -> None:
        """A query's callback (a Zenoh thread)."""
        if reply.ok is not None:
            self.put(str(reply.ok.key_expr), reply.ok.payload.to_bytes())

    def put(self, key: str, payload: bytes) -> None:
        """One frame in (any thread); past the bounds, the oldest STATE frames out."""
        with self._lock:
            frames = self._frames
            frames.append((key, payload))
            self.bytes += len(payload)
            while len(frames) > 1 and (
                self.bytes > self.max_bytes or len(frames) > self.max_frames
            ):
                self._drop_oldest()
            self.peak = max(self.peak, self.bytes)
            wake, self._signalled = not self._signalled, True
        if wake:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                self._loop.call_soon_threadsafe(self._wake.set)

    def _drop_oldest(self) -> None:
        """Drop the oldest STATE frame, or the oldest frame if none is one."""
        frames = self._frames
        at = next((i for i, (_, p) in enumerate(frames) if codec.is_state(p)), 0)
        _, payload = frames[at]
        del frames[at]
        self.bytes -= len(payload)
        self.dropped += 1

    async def wait(self) -> list[tuple[str, bytes]]:
        """The oldest frames waiting, at most `READ_FRAMES` (waits for one): the rest are
        taken after the loop has gone round, so no wake-up holds it long."""
        await self._wake.wait()
        self._wake.clear()
        with self._lock:
            frames = self._frames
            if len(frames) <= READ_FRAMES:
                taken, self._frames = list(frames), deque()
                self.bytes = 0
                self._signalled = False
            else:
                taken = [frames.popleft() for _ in range(READ_FRAMES)]
                self.bytes -= sum(len(payload) for _, payload in taken)
                self._loop.call_soon(self._wake.set)  # (an Event already set would not yield)
        return taken


@functools.lru_cache(maxsize=4096)
def _parsed(key: str) -> tuple[str, str] | None:
    return keys.parse(key)  # a few keys, again and again


def decode_all(
    frames: Sequence[tuple[str, bytes]], identities: Identities
) -> list[Received | StateReceived | DevicesDescribed | PacketDropped]:
    """Frames as events: what decodes (a STATE frame checked, its columns not read yet), and
    a PacketDropped for what does not. `identities` follows each source's DEVICES frames (kept
    from one call to the next)."""
    events: list[Received | StateReceived | DevicesDescribed | PacketDropped] = []
    for key, payload in frames:
        where = _parsed(key)
        if where is None:
            continue  # another tool's key under robowire/, or a device's JSON key
        source = where[0]
        try:
            frame = codec.unpack(payload)
        except DecodeError as exc:
            events.append(
                PacketDropped(
                    protocol=codec.PROTOCOL, reason=f"{key}: {exc.reason}", offset=exc.offset
                )
            )
            continue
        if isinstance(frame, codec.Packed):
            events.append(StateReceived(source, identities.epoch(source), frame))
        elif isinstance(frame, codec.Batched):  # a tick's STATE frames: each names its source
            events += [
                StateReceived(name, identities.epoch(name), packed) for name, packed in frame.states
            ]
        elif isinstance(frame, codec.Devices) and identities.describe(source, frame):
            events.append(DevicesDescribed(source, identities.epoch(source), frame, len(payload)))
        else:
            events.append(Received(source, frame, len(payload)))
    return events


def payload_size(event: object) -> int:
    """The payload bytes behind an event of `decode_all` (what a source's hold counts)."""
    if isinstance(event, StateReceived):
        return len(event.packed.payload)
    return getattr(event, "size", 0)


class ZenohSource(Source):
    """Subscribes to publishing gateways (see the module docstring)."""

    event_size = staticmethod(payload_size)  # its frames are up to megabytes: a hold in bytes

    def __init__(self, link: Link, prefix: str = "") -> None:
        super().__init__(f"zenoh://{link.host}:{link.port}")
        self.link = link
        self.prefix = prefix
        self.session: zenoh.Session | None = None
        self.inbox: Inbox | None = None
        self._asked: dict[str, float] = {}  # source ("*": all) -> when last asked
        self._inbox_drops = 0
        self._inbox_peak = 0  # of the inboxes of connections that ended
        self._identities = Identities()  # who each publisher's slots are (`decode_all`)
        self._said: set[str] = set()  # foreign sources said

    def new_adapter(self, world: World) -> ZenohAdapter:
        return ZenohAdapter(world, self.prefix)

    async def connect(self, world: World) -> None:
        try:
            session = await asyncio.to_thread(open_session, self.link)
        except TransportError as exc:
            if self.link.mode == "listen":  # a port in use will not free itself: say so, end
                raise RobowireError(str(exc)) from None
            raise
        loop = asyncio.get_running_loop()
        inbox = self.inbox = Inbox(loop)
        self.session = session
        declared: list[Any] = []
        try:
            declared.append(session.declare_subscriber(f"{keys.ROOT}/*/*", inbox.sample))
            declared.append(
                session.liveliness().declare_subscriber(
                    f"{keys.GATEWAY}/*",
                    lambda sample: loop.call_soon_threadsafe(self._gateway_seen, sample),
                    history=True,  # the gateways up now: each is asked for, as it is seen
                )
            )
            self.connected()
            while True:
                frames = await inbox.wait()
                self.deliver(decode_all(frames, self._identities), monotonic())
                self._count_losses()
        finally:
            for entity in declared:
                entity.undeclare()
            self.session = None
            self._inbox_peak = max(self._inbox_peak, inbox.peak)
            await asyncio.to_thread(cast(Callable[[], None], session.close))

    def buffered_peak(self) -> int:
        return super().buffered_peak() + max(self._inbox_peak, self.inbox.peak if self.inbox else 0)

    def _gateway_seen(self, sample: zenoh.Sample) -> None:
        import zenoh

        if sample.kind == zenoh.SampleKind.PUT:
            log.info("%s: gateway %s is up", self.name, str(sample.key_expr).rsplit("/", 1)[-1])
            self.ask("*", force=True)

    def ask(self, source: str, *, force: bool = False) -> None:
        """Query the snapshot of `source` ("*": every source), at most every ASK_AGAIN s."""
        import zenoh

        now = monotonic()
        if self.session is None or self.inbox is None:
            return
        if not force and now - self._asked.get(source, -ASK_AGAIN) < ASK_AGAIN:
            return
        self._asked[source] = now
        chunk = "*" if source == "*" else keys.escape(source)
        self.session.get(
            f"{keys.ROOT}/{chunk}/{keys.SNAPSHOT}",
            self.inbox.reply,
            consolidation=zenoh.ConsolidationMode.NONE,
            timeout=QUERY_TIMEOUT,
        )

    def _count_losses(self) -> None:
        adapter = self.adapter
        if isinstance(adapter, ZenohAdapter) and adapter.foreign - self._said:
            for name in sorted(adapter.foreign - self._said):
                log.info("%s: source %r is this gateway's own: not taken in", self.name, name)
            self._said |= adapter.foreign
        if isinstance(adapter, ZenohAdapter) and adapter.unknown:
            for source in adapter.unknown:
                self.ask(source)
            adapter.unknown.clear()
            self.stats.drop("state of devices not described yet: asked for a snapshot")
        if self.inbox is not None and self.inbox.dropped > self._inbox_drops:
            self.stats.dropped += self.inbox.dropped - self._inbox_drops
            self.stats.last_drop_reason = "fell behind: oldest frames dropped"
            self._inbox_drops = self.inbox.dropped


def open_source(endpoint: Endpoint) -> ZenohSource:
    """The source of a `zenoh://HOST:PORT?mode=connect|listen&scout=0|1&prefix=P` URL."""
    endpoint.check_options(SOURCE_OPTIONS, "a Zenoh subscriber")
    return ZenohSource(link_of(endpoint, "connect"), endpoint.option("prefix", ""))
