"""World updates as Foxglove messages: the one builder the live Foxglove sink
(`sinks.foxglove`) and the MCAP recorder (`recording`) share.

`FoxgloveMessages.build(table, update)` reads the changed devices' columns and returns
`(topic, message)` pairs: foxglove-sdk message objects (`foxglove.messages`) for

    /tf                  foxglove.FrameTransforms  "world" -> "<source>/<device>" per device
                                                   with a position (ENU metres; identity
                                                   rotation if unknown)
    /scene               foxglove.SceneUpdate      a cube per device in its own frame (so it
                                                   moves with /tf), when a device first appears
                                                   or its LED colour changes
    /location            foxglove.LocationFix      one per changed device with a geodetic fix
                         (foxglove.LocationFixes   or, with `batch_locations`, one message
                                                   holding them all: what the recorder writes)

and JSON bytes for `/telemetry/<source>` (`{"device": [ids], "units": {"<field>": unit},
"<field>": [values], ...}`, the changed devices of that source as columns, null where not
written; JSON schema `TELEMETRY_SCHEMA`, named `robowire.Telemetry`). The builder remembers the
colour it last gave each device, so the scene is only sent again when it changes; `reset()`
forgets it (a new Foxglove client, or a new file, must get every cube).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from robowire.world import Update
from robowire.world.model import GEODETIC, ORIENTATION, POSITION
from robowire.world.table import FloatArray, SourceTable

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
TF_TOPIC = "/tf"
SCENE_TOPIC = "/scene"
LOCATION_TOPIC = "/location"
TELEMETRY_PREFIX = "/telemetry/"
TELEMETRY_SCHEMA_NAME = "robowire.Telemetry"
TELEMETRY_SCHEMA = orjson.dumps(
    {
        "title": TELEMETRY_SCHEMA_NAME,
        "description": "the changed devices of one source, as columns: a value per device "
        "(null: not written), in the order of `device`",
        "type": "object",
        "required": ["device", "units"],
        "properties": {
            "device": {"type": "array", "items": {"type": "string"}},
            "units": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "additionalProperties": {"type": "array", "items": {"type": ["number", "null"]}},
    }
)
"""The JSON schema of `/telemetry/<source>` (live and recorded)."""


def frame_id(source: str, device_id: str) -> str:
    """The Foxglove frame of a device."""
    return f"{source}/{device_id}"


def snapshot(table: SourceTable) -> Update:
    """An update touching every device of a table with every field (for a new client)."""
    fields = {POSITION, ORIENTATION, GEODETIC, *table.telemetry}
    return Update(table.source, np.arange(len(table), dtype=np.intp), frozenset(fields), 0.0)


class FoxgloveMessages:
    """Turns one source's changed devices into Foxglove messages (see the module docstring)."""

    def __init__(self, *, batch_locations: bool = False) -> None:
        self.batch_locations = batch_locations
        self._frames: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # source -> ids, frames
        self._sent: dict[str, FloatArray] = {}  # source -> colour last sent per slot
        self._kind_colours: dict[str, FloatArray] = {}  # source -> colour of each kind

    def reset(self) -> None:
        """Forget the colours sent: the next build sends every device's cube again."""
        self._sent.clear()

    def build(self, table: SourceTable, update: Update) -> list[tuple[str, Any]]:
        """The messages for `update`'s devices, read from `table` (their latest state)."""
        from foxglove.messages import (
            Color,
            CubePrimitive,
            FrameTransform,
            FrameTransforms,
            LocationFix,
            LocationFixes,
            Quaternion,
            SceneEntity,
            SceneUpdate,
            Vector3,
        )

        out: list[tuple[str, Any]] = []
        slots = update.slots
        if not len(slots):
            return out
        ids, frames = self._names(table, slots)
        if POSITION in update.fields or ORIENTATION in update.fields:
            position = table.position[slots]
            has = ~np.isnan(position).any(axis=1)
            rotation = table.orientation[slots]  # identity where none was written
            rows = np.flatnonzero(has).tolist()
            p, q = position.tolist(), rotation.tolist()
            transforms = [
                FrameTransform(
                    parent_frame_id=WORLD_FRAME,
                    child_frame_id=frames[i],
                    translation=Vector3(x=p[i][0], y=p[i][1], z=p[i][2]),
                    rotation=Quaternion(w=q[i][0], x=q[i][1], y=q[i][2], z=q[i][3]),
                )
                for i in rows
            ]
            out.append((TF_TOPIC, FrameTransforms(transforms=transforms)))
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
            out.append((SCENE_TOPIC, SceneUpdate(entities=entities)))
        if GEODETIC in update.fields:
            geo = table.geodetic[slots]
            g = geo.tolist()
            fixes = [
                LocationFix(
                    frame_id=frames[i], latitude=g[i][0], longitude=g[i][1], altitude=g[i][2]
                )
                for i in np.flatnonzero(~np.isnan(geo).any(axis=1)).tolist()
            ]
            if self.batch_locations:
                if fixes:
                    out.append((LOCATION_TOPIC, LocationFixes(fixes=fixes)))
            else:
                out.extend((LOCATION_TOPIC, fix) for fix in fixes)
        telemetry = self._telemetry(table, update, ids)
        if telemetry is not None:
            out.append((TELEMETRY_PREFIX + table.source, telemetry))
        return out

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

    @staticmethod
    def _telemetry(table: SourceTable, update: Update, ids: list[str]) -> bytes | None:
        names = [n for n in update.fields if n in table.telemetry]
        if not names:
            return None
        names.sort()
        message: dict[str, Any] = {"device": ids, "units": {n: table.units[n] for n in names}}
        for name in names:
            message[name] = table.telemetry[name][update.slots]  # NaN (not written) -> null
        return orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)
