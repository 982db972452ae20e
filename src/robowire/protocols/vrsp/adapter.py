"""VRSP <-> world model, both directions, as columns (no Python step per drone on the data path).

Wire -> world (`VrspAdapter`): every drone is a device (kind "drone", id the VRSP device id as
text, attributes `definition` and `model` from its definition). Frames:

* position: VRSP's left-handed Y-up frame (x East, y Up, z North, metres from the DEF's root)
  becomes ENU by swapping y and z: (E, N, U) = (x, z, y).
* orientation: that swap is a reflection M, so a rotation R in the wire frame is M R M in ENU,
  the rotation about the mirrored axis -M a by the same angle: the quaternion (w, x, y, z)
  becomes (w, -x, -z, -y). A drone that sends a heading but no orientation gets the yaw the
  heading says (degrees clockwise from north seen from above = a negative turn about Up).
* geodetic: the DEF's root plus the ENU offset, through pymap3d (WGS84).
* telemetry: `led_red/green/blue` (0..255, the 0x1 colour), `heading` (deg); per payload slot
  k of the drone's definition: Light/Laser `payload<k>_red/green/blue` (RGB) or
  `payload<k>_level` (0..255, fixed colour); Pyro `payload<k>_cue` (0 = nothing firing) and
  `payload<k>_since` (s since the cue fired); gimballed payloads `payload<k>_gimbal_w/x/y/z`
  (the gimbal's quaternion, converted to ENU like the orientation). A cue that starts firing
  is also a log event naming the cue's VDL.

World -> wire (`SwarmEncoder`, for the serve sink): every world device with a position becomes
a drone, named by `SinkNames`: a VRSP source's drone keeps its id, its definition (the
attributes `definition`, `model`, `LightLumens`, `PayloadDefinitions` its adapter wrote), its
heading and its payload states (the `payload<k>_...` telemetry back into the payload
columns); other devices get the lowest free ids in order of first sight and one definition
per device kind, without payloads. Positions are the world's ENU positions (metres) in the
wire's order. The simulator's show (`model.ShowState`, world units too) becomes its DATA
frames through the same columns (`show_swarm`: `drone_rows`, `payload_rows`), the one place
ENU becomes the wire's frame and colours, cue times and quaternions its bytes and floats.
The root is the sink's `lat`/`lon`/`alt` when given; otherwise it is derived once from the
first device that has both a geodetic and an ENU position, so that this device's local offset
maps back to its latitude/longitude (a VRSP -> VRSP bridge keeps the sender's root).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pymap3d
from numpy.typing import NDArray

from robowire import units
from robowire.protocols.vrsp.codec import (
    LIGHT_LEVEL,
    LIGHT_RGB,
    MAX_DEVICES,
    PYRO,
    DefinitionTable,
    definition_from_json,
    definition_to_json,
    empty_swarm,
)
from robowire.protocols.vrsp.definitions import DeviceDefinition, Swarm
from robowire.protocols.vrsp.events import DefinitionReceived, SwarmFrame, VrspEvent
from robowire.protocols.vrsp.model import ShowState
from robowire.world import World
from robowire.world.identity import SinkNames
from robowire.world.table import SourceTable

log = logging.getLogger("robowire.vrsp")

KIND = "drone"
MAX_FIRE_LOGS = 64  # cue firings logged per frame (the rest still show in telemetry)
FloatArray = NDArray[np.float64]


def wire_to_enu(position: NDArray[np.floating]) -> FloatArray:
    """(x East, y Up, z North) -> (East, North, Up)."""
    return np.asarray(position, dtype=np.float64)[:, [0, 2, 1]]


def quaternion_mirror(q: NDArray[np.floating]) -> FloatArray:
    """Rotations (..., 4) (w, x, y, z) in one of the two frames -> the same rotations in the
    other: (w, -x, -z, -y). The y/z swap is its own inverse, so this maps both ways."""
    q = np.asarray(q, dtype=np.float64)
    return np.stack([q[..., 0], -q[..., 1], -q[..., 3], -q[..., 2]], axis=-1)


def heading_quaternion(heading_deg: NDArray[np.floating]) -> FloatArray:
    """ENU yaw quaternions of headings (degrees clockwise from north, seen from above)."""
    half = np.radians(np.asarray(heading_deg, dtype=np.float64)) * -0.5
    zero = np.zeros_like(half)
    return np.stack([np.cos(half), zero, zero, np.sin(half)], axis=1)


def _normalised(q: FloatArray) -> FloatArray:
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    out: FloatArray = np.tile([1.0, 0.0, 0.0, 0.0], (len(q), 1))
    np.divide(q, norm, out=out, where=norm > 0)
    return out


class VrspAdapter:
    """Writes one VRSP receiver's frames into the world under `source`."""

    def __init__(self, world: World, source: str, *, geodetic: bool = True) -> None:
        self.world = world
        self.source = source
        self.geodetic = geodetic
        self.table: DefinitionTable | None = None
        self._slot_of = np.full(MAX_DEVICES, -1, dtype=np.intp)
        self._cues = np.zeros((MAX_DEVICES, 0), dtype=np.uint8)  # last cue per id and slot
        self.frames = 0

    def apply(self, events: Sequence[VrspEvent], receive_time: float) -> int:
        """Write the events into the world; returns the datagrams taken in."""
        taken = 0
        for event in events:
            if isinstance(event, SwarmFrame):
                self.frame(event, receive_time)
                taken += event.datagrams
            elif isinstance(event, DefinitionReceived):
                self.definition(event.table, receive_time)
                taken += 1
        return taken

    def definition(self, table: DefinitionTable, receive_time: float) -> None:
        """A new or grown definition table: name its devices (once per DEF, not per frame)."""
        self.table = table
        k = table.slots
        if self._cues.shape[1] != k:
            self._cues = np.zeros((MAX_DEVICES, k), dtype=np.uint8)
        source_table = self.world.table(self.source)
        ids = table.order
        rows = table.index_of[ids]
        for device, row in zip(ids.tolist(), rows.tolist(), strict=True):
            slot = self._slot_of[device]
            if slot < 0:
                slot = self._slot_of[device] = source_table.slot(str(device), KIND)
            d = table.definitions[row]
            described = definition_to_json(d)  # what a VRSP sink defines the drone with again
            source_table.attributes[slot].update(
                definition=d.definition_id,
                model=d.model,
                **{key: described[key] for key in DEFINITION_KEYS if described.get(key)},
            )

    def _slots(self, ids: NDArray[np.uint16]) -> NDArray[np.intp]:
        slots = self._slot_of[ids]
        missing = slots < 0
        if missing.any():
            source_table = self.world.table(self.source)
            for device in np.unique(ids[missing]).tolist():
                self._slot_of[device] = source_table.slot(str(device), KIND)
            slots = self._slot_of[ids]
        return slots

    def frame(self, event: SwarmFrame, receive_time: float) -> None:
        swarm, table = event.swarm, event.table
        n = len(swarm.ids)
        if n == 0:
            return
        self.frames += 1
        slots = self._slots(swarm.ids)
        position = wire_to_enu(swarm.position)
        telemetry: dict[str, tuple[FloatArray | float, str]] = {}
        if swarm.has_color.any():
            color = np.where(swarm.has_color[:, None], swarm.color, np.nan)
            for i, name in enumerate(("led_red", "led_green", "led_blue")):
                telemetry[name] = (color[:, i], units.COUNT)
        if swarm.has_heading.any():
            heading = np.where(swarm.has_heading, swarm.heading, np.nan)
            telemetry["heading"] = (heading, units.DEGREE)
        self._payloads(swarm, table, telemetry, receive_time)
        geodetic = None
        if self.geodetic:
            lat0, lon0, alt0 = table.root
            with np.errstate(invalid="ignore"):  # an infinite point (a peer's) is nowhere: NaN
                lat, lon, alt = pymap3d.enu2geodetic(
                    position[:, 0], position[:, 1], position[:, 2], lat0, lon0, alt0
                )
            geodetic = np.stack([lat, lon, alt], axis=1)
        oriented = swarm.has_orientation | swarm.has_heading
        orientation = None
        if oriented.any():
            orientation = np.where(
                swarm.has_orientation[:, None],
                _normalised(quaternion_mirror(swarm.orientation)),
                heading_quaternion(swarm.heading),
            )
        all_oriented = orientation is not None and bool(oriented.all())
        self.world.update(
            self.source,
            slots,
            receive_time=receive_time,
            source_time=receive_time,
            position=position,
            orientation=orientation if all_oriented else None,
            geodetic=geodetic,
            telemetry=telemetry,
        )
        if orientation is not None and not all_oriented:
            self.world.update(
                self.source,
                slots[oriented],
                receive_time=receive_time,
                orientation=orientation[oriented],
            )

    def _payloads(
        self,
        swarm: Swarm,
        table: DefinitionTable,
        telemetry: dict[str, tuple[FloatArray | float, str]],
        receive_time: float,
    ) -> None:
        k = swarm.cue.shape[1]
        if not k or not table.definitions:
            return
        rows = table.index_of[swarm.ids]
        kinds = table.kinds[rows]  # (n, K)
        gimballed = table.gimballed[rows]
        for j in range(k):
            kind = kinds[:, j]
            if (kind == LIGHT_RGB).any():
                rgb = np.where((kind == LIGHT_RGB)[:, None], swarm.light[:, j], np.nan)
                for i, name in enumerate(("red", "green", "blue")):
                    telemetry[f"payload{j}_{name}"] = (rgb[:, i], units.COUNT)
            if (kind == LIGHT_LEVEL).any():
                level = np.where(kind == LIGHT_LEVEL, swarm.light[:, j, 0], np.nan)
                telemetry[f"payload{j}_level"] = (level, units.COUNT)
            pyro = kind == PYRO
            if pyro.any():
                cue = swarm.cue[:, j]
                telemetry[f"payload{j}_cue"] = (np.where(pyro, cue, np.nan), units.COUNT)
                since = np.where(pyro & (cue > 0), swarm.cue_ms[:, j] / 1000.0, np.nan)
                telemetry[f"payload{j}_since"] = (since, units.SECOND)
                before = self._cues[swarm.ids, j]
                fired = np.flatnonzero(pyro & (cue > 0) & (cue != before))
                self._cues[swarm.ids, j] = np.where(pyro, cue, 0)
                for row in fired[:MAX_FIRE_LOGS].tolist():
                    self._log_fire(table, int(swarm.ids[row]), int(rows[row]), j, int(cue[row]),
                                   receive_time)  # fmt: skip
            if gimballed[:, j].any():
                g = np.where(gimballed[:, j, None], quaternion_mirror(swarm.gimbal[:, j]), np.nan)
                for i, axis in enumerate("wxyz"):
                    telemetry[f"payload{j}_gimbal_{axis}"] = (g[:, i], units.COUNT)

    def _log_fire(
        self, table: DefinitionTable, device: int, row: int, slot: int, cue: int, when: float
    ) -> None:
        payload = table.definitions[row].payloads[slot]
        vdl = next((c.vdl for c in payload.cues if c.id == cue), "")
        text = f"pyro cue {cue} fired" + (f": {vdl}" if vdl else "")
        self.world.log(self.source, str(device), text, time=when)


# -- world -> wire -----------------------------------------------------------------------------


class SwarmEncoder:
    """World devices -> the swarm a VRSP sender sends (see the module docstring)."""

    def __init__(self, root: tuple[float, float, float] | None = None) -> None:
        self.root = root
        self.full = False  # more than 65,536 devices were offered (the rest are not sent)
        self.names = SinkNames("vrsp", self._free_id, where="vrsp serve")
        self._next_free = 0
        self._definitions: dict[tuple[str, ...], DeviceDefinition] = {}  # key -> definition
        self._definition_of = np.full(MAX_DEVICES, -1, dtype=np.int64)  # VRSP id -> its id
        self._slot_ids: dict[str, NDArray[np.intp]] = {}  # source -> VRSP id per slot

    def _free_id(self, name: str) -> str:
        """The mapping of devices that are not VRSP drones: the lowest id no device has."""
        while self._next_free < MAX_DEVICES and self.names.taken(str(self._next_free)):
            self._next_free += 1
        return str(self._next_free)

    def _ids_of(self, world: World, source: str, slots: NDArray[np.intp]) -> NDArray[np.intp]:
        known = self._slot_ids.get(source)
        table = world.tables[source]
        if known is None or len(known) < len(table):
            grown = np.full(max(len(table), 16), -2, dtype=np.intp)
            if known is not None:
                grown[: len(known)] = known
            known = self._slot_ids[source] = grown
        ids = known[slots]
        new = ids == -2
        if new.any():
            fresh = np.unique(slots[new])
            for slot, name in zip(fresh.tolist(), self.names.names(table, fresh), strict=True):
                known[slot] = self._new_id(table, slot, name)
            ids = known[slots]
        return ids

    def _new_id(self, table: SourceTable, slot: int, name: str) -> int:
        vrsp_id = int(name) if name.isdecimal() else MAX_DEVICES
        if vrsp_id >= MAX_DEVICES:
            self.full = True
            return -1
        self._definition_of[vrsp_id] = self._definition(table, slot).definition_id
        return vrsp_id

    def _definition(self, table: SourceTable, slot: int) -> DeviceDefinition:
        """A VRSP drone's own definition (its id, model and payloads, as its adapter wrote
        them), else one per device kind, without payloads."""
        attributes = table.attributes[slot]
        native = self.names.native(table) and "definition" in attributes
        key = (table.source, str(attributes["definition"])) if native else (table.kinds[slot],)
        found = self._definitions.get(key)
        if found is not None:
            return found
        used = {d.definition_id for d in self._definitions.values()}
        wanted = int(attributes["definition"]) if native else len(self._definitions)
        while wanted in used:
            wanted += 1
        if native:
            description = {k: attributes[k] for k in DEFINITION_KEYS if k in attributes}
            found = definition_from_json(
                {"DefinitionID": wanted, "DeviceModel": attributes.get("model", ""),
                 **description}
            )  # fmt: skip
        else:
            found = DeviceDefinition(definition_id=wanted, model=table.kinds[slot])
        self._definitions[key] = found
        return found

    def blocks(self) -> list[tuple[DeviceDefinition, NDArray[np.uint16]]]:
        """The definition blocks of every device seen so far."""
        out = []
        for definition in self._definitions.values():
            ids = np.flatnonzero(self._definition_of == definition.definition_id)
            out.append((definition, ids.astype(np.uint16)))
        return out

    def _find_root(self, world: World) -> tuple[float, float, float] | None:
        for table in world.tables.values():
            n = len(table)
            usable = ~np.isnan(table.geodetic[:n]).any(axis=1) & ~np.isnan(table.position[:n]).any(
                axis=1
            )
            found = np.flatnonzero(usable)
            if len(found):
                slot = int(found[0])
                e, n_, u = table.position[slot]
                lat, lon, alt = table.geodetic[slot]
                root = pymap3d.enu2geodetic(-e, -n_, -u, lat, lon, alt)
                return (float(root[0]), float(root[1]), float(root[2]))
        return None

    def swarm(self, world: World) -> Swarm | None:
        """Every device with a position, as one frame (None before any device has one)."""
        parts: list[tuple[SourceTable, NDArray[np.intp], NDArray[np.intp]]] = []
        for source, table in world.tables.items():
            n = len(table)
            if not n:
                continue
            slots = np.flatnonzero(~np.isnan(table.position[:n]).any(axis=1))
            if not len(slots):
                continue
            ids = self._ids_of(world, source, slots)
            keep = ids >= 0
            parts.append((table, slots[keep], ids[keep]))
        if not parts:
            return None
        if self.root is None:
            self.root = self._find_root(world)
            if self.root is None:
                self.root = (0.0, 0.0, 0.0)
                log.warning(
                    "vrsp: no device has a geodetic position and no ?lat=&lon= was given: "
                    "the DEF root is 0, 0, 0 (positions are sent as they are, ENU metres)"
                )
        k = max((len(d.payloads) for d in self._definitions.values()), default=0)
        swarm = empty_swarm(sum(len(ids) for _, _, ids in parts), k)
        start = 0
        with np.errstate(over="ignore", invalid="ignore"):  # past float32: inf; inf*0: NaN
            for table, slots, ids in parts:
                rows = slice(start, start + len(ids))
                start += len(ids)
                native = self.names.native(table)
                heading = table.telemetry.get("heading")
                drone_rows(
                    swarm,
                    rows,
                    ids=ids,
                    position=table.position[slots],
                    has_orientation=table.has_orientation[slots],
                    orientation=table.orientation[slots],
                    color=_led_colours(table, slots),
                    heading=heading[slots] if heading is not None and native else None,
                )
                if k and native:
                    _payload_columns(table, slots, swarm, rows, k)
        return swarm


# -- drones in world units -> a swarm's rows: the sink's world and the simulator's show ------


def drone_rows(
    swarm: Swarm,
    rows: slice,
    *,
    ids: NDArray[np.integer],
    position: NDArray[np.floating],
    has_orientation: NDArray[np.bool_],
    orientation: NDArray[np.floating],
    color: NDArray[np.floating],
    heading: NDArray[np.floating] | None,
) -> None:
    """Write drones into `swarm`'s `rows`: ENU `position` (m) in the wire's frame (the swap),
    ENU `orientation` quaternions mirrored into it, the LED `color` (RGB 0..255, rounded half
    up; NaN: none) and `heading` (degrees; NaN or None: none), each as float32 or bytes."""
    swarm.ids[rows] = ids
    _swap_into(swarm.position[rows], position)
    swarm.has_orientation[rows] = has_orientation
    _mirror_into(swarm.orientation[rows], orientation)
    none = np.isnan(color)
    lit = ~(none[:, 0] | none[:, 1] | none[:, 2])
    swarm.has_color[rows] = lit
    swarm.color[rows][lit] = _byte(color[lit])
    if heading is not None:
        swarm.has_heading[rows] = ~np.isnan(heading)
        swarm.heading[rows] = np.nan_to_num(heading)


def payload_rows(
    swarm: Swarm,
    rows: slice,
    j: int | slice,
    *,
    rgb: NDArray[np.floating] | None = None,
    level: NDArray[np.floating] | None = None,
    cue: NDArray[Any] | None = None,
    since: NDArray[np.floating] | None = None,
    gimbal: NDArray[np.floating] | None = None,
) -> None:
    """Write payload slot `j` (or slots) of `swarm`'s `rows`: a light's `rgb` and a laser's `level`
    (0..255, rounded half up; a NaN level is left alone), the pyro `cue` burning and the
    seconds it has burnt (`since`, sent in ms, to the nearest), and a gimbal's ENU quaternion
    (mirrored into the wire's frame; not finite: straight ahead). NaN elsewhere is 0."""
    light = swarm.light[rows, j]  # a view: written in place
    if rgb is not None:
        light[:] = _byte(np.nan_to_num(rgb))
    if level is not None:
        lit = ~np.isnan(level)
        light[lit, 0] = _byte(level[lit])
    if cue is not None:
        whole = cue.dtype == np.uint8  # (the simulator's: nothing to round)
        swarm.cue[rows, j] = cue if whole else np.clip(np.rint(np.nan_to_num(cue)), 0, 255)
    if since is not None:
        swarm.cue_ms[rows, j] = np.clip(np.rint(np.nan_to_num(since) * 1000.0), 0, 65535)
    if gimbal is not None:
        finite = np.isfinite(gimbal)  # (per component: a reduce over 4 is slow in numpy)
        aimed = (finite[..., 0] & finite[..., 1] & finite[..., 2] & finite[..., 3])[..., None]
        if not aimed.all():
            gimbal = np.where(aimed, gimbal, _IDENTITY)
        _mirror_into(swarm.gimbal[rows, j], gimbal)


def _swap_into(out: NDArray[np.float32], position: NDArray[np.floating]) -> None:
    """`wire_to_enu` (the swap is its own inverse) written into the float32 column `out`."""
    out[:, 0], out[:, 1], out[:, 2] = position[:, 0], position[:, 2], position[:, 1]


def _mirror_into(out: NDArray[np.float32], q: NDArray[np.floating]) -> None:
    """`quaternion_mirror` written into the float32 column `out` (no float64 copy)."""
    out[..., 0], out[..., 1], out[..., 2], out[..., 3] = (
        q[..., 0],
        -q[..., 1],
        -q[..., 3],
        -q[..., 2],
    )


def _byte(values: NDArray[np.floating]) -> NDArray[np.uint8]:
    """0..255 values as bytes, rounded half up (a colour's usual rounding, and what the
    simulator's shows and their capture have always had)."""
    rounded: NDArray[np.uint8] = np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)
    return rounded


def show_swarm(show: ShowState) -> Swarm:
    """The simulator's show at one moment (`model.ShowState`, world units) as the DATA frame
    its sender sends, through the columns the sink writes the world's drones with."""
    n, k = len(show.ids), show.cue.shape[1]
    swarm = empty_swarm(n, k)
    everything = slice(None)
    oriented = show.orientation is not None
    drone_rows(
        swarm,
        everything,
        ids=show.ids,
        position=show.position,
        has_orientation=np.full(n, oriented),
        orientation=show.orientation if show.orientation is not None else np.zeros((n, 4)),
        color=show.color,
        heading=show.heading,
    )
    if k:  # every slot at once
        payload_rows(swarm, everything, everything, rgb=show.light, cue=show.cue,
                     since=show.since, gimbal=show.gimbal)  # fmt: skip
    return swarm


DEFINITION_KEYS = ("LightLumens", "PayloadDefinitions")
"""What a VRSP source keeps of each drone's definition as its attributes (the DEF's own JSON
names: `payloads` are lights, lasers and pyro with their mounts and cues)."""


def _payload_columns(
    table: SourceTable, slots: NDArray[np.intp], swarm: Swarm, rows: slice, k: int
) -> None:
    """The payload state a VRSP source wrote as telemetry (`payload<j>_...`) -> the swarm's
    payload columns for `rows` (what each record sends depends on the drone's definition)."""
    telemetry = table.telemetry

    def column(name: str) -> FloatArray | None:
        found = telemetry.get(name)
        return None if found is None else np.nan_to_num(found[slots])

    for j in range(k):
        channels = [column(f"payload{j}_{name}") for name in ("red", "green", "blue")]
        rgb = None
        if any(c is not None for c in channels):
            rgb = np.stack([np.zeros(len(slots)) if c is None else c for c in channels], axis=1)
        level = telemetry.get(f"payload{j}_level")
        gimbal = [telemetry.get(f"payload{j}_gimbal_{axis}") for axis in "wxyz"]
        payload_rows(
            swarm,
            rows,
            j,
            rgb=rgb,
            level=None if level is None else level[slots],
            cue=column(f"payload{j}_cue"),
            since=column(f"payload{j}_since"),
            gimbal=np.stack([g[slots] for g in gimbal if g is not None], axis=1)
            if all(g is not None for g in gimbal)
            else None,
        )


_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
LED_FIELDS = ("led_red", "led_green", "led_blue")


def _led_colours(table: SourceTable, slots: NDArray[np.intp]) -> FloatArray:
    """(n, 3) the devices' LED colour (telemetry `led_red/green/blue`, 0..255; NaN where a
    device has none): what the 0x1 colour of a DATA record carries."""
    if not all(name in table.telemetry for name in LED_FIELDS):
        return np.full((len(slots), 3), np.nan)
    return np.stack([table.telemetry[name][slots] for name in LED_FIELDS], axis=1)
