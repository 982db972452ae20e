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
    /telemetry/<source>  JSON                      {"device": [ids], "<field>": [values], ...}
                                                   the changed devices of that source, as
                                                   columns (null: not written)

One JSON channel per source, not per device: 10,000 drones are one channel, one message per
pull. The SDK wants one object per transform, cube and fix; that loop is the cost of a pull
(`bench`-style figure in docs/foxglove.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import orjson

from robowire.endpoints import Endpoint
from robowire.errors import TransportError
from robowire.service import Sink
from robowire.world import LogEvent, Update, World
from robowire.world.model import GEODETIC, ORIENTATION, POSITION
from robowire.world.table import FloatArray, SourceTable

DEFAULT_PORT = 8765
DEFAULT_RATE = 30.0
WORLD_FRAME = "world"
CUBE_SIZE = 0.2  # metres
LED_FIELDS = ("led_red", "led_green", "led_blue")
KIND_COLOURS: dict[str, tuple[float, float, float]] = {
    "drone": (0.2, 0.6, 1.0),
    "robot": (1.0, 0.6, 0.1),
    "tracker": (0.3, 0.9, 0.3),
    "rigid_body": (0.3, 0.9, 0.3),
}
OTHER_COLOUR = (0.8, 0.8, 0.8)
SINK_OPTIONS = frozenset({"rate"})


def frame_id(source: str, device_id: str) -> str:
    """The Foxglove frame of a device."""
    return f"{source}/{device_id}"


class FoxgloveSink(Sink):
    """Serves the world to Foxglove app clients over the foxglove-sdk WebSocket server."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, rate: float = 30.0):
        super().__init__(f"foxglove://{host}:{port}")
        self.host = host
        self.port = port
        self.max_rate = rate or DEFAULT_RATE
        self._server: Any = None
        self._channels: Any = None
        self._telemetry: dict[str, Any] = {}
        self._frames: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # source -> ids, frames
        self._sent: dict[str, FloatArray] = {}  # source -> colour last sent per slot
        self._kind_colours: dict[str, FloatArray] = {}  # source -> colour of each kind
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
            )
        except Exception as exc:  # the SDK raises its own error types for a busy port
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TransportError(f"cannot listen on {self.host}:{self.port}: {reason}") from None
        self.context = context
        self._channels = (
            FrameTransformsChannel("/tf", context=context),
            SceneUpdateChannel("/scene", context=context),
            LocationFixChannel("/location", context=context),
        )
        self.listening((self.host, self._server.port))
        self._sent.clear()  # a new server: every device's cube is sent again
        await asyncio.Future()

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self._channels is None:
            return True
        if self.snapshot_due:
            self.snapshot_due = False
            self._sent.clear()
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

    # -- one source's changed devices ---------------------------------------------------------

    def _send(self, table: SourceTable, update: Update) -> None:
        from foxglove.messages import (
            Color,
            CubePrimitive,
            FrameTransform,
            FrameTransforms,
            LocationFix,
            Quaternion,
            SceneEntity,
            SceneUpdate,
            Vector3,
        )

        tf_channel, scene_channel, location_channel = self._channels
        slots = update.slots
        ids, frames = self._names(table, slots)
        if POSITION in update.fields or ORIENTATION in update.fields:
            position = table.position[slots]
            has = ~np.isnan(position).any(axis=1)
            rotation = table.orientation[slots]  # identity where none was written
            rows = np.flatnonzero(has).tolist()
            p, q = position.tolist(), rotation.tolist()
            tf_channel.log(
                FrameTransforms(
                    transforms=[
                        FrameTransform(
                            parent_frame_id=WORLD_FRAME,
                            child_frame_id=frames[i],
                            translation=Vector3(x=p[i][0], y=p[i][1], z=p[i][2]),
                            rotation=Quaternion(w=q[i][0], x=q[i][1], y=q[i][2], z=q[i][3]),
                        )
                        for i in rows
                    ]
                )
            )
        colours = self._device_colours(table, slots)
        sent = self._sent_colours(table)
        new = np.flatnonzero((sent[slots] != colours).any(axis=1))
        if len(new):
            sent[slots[new]] = colours[new]
            size = Vector3(x=CUBE_SIZE, y=CUBE_SIZE, z=CUBE_SIZE)
            rgb = colours[new].tolist()
            entities = [
                SceneEntity(
                    frame_id=frames[i],
                    id=frames[i],
                    frame_locked=True,
                    cubes=[CubePrimitive(size=size, color=Color(r=r, g=g, b=b, a=1.0))],
                )
                for i, (r, g, b) in zip(new.tolist(), rgb, strict=True)
            ]
            scene_channel.log(SceneUpdate(entities=entities))
        if GEODETIC in update.fields:
            geo = table.geodetic[slots]
            g = geo.tolist()
            for i in np.flatnonzero(~np.isnan(geo).any(axis=1)).tolist():
                location_channel.log(
                    LocationFix(
                        frame_id=frames[i], latitude=g[i][0], longitude=g[i][1], altitude=g[i][2]
                    )
                )
        self._send_telemetry(table, update, ids)

    def _names(self, table: SourceTable, slots: np.ndarray) -> tuple[list[str], list[str]]:
        """The ids and frame ids of `slots` (frame ids made once per device, then indexed)."""
        cached = self._frames.get(table.source)
        if cached is None or len(cached[0]) < len(table):
            ids = np.array(table.ids, dtype=object)
            frames = np.array([frame_id(table.source, d) for d in table.ids], dtype=object)
            cached = self._frames[table.source] = (ids, frames)
        return cached[0][slots].tolist(), cached[1][slots].tolist()

    def _sent_colours(self, table: SourceTable) -> FloatArray:
        """The colour last sent per slot (NaN: no cube sent yet), grown with the table."""
        sent = self._sent.get(table.source)
        if sent is None or len(sent) < len(table):
            grown = np.full((len(table), 3), np.nan)
            if sent is not None:
                grown[: len(sent)] = sent
            sent = self._sent[table.source] = grown
        return sent

    def _device_colours(self, table: SourceTable, slots: np.ndarray) -> FloatArray:
        """(n, 3) RGB 0..1: the LED colour (0..255 telemetry) where a device has one, else
        its kind's colour."""
        kinds = self._kind_colours.get(table.source)
        if kinds is None or len(kinds) < len(table):
            kinds = np.array([KIND_COLOURS.get(k, OTHER_COLOUR) for k in table.kinds])
            kinds = self._kind_colours[table.source] = kinds.reshape(-1, 3)
        colours: FloatArray = kinds[slots]
        if all(f in table.telemetry for f in LED_FIELDS):
            led = np.stack([table.telemetry[f][slots] for f in LED_FIELDS], axis=1)
            lit = ~np.isnan(led).any(axis=1)
            colours[lit] = np.round(np.clip(led[lit] / 255.0, 0.0, 1.0), 3)
        return colours

    def _send_telemetry(self, table: SourceTable, update: Update, ids: list[str]) -> None:
        names = [n for n in update.fields if n in table.telemetry]
        if not names:
            return
        channel = self._telemetry.get(table.source)
        if channel is None:
            import foxglove

            channel = foxglove.Channel(
                f"/telemetry/{table.source}", message_encoding="json", context=self.context
            )
            self._telemetry[table.source] = channel
        message: dict[str, Any] = {"device": ids}
        for name in sorted(names):
            message[name] = table.telemetry[name][update.slots]  # NaN (not written) -> null
        channel.log(orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY))


def snapshot(table: SourceTable) -> Update:
    """An update touching every device of a table with every field (for a new client)."""
    fields = {POSITION, ORIENTATION, GEODETIC, *table.telemetry}
    return Update(table.source, np.arange(len(table), dtype=np.intp), frozenset(fields), 0.0)


def open_sink(endpoint: Endpoint) -> FoxgloveSink:
    """The sink of a `foxglove://host:port?rate=HZ` URL."""
    endpoint.check_options(SINK_OPTIONS, "a Foxglove server")
    rate = endpoint.float_option("rate", DEFAULT_RATE)
    return FoxgloveSink(endpoint.host, endpoint.port_or(DEFAULT_PORT), rate)
