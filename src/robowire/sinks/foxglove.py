"""`robowire serve foxglove://127.0.0.1:8765`: the world, live, for the Foxglove app.

Built on foxglove-sdk (its WebSocket server, subprotocol `foxglove.sdk.v1`, and its typed
`foxglove.messages`); each sink has its own `foxglove.Context`, so two sinks in one process
never share channels. At `?rate=` pulls a second (30 by default), for what changed:

    /tf                  foxglove.FrameTransforms  "world" -> "<source>/<device>" per device
                                                   (ENU metres; identity rotation if unknown)
    /scene               foxglove.SceneUpdate      a cube per device in its own frame (so it
                                                   moves with /tf), sent when a device first
                                                   appears or its LED colour changes

When a client subscribes, the next pull sends every device, changed or not.
    /location            foxglove.LocationFix      one per changed device with a geodetic fix
    /telemetry/<source>  JSON                      {"device": [ids], "units": {field: unit},
                                                   "<field>": [values], ...}
                                                   the changed devices of that source, as
                                                   columns (null: not written)

One JSON channel per source, not per device: 10,000 drones are one channel, one message per
pull. The SDK wants one object per transform, cube and fix; that loop is the cost of a pull
(`bench`-style figure in docs/foxglove.md). The messages come from `foxglove_messages`, which
the MCAP recorder shares.
"""

from __future__ import annotations

import asyncio
from typing import Any

from robowire.endpoints import Endpoint
from robowire.errors import TransportError
from robowire.service import Sink
from robowire.sinks.foxglove_messages import (
    LOCATION_TOPIC,
    SCENE_TOPIC,
    TF_TOPIC,
    FoxgloveMessages,
    frame_id,
    snapshot,
)
from robowire.world import LogEvent, Update, World
from robowire.world.table import SourceTable

DEFAULT_PORT = 8765
DEFAULT_RATE = 30.0
BACKLOG = 128
"""Messages the SDK holds per client (its default is 1024); a client that stops reading loses
the oldest first, so a stalled client holds at most this many (about a second of every topic
at the default rate), never a growing queue."""
SINK_OPTIONS = frozenset({"rate"})
__all__ = ["FoxgloveSink", "frame_id", "open_sink", "snapshot"]


class FoxgloveSink(Sink):
    """Serves the world to Foxglove app clients over the foxglove-sdk WebSocket server."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, rate: float = 30.0):
        super().__init__(f"foxglove://{host}:{port}")
        self.host = host
        self.port = port
        self.max_rate = rate or DEFAULT_RATE
        self._server: Any = None
        self._channels: dict[str, Any] | None = None  # topic -> channel, once serving
        self.messages = FoxgloveMessages()
        self.context: Any = None  # the foxglove.Context of this sink's channels, once serving
        self.snapshot_due = False

    async def serve(self, world: World) -> None:
        import foxglove
        from foxglove.channels import (
            FrameTransformsChannel,
            LocationFixChannel,
            SceneUpdateChannel,
        )
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
                host=self.host,
                port=self.port,
                context=context,
                server_listener=Subscribed(),
                message_backlog_size=BACKLOG,
            )
        except Exception as exc:  # the SDK raises its own error types for a busy port
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TransportError(f"cannot listen on {self.host}:{self.port}: {reason}") from None
        self.context = context
        self._channels = {
            TF_TOPIC: FrameTransformsChannel(TF_TOPIC, context=context),
            SCENE_TOPIC: SceneUpdateChannel(SCENE_TOPIC, context=context),
            LOCATION_TOPIC: LocationFixChannel(LOCATION_TOPIC, context=context),
        }
        self.listening((self.host, self._server.port))
        self.messages.reset()  # a new server: every device's cube is sent again
        await asyncio.Future()

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

    def _send(self, table: SourceTable, update: Update) -> None:
        assert self._channels is not None
        for topic, message in self.messages.build(table, update):
            channel = self._channels.get(topic)
            if channel is None:  # a source's telemetry: its own JSON channel
                import foxglove

                channel = self._channels[topic] = foxglove.Channel(
                    topic, message_encoding="json", context=self.context
                )
            channel.log(message)


def open_sink(endpoint: Endpoint) -> FoxgloveSink:
    """The sink of a `foxglove://host:port?rate=HZ` URL."""
    endpoint.check_options(SINK_OPTIONS, "a Foxglove server")
    rate = endpoint.float_option("rate", DEFAULT_RATE)
    return FoxgloveSink(endpoint.host, endpoint.port_or(DEFAULT_PORT), rate)
