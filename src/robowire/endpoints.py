"""Endpoint URLs and the lazy registry of protocol packages.

    spyglass://host:port          vrpn://Tracker0@host:3883      vrpn+tcp://Tracker0@host
    xrp://host:3540               ugcs://host:5556               vrsp://0.0.0.0:PORT
    zenoh://host:7447             foxglove://host:8765 (serve)   http://host:8080 (the viewer)
    recording.rec                 vrpn:capture.pcap              spyglass:-   (stdin)

VRPN's own names are accepted as they are, so a line copied from a VRPN config works:
`Tracker0@host[:port]` (UDP+TCP, as `vrpn://`), `Tracker0@tcp://host[:port]` (`vrpn+tcp://`),
`Tracker0@x-vrpn://host[:port]`, and `Tracker0@file://log.vrpn` (a VRPN log file).

A URL's scheme names the protocol. A file is named by its path: `.rec` is SpyGlass and `.mcap`
a robowire recording; any other file takes the protocol as a `name:` prefix. Options ride in
the query string (`vrpn://Tracker0@host?time=receive`).

The scheme names the protocol (`vrpn+tcp` is VRPN's too); which protocols exist, and what
each accepts, is the registry's business (`robowire.protocols`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from robowire.errors import ConfigError
from robowire.protocols import names, protocol_of_scheme

FILE_SUFFIXES: dict[str, str] = {".rec": "spyglass", ".mcap": "mcap", ".vrpn": "vrpn"}
"""File suffix -> protocol name, for files named without a `protocol:` prefix."""

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".bin", ".raw", ".txt", ".rec", ".mcap", ".vrpn")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One parsed endpoint: a network address or a file, and the protocol that speaks it."""

    raw: str
    protocol: str
    scheme: str
    host: str = "127.0.0.1"
    port: int | None = None
    user: str | None = None  # the part before '@' (VRPN device names)
    host_given: bool = True  # False: the URL named no host (`xrp://`), `host` is the default
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

    def check_options(self, known: Collection[str], role: str) -> None:
        """ConfigError naming the first option `role` does not know (a typo is never ignored)."""
        for name in self.options:
            if name not in known:
                allowed = ", ".join(sorted(known)) or "none"
                raise ConfigError(
                    f"{self.raw}: unknown option {name!r} for {role} (known: {allowed})"
                )

    def __str__(self) -> str:
        return self.raw


def split_host_port(
    text: str, default_port: int, default_host: str = "127.0.0.1", what: str = "--to"
) -> tuple[str, int]:
    """`HOST[:PORT]` (also `[v6]:PORT`, or `scheme://HOST[:PORT]`) -> (host, port), with the
    defaults for what is left out; ConfigError naming `what` for a bad port."""
    rest = text.split("://", 1)[-1].rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port or ("::" in rest and not rest.startswith("[")):
        return rest.strip("[]") or default_host, default_port  # no port (or a bare IPv6)
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"{what} {text}: the port must be a number") from None
    if not 0 < number < 65536:
        raise ConfigError(f"{what} {text}: the port must be 1..65535")
    return host.strip("[]") or default_host, number


VRPN_NAME = re.compile(r"^(?P<device>[^@/:?]+)@(?:(?P<scheme>tcp|x-vrpn|file)://)?(?P<rest>.+)$")
"""VRPN's `Device@[tcp://|x-vrpn://|file://]host[:port]` (vrpn_get_connection_by_name)."""
VRPN_SCHEMES = {None: "vrpn", "x-vrpn": "vrpn", "tcp": "vrpn+tcp"}


def vrpn_name(text: str) -> str | None:
    """The robowire URL of a VRPN name (`Tracker0@host:3883` -> `vrpn://Tracker0@host:3883`),
    or None if `text` is not one."""
    match = VRPN_NAME.match(text)
    if match is None:
        return None
    device, scheme, rest = match["device"], match["scheme"], match["rest"]
    if scheme == "file":
        return f"vrpn:{rest}"
    return f"{VRPN_SCHEMES[scheme]}://{device}@{rest}"


_FILE_QUERY = re.compile(r"\?([A-Za-z_]\w*=[^&?]*(?:&[A-Za-z_]\w*=[^&?]*)*)$")


def parse_endpoint(text: str) -> Endpoint:
    """Parse a URL or file name into an Endpoint, or raise ConfigError saying what is wrong.

    A file name takes options as a URL does (`vrpn:capture.pcap?time=receive`), unless a file
    of that whole name exists."""
    query = _FILE_QUERY.search(text) if "://" not in text else None
    if query is not None and not Path(text).exists():
        parsed = parse_endpoint(text[: query.start()])
        options = {**parsed.options, **dict(parse_qsl(query.group(1)))}
        return dataclasses.replace(parsed, raw=text, options=options)
    named_file = "://" not in text and Path(text).suffix.lower() in CAPTURE_SUFFIXES
    native = vrpn_name(text) if "@" in text.split("://", 1)[0] and not named_file else None
    if native is not None:
        try:
            parsed = parse_endpoint(native)
        except ConfigError as exc:  # say it about what the user wrote
            raise ConfigError(str(exc).replace(repr(native), repr(text))) from None
        if parsed.is_file:  # VRPN's file:// names the log; the device is whatever it holds
            return Endpoint(
                raw=text, protocol="vrpn", scheme="file", path=parsed.path, options=parsed.options
            )
        return Endpoint(
            raw=text,
            protocol=parsed.protocol,
            scheme=parsed.scheme,
            host=parsed.host,
            host_given=parsed.host_given,
            port=parsed.port,
            user=parsed.user,
            options=parsed.options,
        )
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        protocol = protocol_of_scheme(scheme)
        if protocol is None:
            known = ", ".join(names())
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
            host_given=parts.hostname is not None,
            port=port,
            user=parts.username,
            options=dict(parse_qsl(parts.query)),
        )
    prefix, colon, rest = text.partition(":")
    if colon and prefix.lower() in names() and rest:
        return Endpoint(raw=text, protocol=prefix.lower(), scheme="file", path=rest)
    protocol = FILE_SUFFIXES.get(Path(text).suffix.lower())
    if protocol is not None:
        return Endpoint(raw=text, protocol=protocol, scheme="file", path=text)
    raise ConfigError(
        f"cannot tell the protocol of {text!r}: use a URL like spyglass://host:port, "
        "or name a file as PROTOCOL:FILE (e.g. vrpn:capture.pcap)"
    )
