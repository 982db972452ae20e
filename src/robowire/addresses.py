"""Addresses -> endpoints, and the registry of sources that are not a wire protocol's.

    spyglass://host:port          vrpn://Tracker0@host:3883      vrpn+tcp://Tracker0@host
    xrp://host:3540               ugcs://host:5556               vrsp://0.0.0.0:PORT
    zenoh://host:7447             foxglove://host:8765 (serve)   http://host:8080 (the viewer)
    recording.rec                 vrpn:capture.pcap              spyglass:-   (stdin)

A URL's scheme names a protocol (`vrpn+tcp` is VRPN's too, `robowire.protocols`), a sink
(`robowire.sinks`) or a source of `SOURCES`. A file takes the protocol as a `name:` prefix, or
is told by the protocol whose own format it is in (its suffix or first bytes: a SpyGlass `.rec`,
a VRPN log) or by `FILE_SOURCES` (`.mcap`, a robowire recording); a directory is a rosbag2
bag. A protocol's own address form is accepted as it is, so a line copied from its
configuration works (VRPN's `Tracker0@host`, `Tracker0@tcp://host`, `Tracker0@file://log.vrpn`).
Options ride in the query string (`vrpn://Tracker0@host?time=receive`), for files too
(`vrpn:capture.pcap?time=receive`).

This module names no protocol: each declares its schemes, formats and address form in its
`WireProtocol`.
"""

from __future__ import annotations

import dataclasses
import re
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from robowire import protocols, sinks
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError

SOURCES: dict[str, str] = {
    "zenoh": "robowire.zenoh:open_source",
    "ros2": "robowire.ros2:open_source",
    "mcap": "robowire.recording:open_source",
    "rosbag2": "robowire.ros2.bag_source:open_source",
    "ros2+zenoh": "robowire.ros2.zenoh_source:open_source",
}
"""Sources that are not a wire protocol (`listen zenoh://…`, a robowire recording): name ->
"module:function" taking the `Endpoint` and returning the `Source`; more from the
`robowire.sources` entry point group."""

FILE_SOURCES: dict[str, str] = {".mcap": "mcap", ".db3": "rosbag2", ".bag": "rosbag2"}
"""File suffix -> the `SOURCES` name that reads such a file (a ROS 2 `.mcap` is told from
robowire's own by its profile, in `robowire.gateway`; `.bag`: to say it is a ROS 1 bag)."""

BAG_DIRECTORY = "rosbag2"
"""The `SOURCES` name that reads a directory (a rosbag2 bag)."""

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".bin", ".raw", ".txt")
"""Suffixes of captures any protocol reads: a name ending so is a file, never a native
address (`a@b.pcap`)."""

_FILE_QUERY = re.compile(r"\?([A-Za-z_]\w*=[^&?]*(?:&[A-Za-z_]\w*=[^&?]*)*)$")


def source_target(name: str) -> str | None:
    """The "module:function" of the non-protocol source `name`, or None."""
    if name in SOURCES:
        return SOURCES[name]
    found = (ep.value for ep in entry_points(group="robowire.sources") if ep.name == name)
    return next(found, None)


def _scheme_owner(scheme: str) -> str | None:
    """What a URL scheme names: a protocol, a sink or a source (its registry name), or None."""
    protocol = protocols.protocol_of_scheme(scheme)
    if protocol is not None:
        return protocol
    name = scheme.lower()
    return name if name in sinks.names() or source_target(name) is not None else None


def _is_file_name(text: str) -> bool:
    suffix = Path(text).suffix.lower()
    if suffix in CAPTURE_SUFFIXES or suffix in FILE_SOURCES:
        return True
    return any(suffix in p.suffixes() for p in protocols.landed()) if suffix else False


def parse_endpoint(text: str) -> Endpoint:
    """Parse a URL or file name into an Endpoint, or raise ConfigError saying what is wrong.

    A file name takes options as a URL does (`vrpn:capture.pcap?time=receive`), unless a file
    of that whole name exists."""
    query = _FILE_QUERY.search(text) if "://" not in text else None
    if query is not None and not Path(text).exists():
        parsed = parse_endpoint(text[: query.start()])
        options = {**parsed.options, **dict(parse_qsl(query.group(1)))}
        return dataclasses.replace(parsed, raw=text, options=options)
    if "@" in text.split("://", 1)[0]:
        named_file = "://" not in text and _is_file_name(text)
        native = None if named_file else protocols.native_url(text)
        if native is not None:
            return _native(text, native)
    if "://" in text:
        return _url(text)
    prefix, colon, rest = text.partition(":")
    if colon and prefix.lower() in protocols.names() and rest:
        return Endpoint(raw=text, protocol=prefix.lower(), scheme="file", path=rest)
    name = FILE_SOURCES.get(Path(text).suffix.lower())
    if name is None and Path(text).is_dir():
        name = BAG_DIRECTORY
    if name is None and (protocol := protocols.of_file(text)) is not None:
        name = protocol.name
    if name is not None:
        return Endpoint(raw=text, protocol=name, scheme="file", path=text)
    raise ConfigError(
        f"cannot tell the protocol of {text!r}: use a URL like spyglass://host:port, "
        "or name a file as PROTOCOL:FILE (e.g. vrpn:capture.pcap)"
    )


def _native(text: str, url: str) -> Endpoint:
    """The endpoint of a protocol's own address `text`, which means the robowire `url`."""
    try:
        parsed = parse_endpoint(url)
    except ConfigError as exc:  # say it about what the user wrote
        raise ConfigError(str(exc).replace(repr(url), repr(text))) from None
    return dataclasses.replace(parsed, raw=text)


def _url(text: str) -> Endpoint:
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    owner = _scheme_owner(scheme)
    if owner is None:
        known = ", ".join(protocols.names())
        raise ConfigError(f"unknown scheme {scheme!r} in {text!r} (known: {known})")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"bad port in {text!r}: {exc}") from None
    return Endpoint(
        raw=text,
        protocol=owner,
        scheme=scheme,
        host=parts.hostname or "127.0.0.1",
        host_given=parts.hostname is not None,
        port=port,
        user=parts.username,
        options=dict(parse_qsl(parts.query)),
    )
