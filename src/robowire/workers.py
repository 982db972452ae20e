"""Worker processes: a site's sources and heavy sinks on every core, joined by Zenoh.

A `[[source]]` or `[[sink]]` of a site file with `worker = "NAME"` runs in the worker process
NAME (`robowire up -c site.toml --worker NAME`, the same file), not in the gateway:

    gateway (`up -c site.toml`)                 worker NAME (`up -c site.toml --worker NAME`)
      its own sources, sinks, sims                its sources -> its world -> zenoh sink
      zenoh sink: its own sources, listening ---> zenoh source -> its world -> its sinks
      zenoh source (connects to that sink)   <--- (every worker connects to the bus)
      one `Worker` service per worker       <--- status beacon: its services' status
                                                  (spawned: reads stdin, whose end means the
                                                  gateway is gone)

The gateway's bus sink is a Zenoh peer listening on the `[workers] bus` address; workers and
the gateway's bus source are its clients, and it routes between them, so a worker's sink
gets the other workers' sources straight from them and the gateway's own sources from the
gateway's bus sink. Nothing is echoed back: a Zenoh source never writes into a table its
world already has (`ZenohAdapter`). The gateway's bus source (`workers@HOST:PORT` in its
status) is under the overload policy as every source is: while the gateway is behind, a
worker's STATE frame made stale by a newer one of the same devices and columns is shed and
counted in its `shed` (`robowire.zenoh.source`).
The same file runs on several machines: the workers in `[workers] remote` are not spawned by
the gateway; run `robowire up -c site.toml --worker NAME` for each where it should run (its
bus host is the gateway's address).

Every worker says what its services are doing on the bus every `POLL_SECONDS`
(`StatusBeacon`, key `robowire/=workers/NAME/=status`), and the gateway has one `Worker` per
worker that takes it in: the gateway's status shows the worker's row (state; messages, those
its sources took in; restarts as drops) followed by the worker's own sources and sinks as it
said them (state, counters, rates, and what each source shed under overload: `Remote`; not
its bus or status endpoint). A remote worker is `connected` while it speaks and `waiting`
once it said nothing for `SILENT_POLLS` polls (and shows nothing then).

A spawned worker's `Worker` also supervises it: it starts the child, restarts it when it
ends (backoff doubling from 1 s to 8 s; the first exit is said in one line, then nothing
until it has run for a while; nothing of it is shown while it is down, since a restarted
worker counts from 0), and stops it when the gateway stops (SIGTERM, then SIGKILL after
`STOP_SECONDS`). A gateway killed outright leaves no worker either: each child's stdin is a
pipe from the gateway, and a worker ends when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

import orjson

from robowire.addresses import parse_endpoint
from robowire.config import Site
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.gateway import open_site
from robowire.service import MAX_RETRY_SECONDS, RETRY_SECONDS, Service, Sink, Source
from robowire.status import FIELDS, ServiceStatus, status_message
from robowire.timebase import monotonic
from robowire.world import World
from robowire.zenoh import keys
from robowire.zenoh.net import Link, Mode, link_of, open_when_up
from robowire.zenoh.sink import ZenohSink
from robowire.zenoh.source import ZenohSource

log = logging.getLogger("robowire")

STOP_SECONDS = 5.0  # a worker that has not ended this long after SIGTERM is killed
STEADY_SECONDS = 10.0  # a worker that ran this long before it ended is said again
POLL_SECONDS = 2.0  # how often a worker says its status on the bus
SILENT_POLLS = 3  # a worker that said nothing for this many polls is forgotten (waiting)


def keep_big_buffers() -> None:
    """Have glibc serve big allocations (a 10,000-drone frame is 680 kB, its columns 80-320
    kB) from the heap and keep what is freed, instead of mapping fresh pages for each and
    unmapping them after: each first touch of a fresh page is a fault, and copying a fresh
    680 kB buffer took 930 us here against 39 us from the heap. `robowire up` (the gateway
    and each worker) sets it; RSS then keeps up to 256 MiB freed for reuse. Elsewhere than
    glibc, nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: map only allocations of 64 MiB and more
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: give back only past 256 MiB free at the top


def site_services(site: Site, path: str, worker: str | None = None) -> list[Service]:
    """What `robowire up -c PATH [--worker NAME]` runs: the site's services for the gateway
    (`worker` None) or one worker, with the bus between them and, in the gateway, one
    `Worker` per worker it spawns."""
    if worker is not None and worker not in site.worker_names:
        known = ", ".join(site.worker_names) or "none"
        said = f"no source or sink has worker = {worker!r} (workers: {known})"
        raise ConfigError(f"{site.path}: {said}")
    out = open_site(site, worker)
    if site.workers is None:
        return out
    bus = parse_endpoint(site.workers.bus)
    if worker is None:
        # the bus sink is the peer every worker connects to (it listens, and is ready before
        # any source starts); it publishes the gateway's own sources, for the workers' sinks
        local = frozenset(s.name for s in out if isinstance(s, Source))
        out.append(_bus_sink(bus, local, "listen"))
        heard = ZenohSource(link_of(bus, "connect"))
        heard.name = f"workers@{heard.link.host}:{heard.link.port}"
        out.append(heard)
        remote = site.workers.remote
        out += [Worker(name, path, bus, spawn=name not in remote) for name in site.worker_names]
        return out
    mine = frozenset(s.name for s in out if isinstance(s, Source))
    sinks = any(isinstance(s, Sink) for s in out)
    if mine:
        out.append(_bus_sink(bus, mine, "connect"))
    if sinks:  # they get the whole world: every worker's sources and the gateway's own
        out.append(ZenohSource(link_of(bus, "connect")))
    out.append(StatusBeacon(worker, link_of(bus, "connect")))
    return out


def _bus_name(bus: Endpoint) -> str:
    """The name a worker's bus sink and source have (their link's)."""
    link = link_of(bus, "connect")
    return f"zenoh://{link.host}:{link.port}"


def _bus_sink(bus: Endpoint, sources: frozenset[str], mode: Mode) -> ZenohSink:
    sink = ZenohSink(link_of(bus, mode))
    sink.sources = sources
    return sink


class Worker(Service):
    """One worker process of the gateway's site: supervised when the gateway spawns it, and
    in the gateway's status either way, as its `StatusBeacon` says it on the bus (see the
    module docstring)."""

    role = "worker"
    announce = "running"

    def __init__(self, worker: str, path: str, bus: Endpoint, *, spawn: bool = True) -> None:
        super().__init__(f"worker {worker}")
        self.worker = worker
        self.path = path
        self.link = link_of(bus, "connect")
        self.bus = _bus_name(bus)  # the name of the worker's bus services (not shown as its own)
        self.spawn = spawn
        self.pid: int | None = None
        self.status_url: str | None = None  # a spawned worker's own status server
        self.status: list[ServiceStatus] = []  # its sources and sinks, as it last said
        self.heard: float | None = None  # when it last said them (monotonic)

    def speaking(self) -> bool:
        """Up: a spawned worker while its process runs, a remote one while it says its
        status (it is `ready` from the start either way: the gateway's sources do not wait
        for a worker on another machine)."""
        return self.ready.is_set() and (self.spawn or self.heard is not None)

    def remote_status(self) -> list[ServiceStatus]:
        """The worker's own sources and sinks, as it last said (see the module docstring)."""
        return self.status

    def command(self, status_port: int) -> list[str]:
        return [
            sys.executable, "-m", "robowire.cli", "up", "-c", self.path,
            "--worker", self.worker, "--supervised", "--status-port", str(status_port),
        ]  # fmt: skip

    async def run(self, world: World) -> None:
        following = asyncio.create_task(self._follow())
        try:
            if self.spawn:
                await self._supervise()
            else:
                self.ready.set()
                await following  # (it runs until cancelled)
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)

    async def _supervise(self) -> None:
        delay = RETRY_SECONDS
        quiet = False
        while True:
            began = monotonic()
            code = await self._run_once()
            self.ready.clear()  # "waiting" in the status until it runs again
            ran = monotonic() - began
            if ran >= STEADY_SECONDS:
                delay, quiet = RETRY_SECONDS, False
            self.stats.drop(f"exited with status {code}; restarted")
            if not quiet:
                log.warning("%s exited with status %s; restarting it", self.name, code)
                quiet = True
            await asyncio.sleep(delay)
            delay = min(2 * delay, MAX_RETRY_SECONDS)

    async def _run_once(self) -> int:
        port = _free_port()
        self.status_url = f"http://127.0.0.1:{port}/status"
        process = await asyncio.create_subprocess_exec(
            *self.command(port), stdin=asyncio.subprocess.PIPE
        )
        self.pid = process.pid
        self.ready.set()
        try:
            return await process.wait()
        except asyncio.CancelledError:
            await _stop(process)
            raise
        finally:
            self.pid = None
            self._forget()

    async def _follow(self) -> None:
        """Take in what the worker says on the bus; forget it once it has said nothing for
        `SILENT_POLLS` times `POLL_SECONDS` (a remote worker is then `waiting`)."""
        session = await open_when_up(self.link, self.name)
        loop = asyncio.get_running_loop()
        key = keys.worker_status(self.worker)
        subscriber: Any = session.declare_subscriber(
            key, lambda sample: loop.call_soon_threadsafe(self.said, sample.payload.to_bytes())
        )
        silence = SILENT_POLLS * POLL_SECONDS
        try:
            while True:
                await asyncio.sleep(POLL_SECONDS)
                if self.heard is not None and monotonic() - self.heard > silence:
                    self._forget()
        finally:
            subscriber.undeclare()
            await asyncio.to_thread(cast(Callable[[], None], session.close))

    def said(self, payload: bytes) -> None:
        """A status message of the worker's (`StatusBeacon`): its sources and sinks (not its
        bus or beacon), and the messages its sources took in as this row's. Anything else
        on the key (not that message) is dropped, and said at debug level."""
        try:
            said = orjson.loads(payload)["services"]
            services = [self._service(s) for s in said if s["role"] in ("source", "sink")]
        except (orjson.JSONDecodeError, LookupError, TypeError, ValueError) as exc:
            log.debug("%s: not a status message (%s): %r", self.name, exc, payload[:80])
            return
        if self.spawn and self.pid is None:
            return  # from a worker process that has ended (a late message): it counts from 0
        self.status = [s for s in services if s.name != self.bus]
        self.heard = monotonic()
        self.stats.messages_out = sum(s.messages for s in self.status if s.role == "source")

    def _service(self, said: dict[str, Any]) -> ServiceStatus:
        """One service of a status message (TypeError or ValueError if it is not one)."""
        status = ServiceStatus(**{k: v for k, v in said.items() if k in FIELDS})
        texts, counts = (status.name, status.role, status.state), (status.messages, status.shed)
        if not all(isinstance(t, str) for t in texts) or not all(type(n) is int for n in counts):
            raise ValueError(f"a service of unexpected types: {said!r:.80}")
        return dataclasses.replace(status, worker=self.worker)

    def _forget(self) -> None:
        self.status, self.heard = [], None


class StatusBeacon(Service):
    """In a worker process: what its services are doing (`Gateway.status()`), put on the bus
    as JSON every `POLL_SECONDS` (`zenoh.keys.worker_status`), where the gateway's `Worker`
    takes it in: a worker on another machine has no status server the gateway can reach."""

    role = "status"
    announce = "publishing to"

    def __init__(self, worker: str, link: Link) -> None:
        super().__init__(f"status of worker {worker}")
        self.worker = worker
        self.link = link

    async def run(self, world: World) -> None:
        self.listening((self.link.host, self.link.port))  # at once: the sources do not wait
        session = await open_when_up(self.link, self.name)
        key = keys.worker_status(self.worker)
        try:
            while True:
                if self.gateway is not None:
                    message = status_message(self.gateway.status())
                    session.put(key, orjson.dumps(message))
                    self.stats.messages_out += 1
                await asyncio.sleep(POLL_SECONDS)
        finally:
            await asyncio.to_thread(cast(Callable[[], None], session.close))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL if it has not ended within STOP_SECONDS."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def watch_parent(stop: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
    """In a supervised worker: call `stop` (on `loop`) when stdin ends, that is when the
    gateway that spawned it is gone, however it went; exit outright if that does not end
    the run within STOP_SECONDS."""

    def wait() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):  # not sys.stdin: its lock would hold up the exit
                pass
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
            loop.call_soon_threadsafe(stop)
        threading.Event().wait(STOP_SECONDS)
        os._exit(1)

    threading.Thread(target=wait, name="robowire-parent-watch", daemon=True).start()
