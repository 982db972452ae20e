"""Endpoint URLs and the lazy registry of protocol packages.

    spyglass://host:port          vrpn://Tracker0@host:3883      vrpn+tcp://Tracker0@host
    xrp://host:3540               ugcs://host:5556               vrsp://0.0.0.0:PORT
    recording.rec                 vrpn:capture.pcap              spyglass:-   (stdin)

A URL's scheme names the protocol. A file is named by its path: `.rec` is SpyGlass and `.mcap`
a robowire recording; any other file takes the protocol as a `name:` prefix. Options ride in
the query string (`vrpn://Tracker0@host?time=receive`).

Each protocol package has an `endpoints` module (the CLI glue) loaded only when its protocol
is used; `glue()` turns a protocol that has not landed yet into one clear ConfigError. More
protocols can be added from other distributions through the `robowire.protocols` entry point.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from urllib.parse import parse_qsl, urlsplit

from robowire.errors import ConfigError

PROTOCOLS: dict[str, str] = {
    "spyglass": "robowire.protocols.spyglass.endpoints",
    "vrpn": "robowire.protocols.vrpn.endpoints",
    "xrp": "robowire.protocols.xrp.endpoints",
    "ugcs": "robowire.protocols.ugcs.endpoints",
    "vrsp": "robowire.protocols.vrsp.endpoints",
}
"""Protocol name -> module of its CLI glue."""

SCHEMES: dict[str, str] = {
    "spyglass": "spyglass",
    "vrpn": "vrpn",
    "vrpn+tcp": "vrpn",
    "xrp": "xrp",
    "ugcs": "ugcs",
    "vrsp": "vrsp",
}
"""URL scheme -> protocol name."""

FILE_SUFFIXES: dict[str, str] = {".rec": "spyglass", ".mcap": "mcap"}
"""File suffix -> protocol name, for files named without a `protocol:` prefix."""

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".bin", ".raw", ".txt", ".rec", ".mcap")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One parsed endpoint: a network address or a file, and the protocol that speaks it."""

    raw: str
    protocol: str
    scheme: str
    host: str = "127.0.0.1"
    port: int | None = None
    user: str | None = None  # the part before '@' (VRPN device names)
    path: str | None = None  # set for files; "-" is stdin
    options: dict[str, str] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def port_or(self, default: int) -> int:
        return default if self.port is None else self.port

    def option(self, name: str, default: str) -> str:
        return self.options.get(name, default)

    def float_option(self, name: str, default: float) -> float:
        """A non-negative number option (seconds, a speed, a rate), or ConfigError."""
        try:
            value = float(self.options.get(name, default))
        except ValueError:
            raise ConfigError(f"{self.raw}: {name} must be a number") from None
        if not value >= 0:
            raise ConfigError(f"{self.raw}: {name} must not be negative")
        return value

    def __str__(self) -> str:
        return self.raw


def parse_endpoint(text: str) -> Endpoint:
    """Parse a URL or file name into an Endpoint, or raise ConfigError saying what is wrong."""
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        protocol = SCHEMES.get(scheme)
        if protocol is None:
            known = ", ".join(sorted(SCHEMES))
            raise ConfigError(f"unknown scheme {scheme!r} in {text!r} (known: {known})")
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"bad port in {text!r}: {exc}") from None
        return Endpoint(
            raw=text,
            protocol=protocol,
            scheme=scheme,
            host=parts.hostname or "127.0.0.1",
            port=port,
            user=parts.username,
            options=dict(parse_qsl(parts.query)),
        )
    prefix, colon, rest = text.partition(":")
    if colon and prefix.lower() in PROTOCOLS and rest:
        return Endpoint(raw=text, protocol=prefix.lower(), scheme="file", path=rest)
    protocol = FILE_SUFFIXES.get(Path(text).suffix.lower())
    if protocol is not None:
        return Endpoint(raw=text, protocol=protocol, scheme="file", path=text)
    raise ConfigError(
        f"cannot tell the protocol of {text!r}: use a URL like spyglass://host:port, "
        "or name a file as PROTOCOL:FILE (e.g. vrpn:capture.pcap)"
    )


def glue(protocol: str) -> ModuleType:
    """The `endpoints` module of a protocol, imported on first use."""
    module_name = PROTOCOLS.get(protocol)
    if module_name is None:
        for ep in entry_points(group="robowire.protocols"):
            if ep.name == protocol:
                module_name = ep.value
                break
    if module_name is None:
        raise ConfigError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"{protocol}: not available in robowire yet") from None
        raise ConfigError(f"{protocol}: needs the missing package {exc.name!r}") from None


def glue_function(protocol: str, name: str, role: str) -> object:
    """One function of a protocol's glue, or a ConfigError if that role has not landed."""
    function = getattr(glue(protocol), name, None)
    if function is None:
        raise ConfigError(f"{protocol}: {role} is not available in robowire yet")
    return function
