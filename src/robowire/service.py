"""What the gateway runs, and the templates every protocol builds its services on.

Each is a `Service`: `run(world)` does the work until it is finished (a file ended) or
cancelled (Ctrl-C, --duration). Servers set `address` and `ready` once they listen, so callers
that asked for port 0 can learn the port.

The templates own the loops, so that each loop exists once (python-can's `recv` /
`_recv_internal` split):

* `Source` owns reconnecting with backoff (`keep_connecting`, `Backoff`) and the counters: a
  protocol writes `new_adapter` and `connect` (one connection, until it ends) and hands session
  events to `deliver`; `tick` runs every `tick_every` seconds beside it, if set.
* `CaptureSource` is the capture driver: it reads a capture's records (pcap/pcapng, raw
  streams, text captures, `.rec`) through the protocol's sessions, in batches, optionally at
  the recorded pace. A protocol writes `new_adapter` and `new_session` (or `feed`).
* `Sink` owns the subscription: a latest-state subscriber (or, with `every_update`, a queue
  bounded in bytes), pulled when the sink is ready (as soon as something changed, or at most
  `max_rate` times a second) and handed to `write`; a protocol server runs in `serve` beside it.
* `Sim` owns the timed loop: a simulator writes `step(now)` and `next_deadline()`, and runs its
  server in `serve` beside it; the template calls `step` at each deadline and owns the one
  rule for falling behind (`step_time`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from robowire.capture import Record, batches
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError, RobowireError, TransportError
from robowire.sequence import FaultLog, PeerRestarted
from robowire.timebase import TIME_MODES, SourceClock, WallClock, monotonic
from robowire.transport.budget import (
    CALM_TURN,
    SINK_SHARE,
    SINK_TURN,
    Budget,
    Held,
    Turns,
    pressure,
)
from robowire.transport.reconnect import Backoff, keep_connecting
from robowire.transport.tap import RECEIVER, Tap
from robowire.transport.timer import Ticker
from robowire.wire import Adapter, Address, ConnectionLost, PacketDropped, SessionStats
from robowire.world import LogEvent, Update, World
from robowire.world.feed import DEFAULT_BYTES, Subscription
from robowire.world.table import FloatArray, SlotArray

log = logging.getLogger("robowire")

FAULT_NAMES = ("settled", "duplicated", "reordered")  # a session's wire counts the log says
# (`settled`: lost, less the gaps recent enough to be reordering)
RETRY_SECONDS = 1.0  # first wait before reconnecting (after the at-once retry, see Source)
MAX_RETRY_SECONDS = 8.0  # the backoff doubles up to this (or `retry`, if that is longer)
MAX_LAG = 0.1  # a simulator's step this late is skipped, not caught up (see `Sim`)
MAX_PENDING = 20_000  # events a source holds while it waits for credit (stale reports shed,
# so at most one of each thing it reports, and the rest); the oldest past it go in at once
MAX_PENDING_BYTES = 16 << 20  # and bytes, for a source that says what its events hold


class Status(Protocol):
    """One service's status, as the gateway reports it (`robowire.status.ServiceStatus`)."""

    def to_json(self) -> dict[str, Any]: ...


class Host(Protocol):
    """What a service may ask of the gateway that runs it (`Service.gateway`): the services
    beside it (the XRP sink relays to its robot's source), and what each is doing (the
    viewer's status message, `--status-port`)."""

    @property
    def services(self) -> Sequence[Service]: ...

    def status(self) -> Sequence[Status]: ...


class Service(ABC):
    """Something the gateway runs; subclasses implement `run`."""

    role = "service"
    announce = "listening on"  # what `address` is, for the line the CLI prints once ready

    def __init__(self, name: str) -> None:
        self.name = name
        self.address: Address | None = None
        self.ready = asyncio.Event()
        self.stats = SessionStats()
        self.gateway: Host | None = None  # the gateway running it (set when it starts)

    def listening(self, address: Address) -> None:
        """Call once the service's socket is bound. A server asked for port 0 is renamed
        after the port it got (a source's name is its world key, fixed before it binds)."""
        self.address = (str(address[0]), int(address[1]))
        if self.role != "source" and self.name.endswith(":0"):
            self.name = f"{self.name[:-2]}:{self.address[1]}"
        self.ready.set()

    @abstractmethod
    async def run(self, world: World) -> None:
        """Do the work until finished or cancelled."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Source(Service):
    """Writes what a peer sends into the world under the source id `self.name`.

    The template: `run` builds the adapter, then calls `connect` again and again
    (`keep_connecting`). `connect` raises TransportError when it cannot connect (the template
    tries again, starting attempts `retry` seconds apart for an outage's first half minute,
    then doubling that up to `MAX_RETRY_SECONDS`, and says so once, with the reason), calls
    `connected()` once it is up, and returns when that connection has ended (dialled again at
    once if it lasted at least `retry` seconds, else after `retry`: `Backoff`). A source that
    listens for peers (rather than dialling one) calls `connected()` when a peer comes and
    `disconnected()` when the last one has gone. With `tick_every` set, `tick(now)` runs that
    often while the source runs (work between messages, such as moving what the last message
    set in motion).

    A datagram source cannot see its peer go: it sets `silence`, and then counts as up only
    while something arrived in the last `silence` seconds (`live`, what the status shows).
    """

    role = "source"
    protocol: str | None = None  # whose native names the device ids are (set by open_source)
    silence: float | None = None  # seconds without a message after which a UDP peer is gone
    time_default = "sender"  # `?time=` when the URL says nothing; "receive" if no stamps
    tick_every: float | None = None  # seconds between `tick` calls (None: no periodic work)
    event_size: Callable[[object], int] | None = None  # the bytes an event holds, if big

    def __init__(self, name: str, *, retry: float = RETRY_SECONDS) -> None:
        super().__init__(name)
        self.retry = retry
        self.connections = 0
        self.restarts = 0  # its peer restarted with fresh state, seen in what it sent
        self.faults = FaultLog(name, log)  # its faults' log lines, first and summarised
        self._faults_due = 0.0  # when `deliver` next looks at the fault counts
        self.clock = WallClock()
        self.time = SourceClock(self.time_default)  # `?time=` and the sender's clock offset
        self.adapter: Adapter[Any] | None = None
        self.up = False  # a connection is up now (between `connected()` and its end)
        self.tap: Tap | None = None  # sees every datagram / stream chunk received (recording)
        self.last_heard: float | None = None  # when the UDP receive loop last read for it
        self.budget: Budget | None = Budget()  # its world writes' share (None: never waits)
        self._held = Held(self.event_size)  # events waiting for credit (see `deliver`)
        self._turns = Turns()  # how many of them a slice of a turn writes (their cost)
        self._pending_at = 0.0  # when the newest of them was read
        self._waiting: asyncio.TimerHandle | None = None
        self._failing = False

    def new_adapter(self, world: World) -> Adapter[Any]:
        """The adapter that writes this source's events into `world`."""
        raise NotImplementedError

    async def connect(self, world: World) -> None:
        """One connection, from connecting to its end (see the class docstring)."""
        raise NotImplementedError(f"{type(self).__name__} reads a file, it does not connect")

    def tick(self, now: float) -> None:
        """Periodic work, every `tick_every` seconds while the source runs (monotonic `now`)."""

    def connected(self) -> None:
        """Call when a connection is up: counts it, says so after failures, sets `ready`."""
        self.connections += 1
        self.up = True
        if self._failing:
            log.warning("%s: connected", self.name)
        elif self.connections > 1:
            log.info("%s: reconnected", self.name)
        self._failing = False
        self.ready.set()

    def disconnected(self) -> None:
        """Call when the last peer of a listening source has gone (it waits for the next)."""
        self.up = False

    def wire_counts(self) -> dict[str, int]:
        """What the wire did to this source's messages, as far as its protocol can count:
        its session's `wire_counts()` if it keeps them (`robowire.sequence`), else none."""
        counts = getattr(getattr(self, "session", None), "wire_counts", None)
        return counts() if callable(counts) else {}

    def fault_counts(self) -> dict[str, int]:
        """The wire's fault counts the status shows, by `robowire.sequence.FAULTS` name (bad
        bytes, `errors`, have their own lines: `PacketDropped`)."""
        counts = {k: v for k, v in self.wire_counts().items() if k in FAULT_NAMES}
        counts["reconnected"] = max(0, self.connections - 1) + self.restarts
        return counts

    def live(self, now: float) -> bool:
        """Up, and (with `silence`) heard from in the last `silence` seconds."""
        if not self.up:
            return False
        if self.silence is None:
            return True
        return self.last_heard is not None and now - self.last_heard <= self.silence

    def deliver(self, events: Sequence[object], now: float) -> None:
        """Session events (read at monotonic `now`) into the world, and into the counters.

        The overload policy (`robowire.transport.budget`): while the gateway keeps up, the
        events are written at once (a delivery that would take longer than a turn, a turn at
        a time: `apply`; what comes before the rest is written joins it, as below, stale
        reports shed). While its loop is behind (`pressure()`), the source's world writes
        are budgeted: while it has credit they are written at once; once it has spent it they
        wait, merged with what comes next, until it is back, and then go in stamped with the
        newest read time, without the state reports a newer one made stale (shed as the newer
        one comes, counted in `budget.shed`; their messages still count in `messages_in`, as
        received), a turn at a time. Counters and log lines are immediate either way."""
        if self.adapter is None:
            return
        if now >= self._faults_due:  # (a second apart: not a cost per delivery)
            self._faults_due = now + 1.0
            self.faults.update(self.fault_counts(), now)
        for event in events:
            if isinstance(event, PacketDropped):
                self.stats.drop(event.reason)
                log.debug("%s: %s", self.name, event)
            elif isinstance(event, ConnectionLost):
                log.info("%s: %s", self.name, event.reason)
            elif isinstance(event, PeerRestarted):
                self.restarts += 1
                log.warning("%s: %s", self.name, event.reason)
        budget = self.budget
        behind = budget is not None and pressure().behind(now)
        if self._waiting is None and (
            budget is None or (not behind and self._turns.within(len(events), CALM_TURN))
        ):  # it keeps up (or a file, which sheds nothing): at once, as they are
            began = monotonic()
            self.stats.messages_in += self.adapter.apply(events, self.clock.wall(now))
            self._turns.took(len(events), 0, monotonic() - began)
            return
        backlog = self._waiting is not None  # the source is not keeping up: shed, as behind
        shed, messages = self._held.add(events, shed=behind or backlog)
        if budget is not None:
            budget.shed += shed
        self.stats.messages_in += messages  # received, though not written
        self._pending_at = now
        overflow = self._held.overflow(MAX_PENDING, MAX_PENDING_BYTES)
        if overflow:  # bounded, however far behind the writes are: the oldest go in now
            self.stats.messages_in += self.adapter.apply(overflow, self.clock.wall(now))
        if backlog:
            return
        elif not behind or budget is None or budget.wait(now) <= 0.0:
            self.apply()
        else:
            self._waiting = asyncio.get_running_loop().call_later(budget.wait(now), self.apply)

    def apply(self, everything: bool = False) -> None:
        """Write the events waiting (see `deliver`) into the world now, a turn of them:
        slices by their measured cost until `SINK_TURN` seconds have gone (`CALM_TURN` while
        the loop keeps up), the rest when the loop has gone round (and, behind, the credit is
        back); with `everything`, all of them at once."""
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        if self.adapter is None or not len(self._held):
            return
        budget = self.budget
        began = now = monotonic()
        behind = budget is not None and pressure().behind(began)
        end = began + (SINK_TURN if behind else CALM_TURN)
        wall = self.clock.wall(self._pending_at)
        while len(self._held) and (everything or now < end):
            start = now
            events = self._held.take(None if everything else self._turns.slice()[0])
            self.stats.messages_in += self.adapter.apply(events, wall)
            now = monotonic()
            self._turns.took(len(events), 0, now - start)
        if budget is not None and behind:
            budget.spend(began, now - began)
        if len(self._held):  # after the loop went round (behind: and with credit)
            wait = max(budget.wait(now), 0.0) if budget is not None and behind else 0.0
            self._waiting = asyncio.get_running_loop().call_later(wait, self.apply)

    def buffered_peak(self) -> int:
        """The most bytes this source's bounded buffers held so far, where it knows their size
        (its hold, for a source with an `event_size`; a Zenoh source's inbox): a process
        keeps the memory of a buffer's peak once it drains (glibc's free lists), so a check
        of its memory over time counts the peaks out."""
        return self._held.peak

    def timed(self, world: World) -> World:
        """The world as this source's adapter writes it: source times through `self.time`."""
        return TimedWorld(world, self.time)

    async def run(self, world: World) -> None:
        RECEIVER.set(self)  # this task's receive loops hand what they read to `self.tap`
        if self.protocol is not None:  # (a zenoh or MCAP source's tables say their own)
            world.table(self.name).protocol = self.protocol
        self.adapter = self.new_adapter(self.timed(world))
        ticking = self._ticking()
        try:
            await self._connections(world)
        finally:
            ticking.cancel()
            self.apply(everything=True)  # what was waiting for credit

    def _ticking(self) -> Ticker:
        """Start calling `tick` every `tick_every` seconds (until the ticker is cancelled)."""
        return Ticker(asyncio.get_running_loop(), self.tick_every, self.tick)

    async def _connections(self, world: World) -> None:
        await keep_connecting(
            lambda: self.connect(world),
            Backoff(self.retry, MAX_RETRY_SECONDS),
            failed=self._failed,
            ended=self._ended,
        )

    def _failed(self, exc: TransportError) -> None:
        self.up = False
        if not self._failing:
            log.warning("%s: %s; retrying until it answers", self.name, exc)
            self._failing = True

    def _ended(self) -> None:
        self.up = False
        log.info("%s: connection ended; reconnecting", self.name)


def time_option(endpoint: Endpoint) -> tuple[str | None, Endpoint]:
    """A source URL's `?time=sender|receive|corrected` (None if not given), and the endpoint
    without it (the option is every source's, so no protocol's own options list it)."""
    mode = endpoint.options.get("time")
    if mode is None:
        return None, endpoint
    if mode not in TIME_MODES:
        said = f"{endpoint.raw}: time must be sender, receive or corrected"
        raise ConfigError(f"{said}, not {mode!r}")
    rest = {k: v for k, v in endpoint.options.items() if k != "time"}
    return mode, dataclasses.replace(endpoint, options=rest)


class TimedWorld(World):
    """One source's view of the world: the same tables and feed, but every write's source
    time goes through the source's `SourceClock` first (its `?time=` policy, and the clock
    offset estimate it feeds). One call per write, vectorised: no loop per device."""

    def __init__(self, world: World, clock: SourceClock) -> None:
        fields = dataclasses.fields(world)  # every field the same object: one world, shared
        super().__init__(**{f.name: getattr(world, f.name) for f in fields if f.init})
        self.clock = clock

    def update(
        self,
        source: str,
        slots: SlotArray | Sequence[int],
        *,
        receive_time: float,
        source_time: FloatArray | float | None = None,
        **columns: Any,
    ) -> Update:
        when = self.clock.retime(source_time, receive_time)
        return super().update(source, slots, receive_time=receive_time, source_time=when, **columns)


class CaptureSource(Source):
    """A capture file read to its end through the protocol's own sessions.

    Records come from `read` (the protocol's capture reader) in batches; each batch is fed
    through `feed` and delivered as one world update. `speed` (a file option, and what
    `replay --speed` sets) paces the records at their recorded times divided by `speed`;
    0 reads as fast as they decode. With `loop` the file starts again at its end (fresh
    sessions, the same adapter) until the run is stopped. Damage at the end of a file (a cut
    record) is one drop, after every whole record before it. A file in which nothing decodes
    is an error (the source fails with one line), not an empty success.
    """

    native_table = True  # its table's ids are `protocol`'s own names (False: a replay's)

    def __init__(self, protocol: str, endpoint: Endpoint, read: Any) -> None:
        assert endpoint.path is not None
        super().__init__(f"{protocol}:{endpoint.path}")
        self.budget = None  # a file sheds nothing: it waits for its readers instead
        self.protocol = protocol
        self.path = endpoint.path
        self.speed = endpoint.float_option("speed", 0.0)
        self.loop = False  # `replay --loop`: start again at the end, until stopped
        self.passes = 1  # how many times the file has been started
        self._read = read
        self.sessions: dict[str, Any] = {}

    def records(self) -> Iterator[Record]:
        """The capture's records (a protocol may filter or annotate them here)."""
        records: Iterator[Record] = self._read(self.path)
        return records

    def new_session(self, record: Record) -> Any:
        """A session for the flow `record` starts (one per TCP direction or datagram flow)."""
        raise NotImplementedError

    def session_for(self, record: Record) -> Any | None:
        """The session that gets `record`; None drops it (counted)."""
        session = self.sessions.get(record.flow)
        if session is None:
            session = self.sessions[record.flow] = self.new_session(record)
        return session

    def feed(self, record: Record, now: float) -> list[Any]:
        """One record through its session: datagrams as datagrams, stream bytes as bytes."""
        session = self.session_for(record)
        if session is None:
            self.stats.drop(f"{record.flow}: no session takes this record")
            return []
        if record.transport == "udp":
            events: list[Any] = session.feed_datagram(record.data, record.src or ("", 0), now)
            return events
        events = session.feed(record.data, now)
        return events

    def finish(self, now: float) -> list[Any]:
        """The file ended: what the sessions say at the end of their streams."""
        return [
            e for s in self.sessions.values() if hasattr(s, "feed_eof") for e in s.feed_eof(now)
        ]

    async def run(self, world: World) -> None:
        if self.native_table:
            world.table(self.name).protocol = self.protocol
        self.adapter = self.new_adapter(self.timed(world))
        self.ready.set()
        ticking = self._ticking()
        try:
            await self._passes(world)
        finally:
            ticking.cancel()

    async def _passes(self, world: World) -> None:
        while True:
            await self._read_once(world)
            if not self.stats.messages_in and self.stats.dropped:  # not this protocol at all
                raise RobowireError(
                    f"{self.path}: nothing in it decodes as {self.protocol} "
                    f"({self.stats.dropped} dropped; last: {self.stats.last_drop_reason})"
                )
            if not self.loop or self.path == "-":
                return
            self.passes += 1
            self.sessions.clear()  # every pass starts each stream afresh, as the capture did

    async def _read_once(self, world: World) -> None:
        try:
            async for batch in batches(self.records(), self.speed):
                now = monotonic()
                events: list[Any] = []
                for record in batch:
                    events += self.feed(record, now)
                self.deliver(events, now)
                # a file waits until the sinks that take every update wrote this batch: a line
                # prints the fields its update did not write from the table as it is when the
                # sink writes it, so a batch applied meanwhile (a sink whose turn ended early,
                # on a loaded machine) changed what `listen --json` printed of a file
                if world.feed.backlog():
                    await asyncio.sleep(0)  # (their turn)
                    while world.feed.backlog():
                        await asyncio.sleep(0.005)
        except DecodeError as exc:  # the file is cut or damaged here: the rest is lost
            self.stats.drop(exc.reason)
            log.warning("%s: %s", self.name, exc)
        self.deliver(self.finish(monotonic()), monotonic())


class Sink(Service):
    """Offers the world to peers (or a file, or a screen).

    The template: `run` subscribes to the world, starts `serve` (the protocol's server, if it
    has one) and then pulls what changed, as soon as something did or, with `max_rate`, at most
    that many times a second, and hands it to `write`: one `Update` per changed source with the
    latest values of its changed devices (a slow sink sees fewer, fresher states and never
    holds more than one copy of the state), or with `every_update` every update as written.
    It ends when `write` returns False, when the server fails (its error is raised) or when
    cancelled; `finish` runs last either way.
    """

    role = "sink"
    every_update = False  # True: a queue of every update bounded in bytes (the recorder)
    max_bytes = DEFAULT_BYTES  # that queue's bound
    max_rate: float | None = None  # pulls per second; None: whenever something changed
    # True: `write` is done with the latest values pulled when it returns (it encodes them at
    # once), so the pull lends it views of the world's columns instead of copies
    encodes_at_once = False

    async def serve(self, world: World) -> None:
        """Run this sink's server until cancelled (calling `listening` once bound); raise
        TransportError if it cannot. `world` is there for what a new peer is sent first (a
        snapshot of every device). The default has no server: it is ready at once."""
        self.ready.set()
        await asyncio.Future()

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        """Send or show what changed; return False once this sink has done its job."""
        raise NotImplementedError

    def finish(self, world: World) -> None:
        """The run is over: flush and close (called once, after the last `write`)."""

    async def run(self, world: World) -> None:
        with world.subscribe(every_update=self.every_update, max_bytes=self.max_bytes) as changes:
            server: asyncio.Future[Any] = asyncio.create_task(self.serve(world))
            server.add_done_callback(lambda _: changes.interrupt())  # the wait below ends
            turns = Turns()
            budget = Budget(share=SINK_SHARE, burst=SINK_TURN, interval=0.0)  # (while behind)
            try:
                going = True
                while going:
                    if self.max_rate:
                        done, _ = await asyncio.wait([server], timeout=1.0 / self.max_rate)
                    else:  # (awaited as it is: a task and `asyncio.wait` per pull cost more
                        # than a small pull; the server's end interrupts it)
                        await changes.wait()
                        done = {server} if server.done() else set()
                    if server in done:
                        server.result()  # raises what stopped the server
                        return
                    # a turn of a queue of every update ends SINK_TURN seconds in (behind;
                    # else CALM_TURN); the rest waits for the next turn, and while behind,
                    # for the sink's share of wall time (SINK_SHARE)
                    began = monotonic()
                    behind = False
                    if isinstance(changes, Subscription):
                        behind = pressure().behind(began)
                        end = began + (SINK_TURN if behind else CALM_TURN)
                        going = self._turn(world, changes, turns, end)
                    else:
                        going = self.write(world, changes.pull(copy=not self.encodes_at_once))
                    took = monotonic() - began
                    self._count_feed_drops(changes.dropped)
                    if behind:
                        budget.spend(began, took)
                        pause = budget.wait(monotonic())
                        if pause > 0.0:  # (a server that ends meanwhile is seen next turn)
                            await asyncio.wait([server], timeout=pause)
                            continue
                    if isinstance(changes, Subscription):
                        # the loop goes round between two turns of a queue: its wait returns
                        # at once while the queue holds the rest, without yielding
                        await asyncio.sleep(0)
            finally:
                server.cancel()
                await asyncio.gather(server, return_exceptions=True)
                self.write(world, changes.pull())  # what arrived while ending
                self._count_feed_drops(changes.dropped)
                self.finish(world)

    def _turn(
        self, world: World, queue: Subscription[Update | LogEvent], turns: Turns, end: float
    ) -> bool:
        """Hand `write` the oldest queued updates a slice at a time (`Turns`) until `end` or
        until none are left; False once this sink has done its job."""
        while True:
            size, began = queue.bytes, monotonic()
            items = queue.pull(*turns.slice())
            going = self.write(world, items)
            now = monotonic()
            turns.took(len(items), size - queue.bytes, now - began)
            if not going or not queue.pending() or now >= end:
                return going

    _feed_drops = 0  # what the subscription had dropped at the last pull

    def _count_feed_drops(self, total: int) -> None:
        """Updates the subscription dropped (a queue that was full) count as this sink's
        drops, as they happen."""
        if total > self._feed_drops:
            self.stats.dropped += total - self._feed_drops
            self.stats.last_drop_reason = "fell behind: oldest updates dropped"
            self._feed_drops = total


def step_time(deadline: float, now: float) -> float:
    """The time a simulator's step due at `deadline` is for, when the loop runs it at `now`:
    the deadline itself, unless the loop is more than `MAX_LAG` late; then `now` (see `Sim`)."""
    return deadline if now - deadline <= MAX_LAG else now


class Sim(Service):
    """A simulated device speaking a protocol on a real socket. `run` ignores the world.

    The template (python-can's periodic sends, owned by the base class): `run` starts `serve`
    (the simulator's server or socket, until cancelled; it calls `listening` once bound) and,
    beside it, the timed loop: `step(now)` at once, then again at each `next_deadline()`
    (monotonic seconds; None: no timed work left, the sessions' own timers do the rest, as
    VRSP's and XRP's do). It ends when `serve` ends (its error raised) or when cancelled.

    Falling behind, one rule for every simulator (`step_time`): a step is for its deadline.
    `step` is given the deadline, not the time the loop woke, so a fixed-rate simulator that
    schedules its next step one period after the last stays on its grid (steps exactly a
    period apart, each stamped with the time it is for), and a loop that woke up to `MAX_LAG`
    (0.1 s) late runs the missed steps back to back. Later than that (a busy machine, a
    pause), the missed steps are skipped: `step` is given the time now and the deadlines that
    follow count from there, so nothing bursts out to catch up. A simulator with many small
    deadlines does what is due by the step's time in each step and spaces its steps itself
    (SpyGlass: at least `SIM_STEP` apart), so that catching up stays cheap.
    """

    role = "sim"

    async def serve(self) -> None:
        """Run the simulator's server until cancelled (calling `listening` once bound); raise
        TransportError if it cannot. The default has none: it is ready at once."""
        self.ready.set()
        await asyncio.Future()

    def step(self, now: float) -> None:
        """Do what is due at `now` (monotonic seconds; see `step_time`): move, send."""

    def next_deadline(self) -> float | None:
        """When `step` is next due (monotonic seconds), or None for never."""
        return None

    async def run(self, world: World) -> None:
        serving = asyncio.create_task(self.serve())
        stepping = asyncio.create_task(self._steps())
        try:
            await asyncio.wait([serving, stepping], return_when=asyncio.FIRST_COMPLETED)
            if stepping.done():
                stepping.result()  # raises what broke a step
            await serving  # raises what stopped the server
        finally:
            for task in (stepping, serving):
                task.cancel()
            await asyncio.gather(stepping, serving, return_exceptions=True)

    async def _steps(self) -> None:
        """The timed loop: each step a timer callback of the loop's, which schedules the
        next (a task sleeping per step costs a 1 kHz simulator a second wake-up of the loop
        per step, to resume the task after its sleep's timer). Ends when `next_deadline` is
        None; a step's error is raised here."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def tick(deadline: float) -> None:
            try:
                self.step(step_time(deadline, monotonic()))
                following = self.next_deadline()
            except Exception as exc:  # raised by `_steps`, as a step's error always was
                ended.set_exception(exc)
                return
            if following is None:
                ended.set_result(None)
            else:
                timer[0] = loop.call_later(max(0.0, following - monotonic()), tick, following)

        timer = [loop.call_soon(tick, monotonic())]
        try:
            await ended
        finally:
            timer[0].cancel()


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions:
    """What `robowire sim PROTOCOL` passes to a protocol's `open_sim`."""

    host: str = "127.0.0.1"
    port: int | None = None  # None: the protocol's default port; 0: any free port
    count: int | None = None  # how many devices (None: the simulator's default)
    rate: float | None = None  # updates per second (None: the simulator's default)
    seed: int = 0  # all randomness comes from this seed
    target: str | None = None  # `--to HOST[:PORT]`: where a sending (or dialling) sim goes
    options: dict[str, str] = field(default_factory=dict)  # protocol-specific --set k=v
