"""The key expressions robowire publishes under (pure: strings in, strings out).

    robowire/<source>/=state       binary STATE frame: the changed devices of one source, as
                                   columns, one message per source per pull (DROP: latest state)
    robowire/<source>/=devices     binary DEVICES frame: ids, kinds, names, links, attributes of
                                   new or changed devices (BLOCK: never dropped)
    robowire/<source>/=log         binary LOG frame: one log event (BLOCK)
    robowire/=batch/=state         binary BATCH frame: the small STATE frames of one tick of a
                                   publisher, of any of its sources, in one message (DROP)
    robowire/<source>/=snapshot    queryable: a DEVICES frame and a STATE frame of every device
    robowire/<source>/<device>     queryable: one device as JSON (for `z_get` and other tools)
    robowire/=gateway/<zid>        liveliness token of each publishing gateway
    robowire/=workers/<name>/=status  a site's worker NAME: its services' status as JSON,
                                   every few seconds (`robowire.workers`)

A source or device name becomes one key chunk: the characters Zenoh reserves (`/ * $ ? #`),
`%`, `=`, white space and a leading `@` are percent-encoded, so no name can pose as a
reserved `=` chunk and every name comes back as it was (`unescape`). The empty name is `%`.
"""

from __future__ import annotations

from urllib.parse import unquote

ROOT = "robowire"
STATE = "=state"
DEVICES = "=devices"
LOG = "=log"
SNAPSHOT = "=snapshot"
BATCH = f"{ROOT}/=batch/{STATE}"  # (no source is named "=batch": its `=` would be escaped)
GATEWAY = f"{ROOT}/=gateway"
WORKERS = f"{ROOT}/=workers"
STATUS = "=status"
KINDS = (STATE, DEVICES, LOG)
"""The last chunks a subscriber takes in (a `=snapshot` reply carries DEVICES and STATE)."""

_RESERVED = frozenset("/*$?#%=")


def escape(name: str) -> str:
    """One key chunk for a source or device name (see the module docstring)."""
    if not name:
        return "%"
    out = []
    for i, ch in enumerate(name):
        if ch in _RESERVED or ch.isspace() or ord(ch) < 32 or (ch == "@" and i == 0):
            out.append("".join(f"%{b:02X}" for b in ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def unescape(chunk: str) -> str:
    """The name a chunk made by `escape` stands for."""
    return "" if chunk == "%" else unquote(chunk, errors="strict")


def key(source: str, last: str) -> str:
    """`robowire/<source>/<last>`; `last` is a reserved chunk (STATE, ...) or an escaped id."""
    return f"{ROOT}/{escape(source)}/{last}"


def worker_status(worker: str) -> str:
    """`robowire/=workers/<worker>/=status` (four chunks: no subscriber of frames takes it)."""
    return f"{WORKERS}/{escape(worker)}/{STATUS}"


def device_key(source: str, device: str) -> str:
    return key(source, escape(device))


def parse(key_expr: str) -> tuple[str, str] | None:
    """(source, last chunk) of a key robowire publishes a frame under, or None for any other
    key (another tool's, a device's JSON key, a malformed escape)."""
    parts = key_expr.split("/")
    if len(parts) != 3 or parts[0] != ROOT or parts[2] not in (*KINDS, SNAPSHOT):
        return None
    try:
        return unescape(parts[1]), parts[2]
    except UnicodeDecodeError:
        return None
