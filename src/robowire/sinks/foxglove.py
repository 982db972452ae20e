"""`robowire serve foxglove://127.0.0.1:8765`: the world, live, for the Foxglove app.

Built on foxglove-sdk (its WebSocket server and its typed `foxglove.messages`); each sink has
its own `foxglove.Context`, so two sinks in one process never share channels. The SDK's server
accepts only the subprotocol `foxglove.sdk.v1` (HTTP 400 to any other) and has no option for
more, while the Foxglove WebSocket protocol's own clients (`@foxglove/ws-protocol`, Lichtblick,
older Foxglove apps) offer `foxglove.websocket.v1`, the same protocol under its first name. So
the SDK's server listens on a loopback port of its own, and the sink's port is a small relay
(`websockets`) that accepts either subprotocol and passes every message both ways unchanged
(`relay`). At `?rate=` pulls a second (30 by default), for what changed, it logs the topics
that `foxglove_messages` lists and builds: /tf, /scene, /location (one foxglove.LocationFixes
per source; `?location=fix`: one foxglove.LocationFix per device instead) and
/telemetry/<source> (JSON, schema robowire.Telemetry).

When a client subscribes, the next pull sends every device, changed or not. One JSON channel
per source, not per device: 10,000 drones are one channel, one message per pull. The messages
are bytes built from the world's columns (the MCAP recorder shares the builder), logged on
channels with the SDK's Foxglove schemas; only the topics some client (or MCAP sink) reads are
built.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Subprotocol

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, TransportError
from robowire.service import Sink
from robowire.sinks.foxglove_messages import (
    TELEMETRY_PREFIX,
    TELEMETRY_SCHEMA,
    TELEMETRY_SCHEMA_NAME,
    FoxgloveMessages,
    frame_id,
    snapshot,
)
from robowire.sinks.foxglove_messages import schema as foxglove_schema
from robowire.transport.tcp import listen_error
from robowire.world import LogEvent, Update, World
from robowire.world.table import SourceTable

DEFAULT_PORT = 8765
DEFAULT_RATE = 30.0
BACKLOG = 128
"""Messages the SDK holds per client (its default is 1024); a client that stops reading loses
the oldest first, so a stalled client holds at most this many (about a second of every topic
at the default rate), never a growing queue."""
SINK_OPTIONS = frozenset({"rate", "location"})
LOCATIONS = ("fixes", "fix")
"""`?location=`: one `foxglove.LocationFixes` per source and pull (the default), or one
`foxglove.LocationFix` per device (10,000 drones: 10,000 SDK logs a pull, 12 ms)."""
SDK_SUBPROTOCOL = Subprotocol("foxglove.sdk.v1")
SUBPROTOCOLS = [SDK_SUBPROTOCOL, Subprotocol("foxglove.websocket.v1")]
"""What the sink accepts, the SDK's name first (chosen when a client offers both)."""
MAX_CLIENT_MESSAGE = 16 << 20
"""The largest message a client may send (subscriptions, requests: a few hundred bytes)."""
log = logging.getLogger("robowire")
SDK_CLIENT_LOG = "foxglove.websocket.connected_client"
"""The SDK's logger of what a client sent it (`Invalid message from HOST:PORT: why`)."""
INVALID = "Invalid message from "
UNKNOWN_CHANNEL = "Received message for unknown channel"  # (no client named: said once a minute)
REPEAT = 60.0  # seconds between two lines of UNKNOWN_CHANNEL
__all__ = ["FoxgloveSink", "frame_id", "open_sink", "snapshot"]


class _Unreadable(logging.Filter):
    """The SDK logs an error line for every message of a client it cannot read: a client
    sending garbage wrote a hundred a second. This says the first of each of the sink's clients
    (by its own address, not the relay's) and counts the rest as the sink's errors, unsaid.
    Its line for data on a channel no client advertised names no client: said once a minute,
    for every sink of the process (`said_unknown`)."""

    said_unknown = -math.inf  # when UNKNOWN_CHANNEL was said last (the process's SDK logger)

    def __init__(self, sink: FoxgloveSink) -> None:
        super().__init__()
        self.sink = sink

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith(UNKNOWN_CHANNEL):
            if time.monotonic() - _Unreadable.said_unknown < REPEAT:
                return False
            _Unreadable.said_unknown = time.monotonic()
            record.msg, record.args = "foxglove: %s (said at most once a minute)", (text,)
            return True
        if not text.startswith(INVALID):
            return True
        relayed, _, why = text.removeprefix(INVALID).partition(": ")
        client = self.sink.relayed.get(relayed)
        if client is None:
            return True  # not one of this sink's (another sink's filter decides)
        stats = self.sink.stats
        stats.extra["errors"] = stats.extra.get("errors", 0) + 1
        if client[1]:
            return False
        self.sink.relayed[relayed] = (client[0], True)
        record.msg = (
            "%s: client %s sent what the Foxglove server cannot read (%s); "
            "counted as errors from now on, not said again"
        )
        record.args = (self.sink.name, client[0], why)
        return True


class FoxgloveSink(Sink):
    """Serves the world to Foxglove app clients over the foxglove-sdk WebSocket server."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        rate: float = 30.0,
        location: str = "fixes",
    ):
        super().__init__(f"foxglove://{host}:{port}")
        self.host = host
        self.port = port
        self.max_rate = rate or DEFAULT_RATE
        self._server: Any = None  # the SDK's server, on a loopback port of its own
        self._channels: dict[str, Any] | None = None  # topic -> channel, once serving
        self.messages = FoxgloveMessages(batch_locations=location == "fixes")
        self.context: Any = None  # the foxglove.Context of this sink's channels, once serving
        self.relayed: dict[str, tuple[str, bool]] = {}
        """The relay's address at the SDK's server (HOST:PORT) -> its client's, and whether
        something unreadable of that client was said (`_Unreadable`)."""
        self.snapshot_due = False

    async def serve(self, world: World) -> None:
        import foxglove
        from foxglove.websocket import ChannelView, Client, ServerListener

        sink = self

        class Subscribed(ServerListener):
            """A client subscribed: the next pull sends every device (a client that joins a
            running show must see the devices that stand still too)."""

            def on_subscribe(self, client: Client, channel: ChannelView) -> None:
                sink.snapshot_due = True  # read on the event loop's thread; a flag suffices

        context = foxglove.Context()
        try:
            self._server = foxglove.start_server(
                name="robowire",
                host="127.0.0.1",
                port=0,
                context=context,
                server_listener=Subscribed(),
                message_backlog_size=BACKLOG,
            )
        except Exception as exc:  # the SDK raises its own error types
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TransportError(f"cannot start the Foxglove server: {reason}") from None
        self.context = context
        self._channels = {topic: self._channel(topic) for topic in self.messages.schemas}
        upstream = f"ws://127.0.0.1:{self._server.port}"
        unreadable = _Unreadable(self)
        logging.getLogger(SDK_CLIENT_LOG).addFilter(unreadable)
        try:
            server = await serve(
                lambda client: relay(client, upstream, self.relayed),
                self.host,
                self.port,
                subprotocols=SUBPROTOCOLS,
                compression=None,
                max_size=MAX_CLIENT_MESSAGE,
            )
        except OSError as exc:
            logging.getLogger(SDK_CLIENT_LOG).removeFilter(unreadable)
            raise listen_error(self.host, self.port, exc) from None
        try:
            host, port = next(iter(server.sockets)).getsockname()[:2]
            self.listening((host, port))
            self.messages.reset()  # a new server: every device's cube is sent again
            await asyncio.Future()
        finally:
            server.close()
            await server.wait_closed()
            logging.getLogger(SDK_CLIENT_LOG).removeFilter(unreadable)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self._channels is None:
            return True
        if self.snapshot_due:
            self.snapshot_due = False
            self.messages.reset()
            items = [*items, *(snapshot(t) for t in list(world.tables.values()) if len(t))]
        for item in items:
            if isinstance(item, Update) and len(item):
                table = world.tables.get(item.source)
                if table is not None:
                    self._send(table, item)
        return True

    def finish(self, world: World) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._channels = None

    def _channel(self, topic: str) -> Any:
        """A channel of pre-encoded messages: protobuf with the Foxglove schema of `topic`,
        or a source's telemetry (JSON)."""
        import foxglove

        name = self.messages.schemas.get(topic)
        if name is None:
            schema = foxglove.Schema(
                name=TELEMETRY_SCHEMA_NAME, encoding="jsonschema", data=TELEMETRY_SCHEMA
            )
            return foxglove.Channel(
                topic, message_encoding="json", schema=schema, context=self.context
            )
        name, encoding, data = foxglove_schema(name)
        schema = foxglove.Schema(name=name, encoding=encoding, data=data)
        return foxglove.Channel(
            topic, message_encoding="protobuf", schema=schema, context=self.context
        )

    def _send(self, table: SourceTable, update: Update) -> None:
        assert self._channels is not None
        telemetry = TELEMETRY_PREFIX + table.source
        if table.telemetry and telemetry not in self._channels:  # its own JSON channel
            self._channels[telemetry] = self._channel(telemetry)
        read = {topic for topic, channel in self._channels.items() if channel.has_sinks()}
        for topic, message in self.messages.build(table, update, read):
            channel = self._channels[topic]
            if isinstance(message, list):  # one LocationFix per device: the SDK's own log
                log = channel.base.log  # (its Python wrapper's checks cost more than the log)
                for fix in message:
                    log(fix)
            else:
                channel.log(message)


async def relay(
    client: ServerConnection, upstream: str, relayed: dict[str, tuple[str, bool]] | None = None
) -> None:
    """Pass every message between a client (either subprotocol) and the SDK's server at
    `upstream` (as `foxglove.sdk.v1`), unchanged and in order, until either side closes; the
    other side is then closed with the same code. A client that stops reading stops the relay
    reading the SDK's server, whose backlog (`BACKLOG`) then drops the oldest messages.
    `relayed` has the relay's address at the SDK's server -> the client's, while it runs."""
    try:
        server = await connect(
            upstream, subprotocols=[SDK_SUBPROTOCOL], compression=None, max_size=None
        )
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        log.warning("foxglove: cannot reach the Foxglove server at %s: %s", upstream, exc)
        await client.close(1011, "the Foxglove server is not reachable")
        return
    here = ":".join(map(str, server.local_address[:2]))
    if relayed is not None:
        relayed[here] = (":".join(map(str, client.remote_address[:2])), False)
    async with server:
        pipes = [
            asyncio.create_task(pipe(client, server)),
            asyncio.create_task(pipe(server, client)),
        ]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            if relayed is not None:
                relayed.pop(here, None)
        code = server.close_code
        if code is not None:  # the SDK ended it: say why to the client (1005, 1006 and 1015
            # mean the SDK sent no code, so there is none to pass on)
            await client.close(
                1011 if code in (1005, 1006, 1015) else code, server.close_reason or ""
            )


async def pipe(
    source: ClientConnection | ServerConnection, to: ClientConnection | ServerConnection
) -> None:
    """Send each message `source` receives to `to` (text as text, binary as binary)."""
    with contextlib.suppress(ConnectionClosed):
        async for message in source:
            await to.send(message)


def open_sink(endpoint: Endpoint) -> FoxgloveSink:
    """The sink of a `foxglove://host:port?rate=HZ&location=fixes|fix` URL."""
    endpoint.check_options(SINK_OPTIONS, "a Foxglove server")
    rate = endpoint.float_option("rate", DEFAULT_RATE)
    location = endpoint.option("location", LOCATIONS[0])
    if location not in LOCATIONS:
        raise ConfigError(f"{endpoint.raw}: location must be one of {', '.join(LOCATIONS)}")
    return FoxgloveSink(endpoint.host, endpoint.port_or(DEFAULT_PORT), rate, location)
