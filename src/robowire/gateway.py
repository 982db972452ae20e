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

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from robowire import protocols
from robowire.endpoints import Endpoint, parse_endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import WireProtocol
from robowire.runner import Runner
from robowire.service import Sim, SimOptions, Sink, Source, time_option

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
    target = protocols.SOURCE_SCHEMES.get(endpoint.protocol)
    if target is not None and not endpoint.is_file:  # a source that is not a wire protocol
        source: Source = _load(target)(endpoint)
        return source
    if endpoint.protocol in protocols.SINK_SCHEMES:
        raise ConfigError(f"{endpoint.raw}: {endpoint.scheme}:// can only be served to, not read")
    if endpoint.protocol == "mcap":
        from robowire.recording import McapSource

        endpoint.check_options({"speed", *EVERY_SOURCE}, "a recording")
        return McapSource(endpoint)
    protocol = protocols.get(endpoint.protocol)
    if endpoint.is_file:
        endpoint.check_options(protocol.file_options | EVERY_SOURCE, f"{protocol.title} files")
    else:
        _check_scheme(protocol, endpoint)
        known = protocol.source_options | EVERY_SOURCE
        endpoint.check_options(known, f"a {protocol.title} source")
    source = protocol.open_source(endpoint)
    source.protocol = protocol.name
    return source


def open_sink(url: str | Endpoint) -> Sink:
    """A protocol server offering the world (`robowire serve URL`)."""
    endpoint = parse_endpoint(url) if isinstance(url, str) else url
    if endpoint.is_file:
        raise ConfigError(f"{endpoint.raw}: serve needs a URL like {endpoint.protocol}://host:port")
    target = protocols.SINK_SCHEMES.get(endpoint.protocol)
    if target is not None:  # a sink that is not a wire protocol (Foxglove, Zenoh)
        opened: Sink = _load(target)(endpoint)
        return opened
    protocol = protocols.get(endpoint.protocol)
    if protocol.open_sink is None:
        raise ConfigError(f"{protocol.name}: serving is not available in robowire yet")
    _check_scheme(protocol, endpoint)
    endpoint.check_options(protocol.sink_options, f"a {protocol.title} server")
    return protocol.open_sink(endpoint)


def _load(target: str) -> Any:
    """The function a `"module:function"` registry entry names."""
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)


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


def _check_scheme(protocol: WireProtocol, endpoint: Endpoint) -> None:
    if endpoint.scheme not in protocol.schemes:
        known = ", ".join(f"{s}://" for s in protocol.schemes)
        raise ConfigError(f"{endpoint.raw}: {protocol.title} speaks {known}")


class Gateway(Runner):
    """A `Runner` (`robowire.runner`) that also opens sources from their URLs."""

    def add_sources(self, urls: Iterable[str]) -> Self:
        return self.add(*(open_source(url) for url in urls))
