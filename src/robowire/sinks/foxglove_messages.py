"""World updates as Foxglove messages: the one builder the live Foxglove sink
(`sinks.foxglove`) and the MCAP recorder (`recording`) share.

`FoxgloveMessages.build(table, update)` reads the changed devices' columns and returns
`(topic, bytes)` pairs, each the encoded message of its topic's schema (`schemas`), built
from the numpy columns with `pbwire` (no Python object per transform, cube or fix):

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

The bytes are what foxglove-sdk's own message classes encode, field for field (it leaves out
fields equal to zero, these keep them: the same values to any protobuf reader); the schemas
(FileDescriptorSets) are the SDK's. tests/core/test_foxglove_messages.py parses them with
Foxglove's generated classes (`foxglove-schemas-protobuf`) and compares with the SDK's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container
from typing import Any

import numpy as np
import orjson

from robowire import pbwire
from robowire.pbwire import Heads, Layout
from robowire.world import Update
from robowire.world.model import GEODETIC, ORIENTATION, POSITION
from robowire.world.table import FloatArray, SourceTable

WORLD_FRAME = "world"
FEW_VALUES = 1024  # telemetry values checked at once and printed from lists (`few_wholes`)
MAX_FIELD_SETS = 1024  # the sets of fields whose telemetry names are kept sorted
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


# the fixed-size part of each message (pbwire.Layout), after its device's head (pbwire.Heads)
TRANSFORM_TAIL = Layout(  # FrameTransform: translation (4, Vector3), rotation (5, Quaternion)
    [b"\x22\x1b\x09", "x", b"\x11", "y", b"\x19", "z",
     b"\x2a\x24\x09", "qx", b"\x11", "qy", b"\x19", "qz", b"\x21", "qw"]
)  # fmt: skip
ENTITY_TAIL = Layout(  # SceneEntity: cubes (8, CubePrimitive: size (2), color (3))
    [b"\x42\x43\x12\x1b\x09", "sx", b"\x11", "sy", b"\x19", "sz",
     b"\x1a\x24\x09", "r", b"\x11", "g", b"\x19", "b", b"\x21", "a"]
)  # fmt: skip
FIX_TAIL = Layout([b"\x09", "lat", b"\x11", "lon", b"\x19", "alt"])  # LocationFix 1, 2, 3
WORLD_FIELD = pbwire.string(2, WORLD_FRAME)  # FrameTransform.parent_frame_id
FRAME_LOCKED = pbwire.key(5, pbwire.VARINT) + b"\x01"  # SceneEntity.frame_locked = true


def transform_head(frame: str) -> bytes:
    """FrameTransforms.transforms (1): a transform's key, length, parent and child frame."""
    body = WORLD_FIELD + pbwire.string(3, frame)
    return pbwire.key(1, pbwire.LENGTH) + pbwire.varint(len(body) + TRANSFORM_TAIL.size) + body


def entity_head(frame: str) -> bytes:
    """SceneUpdate.entities (2): an entity's key, length, frame_id, id and frame_locked."""
    body = pbwire.string(2, frame) + pbwire.string(3, frame) + FRAME_LOCKED
    return pbwire.key(2, pbwire.LENGTH) + pbwire.varint(len(body) + ENTITY_TAIL.size) + body


def fix_head(frame: str) -> bytes:
    """A LocationFix's frame_id (7)."""
    return pbwire.string(7, frame)


def fixes_head(frame: str) -> bytes:
    """LocationFixes.fixes (1): a fix's key, length and frame_id."""
    body = fix_head(frame)
    return pbwire.key(1, pbwire.LENGTH) + pbwire.varint(len(body) + FIX_TAIL.size) + body


def any_column(flags: np.ndarray) -> np.ndarray:
    """Per row of an (n, k) boolean array: is any column true (`.any(axis=1)`, which is
    many times slower for a few columns)."""
    out = flags[:, 0].copy()
    for column in range(1, flags.shape[1]):
        out |= flags[:, column]
    return out


def written(
    column: FloatArray, slots: np.ndarray, pick: np.ndarray | slice
) -> tuple[FloatArray, np.ndarray]:
    """The rows of an (n, k) column at `slots` (`pick`: the same as a slice, or slots) with
    no NaN, and their slots (`slots` itself when every row is written)."""
    values: FloatArray = column[pick]
    missing = any_column(np.isnan(values))
    if not missing.any():
        return values, slots
    return values[~missing], slots[~missing]


@functools.cache
def schema(name: str) -> tuple[str, str, bytes]:
    """(name, encoding, data) of a Foxglove schema, as foxglove-sdk's message classes give it
    (a protobuf FileDescriptorSet)."""
    import foxglove.messages

    found = getattr(foxglove.messages, name.removeprefix("foxglove.")).get_schema()
    return found.name, found.encoding, found.data


class FoxgloveMessages:
    """Turns one source's changed devices into Foxglove messages (see the module docstring)."""

    def __init__(self, *, batch_locations: bool = False) -> None:
        self.batch_locations = batch_locations
        self.schemas = {
            TF_TOPIC: "foxglove.FrameTransforms",
            SCENE_TOPIC: "foxglove.SceneUpdate",
            LOCATION_TOPIC: "foxglove.LocationFixes" if batch_locations else "foxglove.LocationFix",
        }
        """The protobuf schema of each topic but telemetry (JSON, `TELEMETRY_SCHEMA`)."""
        self._ids: dict[str, np.ndarray] = {}  # source -> its device ids (object array)
        self._heads: dict[tuple[str, str], Heads] = {}  # (source, topic) -> device heads
        self._sent: dict[str, FloatArray] = {}  # source -> colour last sent per slot
        self._kind_colours: dict[str, FloatArray] = {}  # source -> colour of each kind
        self._names: dict[frozenset[str], list[str]] = {}  # fields -> the telemetry ones
        self._ids_json_of: dict[str, tuple[np.ndarray, orjson.Fragment]] = {}  # ids, JSON

    def reset(self) -> None:
        """Forget the colours sent: the next build sends every device's cube again."""
        self._sent.clear()
        self._names.clear()

    def build(
        self, table: SourceTable, update: Update, topics: Container[str] | None = None
    ) -> list[tuple[str, bytes | list[bytes]]]:
        """The messages for `update`'s devices, read from `table` (their latest state), as
        encoded bytes: protobuf (schema `self.schemas[topic]`) or JSON (telemetry); without
        `batch_locations`, `/location`'s are a list, one message per device. With `topics`,
        only the Foxglove topics named there are built (the others have no reader)."""
        out: list[tuple[str, bytes | list[bytes]]] = []
        slots = update.slots
        if not len(slots):
            return out
        wanted = (lambda topic: True) if topics is None else topics.__contains__
        pick = pbwire.as_range(slots)  # a whole table's slots: views, not copies
        if (POSITION in update.fields or ORIENTATION in update.fields) and wanted(TF_TOPIC):
            p, located = written(table.position, slots, pick)
            q = table.orientation[pick if located is slots else located]  # identity if unknown
            data, _ = self._heads_of(table, TF_TOPIC, transform_head).messages(
                located, TRANSFORM_TAIL, x=p[:, 0], y=p[:, 1], z=p[:, 2],
                qw=q[:, 0], qx=q[:, 1], qy=q[:, 2], qz=q[:, 3],
            )  # fmt: skip
            out.append((TF_TOPIC, data))
        if wanted(SCENE_TOPIC):
            colours = self._device_colours(table, pick)
            sent = self._sent_colours(table)
            new = np.flatnonzero(any_column(sent[pick] != colours))
            if len(new):
                sent[slots[new]] = colours[new]
                c = colours[new]
                data, _ = self._heads_of(table, SCENE_TOPIC, entity_head).messages(
                    slots[new], ENTITY_TAIL, sx=CUBE_SIZE, sy=CUBE_SIZE, sz=CUBE_SIZE,
                    r=c[:, 0], g=c[:, 1], b=c[:, 2], a=1.0,
                )  # fmt: skip
                out.append((SCENE_TOPIC, data))
        if GEODETIC in update.fields and wanted(LOCATION_TOPIC):
            g, located = written(table.geodetic, slots, pick)
            head = fixes_head if self.batch_locations else fix_head
            data, ends = self._heads_of(table, LOCATION_TOPIC, head).messages(
                located, FIX_TAIL, lat=g[:, 0], lon=g[:, 1], alt=g[:, 2]
            )
            if self.batch_locations:
                if len(located):
                    out.append((LOCATION_TOPIC, data))
            elif len(located):  # one LocationFix message per device: the schema holds one fix
                starts = [0, *ends[:-1].tolist()]
                fixes = [data[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]
                out.append((LOCATION_TOPIC, fixes))
        if wanted(TELEMETRY_PREFIX + table.source):
            telemetry = self._telemetry(table, update, pick)
            if telemetry is not None:
                out.append((TELEMETRY_PREFIX + table.source, telemetry))
        return out

    def _device_ids(self, table: SourceTable) -> np.ndarray:
        ids = self._ids.get(table.source)
        if ids is None or len(ids) < len(table):
            ids = self._ids[table.source] = np.array(table.ids, dtype=object)
        return ids

    def _heads_of(self, table: SourceTable, topic: str, make: Callable[[str], bytes]) -> Heads:
        heads = self._heads.get((table.source, topic))
        if heads is None:
            heads = self._heads[table.source, topic] = Heads(
                lambda slot: make(frame_id(table.source, table.ids[slot]))
            )
        return heads

    def _sent_colours(self, table: SourceTable) -> FloatArray:
        """The colour last sent per slot (NaN: no cube sent yet), grown with the table."""
        sent = self._sent.get(table.source)
        if sent is None or len(sent) < len(table):
            grown = np.full((len(table), 3), np.nan)
            if sent is not None:
                grown[: len(sent)] = sent
            sent = self._sent[table.source] = grown
        return sent

    def _device_colours(self, table: SourceTable, pick: np.ndarray | slice) -> FloatArray:
        """(n, 3) RGB 0..1: the LED colour (0..255 telemetry) where a device has one, else
        its kind's colour."""
        kinds = self._kind_colours.get(table.source)
        if kinds is None or len(kinds) < len(table):
            kinds = np.array([KIND_COLOURS.get(k, OTHER_COLOUR) for k in table.kinds])
            kinds = self._kind_colours[table.source] = kinds.reshape(-1, 3)
        if not all(f in table.telemetry for f in LED_FIELDS):
            return kinds[pick].copy()
        led = np.stack([table.telemetry[f][pick] for f in LED_FIELDS], axis=1)
        lit = ~any_column(np.isnan(led))
        if lit.all():  # (every device lit, a show's: no mask to apply, in place)
            led /= 255.0
            np.clip(led, 0.0, 1.0, out=led)
            return np.round(led, 3, out=led)
        colours: FloatArray = kinds[pick].copy()
        colours[lit] = np.round(np.clip(led[lit] / 255.0, 0.0, 1.0), 3)
        return colours

    def _telemetry(
        self, table: SourceTable, update: Update, pick: np.ndarray | slice
    ) -> bytes | None:
        names = self._names.get(update.fields)
        if names is None:  # (the sets of fields written are few: each sorted once)
            if len(self._names) >= MAX_FIELD_SETS:
                self._names.clear()
            names = self._names[update.fields] = sorted(
                n for n in update.fields if n in table.telemetry
            )
        if not names:
            return None
        few = len(update.slots) * len(names) <= FEW_VALUES  # (a robot's: checked at once)
        ids = self._device_ids(table)[pick].tolist() if few else self._ids_json(table, update)
        message: dict[str, Any] = {"device": ids, "units": {n: table.units[n] for n in names}}
        columns = table.telemetry  # NaN (not written) -> null
        if few:
            data = np.array([columns[n][pick] for n in names])
            message.update(zip(names, few_wholes(data), strict=True))
        else:
            for name in names:
                message[name] = whole(columns[name][pick])
        return orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)

    def _ids_json(self, table: SourceTable, update: Update) -> orjson.Fragment:
        """The JSON array of the ids of a swarm's `update.slots`, printed once for the same
        slots (a device's id never changes)."""
        kept = self._ids_json_of.get(table.source)
        if kept is None or not np.array_equal(kept[0], update.slots):
            data = orjson.Fragment(orjson.dumps(self._device_ids(table)[update.slots].tolist()))
            kept = self._ids_json_of[table.source] = (update.slots.copy(), data)
        return kept[1]


def whole(values: FloatArray) -> np.ndarray:
    """`values` as integers when every one is a whole number (LED levels, counts): the same
    JSON numbers, written several times faster than floats."""
    if np.isnan(values.min()) or not (np.abs(values).max() < 2**53):
        return values
    return values.astype(np.int64) if (values == np.trunc(values)).all() else values


def few_wholes(data: FloatArray) -> list[list[float] | list[int]]:
    """`whole` of each row of `data` (a few values), checked for all rows at once, as lists:
    `orjson` prints a few values faster from lists than from arrays."""
    with np.errstate(invalid="ignore"):  # (NaN, inf)
        exact = ((data == np.trunc(data)) & (np.abs(data) < 2**53)).all(axis=1)
        integers = data.astype(np.int64) if exact.any() else data
    rows: list[list[float] | list[int]] = data.tolist()
    for i in np.flatnonzero(exact).tolist():
        rows[i] = integers[i].tolist()
    return rows
