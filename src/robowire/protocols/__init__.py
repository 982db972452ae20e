"""The protocol registry: one package per protocol, each of the same shape.

    protocols/<name>/codec.py      bytes <-> typed messages (pure functions; messages.py beside
                                   it where a protocol has many)
    protocols/<name>/events.py     the protocol's typed event union
    protocols/<name>/session.py    sans-I/O state machine per role (session_<role>.py if large)
    protocols/<name>/adapter.py    events -> world updates, and world -> wire for the sinks
    protocols/<name>/model.py      the pure simulator (physics, mobility, motion)
    protocols/<name>/services.py   asyncio source, sink and simulator on the shared templates
    protocols/<name>/dissect.py    `robowire decode <name> FILE`
    protocols/<name>/__init__.py   exports `PROTOCOL`, the package's `WireProtocol`

A new protocol is one package plus one line in `REGISTRY` (docs/architecture.md, "Add a
protocol"). Each declares its capture formats (suffixes, sniffers) and its native address form
in its `WireProtocol`, so the core names no protocol: `of_file` and `native_url` ask them.
Packages are imported only when their protocol is used; more can come from other
distributions through the `robowire.protocols` entry point group (`name = "module:attribute"`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from importlib.metadata import entry_points

from robowire.errors import ConfigError
from robowire.protocols.base import WireProtocol

REGISTRY: dict[str, str] = {
    "spyglass": "robowire.protocols.spyglass:PROTOCOL",
    "vrpn": "robowire.protocols.vrpn:PROTOCOL",
    "xrp": "robowire.protocols.xrp:PROTOCOL",
    "ugcs": "robowire.protocols.ugcs:PROTOCOL",
    "vrsp": "robowire.protocols.vrsp:PROTOCOL",
}
"""Protocol name -> "module:attribute" of its `WireProtocol`."""


def names() -> list[str]:
    """Every protocol robowire knows of, landed or not, in a stable order."""
    extra = [ep.name for ep in entry_points(group="robowire.protocols")]
    return [*REGISTRY, *(n for n in extra if n not in REGISTRY)]


def protocol_of_scheme(scheme: str) -> str | None:
    """The protocol a URL scheme names: `vrpn` and `vrpn+tcp` are both VRPN's."""
    name = scheme.lower().partition("+")[0]
    return name if name in names() else None


def get(name: str) -> WireProtocol:
    """The `WireProtocol` of `name`, imported on first use; ConfigError if it is not there."""
    target = REGISTRY.get(name)
    if target is None:
        target = next(
            (ep.value for ep in entry_points(group="robowire.protocols") if ep.name == name), None
        )
    if target is None:
        raise ConfigError(f"unknown protocol {name!r} (known: {', '.join(names())})")
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"{name}: not available in robowire yet") from None
        raise ConfigError(f"{name}: needs the missing package {exc.name!r}") from None
    protocol = getattr(module, attribute or "PROTOCOL", None)
    if not isinstance(protocol, WireProtocol):
        raise ConfigError(f"{name}: {target} is not a robowire protocol")
    return protocol


def of_file(path: str) -> WireProtocol | None:
    """The protocol whose own file format `path` is in (`.rec`, a VRPN log; by its suffix,
    else its first bytes), or None (a pcap or raw capture needs a `PROTOCOL:` prefix)."""
    return next((p for p in _each() if p.claims(path)), None)


def native_url(text: str) -> str | None:
    """The robowire URL of a protocol's own address form (VRPN's `Tracker0@host`), or None."""
    for protocol in _each():
        if protocol.native_address is not None and (url := protocol.native_address(text)):
            return url
    return None


def landed() -> list[WireProtocol]:
    """Every protocol that can be used now (for help texts and the demo)."""
    return list(_each())


def _each() -> Iterator[WireProtocol]:
    """Every protocol that can be used now, each imported only when the caller gets to it."""
    for name in names():
        try:
            yield get(name)
        except ConfigError:
            continue
