"""The protocol contract: each protocol package's `__init__` exports one `WireProtocol`, the
object the registry (`robowire.protocols`) hands to the gateway and the CLI: its name, default
port, URL schemes, the options each role accepts, and the functions that open a source, a sink
or a simulator, dissect a capture and read a capture's records.

It sits above the templates (`robowire.service`); the session contract every session shares is
the low-level `robowire.wire`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

    from robowire.capture import Record
    from robowire.endpoints import Endpoint
    from robowire.service import Sim, SimOptions, Sink, Source


@dataclass(frozen=True, slots=True, kw_only=True)
class WireProtocol:
    """One protocol as the gateway and the CLI see it (see the module docstring).

    `open_sink` / `open_sim` are None where the protocol has no such role yet; the `*_options`
    sets name every URL query option (or `--set` key) the role accepts, so a typo is one clear
    error instead of a silently ignored setting.
    """

    name: str
    title: str
    default_port: int
    schemes: tuple[str, ...]
    open_source: Callable[[Endpoint], Source]
    dissect: Callable[[str], Iterator[dict[str, Any]]]
    read_capture: Callable[[str], Iterator[Record]]
    open_sink: Callable[[Endpoint], Sink] | None = None
    open_sim: Callable[[SimOptions], Sim] | None = None
    source_options: frozenset[str] = frozenset()
    file_options: frozenset[str] = frozenset({"speed"})
    sink_options: frozenset[str] = frozenset()
    sim_settings: frozenset[str] = frozenset()
    command: click.Command | None = None
