"""`robowire serve http://127.0.0.1:8080`: the web viewer's server, on the Sink template.

One port, one `websockets` asyncio server: `process_request` answers plain HTTP GETs with the
static files (`/` is index.html, `/static/<file>`; nothing else, no `..`, no listing) and lets
`/ws` through to the WebSocket (subprotocol `robowire.viewer.v1`), where each browser is a
`ViewerClient` with its own latest-state subscriber (see `client.py`). `GET /status` answers
the gateway's status as JSON (what `robowire status` reads; see `robowire.status`). Every
request passes the sink's `Gate` first (`robowire.access`: Host and Origin allowlists, the
token); control needs the token on the WebSocket's URL (`/ws?token=…`).

The sink's own subscription (the template's) carries what every browser shares: log events,
and which sources' neighbour links changed (sent at most once a second). Its server task
also sends the `status` message to every browser once a second, from `Gateway.status()`.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import mimetypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from robowire.access import Gate
from robowire.endpoints import Endpoint
from robowire.errors import TransportError
from robowire.service import Sink
from robowire.status import RateMeter, service_status, status_message
from robowire.timebase import WallClock, monotonic
from robowire.transport.budget import pressure
from robowire.transport.tcp import listen_error
from robowire.version import __version__
from robowire.viewer.client import ControllerLike, ViewerClient
from robowire.viewer.links import LinkPass, link_pairs
from robowire.world import LogEvent, Update, World
from robowire.world.model import LINKS

log = logging.getLogger("robowire")

DEFAULT_PORT = 8080
DEFAULT_RATE = 30.0  # frames per second per browser, at most
SUBPROTOCOL = "robowire.viewer.v1"
MAX_MESSAGE = 64 << 10  # a browser's messages are small; a bigger one closes its connection
STATUS_PERIOD = 1.0
LINKS_PERIOD = 1.0
LINKS_PERIOD_BEHIND = 5.0  # while the gateway is behind (`pressure()`): 1,000 SpyGlass nodes'
# links take tens of milliseconds to gather, a loop turn that frames and commands wait for
SINK_OPTIONS = frozenset({"rate"})
STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
    ".ico": "image/x-icon",
}


class ViewerSink(Sink):
    """Serves the viewer's page and its WebSocket (see the module docstring)."""

    max_rate = 10.0  # the shared subscription (logs, links) is pulled at most this often

    def __init__(
        self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, rate: float = DEFAULT_RATE
    ):
        super().__init__(f"http://{host}:{port}")
        self.host = host
        self.port = port
        self.rate = rate if rate > 0 else DEFAULT_RATE
        self.controller: ControllerLike | None = None  # --allow-control
        self.gate = Gate(self, served_as=host)  # its `access` set by the CLI's options
        self.clients: set[ViewerClient] = set()
        self.clock = WallClock()
        self.frames_sent = 0
        self.ignored_messages = 0
        self._indices: dict[str, int] = {}
        self._links_due: set[str] = set()
        self._links_sent_at = 0.0
        self._link_passes: dict[str, LinkPass] = {}  # links being resolved, a part a write
        self._world: World | None = None
        self._own_rates = RateMeter()

    @property
    def url(self) -> str | None:
        """The page's address once listening (with the token, when there is one)."""
        if self.address is None:
            return None
        token = self.gate.access.token
        query = f"?token={quote(token, safe='')}" if token is not None else ""
        return f"http://{self.address[0]}:{self.address[1]}/{query}"

    def source_index(self, source: str) -> int:
        """The number of `source` in binary frames (the same for every browser)."""
        index = self._indices.get(source)
        if index is None:
            index = self._indices[source] = len(self._indices)
        return index

    def commands(self) -> dict[str, Any]:
        """What control offers now, per source (empty without a controller)."""
        if self.controller is None:
            return {}
        return {k: [dict(c) for c in v] for k, v in self.controller.catalog().items()}

    def may_control(self, target: str) -> bool:
        """Whether a WebSocket opened at `target` (`/ws?token=…`) may send commands."""
        return self.controller is not None and self.gate.access.has_token(target)

    def hello(self, control: bool) -> dict[str, Any]:
        """The first message a browser gets: versions, the frame rate, what control offers
        (`control`: this browser may command; `token_needed`: it could with the token)."""
        commands = self.commands() if control else {}
        if control:
            self._commands_sent = commands
        return {
            "type": "hello",
            "version": 1,
            "server": f"robowire {__version__}",
            "rate": self.rate,
            "control": control,
            "token_needed": self.controller is not None and not control,
            "commands": commands,
        }

    def ignored(self, why: str) -> None:
        """A browser sent something the viewer does not understand: counted, ignored."""
        self.ignored_messages += 1
        self.stats.extra["errors"] = self.ignored_messages
        log.debug("%s: %s", self.name, why)

    # -- serving ------------------------------------------------------------------------------

    async def serve(self, world: World) -> None:
        self._world = world
        try:
            server = await serve(
                self._connection,
                self.host,
                self.port,
                process_request=self._http,
                subprotocols=[Subprotocol(SUBPROTOCOL)],
                select_subprotocol=_select_subprotocol,
                compression=None,
                max_size=MAX_MESSAGE,
                server_header=f"robowire/{__version__}",
            )
        except OSError as exc:
            raise listen_error(self.host, self.port, exc) from None
        try:
            self.listening(_bound(server))
            while True:
                await asyncio.sleep(STATUS_PERIOD)
                status = self.status()  # also without browsers: `GET /status` has rates
                if self.clients:
                    self._broadcast(status)
                    self._broadcast_commands()
        finally:
            server.close()
            await server.wait_closed()

    _commands_sent: dict[str, Any] | None = None

    def _broadcast_commands(self) -> None:
        """A `commands` message when the catalog changed (a UgCS vehicle registered after a
        browser got its hello)."""
        if self.controller is None:
            return
        commands = self.commands()
        if commands != self._commands_sent:
            self._commands_sent = commands
            message = {"type": "commands", "commands": commands}
            for client in list(self.clients):
                if client.control:
                    client.push(message)

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        path = unquote(urlsplit(request.path).path)
        refused = self.gate.check(
            request.path,
            request.headers.get_all("Host"),
            request.headers.get_all("Origin"),
            websocket=path == "/ws",
            data=not (path in ("/", "/index.html") or path.startswith("/static/")),
        )
        if refused is not None:
            return _text(http.HTTPStatus(refused[0]), refused[1])
        if path == "/ws":
            return None  # the WebSocket handshake goes on
        if path in ("/", "/index.html"):
            return _file(STATIC / "index.html")
        if path in ("/status", "/status/"):
            body = json.dumps(self.status(), separators=(",", ":")).encode()
            return _response(http.HTTPStatus.OK, body, "application/json")
        if path.startswith("/static/"):
            wanted = path.removeprefix("/static/")
            if wanted and ".." not in wanted.split("/") and "\\" not in wanted:
                target = (STATIC / wanted).resolve()
                if target.is_relative_to(STATIC.resolve()) and target.is_file():
                    return _file(target)
        return _text(http.HTTPStatus.NOT_FOUND, "not found\n")

    async def _connection(self, ws: ServerConnection) -> None:
        assert self._world is not None
        client = ViewerClient(self, self._world, ws)
        self.clients.add(client)
        try:
            await client.run()
        finally:
            self.clients.discard(client)

    # -- what every browser gets ------------------------------------------------------------

    def _broadcast(self, message: Mapping[str, Any]) -> None:
        for client in list(self.clients):
            client.push(message)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        for item in items:
            if isinstance(item, LogEvent):
                self._broadcast(
                    {"type": "log", "source": item.source, "device": item.device_id,
                     "text": item.text, "level": item.level, "time": item.time}
                )  # fmt: skip
            elif LINKS in item.fields:
                self._links_due.add(item.source)
        now = monotonic()
        period = LINKS_PERIOD_BEHIND if pressure().behind(now) else LINKS_PERIOD
        if self._links_due and not self._link_passes and now - self._links_sent_at >= period:
            self._links_sent_at = now
            self._link_passes = {s: LinkPass(world.tables[s]) for s in sorted(self._links_due)}
            self._links_due.clear()
        for source, links in list(self._link_passes.items()):  # a part a write
            if links.step(world.tables[source]):
                self._broadcast({"type": "links", "source": source, "pairs": links.pairs()})
                del self._link_passes[source]
            break
        self.stats.messages_out = self.frames_sent
        return True

    def links(self, world: World, source: str) -> dict[str, Any]:
        """The `links` message of one source: pairs of slots, each pair once, in order (an
        array of two columns; a SpyGlass network has hundreds of thousands of links)."""
        return {"type": "links", "source": source, "pairs": link_pairs(world.tables[source])}

    def links_now(self) -> list[dict[str, Any]]:
        """The `links` of every source that has any (for a browser that just came)."""
        if self._world is None:
            return []
        world = self._world
        out = []
        for name, table in list(world.tables.items()):
            if any(table.links):
                out.append(self.links(world, name))
        return out

    def status(self) -> dict[str, Any]:
        """The `status` message: every service of the gateway (or this sink alone)."""
        gateway = self.gateway
        self.stats.messages_out = self.frames_sent
        if gateway is not None:
            statuses = gateway.status()
        else:
            world = self._world or World()
            statuses = [service_status(self, "listening", world, self._own_rates, monotonic())]
        return status_message(statuses)


def _select_subprotocol(
    connection: ServerConnection, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    """Ours when the browser offers it; a browser that offers none is served too."""
    return Subprotocol(SUBPROTOCOL) if SUBPROTOCOL in offered else None


def _bound(server: Server) -> tuple[str, int]:
    for sock in server.sockets:
        host, port = sock.getsockname()[:2]
        return str(host), int(port)
    raise TransportError("the viewer's server has no socket")


def _file(path: Path) -> Response:
    kind = CONTENT_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
    return _response(http.HTTPStatus.OK, path.read_bytes(), kind or "application/octet-stream")


def _text(status: http.HTTPStatus, text: str) -> Response:
    return _response(status, text.encode(), "text/plain; charset=utf-8")


def _response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("X-Content-Type-Options", "nosniff"),
            ("Cache-Control", "no-cache"),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def open_sink(endpoint: Endpoint) -> ViewerSink:
    """The viewer of an `http://host:port?rate=HZ` URL (port 0: any free port)."""
    endpoint.check_options(SINK_OPTIONS, "the viewer")
    return ViewerSink(
        endpoint.host, endpoint.port_or(DEFAULT_PORT), endpoint.float_option("rate", DEFAULT_RATE)
    )
