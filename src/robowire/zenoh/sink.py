"""`robowire serve zenoh://HOST:PORT`: the world, published on Zenoh (keys in `keys`).

Each pull sends, per changed source, one STATE frame with the changed devices' columns (its
publisher has congestion control DROP: a latest state may be lost to a slow link and the next
one replaces it); a DEVICES frame before it when the source has new devices or links or
attributes changed, and one LOG frame per log event (both BLOCK: never dropped by Zenoh).

Small STATE frames are batched per tick (`?batch=MS`, 1 ms by default; 0: not at all): the
frames of one pull go in one put (a BATCH frame on `robowire/=batch/=state` when there are
several), and frames that come within a tick of the last put wait for that tick's end and go
together. Each put
wakes Zenoh's threads on both sides (~50 us each here); frames of a stream of pulls share it.
A quiet link's frame goes at once; what the batching costs is how long frames waited
(`ZenohSink.held`). A frame of `BATCH_BYTES` or more is put on its own, at once (after the
frames held before it: a source's older state never arrives after its newer), and so are
frames held once they are `HELD_BYTES`.

The event loop never waits for the network: a STATE frame with nothing queued before it is
put at once (DROP never waits), everything else by one writer thread, in order, from a queue
bounded in bytes. A BLOCK put that waits for a stalled peer holds up only that thread; behind
it, STATE frames are dropped first once the queue holds `STATE_BYTES`, and everything past
`MAX_BYTES` (each drop counted). Big payloads go through Zenoh's shared memory (`Writer`).

With `?prefix=P` each source is published as `P<source>` (gateways at one router whose
source names would clash). A late joiner gets everything by querying `robowire/*/=snapshot`
(answered with a DEVICES and a STATE frame of every device); `z_get -s
'robowire/<source>/<device>'` answers one device as JSON. Queries arrive on Zenoh's
threads and are answered on the event loop, where the world is.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import orjson

from robowire.endpoints import Endpoint
from robowire.service import Sink
from robowire.timebase import monotonic
from robowire.world import LogEvent, Update, World
from robowire.world.model import (
    ATTRIBUTES,
    GEODETIC,
    LINKS,
    ORIENTATION,
    POSITION,
    SOURCE_TIME,
    VELOCITY,
)
from robowire.world.table import SourceTable, run_of
from robowire.zenoh import codec, keys
from robowire.zenoh.net import Link, link_of, open_when_up

if TYPE_CHECKING:
    import zenoh

log = logging.getLogger("robowire")

SINK_OPTIONS = frozenset({"mode", "scout", "rate", "prefix", "batch"})
STATE_BYTES = 16 << 20  # queued bytes past which new STATE frames are dropped
MAX_BYTES = 64 << 20  # queued bytes past which every new frame is dropped
SHM_BYTES = 64 << 10  # payloads this big or bigger go through shared memory
SHM_POOL = 64 << 20  # the shared-memory pool of one sink
VECTORS = (POSITION, VELOCITY, GEODETIC)
BATCH_TICK = 0.001  # seconds: small STATE frames within this of the last put wait for its end
BATCH_BYTES = SHM_BYTES  # a STATE frame this big goes on its own, at once
HELD_BYTES = 1 << 20  # held frames this big go at once (a batch that big goes in shared memory)


def state_frame(
    table: SourceTable,
    slots: np.ndarray,
    fields: frozenset[str],
    values: Mapping[str, np.ndarray] | None = None,
    receive_time: float | None = None,
) -> codec.State:
    """The current values of `fields` (and the source time) of `slots` (which rise: a pull's
    or every slot), as a STATE frame.

    `values` are those columns at `slots` already taken (a latest-state pull's `Update.values`):
    they are used as they are, so a frame costs no copy of its own before encoding; a run of
    slots is read as a view of a column (the frame is encoded before the world changes)."""
    taken = values or {}
    at = run_of(slots, increasing=True)

    def column(name: str, source: np.ndarray) -> np.ndarray:
        got = taken.get(name)
        return source[at] if got is None else got

    columns: dict[str, codec.Column] = {}
    for name in VECTORS:
        if name in fields:
            columns[name] = codec.Column(values=column(name, getattr(table, name)))
    if ORIENTATION in fields:
        orientation = column(ORIENTATION, table.orientation)
        oriented = table.has_orientation[at]
        if not oriented.all():
            orientation = orientation.copy()
            orientation[~oriented] = np.nan  # NaN row: no orientation
        columns[ORIENTATION] = codec.Column(values=orientation)
    for name in sorted(fields):
        telemetry = table.telemetry.get(name)
        if telemetry is not None:
            columns[name] = codec.Column(
                values=column(name, telemetry), unit=table.units[name], telemetry=True
            )
    source_time = column(SOURCE_TIME, table.source_time)
    # a source without its own clock sends none (fmax skips NaN: NaN only if all are)
    if len(source_time) and not np.isnan(np.fmax.reduce(source_time)):
        columns[SOURCE_TIME] = codec.Column(values=source_time)
    if receive_time is None:
        receive_time = float(np.nanmax(table.receive_time[slots], initial=0.0))
    return codec.State(receive_time=receive_time, slots=slots, columns=columns)


def devices_frame(table: SourceTable, slots: list[int]) -> codec.Devices:
    return codec.Devices(
        slots=tuple(slots),
        ids=tuple(table.ids[s] for s in slots),
        kinds=tuple(table.kinds[s] for s in slots),
        names=tuple(table.names[s] for s in slots),
        links=tuple(table.links[s] for s in slots),
        attributes=tuple(dict(table.attributes[s]) for s in slots),
        protocol=table.protocol,
    )


def snapshot_frames(table: SourceTable) -> list[codec.Frame]:
    """Every device of a table: who they are, then every column that holds anything."""
    slots = np.arange(len(table), dtype=np.intp)
    present = {name for name in VECTORS if not np.isnan(getattr(table, name)[: len(table)]).all()}
    if table.has_orientation[: len(table)].any():
        present.add(ORIENTATION)
    present |= set(table.telemetry)
    return [devices_frame(table, slots.tolist()), state_frame(table, slots, frozenset(present))]


def _drop(query: zenoh.Query) -> None:
    """Finalize a query (the querier's `get` ends once every queryable has dropped it)."""
    cast(Callable[[], None], query.drop)()


class Writer:
    """Talks to Zenoh for a sink: (key, payload, reliable) in order.

    A DROP put never waits, so a STATE frame is put at once from the caller's thread when
    nothing is queued before it; everything else goes through the one writer thread, in
    order. A payload of `SHM_BYTES` or more goes into Zenoh's shared memory: a subscriber on
    the same machine maps it instead of reading it through a socket (one copy less each side,
    and ~3x the messages/s of a TCP put at 680 kB here); Zenoh sends it over the network as
    usual to one elsewhere.
    """

    def __init__(self, session: zenoh.Session) -> None:
        import zenoh

        self._zenoh = zenoh
        self._session = session
        self._block = zenoh.CongestionControl.BLOCK
        self._drop = zenoh.CongestionControl.DROP
        self._publishers: dict[str, zenoh.Publisher] = {}
        self._queue: deque[tuple[str, bytes, bool] | None] = deque()
        self._ready = threading.Condition()
        self._busy = False  # the thread is putting a frame
        self._shm: Any = None  # the shared-memory provider, made on first use
        self.bytes = 0
        self.dropped = 0
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="robowire-zenoh", daemon=True)
        self._thread.start()

    def put(self, key: str, payload: bytes, reliable: bool) -> bool:
        """Send or queue one frame; False (and counted) if the queue is over its bound."""
        with self._ready:
            if not reliable and not self._queue and not self._busy:
                return self._send(key, payload, reliable)
            if self.bytes + len(payload) > (MAX_BYTES if reliable else STATE_BYTES):
                self.dropped += 1
                return False
            self.bytes += len(payload)
            self._queue.append((key, payload, reliable))
            self._ready.notify()
        return True

    def close(self, timeout: float = 2.0) -> None:
        with self._ready:
            self._queue.append(None)
            self._ready.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                self._busy = False
                while not self._queue:
                    self._ready.wait()
                item = self._queue.popleft()
                if item is None:
                    return
                key, payload, reliable = item
                self.bytes -= len(payload)
                self._busy = True
            if not self._send(key, payload, reliable):
                return

    def _send(self, key: str, payload: bytes, reliable: bool) -> bool:
        try:
            data = self._shared(payload) if len(payload) >= SHM_BYTES else payload
            if reliable:
                self._session.put(key, data, congestion_control=self._block)
            else:
                publisher = self._publishers.get(key)
                if publisher is None:
                    publisher = self._session.declare_publisher(key, congestion_control=self._drop)
                    self._publishers[key] = publisher
                publisher.put(data)
            self.sent += 1
            return True
        except Exception as exc:  # a closed session while ending: nothing left to send to
            log.debug("zenoh put %s: %s", key, exc)
            return False

    def _shared(self, payload: bytes) -> Any:
        """The payload in a shared-memory buffer, or as it is when there is none to be had."""
        shm = self._zenoh.shm
        try:
            if self._shm is None:
                self._shm = shm.ShmProvider.default_backend(SHM_POOL)
            # the buffers the subscribers are done with, reclaimed first: the next one is
            # where the last ones were, still in the cache (a copy into a cold 680 kB buffer
            # took 66 us here, into a reused one 28 us), and the pool's pages stay few
            self._shm.garbage_collect()
            buffer = self._shm.alloc(len(payload), shm.GarbageCollect())
            buffer[0 : len(payload)] = payload
            return self._zenoh.ZBytes(buffer)
        except Exception:  # no shared memory here, or the pool is full: a socket it is
            return payload


@dataclass(slots=True)
class Held:
    """What batching costs: STATE frames that waited for their tick's end, how long in all
    and the longest wait (seconds)."""

    frames: int = 0
    puts: int = 0
    waited: float = 0.0
    longest: float = 0.0


class ZenohSink(Sink):
    """Publishes the world on Zenoh (see the module docstring)."""

    encodes_at_once = True  # `write` encodes a pull's values before it returns

    def __init__(
        self, link: Link, rate: float | None = None, prefix: str = "", tick: float = BATCH_TICK
    ) -> None:
        super().__init__(f"zenoh://{link.host}:{link.port}")
        self.link = link
        self.announce = "listening on" if link.mode == "listen" else "publishing to"
        self.max_rate = rate or None
        self.prefix = prefix  # put before each source name published (sites that share names)
        self.session: zenoh.Session | None = None
        self.writer: Writer | None = None
        self._announced: dict[str, int] = {}  # source -> devices described so far
        self._state_keys: dict[str, str] = {}  # source -> the key of its STATE frames
        self._world: World | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._declared: list[Any] = []
        self.sources: frozenset[str] | None = None  # the sources published (None: every one)
        self.tick = tick  # batching's (0: none, every frame on its own key)
        self.held = Held()
        self._held: list[tuple[str, str, bytes, float]] = []  # key, source, payload, since
        self._held_bytes = 0
        self._flushing: asyncio.TimerHandle | None = None
        self._last_put = float("-inf")  # when small STATE frames were last put

    async def serve(self, world: World) -> None:
        self._world = world
        self._loop = asyncio.get_running_loop()
        if self.link.mode == "connect":  # ready at once: the sources start, frames wait
            self.listening((self.link.host, self.link.port))
        session = await open_when_up(self.link, self.name)
        self.session = session
        self.writer = Writer(session)
        zid = str(session.info.zid())
        self._declared = [
            session.declare_queryable(f"{keys.ROOT}/**", self._on_query),
            session.liveliness().declare_token(f"{keys.GATEWAY}/{zid}"),
        ]
        if self.link.mode == "listen":
            self.listening((self.link.host, self.link.port))
        await asyncio.Future()

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self.writer is None:
            return True
        only = self.sources
        small: list[tuple[str, str, bytes]] = []  # this pull's small STATE frames
        for item in items:
            if only is not None and item.source not in only:
                continue
            if isinstance(item, LogEvent):
                frame = codec.Log(
                    device=item.device_id, text=item.text, level=item.level, time=item.time
                )
                self._put(self._key(item.source, keys.LOG), frame, reliable=True)
            elif len(item) and (table := world.tables.get(item.source)) is not None:
                self._publish(table, item, small)
        if small:
            self._batch(small)
        return True

    def _publish(
        self, table: SourceTable, update: Update, small: list[tuple[str, str, bytes]]
    ) -> None:
        source = table.source
        described = self._announced.get(source, 0)
        if len(table) > described:
            self._announced[source] = len(table)
            new = devices_frame(table, list(range(described, len(table))))
            self._put(self._key(source, keys.DEVICES), new, reliable=True)
        if LINKS in update.fields or ATTRIBUTES in update.fields:
            changed = devices_frame(table, update.slots.tolist())
            self._put(self._key(source, keys.DEVICES), changed, reliable=True)
        state = state_frame(table, update.slots, update.fields, update.values, update.receive_time)
        if len(state.columns) > (SOURCE_TIME in state.columns):  # more than the source time
            key = self._state_keys.get(source)
            if key is None:
                key = self._state_keys[source] = self._key(source, keys.STATE)
            payload = codec.encode(state)
            if len(payload) < BATCH_BYTES:
                small.append((key, self.prefix + source, payload))
            else:
                self._flush()  # what waits goes first: a source's older state before its newer
                self._states([(key, self.prefix + source, payload)])

    def _batch(self, small: list[tuple[str, str, bytes]]) -> None:
        """A pull's small STATE frames: put now if no put went in the last tick, else held
        for the tick's end (or until they are `HELD_BYTES`)."""
        if self.tick <= 0:  # no batching: each on its own key, as subscribers before it read
            for frame in small:
                self._states([frame])
            return
        now = monotonic()
        if not self._held and now - self._last_put >= self.tick:
            self._states(small)
            return
        self._held += [(key, source, payload, now) for key, source, payload in small]
        self._held_bytes += sum(len(payload) for _, _, payload in small)
        if self._held_bytes >= HELD_BYTES or now >= self._last_put + self.tick:
            self._flush()  # full, or the tick is over (its timer is late behind a busy loop)
        elif self._flushing is None and self._loop is not None:
            due = max(0.0, self._last_put + self.tick - now)
            self._flushing = self._loop.call_later(due, self._flush)

    def _flush(self) -> None:
        """Put the STATE frames held, and count how long they waited."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        if not self._held:
            return
        held, self._held, self._held_bytes = self._held, [], 0
        now = monotonic()
        waits = [now - since for *_, since in held]
        self.held.frames += len(held)
        self.held.puts += 1
        self.held.waited += sum(waits)
        self.held.longest = max(self.held.longest, *waits)
        self._states([(key, source, payload) for key, source, payload, _ in held])

    def _states(self, states: list[tuple[str, str, bytes]]) -> None:
        """STATE frames in one put: one on its own key, several as a BATCH."""
        self._last_put = monotonic()
        if len(states) == 1:
            key, _, payload = states[0]
            self._send(key, payload, 1)
            return
        for at in range(0, len(states), codec.MAX_BATCH):
            chunk = states[at : at + codec.MAX_BATCH]
            batch = codec.encode_batch([(source, payload) for _, source, payload in chunk])
            self._send(keys.BATCH, batch, len(chunk))

    def _send(self, key: str, payload: bytes, frames: int) -> None:
        if self.writer is None:
            return
        if self.writer.put(key, payload, reliable=False):
            self.stats.messages_out += frames
        else:
            self.stats.drop("zenoh: the send queue is full (a peer is stalled)")

    def _key(self, source: str, last: str) -> str:
        return keys.key(self.prefix + source, last)

    def _put(self, key: str, frame: codec.Frame, *, reliable: bool) -> None:
        assert self.writer is not None
        payload = codec.encode(frame)
        if self.writer.put(key, payload, reliable):
            self.stats.messages_out += 1
        else:
            self.stats.drop("zenoh: the send queue is full (a peer is stalled)")

    def _on_query(self, query: zenoh.Query) -> None:
        """On a Zenoh thread: answer on the event loop, where the world is."""
        loop = self._loop
        if loop is None or loop.is_closed():
            _drop(query)
            return
        try:
            loop.call_soon_threadsafe(self._answer, query)
        except RuntimeError:  # the loop closed meanwhile
            _drop(query)

    def _answer(self, query: zenoh.Query) -> None:
        import zenoh

        try:
            world = self._world
            asked = query.key_expr
            snapshot_only = str(asked).endswith("/" + keys.SNAPSHOT)
            only = self.sources
            for table in list(world.tables.values()) if world is not None else []:
                if not len(table) or (only is not None and table.source not in only):
                    continue
                snapshot = self._key(table.source, keys.SNAPSHOT)
                if zenoh.KeyExpr(snapshot).intersects(asked):
                    for frame in snapshot_frames(table):
                        query.reply(snapshot, codec.encode(frame))
                if snapshot_only or world is None:
                    continue
                if not zenoh.KeyExpr(self._key(table.source, "*")).intersects(asked):
                    continue
                for device in list(table.ids):
                    key = self._key(table.source, keys.escape(device))
                    if zenoh.KeyExpr(key).intersects(asked):
                        view = world.device(table.source, device).to_json()
                        payload = orjson.dumps({**view, "source": self.prefix + table.source})
                        query.reply(key, payload, encoding=zenoh.Encoding.APPLICATION_JSON)
        except Exception as exc:  # a querier that went away, a closed session
            log.debug("zenoh query %s: %s", query.key_expr, exc)
        finally:
            _drop(query)

    def finish(self, world: World) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        for declared in self._declared:
            declared.undeclare()
        self._declared = []
        if self.session is not None:
            cast(Callable[[], None], self.session.close)()
            self.session = None


def open_sink(endpoint: Endpoint) -> ZenohSink:
    """The sink of a `zenoh://HOST:PORT?mode=listen|connect&scout=0|1&rate=HZ&prefix=P&batch=MS`
    URL."""
    endpoint.check_options(SINK_OPTIONS, "a Zenoh publisher")
    rate = endpoint.float_option("rate", 0.0)
    prefix = endpoint.option("prefix", "")
    tick = endpoint.float_option("batch", BATCH_TICK * 1e3) / 1e3
    return ZenohSink(link_of(endpoint, "listen"), rate or None, prefix, tick)
