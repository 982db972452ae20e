"""The VRPN source, file source, sink and simulator: thin asyncio services on the templates.

* `VrpnSource` (`Source`): a VRPN client, `vrpn://Tracker0,Analog0@host:3883` (UDP+TCP) or
  `vrpn+tcp://...` (TCP only); the template reconnects when the server goes. A major version
  mismatch is a SessionError that ends the source (retrying cannot help).
* `VrpnFileSource` (`CaptureSource`): a pcap/pcapng capture or a raw stream from the server,
  each TCP direction through its own client session, or a VRPN log file (`.vrpn`, read by
  `logfile.read_log`) through one.
* `VrpnSink` (`Sink`): a VRPN server offering every world device (`robowire serve vrpn://`).
* `VrpnLogSink` (`Sink`): the world written as a VRPN log file (`record ... -o run.vrpn`).
* `VrpnSim` (`Sim`): a VRPN server of simulated devices (`model.py`).

URL options are parsed here, once, before anything runs; the sets below name exactly the
options each role reads, so the gateway rejects any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from robowire.capture import CaptureReader, Record
from robowire.endpoints import Endpoint, number
from robowire.errors import ConfigError, SessionError
from robowire.protocols.vrpn.adapter import (
    MOTION_DEFAULTS,
    REPORTS,
    VrpnAdapter,
    WorldEncoder,
    tracker_values,
)
from robowire.protocols.vrpn.codec import (
    COOKIE_SIZE,
    DEFAULT_PORT,
    MAX_NAME,
    Frame,
    SystemType,
    encode_cookie,
)
from robowire.protocols.vrpn.dissect import looks_like_lob
from robowire.protocols.vrpn.driver import VrpnLink, connect
from robowire.protocols.vrpn.events import Connected, MessageReceived, PeerSilent, VrpnEvent
from robowire.protocols.vrpn.logfile import encode_log_entry, stream_to_log
from robowire.protocols.vrpn.messages import ButtonStates, Ping, Pong, TrackerSetUpdateRate
from robowire.protocols.vrpn.model import MAX_RATE, DeviceModel
from robowire.protocols.vrpn.model import Frame as TrackerFrame
from robowire.protocols.vrpn.registry import SERVER_TYPE_NAMES, FrameBatch, ReportEncoder
from robowire.protocols.vrpn.server import VrpnServer
from robowire.protocols.vrpn.session import VERSION_MISMATCH, Role, VrpnSession
from robowire.service import RETRY_SECONDS, CaptureSource, Sim, SimOptions, Sink, Source
from robowire.timebase import WallClock, monotonic
from robowire.transport.target import FileTarget
from robowire.wire import Address
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.vrpn")

SOURCE_OPTIONS = frozenset({"retry", "rate", "udp", "devices"})  # and every source's `time`
FILE_OPTIONS = frozenset({"speed"})
SINK_OPTIONS = frozenset({"tracker"})
SIM_SETTINGS = frozenset(
    {"tracker", "analog", "button", "dial", "reports", "clock_offset", "clock_rate", "trackers"}
)
FIRST_CONNECT_TIMEOUT = 5.0
PONG_AFTER = 1.0  # seconds after a device's first log entry: its pong (`VrpnLogSink`)
RECONNECT_TIMEOUT = 2.0
PLAN_SECONDS = 0.05  # the simulator computes and encodes this far ahead in one pass (`_plan`)
PLAN_FRAMES = 20  # and at least this many frames (a pass's fixed cost, over a low rate's few)


def open_sink(endpoint: Endpoint) -> Sink:
    """`vrpn://127.0.0.1:3883`: every world device as a tracker; `?tracker=NAME` for one."""
    return VrpnSink(endpoint)


def open_sim(options: SimOptions) -> Sim:
    return VrpnSim(options)


def adapter_time(source: Source) -> str:
    """What the adapter stamps: the receive time (so text messages get it too) with
    `?time=receive`, else the sender's (which the template's `?time=` policy may correct)."""
    return "receive" if source.time.mode == "receive" else "sender"


def device_names(endpoint: Endpoint) -> list[str]:
    """`Tracker0@host`, `Tracker0,Analog0@host` or `?devices=a,b`; empty means every device."""
    raw = ",".join(x for x in (endpoint.user or "", endpoint.option("devices", "")) if x)
    names = [n.strip() for n in raw.split(",") if n.strip() and n.strip() != "*"]
    for name in names:
        if len(name.encode()) > MAX_NAME:
            raise ConfigError(f"VRPN device name {name[:20]!r}... is longer than {MAX_NAME} bytes")
    return names


# -- sources ---------------------------------------------------------------------------------


class VrpnSource(Source):
    """A VRPN client: one connection, several device names (options: `SOURCE_OPTIONS`)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        retry = endpoint.float_option("retry", RETRY_SECONDS)
        super().__init__(f"vrpn@{self.host}:{self.port}", retry=retry)
        self.devices = device_names(endpoint)
        self.udp = endpoint.scheme == "vrpn" and endpoint.option("udp", "1") != "0"
        self.update_rate = endpoint.float_option("rate", 0.0)
        self.link: VrpnLink | None = None
        self._wire: Counter[str] = Counter()  # the wire counts of the connections before

    def new_adapter(self, world: World) -> VrpnAdapter:
        return VrpnAdapter(world, self.name, devices=self.devices or None, time=self.time_mode)

    @property
    def time_mode(self) -> str:
        return adapter_time(self)

    def wire_counts(self) -> dict[str, int]:
        """The UDP datagrams dropped as copies or late, over every connection (each counts
        its own: the peer's numbers begin again on a new one)."""
        counts = Counter(self._wire)
        link = self.link
        if link is not None and link.session is not None:
            counts.update(link.session.wire_counts())
        return dict(counts)

    async def connect(self, world: World) -> None:
        offset = self.clock.wall(0.0)

        def make_session(peer: Address, udp_inbound: Address | None) -> VrpnSession:
            return VrpnSession(
                Role.CLIENT,
                ping_senders=self.devices,
                udp_inbound=udp_inbound,
                clock_offset=offset,
                now=monotonic(),
            )

        def on_events(link: VrpnLink, events: list[VrpnEvent]) -> None:
            self.deliver(events, monotonic())
            for event in events:
                match event:
                    case Connected() if self.update_rate > 0 and link.session is not None:
                        if link.session.connected:  # (a read that connects may also close)
                            rate = TrackerSetUpdateRate(rate=self.update_rate)
                            for name in self.devices:  # as vrpn_Tracker_Remote can
                                link.session.send(name, rate)
                        link.flush()
                    case PeerSilent(seconds=seconds):
                        log.warning("%s: no pong from the server for %.0f s", self.name, seconds)

        timeout = RECONNECT_TIMEOUT if self.connections else FIRST_CONNECT_TIMEOUT
        link = await connect(
            self.host,
            self.port,
            make_session,
            on_events,
            udp=self.udp,
            timeout=max(self.retry, timeout),
        )
        self.link = link
        self.connected()
        try:
            await asyncio.shield(link.closed)
        finally:
            link.close()
            self.link = None
            if link.session is not None:
                self._wire.update(link.session.wire_counts())
        reason = link.session.close_reason if link.session is not None else ""
        if reason.startswith(VERSION_MISMATCH):
            raise SessionError(f"{self.host}:{self.port}: {reason}")


def _reverse(flow: str) -> str:
    src, _, dst = flow.partition(">")
    return f"{dst}>{src}"


class VrpnFileSource(CaptureSource):
    """A capture read to its end (options: `FILE_OPTIONS`).

    Each TCP direction (or a raw one-direction stream file) feeds its own client session, as a
    live connection would, so names are learnt from that side's descriptions. A UDP datagram
    goes to the session of the side that sent it: the UDP description a side sends on TCP names
    the port it receives on, so datagrams to that port come from the other side of that
    connection. Connection requests (lobs) carry no data and are skipped.
    """

    def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
        super().__init__("vrpn", endpoint, read)

    def new_adapter(self, world: World) -> VrpnAdapter:
        return VrpnAdapter(
            world, self.name, time="receive" if self.time.mode == "receive" else "sender"
        )

    def records(self) -> Iterator[Record]:
        return (
            r for r in super().records() if not (r.transport == "udp" and looks_like_lob(r.data))
        )

    def new_session(self, record: Record) -> VrpnSession:
        return VrpnSession(Role.CLIENT, now=0.0)

    def session_for(self, record: Record) -> VrpnSession | None:
        if record.transport != "udp":
            session: VrpnSession | None = super().session_for(record)
            return session
        port = record.dst[1] if record.dst else None
        for flow, session in self.sessions.items():
            if session.peer_udp is not None and session.peer_udp[1] == port:
                found: VrpnSession | None = self.sessions.get(_reverse(flow))
                return found
        return None


# -- log file writer -------------------------------------------------------------------------


class VrpnLogSink(Sink):
    """`record ... -o run.vrpn`: the world written as the log the mainline server writes with
    `-lo` (what it would send a client: descriptions, then the reports; `logfile`), ending
    with the disconnect entry it logs when the connection drops. The reports are framed by
    one server session, TCP only, as for a connected client, and re-laid as log entries."""

    every_update = True  # a log keeps every report, not the latest state

    def __init__(self, path: str) -> None:
        super().__init__(f"vrpn-log:{path}")
        self.path = path
        self.encoder = WorldEncoder("")
        self.clock = WallClock()
        self.session: VrpnSession | None = None  # made at the first write (its time)
        self._last = 0.0  # the newest time written: the disconnect entry's
        self._pongs: list[tuple[float, str]] = []  # (when, device): pongs still to write
        self.messages = 0
        self._pending = bytearray()
        self._file = FileTarget(path)  # whole entries (a full disk: cut after the last)
        self._file.write(encode_cookie())
        self._skip = COOKIE_SIZE  # the session's own cookie is not logged

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        out = self.encoder.encode(world, items)
        # every entry is stamped on the source's clock (the mainline plays a log by those
        # times); a message without a stamp gets the newest so far
        reports = out.reports()
        times = [t for _, _, t, _ in out.messages if t is not None]
        for _, columns in reports:
            times += [float(columns.times.min()), float(columns.times.max())]
        first = min(times, default=self.clock.wall(monotonic()))
        session = self.session or self._start(first)
        self._last = max([self._last, *times])
        for name in out.new_devices:
            session.register_sender(name)
            self._pongs.append((first + PONG_AFTER, name))
        for sender, message, time, _ in out.messages:
            session.send(sender, message, time=self._last if time is None else time)
        for encoder, columns in reports:
            ids = session.register_senders(tuple(columns.names))
            types = [session.register_type(kind) for kind in encoder.kinds]
            rows = np.array(ids, dtype=np.int32)[columns.senders]
            values = [columns.values]
            batch = encoder.encode(rows, types, columns.sensors, values, time=columns.times)
            session.send_batch(batch, reliable=True)
        self._pong(self._last)
        self._drain()
        return True

    def _pong(self, until: float) -> None:
        """The pongs due by `until`: a client playing the log pings each device once at the
        start and warns if no pong came within 3 s (a real server's log has them too)."""
        if self.session is not None:
            for due, name in [p for p in self._pongs if p[0] <= until]:
                self.session.send(name, Pong(), time=due)
            self._pongs = [p for p in self._pongs if p[0] > until]

    def _start(self, start: float) -> VrpnSession:
        """The session, its descriptions stamped with the first report's time: the mainline
        plays a log from its first entry's time, so nothing may come long before the data."""
        self._last = start
        session = VrpnSession(Role.SERVER, senders=[], types=SERVER_TYPE_NAMES, clock_offset=start)
        session.feed(encode_cookie(), 0.0)  # a client is there from the start: TCP only
        self.session = session
        return session

    def _drain(self) -> None:
        if self.session is None:
            return
        self._pending += self.session.data_to_send()
        if self._skip:
            cut = min(self._skip, len(self._pending))
            del self._pending[:cut]
            self._skip -= cut
        entries, used, count = stream_to_log(self._pending)
        del self._pending[:used]
        self.messages += count
        self._file.write(entries)  # on disk at once: a killed recording keeps it

    def finish(self, world: World) -> None:
        if self._pongs:
            self._last = max(self._last, *(due for due, _ in self._pongs))
            self._pong(self._last)
        self._drain()
        now = self.clock.wall(monotonic()) if self.session is None else self._last
        sec = int(now)
        usec = int((now - sec) * 1e6)
        self._file.write(
            encode_log_entry(
                Frame(sender=0, type=SystemType.DISCONNECT_MESSAGE, sec=sec, usec=usec)
            )
        )
        self.messages += 1
        self._file.close()


# -- sink and simulator ------------------------------------------------------------------------


class VrpnSink(Sink):
    """Serves the world (see `WorldEncoder`; options: `SINK_OPTIONS`): a VRPN source's devices
    under their own senders and sensors, other devices each a tracker named after it, or with
    `?tracker=NAME` every device a sensor of that one tracker. Like the mainline's button
    servers, it sends each button device's states to a client that connects or pings it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"vrpn-server@{self.host}:{self.port}")
        self.single = endpoint.option("tracker", "")
        self.encoder = WorldEncoder(self.single)
        self.server = VrpnServer(
            self.encoder.devices(),
            clock_offset=WallClock().wall(0.0),
            on_connect=self._on_connect,
            on_message=self._on_message,
            sensors=self.encoder.sensor_count,
        )
        self.reports_sent = 0
        self._skipped = 0  # the server's skipped count at the last write

    async def serve(self, world: World) -> None:
        await self.server.run(self.host, self.port, self.listening)

    def _on_connect(self, link: VrpnLink) -> None:
        if link.session is not None and link.session.connected:
            for name, states in self.encoder.buttons.items():
                link.session.send(name, ButtonStates(states=states))

    def _on_message(self, link: VrpnLink, event: MessageReceived) -> None:
        states = self.encoder.buttons.get(event.sender)
        session = link.session
        if session and session.connected and states is not None and isinstance(event.message, Ping):
            session.send(event.sender, ButtonStates(states=states))

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        out = self.encoder.encode(world, items)
        server = self.server
        for name in out.new_devices:
            server.add_device(name)
        for sender, message, time, reliable in out.messages:
            server.broadcast(sender, message, time=time, reliable=reliable, flush=False)
        for encoder, columns in out.reports():
            server.broadcast_reports(
                encoder,
                columns.names,
                columns.sensors,
                [columns.values],
                time=columns.times,
                senders=columns.senders,
                flush=False,
            )
        if out.poses is not None:
            self.reports_sent += len(out.poses)
        server.flush()
        if server.skipped > self._skipped:  # a client too far behind: counted as drops
            self.stats.dropped += server.skipped - self._skipped
            self.stats.last_drop_reason = "a client too far behind: its reports skipped"
            self._skipped = server.skipped
        self.stats.extra["errors"] = server.stats.dropped  # what clients sent that was bad
        return True


def _tracker_names(first: str, count: int) -> list[str]:
    """`count` tracker names from `first`: itself alone, or its trailing number counting up
    (Tracker0 -> Tracker0 ... Tracker99; a name without one gets 0, 1, ... appended)."""
    if count == 1:
        return [first]
    stem = first.rstrip("0123456789")
    start = int(first[len(stem) :] or 0)
    return [f"{stem}{start + i}" for i in range(count)]


class VrpnSim(Sim):
    """`robowire sim vrpn`: a VRPN server with devices like the mainline's NULL/example ones
    (see `model.py`): `--count` tracker sensors (default 2) at `--rate` Hz (default 60, at most
    1000); `--set tracker=... analog=... button=... dial=...` rename the devices, `--set
    reports=pos` sends Pos_Quat only, `--set clock_offset=SECONDS` stamps every message with a
    clock that far ahead (negative: behind) of ours, `--set clock_rate=R` stamps the reports
    with a clock that runs R seconds a second from the start (-1: backwards; a broken clock).
    A client's set_update_rate request changes the rate. `--set trackers=N` serves N trackers
    of `--count` sensors each instead of one (named after `tracker` with its number counting
    up: Tracker0 ... Tracker<N-1>), all reported in one frame, as a mocap system with many
    rigid bodies does."""

    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        super().__init__(f"vrpn-sim@{self.host}:{self.port}")
        settings = options.options
        self.tracker = settings.get("tracker", "Tracker0")
        self.analog = settings.get("analog", "Analog0")
        self.button = settings.get("button", "Button0")
        self.dial = settings.get("dial", "Dial0")
        count = 2 if options.count is None else options.count
        rate = 60.0 if options.rate is None else float(options.rate)
        if not 1 <= count <= 1024:
            raise ConfigError("vrpn sim: --count (sensors) must be 1..1024")
        if not 0 < rate <= MAX_RATE:
            raise ConfigError(f"vrpn sim: --rate must be in (0, {MAX_RATE:.0f}] Hz")
        trackers = number(settings, "trackers", 1.0, "vrpn sim", sign="positive")
        if trackers != int(trackers) or not 1 <= trackers * count <= 1024 * 16:
            raise ConfigError("vrpn sim: trackers must be a whole number, times --count <= 16384")
        # every tracker's sensors are rows of one model: row r is sensor r % count of tracker
        # r // count (one tracker: its sensors)
        self.model = DeviceModel(
            int(trackers) * count, rate, pose_only=settings.get("reports", "all") == "pos"
        )
        self.sensors_per_tracker = count
        kinds = REPORTS[:1] if self.model.pose_only else REPORTS
        self.encoder = ReportEncoder(kinds, [None, MOTION_DEFAULTS, MOTION_DEFAULTS])
        self.trackers = _tracker_names(self.tracker, int(trackers))
        self._senders = tuple(self.trackers)
        self._sender_of_row = np.arange(self.model.count) // count  # index in `_senders`
        self._messages = self.model.count * len(kinds)  # a frame's
        # `--set clock_offset=SECONDS`: a sender whose clock is that far ahead of ours
        self.clock_offset = number(settings, "clock_offset", 0.0, "vrpn sim", sign="any")
        self.clock_rate = number(settings, "clock_rate", 1.0, "vrpn sim", sign="any")
        self.clock = WallClock()
        served = set(self.trackers)
        self.server = VrpnServer(
            [*self.trackers, self.analog, self.button, self.dial],
            clock_offset=self.clock.wall(0.0) + self.clock_offset,
            on_connect=self._on_connect,
            on_message=self._on_message,
            sensors=lambda name: count if name in served else 0,
        )
        self.frames = 0
        self._start: float | None = None  # the first step's time: the run's t = 0
        # the frames planned ahead (`_plan`): their step times, the tracker's columns, header
        # times, and their batches encoded per (sender ids, type ids) mapping, one per frame
        self._times: list[float] = []
        self._planned: TrackerFrame | None = None
        self._walls: npt.NDArray[np.float64] = np.empty(0)
        self._rate = 0.0  # the rate they were planned at
        self._encoded: dict[tuple[tuple[int, ...], tuple[int, ...]], list[FrameBatch]] = {}
        self._next = 0  # the index of the next step's frame among them
        self._due: float | None = None  # the next step's

    @property
    def count(self) -> int:
        return self.sensors_per_tracker

    @property
    def rate(self) -> float:
        return self.model.rate

    def _on_connect(self, link: VrpnLink) -> None:
        if link.session is not None and link.session.connected:  # Button_Filter: Got_Connection
            link.session.send(self.button, self.model.button_states())

    def _on_message(self, link: VrpnLink, event: MessageReceived) -> None:
        session = link.session
        if session is None:
            return
        match event.message:
            case Ping() if event.sender == self.button and session.connected:
                session.send(self.button, self.model.button_states())
            case TrackerSetUpdateRate(rate=rate) if event.sender in self._senders:
                self.model.set_rate(rate)

    async def serve(self) -> None:
        await self.server.run(self.host, self.port, self.listening)

    def step(self, now: float) -> None:
        """Send the frame due at `now`: the next of the frames planned ahead, unless `now` is
        not its time (the first step, steps skipped, a new rate) or none is left; then the
        frames from `now` on are planned first. When the next step is due already (the loop
        woke late), the frame waits for it: the frames caught up go out in one write."""
        if self._start is None:
            self._start = now
        k = self._next
        if k >= len(self._times) or self._times[k] != now:
            self._plan(now)
            k = self._next = 0
        self._send(now - self._start, float(self._walls[k]))
        self._next = k + 1
        rate = self.model.rate
        if k + 1 < len(self._times) and rate == self._rate:
            self._due = self._times[k + 1]
        else:  # none left, or a client asked for a new rate: planned again next step
            self._due, self._times = now + 1.0 / rate, []
        if self._due > monotonic():
            self.server.flush()

    def _plan(self, now: float) -> None:
        """The next `PLAN_SECONDS` of frames (`PLAN_FRAMES` at least) from `now`, one period
        apart, computed in one numpy pass; each mapping's batch of them is encoded in one pass
        too, when first sent (`_batch`). Each frame is stamped with the time it is the pose
        at."""
        assert self._start is not None
        rate = self._rate = self.model.rate
        times = [now]
        for _ in range(max(1, PLAN_FRAMES, round(rate * PLAN_SECONDS)) - 1):
            times.append(times[-1] + 1.0 / rate)  # as each step adds a period to the last
        self._times = times
        steps = np.array(times)
        self._planned = self.model.frames(steps - self._start)
        pace = self.clock_rate  # the sender's clock runs `pace` s a second from the start
        ran = steps if pace == 1.0 else self._start + (steps - self._start) * pace
        self._walls = (self.clock.wall(0.0) + ran) + self.clock_offset  # as wall(now) each
        self._encoded.clear()

    def _batch(self, ids: tuple[int, ...], types: tuple[int, ...]) -> FrameBatch:
        """The frame of this step (`_next`) for a session's ids (see `_plan`)."""
        frames = self._encoded.get((ids, types))
        if frames is None:
            planned = self._planned
            assert planned is not None
            rows = np.repeat(self._walls, self.model.count)  # each frame's header time
            frames_planned = len(self._times)
            if len(ids) == 1:
                sender: int | npt.NDArray[np.int32] = ids[0]
                sensors = planned.sensors
            else:  # each row's tracker id and its sensor number in that tracker
                sender = np.tile(np.array(ids, np.int32)[self._sender_of_row], frames_planned)
                sensors = planned.sensors % self.sensors_per_tracker
            batch = self.encoder.encode(sender, types, sensors, tracker_values(planned), time=rows)
            frames = self._encoded[(ids, types)] = batch.split(frames_planned)
        return frames[self._next]

    def next_deadline(self) -> float | None:
        return self._due

    def _send(self, t: float, wall: float) -> None:
        """Send what is due at `t` seconds into the run (header time `wall`): the tracker's
        frame (`_next` of those planned), then the analog, buttons and dials when due."""
        server, model = self.server, self.model
        messages = self._messages
        # one frame of those encoded at once, queued: `step` writes it (one TCP write / few
        # datagrams per client), or what else is sent now does
        kinds = self.encoder.kinds
        server.broadcast_batch(self._senders, kinds, self._batch, messages, flush=False)
        self.frames += 1
        self.stats.messages_out += messages
        analog = model.analog(t)
        if analog is not None:
            server.broadcast(self.analog, analog, time=wall, reliable=False)
        for change in model.button_changes(t):
            server.broadcast(self.button, change, time=wall)
        for dial in model.dial_updates(t):
            server.broadcast(self.dial, dial, time=wall)
