"""The gateway: sources -> world -> sinks, opened from URLs, run until told to stop.

It runs every service as its own task. Broken peers are a session's business (counted and
dropped, never raised). A source that fails is logged in one line and leaves the others running
(the exit status says it failed). A sink or simulator that fails (a port in use, a file that
cannot be written) ends the run, since the command cannot do its job without it: `run` raises
its error, which the command prints as its one error line.
The run ends on `stop()`, when `duration` has passed, or when every source has finished
(files read to the end); then sinks get a moment to drain what the world published.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robowire import protocols, sinks
from robowire.addresses import FILE_SOURCES, parse_endpoint, source_target
from robowire.config import Site, with_time
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, RobowireError
from robowire.projection import ProjectedSink, Rules
from robowire.recording import McapRecorder, RawEmitter, contents, raw_sources
from robowire.recording.writer import FOXGLOVE_RATE
from robowire.service import CaptureSource, Service, Sim, SimOptions, Sink, Source, time_option
from robowire.status import RateMeter, ServiceStatus, service_status
from robowire.timebase import monotonic
from robowire.world import World

log = logging.getLogger("robowire")

EVERY_SOURCE = frozenset({"time"})  # options every source takes (named when a typo is told)


def open_source(url: str | Endpoint) -> Source:
    """A source for a URL or file name (`robowire listen URL`); every source takes
    `?time=sender|receive|corrected` (see `robowire.timebase.SourceClock`)."""
    endpoint = parse_endpoint(url) if isinstance(url, str) else url
    mode, endpoint = time_option(endpoint)
    source = _open_source(endpoint)
    if mode is not None:
        source.time.mode = mode
    return source


def _open_source(endpoint: Endpoint) -> Source:
    if endpoint.is_file and endpoint.path != "-" and not Path(str(endpoint.path)).is_file():
        raise ConfigError(f"no such file: {endpoint.path}")  # said before anything starts
    target = source_target(endpoint.protocol)
    if target is not None:  # a source that is not a wire protocol (Zenoh, a recording)
        opened: Source = sinks.load(target)(endpoint)
        return opened
    if endpoint.protocol in sinks.names():
        raise ConfigError(f"{endpoint.raw}: {endpoint.scheme}:// can only be served to, not read")
    protocol = protocols.get(endpoint.protocol)
    if endpoint.is_file:
        endpoint.check_options(protocol.file_options | EVERY_SOURCE, f"{protocol.title} files")
    else:
        sinks.check_scheme(protocol, endpoint)
        known = protocol.source_options | EVERY_SOURCE
        endpoint.check_options(known, f"a {protocol.title} source")
    source = protocol.source(endpoint)
    source.protocol = protocol.name
    return source


def open_sink(url: str | Endpoint) -> Sink:
    """The sink an address names (`robowire serve URL`; see `robowire.sinks`)."""
    return sinks.open_sink(parse_endpoint(url) if isinstance(url, str) else url)


def project(sink: Sink, rules: Rules | None, rate: float | None = None) -> Service:
    """`sink` at most `rate` times a second, under `rules` unless they keep everything."""
    if rate:
        sink.max_rate = rate
    return sink if rules is None or rules.empty else ProjectedSink(sink, rules)


def open_sim(name: str, options: SimOptions) -> Sim:
    """A simulated device of protocol `name` (`robowire sim PROTOCOL`)."""
    protocol = protocols.get(name)
    if protocol.open_sim is None:
        raise ConfigError(f"{protocol.name}: the simulator is not available in robowire yet")
    for key in options.options:
        if key not in protocol.sim_settings:
            known = ", ".join(sorted(protocol.sim_settings)) or "none"
            raise ConfigError(f"{name} sim: unknown setting {key!r} (known: {known})")
    return protocol.open_sim(options)


@dataclass
class Gateway:
    """Runs services around one world. Services may be added before or during `run`."""

    world: World = field(default_factory=World)
    services: list[Service] = field(default_factory=list)
    failures: list[tuple[Service, BaseException]] = field(default_factory=list)
    drain_seconds: float = 0.2
    _tasks: dict[asyncio.Task[None], Service] = field(default_factory=dict)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _running: bool = False
    _started: list[Service] = field(default_factory=list)
    _rates: RateMeter = field(default_factory=RateMeter)

    def add(self, *services: Service) -> Gateway:
        for service in services:
            self.services.append(service)
            if self._running:
                self._start(service)
        return self

    def add_sources(self, urls: Iterable[str]) -> Gateway:
        return self.add(*(open_source(url) for url in urls))

    def stop(self) -> None:
        """End the run (safe to call from any callback on the loop, or before `run`)."""
        self._stopping.set()

    def status(self) -> list[ServiceStatus]:
        """What each service is doing now (see `robowire.status`); the message rates are
        measured between calls."""
        now = monotonic()
        return [
            service_status(s, self._state(s), self.world, self._rates, now) for s in self.services
        ]

    def _state(self, service: Service) -> str:
        if any(s is service for s, _ in self.failures):
            return "failed"
        started = any(s is service for s in self._started)
        if started and not any(s is service for s in self._tasks.values()):
            return "finished"
        if isinstance(service, Source):
            return "connected" if service.live(monotonic()) else "waiting"
        if not service.ready.is_set():
            return "waiting"
        return "listening" if service.announce == "listening on" else "connected"

    async def run(self, duration: float | None = None) -> None:
        """Run until stopped, `duration` seconds passed, or every source finished.

        Raises the RobowireError of a sink or simulator that failed, once everything stopped.
        """
        self._running = True
        try:
            async with asyncio.timeout(duration):
                await self._start_servers_then_sources()
                await self._stopping.wait()
        except TimeoutError:
            pass
        finally:
            self._running = False
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for service, exc in self.failures:
            if not isinstance(service, Source) and isinstance(exc, RobowireError):
                raise exc

    async def _start_servers_then_sources(self) -> None:
        """Sinks and simulators first, each until it is ready (bound, subscribed) or has
        failed; sources only once all are up, so a sink that cannot bind ends the run before
        any source has started (one error line, nothing half-started)."""
        servers = [s for s in self.services if not isinstance(s, Source)]
        for service in servers:
            self._start(service)
        for service in servers:
            task = next((t for t, s in self._tasks.items() if s is service), None)
            if task is None or self.failures:
                break
            ready = asyncio.ensure_future(service.ready.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
        if not self.failures:
            for service in list(self.services):
                self._start(service)

    def _start(self, service: Service) -> None:
        if any(s is service for s in self._started):
            return
        self._started.append(service)
        service.gateway = self
        task = asyncio.create_task(service.run(self.world), name=service.name)
        self._tasks[task] = service
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        service = self._tasks.pop(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                exc = exc.exceptions[0]  # a TaskGroup's failure: say what really broke
            self.failures.append((service, exc))
            fatal = not isinstance(service, Source)
            if fatal:
                self.stop()  # the server or simulator the command is for is gone: end the run
            if not isinstance(exc, RobowireError):  # a bug, not bad input: say what broke
                trace = exc if log.isEnabledFor(logging.DEBUG) else None
                log.error(
                    "%s stopped: %s: %s", service.name, type(exc).__name__, exc, exc_info=trace
                )
            elif not fatal:  # a fatal one is raised by `run`: the command's one error line
                log.error("%s: %s", service.name, exc)
        if not self._running or not isinstance(service, Source):
            return
        if not any(isinstance(s, Source) for s in self._tasks.values()):
            # every source has finished (files read): give sinks a moment to drain, then end
            asyncio.get_running_loop().call_later(self.drain_seconds, self.stop)


# -- pipelines: what a command or a site file runs, assembled ---------------------------------


def open_site(site: Site, worker: str | None = None) -> list[Service]:
    """The services of the site that the gateway (`worker` None) or one worker process runs,
    opened (simulators, sinks, then sources); raises the ConfigError of the first that cannot
    be opened, naming its key, before anything runs. The bus between them is
    `robowire.workers`' business."""
    out: list[Service] = []

    def opened(where: str, make: Any) -> Any:
        try:
            return make()
        except RobowireError as exc:
            raise ConfigError(f"{site.path}: {where}: {exc}") from None

    if worker is None:
        for i, sim in enumerate(site.sims, 1):
            simulator: Sim = opened(f"sim[{i}]", lambda s=sim: open_sim(s.protocol, s.options))
            out.append(simulator)
    for i, sink_config in enumerate(site.sinks, 1):
        if sink_config.worker != worker:
            continue
        if sink_config.record:
            sink = sinks.open_recorder(sink_config.url)
        else:
            sink = opened(f"sink[{i}].url", lambda c=sink_config: open_sink(c.url))
        out.append(project(sink, sink_config.rules, sink_config.rate))
    for i, source_config in enumerate(site.sources, 1):
        if source_config.worker != worker:
            continue
        url = source_config.url
        if source_config.time is not None:
            url = with_time(f"{site.path}: source[{i}]", url, source_config.time)
        source: Source = opened(f"source[{i}].url", lambda u=url: open_source(u))
        if source_config.name is not None:
            source.name = source_config.name
        out.append(source)
    return out


def open_recorder(
    output: str,
    urls: Sequence[str],
    sources: Sequence[Source],
    foxglove_rate: float = FOXGLOVE_RATE,
) -> Sink:
    """`robowire record URL... -o FILE`: the sink writing FILE (`sinks.open_recorder`); an
    MCAP recorder takes every raw message the `sources` (opened from `urls`) receive too."""
    recorder = sinks.open_recorder(output, foxglove_rate)
    if isinstance(recorder, McapRecorder):
        for url, source in zip(urls, sources, strict=True):
            recorder.tap_source(source, parse_endpoint(url).protocol, url)
    return recorder


@dataclass(frozen=True, slots=True)
class Replay:
    """What `robowire replay` runs: the sources of a file (and where it goes), or, for an
    MCAP recording served in a protocol it recorded, the raw re-emission (`emitter`)."""

    sources: list[Source]
    emitter: RawEmitter | None = None


def open_replay(
    file: str, target: str | None, speed: float, level: str = "world", loop: bool = False
) -> Replay:
    """The replay of `file` at `speed`: an MCAP recording's world updates (`level` "world")
    or raw messages through the protocols' sessions ("raw"), or a capture or protocol file
    through its protocol's file source; with `loop`, files start again at their end."""
    endpoint = parse_endpoint(file)
    if not endpoint.is_file:
        raise ConfigError(f"{file}: replay reads files (.mcap, .rec, PROTOCOL:capture.pcap)")
    endpoint = dataclasses.replace(endpoint, options={**endpoint.options, "speed": str(speed)})
    recording = endpoint.protocol == FILE_SOURCES[".mcap"]
    if recording and target is not None:
        assert endpoint.path is not None
        if not Path(endpoint.path).is_file():
            raise ConfigError(f"no such file: {endpoint.path}")
        to = parse_endpoint(target)
        if to.protocol in contents(endpoint.path).protocols():
            return Replay([], RawEmitter(endpoint.path, to, speed, loop))
    sources: list[Source]
    if recording and level == "raw":
        sources = list(raw_sources(endpoint, speed))
    else:  # every file source paces itself by its recorded times when given a speed
        sources = [open_source(endpoint)]
    for source in sources:
        if loop and isinstance(source, CaptureSource):
            source.loop = True
    return Replay(sources)
