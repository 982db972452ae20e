"""Which Zenoh session a `zenoh://HOST:PORT?mode=…&scout=…` URL asks for (pure), and opening it.

A publishing gateway listens on HOST:PORT by default and a subscribing one connects to it;
`mode=listen|connect` overrides either, so any number of gateways can meet at a Zenoh router
(`zenohd -l tcp/HOST:PORT`, every gateway with `mode=connect`). Multicast scouting is off
unless `scout=1`: a test, or CI, must never look for peers on the LAN. A session that connects
is a Zenoh client: opening it fails while nothing answers (the source and sink retry, with
backoff); once open, it reconnects by itself after its peer restarts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, TransportError
from robowire.service import MAX_RETRY_SECONDS, RETRY_SECONDS

if TYPE_CHECKING:
    import zenoh

DEFAULT_PORT = 7447  # Zenoh's own default
Mode = Literal["listen", "connect"]
FLAGS = {"0": False, "1": True, "false": False, "true": True, "no": False, "yes": True}


@dataclass(frozen=True, slots=True)
class Link:
    """Where one gateway's Zenoh session listens or connects."""

    host: str
    port: int
    mode: Mode
    scout: bool = False

    @property
    def locator(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp/{host}:{self.port}"

    def config(self) -> str:
        """The session's JSON5 configuration: a listening gateway is a Zenoh peer that listens
        on the locator only; a connecting one is a Zenoh client of the peer or router there
        (it opens no port of its own, and a router forwards between its clients)."""
        if self.mode == "listen":
            config = {"mode": "peer", "listen": {"endpoints": [self.locator]}}
        else:
            config = {"mode": "client", "connect": {"endpoints": [self.locator]}}
        scouting = {"multicast": {"enabled": self.scout}}
        shm = {"shared_memory": {"enabled": True}}  # used for big payloads, on one machine
        return json.dumps({**config, "scouting": scouting, "transport": shm})


def link_of(endpoint: Endpoint, default: Mode) -> Link:
    """The Link of a parsed `zenoh://` URL, or ConfigError naming what is wrong."""
    mode = endpoint.option("mode", default)
    if mode not in ("listen", "connect"):
        raise ConfigError(f"{endpoint.raw}: mode must be listen or connect, not {mode!r}")
    scout = FLAGS.get(endpoint.option("scout", "0").lower())
    if scout is None:
        raise ConfigError(f"{endpoint.raw}: scout must be 0 or 1")
    port = endpoint.port_or(DEFAULT_PORT)
    if port == 0:
        raise ConfigError(f"{endpoint.raw}: zenoh needs a port (1..65535; Zenoh's own is 7447)")
    return Link(endpoint.host, port, "listen" if mode == "listen" else "connect", scout)


def open_session(link: Link) -> zenoh.Session:
    """A Zenoh session for `link` (blocking: call it in a thread); TransportError if it cannot
    listen (a port in use, an address this machine does not have)."""
    import zenoh

    try:
        return zenoh.open(zenoh.Config.from_json5(link.config()))
    except zenoh.ZError as exc:
        text = str(exc)
        if "Address already in use" in text:
            reason = "the port is in use"
        elif "Unable to connect" in text:
            reason = "no Zenoh peer or router answers there"
        elif "Cannot assign requested address" in text:
            reason = "this machine has no such address"
        else:
            reason = text.splitlines()[0].split(" at /")[0] if text else "zenoh refused"
        how = "listen on" if link.mode == "listen" else "connect to"
        raise TransportError(f"cannot {how} {link.host}:{link.port}: {reason}") from None


async def open_when_up(link: Link, name: str) -> zenoh.Session:
    """The session of `name` for `link`; a listening one fails at once (TransportError), a
    connecting one waits for its peer or router, retrying with backoff (said once)."""
    delay = RETRY_SECONDS
    while True:
        try:
            return await asyncio.to_thread(open_session, link)
        except TransportError as exc:
            if link.mode == "listen":
                raise
            if delay == RETRY_SECONDS:
                logging.getLogger("robowire").warning(
                    "%s: %s; retrying until it answers", name, exc
                )
            await asyncio.sleep(delay)
            delay = min(2 * delay, MAX_RETRY_SECONDS)
