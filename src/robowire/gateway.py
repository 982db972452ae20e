"""The gateway: sources -> world -> sinks, opened from URLs, run until told to stop.

Here a URL, a site file, a recording or a replay becomes services (`open_source`, `open_sink`,
`open_sim`, `project`, and the pipelines below). Running them is `robowire.runner`'s (one task
per service, what a failure ends, when the run ends): `Gateway` is its `Runner` plus
`add_sources(urls)`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from robowire import protocols, sinks
from robowire.addresses import BAG_DIRECTORY, FILE_SOURCES, parse_endpoint, source_target
from robowire.config import Site, with_time
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, RobowireError
from robowire.projection import ProjectedSink, Rules
from robowire.recording import McapRecorder, RawEmitter, contents, raw_sources
from robowire.recording.writer import FOXGLOVE_RATE
from robowire.runner import Runner
from robowire.service import CaptureSource, Service, Sim, SimOptions, Sink, Source, time_option

log = logging.getLogger("robowire")

EVERY_SOURCE = frozenset({"time"})  # options every source takes (named when a typo is told)


def open_source(url: str | Endpoint) -> Source:
    """A source for a URL or file name (`robowire listen URL`); every source takes
    `?time=sender|receive|corrected` (see `robowire.timebase.SourceClock`)."""
    endpoint = ros2_bag(parse_endpoint(url) if isinstance(url, str) else url)
    mode, endpoint = time_option(endpoint)
    source = _open_source(endpoint)
    if mode is not None:
        source.time.mode = mode
    return source


def ros2_bag(endpoint: Endpoint) -> Endpoint:
    """`endpoint` read as a ROS bag when it is an `.mcap` that a ROS tool wrote (its profile
    `ros2`, or `ros1` to say so), not a robowire recording."""
    if endpoint.protocol != FILE_SOURCES[".mcap"] or endpoint.path is None:
        return endpoint
    from robowire.ros2.bag import mcap_profile  # (the bag modules load when a bag is read)

    if mcap_profile(Path(endpoint.path)) not in ("ros2", "ros1"):
        return endpoint
    return dataclasses.replace(endpoint, protocol=BAG_DIRECTORY)


def _open_source(endpoint: Endpoint) -> Source:
    found = Path(str(endpoint.path))
    directory = endpoint.protocol == BAG_DIRECTORY and found.is_dir()
    if endpoint.is_file and endpoint.path != "-" and not found.is_file() and not directory:
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


class Gateway(Runner):
    """A `Runner` (`robowire.runner`) that also opens sources from their URLs."""

    def add_sources(self, urls: Iterable[str]) -> Self:
        return self.add(*(open_source(url) for url in urls))


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
    format: str | None = None,
) -> Sink:
    """`robowire record URL... -o FILE [--format F]`: the sink writing FILE
    (`sinks.open_recorder`); an MCAP recorder takes every raw message the `sources` (opened
    from `urls`) receive too."""
    recorder = sinks.open_recorder(output, foxglove_rate, format)
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
    endpoint = ros2_bag(parse_endpoint(file))
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
