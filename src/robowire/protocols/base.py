"""The protocol contract: each protocol package's `__init__` exports one `WireProtocol`, the
object the registry (`robowire.protocols`) hands to the gateway and the CLI: its name, default
port, URL schemes, its native address syntax, its capture formats, the options each role
accepts, and the functions that open a source, a file source, a sink or a simulator and
dissect a capture.

It sits above the templates (`robowire.service`); the session contract every session shares is
the low-level `robowire.wire`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import click

from robowire.capture import CaptureFormat, CaptureReader, Record, reader_for, sniff_format
from robowire.endpoints import Endpoint
from robowire.service import Sim, SimOptions, Sink, Source

ROLES = ("source", "file", "sink", "sim", "dissect", "capture")
"""What a protocol can do; `WireProtocol.roles()` says which of them it does."""

MODULES = ("codec", "events", "session", "adapter", "model", "services", "dissect")
"""The modules every protocol package has (a `session_<role>` per side counts as `session`)."""

STATE_MODULES = ("events", "session")
"""What a protocol with no state has not: its sources' sessions are `StatelessSession`s
(`robowire.protocols.datagram`), whose events are its codec's messages."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Demo:
    """How `robowire demo` runs the protocol's simulator and listens to it (the bridge matrix
    and the walkthrough test run it the same way).

    `url` is the source that reads the simulator, `{host}` and `{port}` filled in with where
    the simulator listens; for a protocol whose simulator `sends` (VRSP), the source binds
    first (`url` with port 0) and the simulator sends to where it bound. `settings` are the
    demo simulator's `--set` values.
    """

    url: str
    settings: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class WireProtocol:
    """One protocol as the gateway and the CLI see it (see the module docstring).

    `open_source` opens the live source of a URL and `open_file` the source of a capture file,
    given the reader `reader(path)` picked for it (`source` chooses between them: the one
    "file or live" dispatch). `read_capture` reads pcap/pcapng and the protocol's text or raw
    captures; `formats` are the file formats of its own (`.rec`, VRPN logs), told by suffix or
    first bytes. `native_address` turns the protocol's own address syntax into a robowire URL
    (VRPN's `Tracker0@host` -> `vrpn://Tracker0@host`), None where it is not one.

    `open_sink` / `open_sim` / `record` are None where the protocol has no such role; the
    `*_options` sets name every URL query option (or `--set` key) the role accepts, so a typo
    is one clear error instead of a silently ignored setting.

    What the rest of robowire and its tests derive from it, so that no list elsewhere names
    a protocol: `kind`, the kind its source gives its devices (what `robowire.publish` gives
    a device set without one); `sends`, its simulator and sink send to a source that binds
    (a datagram receiver: VRSP), where the others listen for their clients; `demo`, how
    `robowire demo` runs it (None: not in the demo); `wireshark`, whether robowire's
    Wireshark plugin dissects it (as `name`, on `default_port`).
    """

    name: str
    title: str
    default_port: int
    schemes: tuple[str, ...]
    open_source: Callable[[Endpoint], Source]
    open_file: Callable[[Endpoint, CaptureReader], Source]
    dissect: Callable[[str], Iterator[dict[str, Any]]]
    read_capture: CaptureReader
    formats: tuple[CaptureFormat, ...] = ()
    native_address: Callable[[str], str | None] | None = None
    open_sink: Callable[[Endpoint], Sink] | None = None
    record: Callable[[str], Sink] | None = None  # `record -o FILE` in one of `formats`
    open_sim: Callable[[SimOptions], Sim] | None = None
    source_options: frozenset[str] = frozenset()
    file_options: frozenset[str] = frozenset({"speed"})
    sink_options: frozenset[str] = frozenset()
    sim_settings: frozenset[str] = frozenset()
    command: click.Command | None = None
    kind: str = "device"
    sends: bool = False
    demo: Demo | None = None
    wireshark: bool = False

    def source(self, endpoint: Endpoint) -> Source:
        """The source of `endpoint`: its capture file through `open_file`, else live."""
        if endpoint.path is not None:
            return self.open_file(endpoint, self.reader(endpoint.path))
        return self.open_source(endpoint)

    def reader(self, path: str) -> CaptureReader:
        """The reader of the capture `path`: its own format's, else `read_capture`."""
        return reader_for(path, self.formats, self.read_capture)

    def records(self, path: str) -> Iterator[Record]:
        """The records of the capture `path`, as a live driver would feed them."""
        return self.reader(path)(path)

    def claims(self, path: str) -> bool:
        """Whether `path` is in a file format of this protocol's own (suffix or first bytes)."""
        return sniff_format(path, self.formats) is not None

    def suffixes(self) -> tuple[str, ...]:
        return tuple(s for f in self.formats for s in f.suffixes)

    def roles(self) -> tuple[str, ...]:
        """The `ROLES` it declares (a source, a file source, dissect and capture always)."""
        optional = {"sink": self.open_sink, "sim": self.open_sim}
        return tuple(r for r in ROLES if optional.get(r, True) is not None)
