"""SpyGlass packets <-> the world model, both directions.

`SpyglassAdapter(world, source, ...)` writes what sessions received into the world;
`WorldEncoder` turns world updates into the packets the sink serves (world -> wire), and
`network_packets` the simulator's reports (`model.Reports`, world units too) into the packets
`sim spyglass` sends: both through the same column functions (`packet_heads`,
`neighborhood_packets`, `polyline_packet`, `trajectory_packet`, `quantised`), the one place
world units become SpyGlass units, header times and number types.

What becomes what (wire -> world):
* Every sender is a device of kind "sensor_node" with id `str(node id)`. Its position is the
  header position of its latest packet (as SpyGlass's PositionPacketNodePositioner does) and its
  source time is the header's Unix seconds + milliseconds.
* Neighbourhood packets replace that node's `links` (neighbour node ids as strings; the sender
  itself and repeats are left out).
* Data packets (and variable lists) give telemetry: the *first* value (what SpyGlass's map
  painter and statistics use) under the profile's name for the semantic type, else
  `data.<semantic type>`, with the profile's unit (else "1"); all values go into the attribute
  of the same name. Std packets keep their payload as hex in attribute `raw.<semantic type>`.
* Node-link packets: attribute `link.<semantic type>` = {"to": id, "values": [...]}.
* Coordinates lists: attribute `polyline.<semantic type>` on the sender, points in ENU metres.
* Trajectory packets: a device of kind "object", id "<sender>:<semantic type>", that moves
  along the trajectory starting at the packet's time; `advance(now)` moves it on.

World -> wire (`WorldEncoder`): each device is a node (`NodeNumbers`: its numeric id if free,
else the highest free number). A SpyGlass source's devices go out as the packets they sent:
data in their own number types (the attribute `value_types`), neighbourhoods when they came,
std, node-link and coordinates packets from their attributes, trajectory objects as their
trajectory packet. Other devices: a changed position or links give a neighbourhood packet
(neighbours = the device's links that are nodes too); each changed telemetry value gives a
one-value float data packet of its semantic type (`SemanticTypes`).

Frame: SpyGlass coordinates are unitless int16s. By default 1 unit = 1 metre with x East,
y North, z Up (ENU); `scale` (metres per unit, per axis) and `offset` (metres, added after
scaling) change that, like SpyGlass's own "metrics" settings. Payload coordinates (polylines,
trajectories) are converted the same way as header positions, so that they share one frame.

Size: one module over 600 lines: the mapping between SpyGlass and the world both ways, as
every protocol's `adapter.py` has it (STYLE: one role per module, the same module names in
each protocol); the frame conversion, the geometry and the payload decoding it needs are read
by both directions.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    DTYPES,
    FLOAT_PACKET_DTYPE,
    HEADER,
    HEADER_SIZE,
    VERSION,
    CoordinatesList2Packet,
    CoordinatesList3Packet,
    DataPacket,
    NeighborhoodPacket,
    NodeLinkPacket,
    Packet,
    PacketColumns,
    SemanticProfile,
    StdPacket,
    SyntaxType,
    TrajectoryPacket2,
    TrajectoryPacket3,
    VariableListPacket,
    encode,
    time_fields,
)
from robowire.protocols.spyglass.events import PacketReceived, PacketsReceived, SpyglassEvent
from robowire.protocols.spyglass.model import Reports
from robowire.protocols.spyglass.profile import (
    COORDINATES,
    DATA,
    NEIGHBORHOOD,
    PLAIN_NEIGHBORS,
    TRAJECTORY,
    Interpretation,
)
from robowire.units import COUNT
from robowire.world import SourceTable, Update, World
from robowire.world.identity import SinkNames
from robowire.world.model import ATTRIBUTES, LINKS, POSITION, SOURCE_TIME

NODE_KIND = "sensor_node"
VALUE_TYPES = "value_types"  # attribute: data name -> the number type of its values
PACKET_TIMES = "packet_times"  # attribute: data name, other attribute or LINKS -> the source
# time (as the world has it) of the packet that set it (`WorldEncoder` relays each at its own)
OBJECT_KIND = "object"
FIRST_FREE_SEMANTIC = 100  # telemetry without a profile entry gets semantic types from here
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Frame:
    """SpyGlass units <-> ENU metres: `scale` metres per unit (per axis), then `offset`."""

    scale: FloatArray
    offset: FloatArray

    @classmethod
    def of(
        cls, scale: float | Sequence[float] = 1.0, offset: Sequence[float] = (0.0, 0.0, 0.0)
    ) -> Frame:
        return cls(
            np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,)).copy(),
            np.asarray(offset, dtype=np.float64).reshape(3),
        )

    def to_enu(self, units: Any) -> FloatArray:
        """SpyGlass units (..., 3) -> ENU metres."""
        enu: FloatArray = np.asarray(units, dtype=np.float64) * self.scale + self.offset
        return enu

    def to_units(self, enu: Any) -> npt.NDArray[np.int64]:
        """ENU metres (n, 3) -> int16 SpyGlass units, clipped to the int16 range (an infinite
        or huge coordinate too); a point with a NaN in it (no position) is 0, 0, 0."""
        points: FloatArray = np.asarray(enu, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # (huge / a small scale: inf)
            units = np.clip(np.rint((points - self.offset) / self.scale), -0x8000, 0x7FFF)
        units[np.isnan(units).any(axis=-1)] = 0
        out: npt.NDArray[np.int64] = units.astype(np.int64)
        return out


@dataclass(slots=True)
class _Motion:
    """A trajectory object: ENU points and the source times at which it is at each."""

    slot: int
    points: FloatArray  # (k, 3)
    times: FloatArray  # (k,) source time at each point


def object_id(sender: int, semantic_type: int) -> str:
    """Device id of the object moved by `sender`'s trajectories of `semantic_type`."""
    return f"{sender}:{semantic_type}"


class SpyglassAdapter:
    """Writes the packets of one source's sessions into `world` (see module docstring)."""

    def __init__(
        self,
        world: World,
        source: str,
        *,
        profile: SemanticProfile = DEFAULT_PROFILE,
        scale: float | Sequence[float] = 1.0,
        offset: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> None:
        self.world = world
        self.source = source
        self.profile = profile
        self.frame = Frame.of(scale, offset)
        self._motions: dict[tuple[int, int], _Motion] = {}
        self._clock_offset = 0.0  # source time - receive time, from the latest packet
        self._node_slots = np.full(0x10000, -1, dtype=np.intp)  # node id -> slot in _table
        self._table: SourceTable | None = None
        self._set: dict[tuple[int, str], int] = {}  # (slot, attribute or LINKS) -> the batch
        # row of the packet that set it last (its time goes into PACKET_TIMES in `_publish`)
        self._starts: list[tuple[float, TrajectoryPacket2 | TrajectoryPacket3]] = []  # objects
        # the batch sets off, written in time order with its nodes' updates (`_publish`)

    @property
    def scale(self) -> FloatArray:
        return self.frame.scale

    @property
    def offset(self) -> FloatArray:
        return self.frame.offset

    def apply(self, events: Sequence[SpyglassEvent], receive_time: float) -> int:
        """Write the packets of a batch of session events received at `receive_time` (Unix
        seconds); returns how many. Drops and lost connections are the source's to count."""
        written = 0
        for event in events:
            if type(event) is PacketsReceived and len(event.packets):
                self._write_columns(event.packets, receive_time)
                written += len(event.packets)
        packets = [e.packet for e in events if type(e) is PacketReceived]
        if packets:
            self._write(packets, receive_time)
        return written + len(packets)

    def _slots(self, table: SourceTable, senders: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """The world slot of each sender (node id), new nodes numbered in order of appearance."""
        if table is not self._table:
            self._table = table
            self._node_slots = np.full(0x10000, -1, dtype=np.intp)
        lookup = self._node_slots
        slots = lookup[senders]
        if (slots < 0).any():
            new, first = np.unique(senders[slots < 0], return_index=True)
            for sender in new[np.argsort(first)].tolist():
                lookup[sender] = table.slot(str(sender), NODE_KIND)
            slots = lookup[senders]
        return slots

    def _write(self, packets: Sequence[Packet], receive_time: float) -> None:
        """The object path (typed packets): one world update per set of changed fields (nodes
        that sent the same kinds of packet share one), plus one per trajectory object."""
        table = self.world.table(self.source)
        senders = np.fromiter((p.sender for p in packets), np.intp, len(packets))
        slots = self._slots(table, senders)
        heads = np.array([(p.x, p.y, p.z, p.seconds, p.milliseconds) for p in packets], np.float64)
        times = heads[:, 3] + heads[:, 4] / 1000.0
        changed: list[set[str]] = []
        for i, packet in enumerate(packets):
            changed.append(set())
            self._apply_one(
                table, int(slots[i]), i, packet, float(times[i]), receive_time, changed[i]
            )
        self._publish(slots, times, heads[:, :3], changed, receive_time)

    def _write_columns(self, columns: PacketColumns, receive_time: float) -> None:
        """The columnar path: the same world as `_write` of the same packets, with no object
        per packet: neighbourhoods and data lists are read per payload shape, the rest (std,
        node links, coordinates, trajectories) one by one."""
        table = self.world.table(self.source)
        head = columns.head
        slots = self._slots(table, head["sender"].astype(np.intp))
        times = head["seconds"] + head["ms"] / 1000.0
        plain = self.profile._plain[head["semantic"], head["syntax"]]
        semantic = head["semantic"].astype(np.intp)
        changed: list[set[str]] = [set() for _ in range(len(columns))]
        link_rows: list[npt.NDArray[np.intp]] = []
        link_lists: list[npt.NDArray[Any]] = []
        data_rows: list[npt.NDArray[np.intp]] = []
        data_first: list[FloatArray] = []
        data_full: list[npt.NDArray[np.bool_]] = []  # the packet has a first value
        data_lists: dict[int, tuple[list[Any], str | list[str]]] = {}  # values, number types
        for group in columns.lists:
            neighbors = plain[group.rows] == PLAIN_NEIGHBORS
            if neighbors.any():
                link_rows.append(group.rows[neighbors])
                link_lists.append(group.values[neighbors])
            data = ~neighbors
            if data.any():
                rows, values = group.rows[data], group.values[data]
                data_rows.append(rows)
                first = values[:, 0] if values.shape[1] else np.zeros(len(rows))
                data_first.append(first.astype(np.float64))
                data_full.append(np.full(len(rows), values.shape[1] > 0))
                kind = values.dtype.name  # the list's number type, as `_data` names it
                pairs = zip(rows.tolist(), values.tolist(), strict=True)
                data_lists.update((row, (row_values, kind)) for row, row_values in pairs)
        for row, packet in sorted(columns.objects.items()):
            if isinstance(packet, VariableListPacket):  # data too: the last packet wins
                values = list(packet.values)
                data_rows.append(np.array([row], dtype=np.intp))
                data_first.append(np.array([values[0] if values else 0.0], dtype=np.float64))
                data_full.append(np.array([bool(values)]))
                data_lists[row] = (values, [DTYPES[tag].name for tag, _ in packet.items])
            else:
                slot = int(slots[row])
                time = float(times[row])
                self._apply_one(table, slot, row, packet, time, receive_time, changed[row])
        if link_rows:  # the last neighbourhood of each node in the batch gives its links
            rows = np.concatenate(link_rows)
            lists = [v for block in link_lists for v in block.tolist()]
            senders = head["sender"]
            for i in _last_per_key(slots[rows], rows).tolist():
                slot, own = int(slots[rows[i]]), int(senders[rows[i]])
                table.links[slot] = tuple(str(n) for n in dict.fromkeys(lists[i]) if n != own)
                self._set[(slot, LINKS)] = int(rows[i])
            for row in rows.tolist():
                changed[row].add(LINKS)
        if data_rows:
            self._data_columns(
                table, slots, semantic, np.concatenate(data_rows), np.concatenate(data_first),
                np.concatenate(data_full), data_lists, changed,
            )  # fmt: skip
        units = np.stack([head["x"], head["y"], head["z"]], axis=1).astype(np.float64)
        self._publish(slots, times, units, changed, receive_time)

    def _data_columns(
        self,
        table: SourceTable,
        slots: npt.NDArray[np.intp],
        semantic: npt.NDArray[np.intp],
        rows: npt.NDArray[np.intp],
        first: FloatArray,
        full: npt.NDArray[np.bool_],
        lists: dict[int, tuple[list[Any], str | list[str]]],
        changed: list[set[str]],
    ) -> None:
        """Data packets (`rows`): per node and semantic type, the last packet's values are its
        attribute and the first value of the last non-empty one (`full`) its telemetry."""
        key = slots[rows] * 256 + semantic[rows]
        attributes = table.attributes
        for sem in np.unique(semantic[rows]).tolist():
            rule = self.profile.rule(sem)
            name = (rule.name if rule else None) or f"data.{sem}"
            mine = semantic[rows] == sem
            these, their_first, their_key = rows[mine], first[mine], key[mine]
            has = full[mine]
            if has.any():
                column = table.column(name, rule.unit if rule else COUNT)
                last = _last_per_key(their_key[has], these[has])
                column[slots[these[has][last]]] = their_first[has][last]
            for i in _last_per_key(their_key, these).tolist():
                row = int(these[i])
                values, kind = lists[row]
                mine_now = attributes[int(slots[row])]
                mine_now[name] = values
                mine_now.setdefault(VALUE_TYPES, {})[name] = kind
                self._set[(int(slots[row]), name)] = row
            for row, has_value in zip(these.tolist(), has.tolist(), strict=True):
                changed[row].add(ATTRIBUTES)
                if has_value:
                    changed[row].add(name)

    def _apply_one(
        self,
        table: SourceTable,
        slot: int,
        row: int,
        packet: Packet,
        time: float,
        receive_time: float,
        changed: set[str],
    ) -> None:
        """What one typed packet (batch row `row`) writes into its node's row (fields named in
        `changed`)."""
        match packet:
            case NeighborhoodPacket():
                own = packet.sender
                table.links[slot] = tuple(
                    str(n) for n in dict.fromkeys(packet.neighbors) if n != own
                )
                changed.add(LINKS)
                self._set[(slot, LINKS)] = row
                return
            case DataPacket():
                kind = DTYPES[packet.syntax_type].name
                key = self._data(table, slot, packet.semantic_type, packet.values, changed, kind)
            case VariableListPacket():
                kinds = [DTYPES[tag].name for tag, _ in packet.items]
                key = self._data(table, slot, packet.semantic_type, packet.values, changed, kinds)
            case StdPacket():
                key = f"raw.{packet.semantic_type}"
                table.attributes[slot][key] = packet.payload.hex()
            case NodeLinkPacket():
                key = f"link.{packet.semantic_type}"
                link = {"to": str(packet.destination), "values": list(packet.values)}
                table.attributes[slot][key] = link
            case CoordinatesList2Packet() | CoordinatesList3Packet():
                key = f"polyline.{packet.semantic_type}"
                points = np.zeros((len(packet.points), 3))
                if packet.points:
                    points[:, : len(packet.points[0])] = packet.points
                table.attributes[slot][key] = np.round(self.frame.to_enu(points), 6).tolist()
            case TrajectoryPacket2() | TrajectoryPacket3():
                self._starts.append((time, packet))
                return
            case _:
                return
        changed.add(ATTRIBUTES)
        self._set[(slot, key)] = row

    def _publish(
        self,
        slots: npt.NDArray[np.intp],
        times: FloatArray,
        units: FloatArray,
        changed: list[set[str]],
        receive_time: float,
    ) -> None:
        """The batch's packets as world updates, in time order: one per time and set of
        changed fields (the usual batch, one time: one update per set of fields), with the
        header positions and fields of the packets of that time, so that every-update
        subscribers get each packet with its own time (a SpyGlass relay sends each again as it
        came), in order even if they take the updates a few at a time. The columns already
        hold the batch's last values; `PACKET_TIMES` says, for each attribute and the links,
        the time of the packet whose value they hold (as the world has it, once written)."""
        self._clock_offset = float(times[-1]) - receive_time
        positions = self.frame.to_enu(units)
        at = times.tolist()
        moments: dict[tuple[int, float], int] = {}  # (slot, time) -> its row (the last)
        fields: dict[int, set[str]] = {}
        for row, (slot, time) in enumerate(zip(slots.tolist(), at, strict=True)):
            last = moments.pop((slot, time), None)
            moments[(slot, time)] = row
            fields[row] = changed[row] if last is None else fields.pop(last) | changed[row]
        keys: dict[int, list[str]] = {}  # a moment's row -> the keys its packets set last
        for (slot, key), row in self._set.items():
            keys.setdefault(moments[(slot, at[row])], []).append(key)
        self._set.clear()
        rows = np.fromiter(moments.values(), dtype=np.intp, count=len(moments))
        rows.sort()
        groups: dict[tuple[float, frozenset[str]], list[int]] = {}
        for row in rows[np.argsort(times[rows], kind="stable")].tolist():
            groups.setdefault((at[row], frozenset(fields[row])), []).append(row)
        table = self.world.table(self.source)
        starts = sorted(self._starts, key=lambda start: start[0], reverse=True)  # (pop: oldest)
        self._starts.clear()
        for (time, group), members in groups.items():
            while starts and starts[-1][0] <= time:  # (each at its packet's time: a group's)
                start, packet = starts.pop()
                self._start_motion(packet, start, receive_time)
            index = np.array(members, dtype=np.intp)
            self.world.update(
                self.source,
                slots[index],
                receive_time=receive_time,
                source_time=times[index],
                position=positions[index],
                changed=group,
            )
            for row in members:
                if row in keys:
                    slot = int(slots[row])
                    stamps = table.attributes[slot].setdefault(PACKET_TIMES, {})
                    stamps.update(dict.fromkeys(keys[row], float(table.source_time[slot])))

    def _data(
        self,
        table: SourceTable,
        slot: int,
        semantic: int,
        values: Iterable[float],
        changed: set[str],
        kind: str | list[str],
    ) -> str:
        """A data packet's values into `slot`'s telemetry and attributes; the attribute's name."""
        rule = self.profile.rule(semantic)
        name = (rule.name if rule else None) or f"data.{semantic}"
        values = list(values)
        if values:
            table.column(name, rule.unit if rule else COUNT)[slot] = float(values[0])
            changed.add(name)
        attributes = table.attributes[slot]
        attributes[name] = values
        # the number type the values came as ("uint8"; a list for a variable list)
        attributes.setdefault(VALUE_TYPES, {})[name] = kind
        changed.add(ATTRIBUTES)
        return name

    def _start_motion(
        self,
        packet: TrajectoryPacket2 | TrajectoryPacket3,
        start: float,
        receive_time: float,
    ) -> None:
        points = np.zeros((len(packet.points), 3))
        points[:, : len(packet.points[0])] = packet.points
        points = self.frame.to_enu(points)
        world = self.world
        times = start + np.concatenate(([0.0], np.cumsum(packet.durations, dtype=np.float64)))
        device = object_id(packet.sender, packet.semantic_type)
        slot = world.table(self.source).slot(
            device, OBJECT_KIND, f"object {packet.semantic_type} of node {packet.sender}"
        )
        motion = _Motion(slot, points, times)
        self._motions[(packet.sender, packet.semantic_type)] = motion
        position, velocity = _locate(motion, start + 0.0)
        world.update_device(
            self.source,
            device,
            receive_time=receive_time,
            kind=OBJECT_KIND,
            source_time=start,
            position=position.tolist(),
            velocity=velocity.tolist(),
            attributes={
                "path": np.round(points, 6).tolist(),
                "durations": list(packet.durations),
                "sender": str(packet.sender),
                "sender_position": self.frame.to_enu(np.array([packet.position]))[0].tolist(),
            },
        )

    def advance(self, now: float) -> int:
        """Move every trajectory object to where it is at `now` (Unix seconds, the receive
        clock); returns how many objects were written. Objects stay at their last point."""
        if not self._motions:
            return 0
        source_now = now + self._clock_offset
        motions = list(self._motions.values())
        located = [_locate(m, source_now) for m in motions]
        self.world.update(
            self.source,
            np.array([m.slot for m in motions], dtype=np.intp),
            receive_time=now,
            position=np.array([p for p, _ in located]),
            velocity=np.array([v for _, v in located]),
        )
        return len(motions)

    @property
    def objects(self) -> int:
        return len(self._motions)


def _last_per_key(keys: npt.NDArray[np.intp], rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Indices (into `keys`) of the latest row (largest of `rows`) of each distinct key."""
    order = np.argsort(rows, kind="stable")
    _, first_from_end = np.unique(keys[order][::-1], return_index=True)
    return order[len(order) - 1 - first_from_end]


def _data_packet(
    semantic: int, values: Any, kind: str | list[str], head: dict[str, Any]
) -> DataPacket | VariableListPacket:
    """A data packet of `values` in the number types they came as."""
    if isinstance(kind, list):
        items = tuple((_SYNTAX[k], v) for k, v in zip(kind, values, strict=True))
        return VariableListPacket(semantic_type=semantic, items=items, **head)
    return DataPacket(
        semantic_type=semantic, syntax_type=_SYNTAX[kind], values=tuple(values), **head
    )


_SYNTAX = {dtype.name: SyntaxType(code) for code, dtype in DTYPES.items()}


def _locate(motion: _Motion, when: float) -> tuple[FloatArray, FloatArray]:
    """Position and velocity (ENU) of a trajectory object at source time `when`."""
    times, points = motion.times, motion.points
    if when <= times[0]:
        return points[0].copy(), np.zeros(3)
    if when >= times[-1]:
        return points[-1].copy(), np.zeros(3)
    leg = int(np.searchsorted(times, when, side="right")) - 1
    span = times[leg + 1] - times[leg]
    if span <= 0:  # a zero-duration leg is a jump
        return points[leg + 1].copy(), np.zeros(3)
    fraction = (when - times[leg]) / span
    delta = points[leg + 1] - points[leg]
    return points[leg] + fraction * delta, delta / span


# -- world -> wire ---------------------------------------------------------------------------


class NodeNumbers:
    """World devices -> SpyGlass node ids (uint16), through `SinkNames`: a SpyGlass node keeps
    its id; another device whose id is a free number keeps it too; the rest get the highest
    free number (counting down from 65535, away from the small ids real nodes use, so that a
    device like a trajectory object "1:40" never takes the number a node "1" numbered later
    needs). None when every number is taken."""

    def __init__(self) -> None:
        self.names = SinkNames("spyglass", self._foreign, where="spyglass serve")
        self._next = 0xFFFF

    def _foreign(self, name: str) -> str:
        if name.isdecimal() and int(name) <= 0xFFFF and not self.names.taken(name):
            return name
        while self._next >= 0 and self.names.taken(str(self._next)):
            self._next -= 1
        return str(self._next)  # "-1": none left

    def __call__(self, table: SourceTable, slot: int) -> int | None:
        name = self.names.name(table, slot)
        number = int(name) if name.isdecimal() else -1
        return number if 0 <= number <= 0xFFFF else None

    def of(self, table: SourceTable, device_id: str) -> int | None:
        """The number of `table`'s device `device_id`; a link to a node never heard from is
        its number (None: not a number, or none left)."""
        slot = table.index.get(device_id)
        if slot is not None:
            return self(table, slot)
        return int(device_id) if device_id.isdecimal() and int(device_id) <= 0xFFFF else None


class SemanticTypes:
    """Telemetry names -> semantic types for data packets: the profile's own entries first,
    then `data.N` names (what the SpyGlass adapter writes) as N, then free numbers from 100."""

    def __init__(self, profile: SemanticProfile) -> None:
        self._types: dict[str, int | None] = {}
        self._used: set[int] = set()
        for code in range(256):
            rule = profile.rule(code)
            if rule is None:
                continue
            self._used.add(code)
            if rule.interpretation is Interpretation.DATA and rule.name:
                self._types.setdefault(rule.name, code)
        self._next = FIRST_FREE_SEMANTIC

    def __call__(self, name: str) -> int | None:
        if name in self._types:
            return self._types[name]
        match = re.fullmatch(r"data\.(\d{1,3})", name)
        code: int | None = int(match.group(1)) if match else None
        if code is None or code > 255:
            while self._next in self._used:
                self._next += 1
            code = self._next if self._next <= 255 else None
        if code is not None:
            self._used.add(code)
        self._types[name] = code
        return code


_NOT_PACKETS = frozenset({VALUE_TYPES, PACKET_TIMES})  # attributes that say of the others


class WorldEncoder:
    """World updates -> encoded SpyGlass packets (what `SpyglassSink` serves).

    A changed position or links (or a change with nothing else to say) give a neighbourhood
    packet; each changed telemetry value a float data packet. Headers carry the device's
    position in SpyGlass units (`frame`) and its source time (else its receive time).
    """

    def __init__(self, *, profile: SemanticProfile = DEFAULT_PROFILE, frame: Frame | None = None):
        self.frame = frame or Frame.of()
        self.numbers = NodeNumbers()
        self.semantic_types = SemanticTypes(profile)
        self._sent: dict[tuple[str, int], dict[str, object]] = {}  # what `_native` last sent
        self.superseded = 0  # packets not sent: a newer one of the same had come (`_native`)

    def snapshot(self, world: World) -> list[bytes]:
        """Every device's latest state (what a viewer that just connected gets first)."""
        out: list[bytes] = []
        for source, table in list(world.tables.items()):
            if len(table):
                slots = np.arange(len(table))
                if self.numbers.names.native(table):
                    out += self._native(table, slots, fresh=True)
                    continue
                everything = frozenset({"position", LINKS, *table.telemetry})
                out += self.update(world, Update(source, slots, everything, 0.0))
        return out

    def _native(
        self,
        table: SourceTable,
        slots: npt.NDArray[np.intp],
        times: FloatArray | None = None,
        positions: FloatArray | None = None,
        *,
        fields: frozenset[str] = frozenset(),
        fresh: bool = False,
    ) -> list[bytes]:
        """A SpyGlass source's devices: each packet it received again, in its own syntax and
        semantic type, with its header time; only what is new: a neighbourhood where the update
        changed `LINKS` (an update of every update: its slots all had one), other packets where
        the adapter wrote a new object since the last call; with `fresh` everything (a new
        viewer).
        Trajectory objects go out as their trajectory packet, not as nodes. `times` and
        `positions` are the update's own (a queue of every update), else the table's.

        Each packet goes out with its own time (`PACKET_TIMES`): an attribute a later packet
        set goes out with that packet's update, and when the links or every attribute of an
        update's packets were replaced by newer ones before it got here (the source wrote
        faster than the sink took them), they are not sent again as of that time: such a
        packet is superseded, counted in `superseded` (at least one per node and time)."""
        out: list[tuple[float, bytes]] = []
        heads = self.frame.to_units(table.position[slots] if positions is None else positions)
        for row, slot in enumerate(slots.tolist()):
            sent = self._sent.setdefault((table.source, slot), {})
            attributes = table.attributes[slot]

            def new(key: str, value: object, sent: dict[str, object] = sent) -> bool:
                if fresh:
                    return True
                changed = sent.get(key) is not value
                sent[key] = value
                return changed

            time = float(table.source_time[slot] if times is None else times[row])
            time = float(table.receive_time[slot]) if math.isnan(time) else time
            stamps = {} if fresh else attributes.get(PACKET_TIMES, {})
            seconds, millis = time_fields(time)
            if table.kinds[slot] == OBJECT_KIND:
                path = attributes.get("path")
                if path is not None and new("path", path):
                    packet = self._trajectory(table, table.ids[slot], attributes, seconds, millis)
                    if packet is not None:
                        out.append((time, encode(packet)))
                continue
            sender = self.numbers(table, slot)
            if sender is None:
                continue
            x, y, z = heads[row].tolist()
            head = dict(sender=sender, seconds=seconds, milliseconds=millis, x=x, y=y, z=z)
            packets: list[Packet] = []
            links = table.links[slot]
            if stamps.get(LINKS, time) > time:  # (with LINKS in `fields`: superseded)
                self.superseded += LINKS in fields
            elif LINKS in fields or (fresh and links):
                neighbors = tuple(
                    n for link in links if (n := self.numbers.of(table, link)) is not None
                )
                packets.append(
                    NeighborhoodPacket(semantic_type=NEIGHBORHOOD, neighbors=neighbors, **head)
                )
            types = attributes.get(VALUE_TYPES, {})
            for key, value in attributes.items():
                if key in _NOT_PACKETS or stamps.get(key, time) > time or not new(key, value):
                    continue  # (a later packet's value goes out with that packet)
                packet = self._attribute(table, key, value, types, head)
                if packet is not None:
                    packets.append(packet)
            if ATTRIBUTES in fields and stamps:  # no attribute left of this time: superseded
                self.superseded += all(t != time for k, t in stamps.items() if k != LINKS)
            out += [(time, encode(packet)) for packet in packets]
        out.sort(key=lambda item: item[0])  # a pull holds many nodes: their packets in time order
        return [packet for _, packet in out]

    def _attribute(
        self,
        table: SourceTable,
        key: str,
        value: Any,
        types: Mapping[str, Any],
        head: dict[str, Any],
    ) -> Packet | None:
        """The packet a SpyGlass device's attribute `key` came from (a data value of its own
        syntax, a raw packet, a node link or a polyline), with header `head`; None for an
        attribute that is none of those."""
        kind, _, number = key.rpartition(".")
        semantic = int(number) if number.isdecimal() else self.semantic_types(key)
        if semantic is None:
            return None
        if key in types:
            return _data_packet(semantic, value, types[key], head)
        if kind == "raw":
            return StdPacket(semantic_type=semantic, payload=bytes.fromhex(value), **head)
        if kind == "link":
            to = self.numbers.of(table, value["to"])
            if to is None:
                return None
            values = tuple(value["values"])
            return NodeLinkPacket(semantic_type=semantic, destination=to, values=values, **head)
        if kind != "polyline":
            return None
        return polyline_packet(self.frame, semantic, value, head)

    def _trajectory(
        self,
        table: SourceTable,
        device_id: str,
        attributes: dict[str, Any],
        seconds: int,
        millis: int,
    ) -> Packet | None:
        """A trajectory object's packet again: its path, durations, sender and semantic type."""
        sender_id, _, semantic = device_id.rpartition(":")
        sender = self.numbers.of(table, str(attributes.get("sender", sender_id)))
        if sender is None or not semantic.isdecimal():
            return None
        x, y, z = self.frame.to_units([attributes.get("sender_position", (0.0, 0.0, 0.0))])[
            0
        ].tolist()
        head = dict(sender=sender, seconds=seconds, milliseconds=millis, x=x, y=y, z=z)
        path, durations = attributes["path"], attributes["durations"]
        return trajectory_packet(self.frame, int(semantic), path, durations, head)

    def update(self, world: World, update: Update) -> list[bytes]:
        """The packets that say what `update` changed."""
        table = world.tables.get(update.source)
        if table is None or not len(update):
            return []
        slots = update.slots
        values = update.values
        fields = update.fields
        if self.numbers.names.native(table):
            return self._native(
                table, slots, values.get(SOURCE_TIME), values.get(POSITION), fields=fields
            )
        senders = np.array(
            [n if (n := self.numbers(table, slot)) is not None else -1 for slot in slots.tolist()],
            dtype=np.int64,
        )
        keep = senders >= 0
        positions = values.get(POSITION)
        if positions is None:
            positions = table.position[slots]
        times = values.get(SOURCE_TIME)
        if times is None:
            times = table.source_time[slots]
        times = np.where(np.isnan(times), table.receive_time[slots], times)
        headers = packet_heads(self.frame, senders, times, positions)
        telemetry = [
            (name, code)
            for name in sorted(fields & table.telemetry.keys())
            if (code := self.semantic_types(name)) is not None
        ]
        out: list[bytes] = []
        if POSITION in fields or LINKS in fields or not telemetry:
            out += self._neighborhoods(update.source, table, slots, headers, keep)
        for name, code in telemetry:  # one float data packet per device, all in one buffer
            column = values.get(name)
            data = column if column is not None else table.telemetry[name][slots]
            rows = keep & ~np.isnan(data)
            packets = headers[rows]
            packets["length"] = FLOAT_PACKET_DTYPE.itemsize - 2
            packets["syntax"] = SyntaxType.FLOAT_LIST
            packets["semantic"] = code
            with np.errstate(over="ignore"):  # past float32: inf, as a peer would send it
                packets["value"] = data[rows]
            out += [bytes(row) for row in packets.view(f"V{FLOAT_PACKET_DTYPE.itemsize}")]
        return out

    def _neighborhoods(
        self,
        source: str,
        table: SourceTable,
        slots: npt.NDArray[np.intp],
        headers: npt.NDArray[Any],
        keep: npt.NDArray[np.bool_],
    ) -> list[bytes]:
        """A neighbourhood packet per device: its links that are nodes too."""
        rows = np.flatnonzero(keep)
        neighbors = [
            [
                n
                for link in table.links[int(slots[row])]
                if (n := self.numbers.of(table, link)) is not None
            ]
            for row in rows.tolist()
        ]
        return neighborhood_packets(headers[rows], neighbors)


# -- the packets, from columns in world units: what the sink says of the world and the simulator
# of its model (`model.Reports`) -------------------------------------------------------------


def packet_heads(
    frame: Frame, senders: npt.NDArray[Any], times: FloatArray, positions: FloatArray
) -> npt.NDArray[Any]:
    """The header columns (a `FLOAT_PACKET_DTYPE` array, payload left 0) of packets from node
    ids `senders` at Unix `times` (s; to the millisecond, half to even like `time_fields`) at
    ENU `positions` (m, in SpyGlass units through `frame`)."""
    millis = np.round(times * 1000.0)
    headers = np.zeros(len(senders), dtype=FLOAT_PACKET_DTYPE)
    headers["version"] = VERSION
    headers["sender"] = senders
    headers["seconds"] = millis // 1000
    headers["ms"] = millis % 1000
    units = frame.to_units(positions)
    headers["x"], headers["y"], headers["z"] = units[:, 0], units[:, 1], units[:, 2]
    return headers


def _head_fields(headers: npt.NDArray[Any]) -> list[dict[str, int]]:
    """The header columns as the typed packets' keyword arguments, one dict per row."""
    rows = headers[["sender", "seconds", "ms", "x", "y", "z"]].tolist()
    keys = ("sender", "seconds", "milliseconds", "x", "y", "z")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def neighborhood_packets(
    headers: npt.NDArray[Any], neighbors: Sequence[Sequence[int]]
) -> list[bytes]:
    """A neighbourhood packet per header row, listing that row's `neighbors` (node ids)."""
    out = []
    heads = headers[["sender", "seconds", "ms", "x", "y", "z"]].tolist()
    for (sender, seconds, millis, x, y, z), nodes in zip(heads, neighbors, strict=True):
        head = HEADER.pack(
            HEADER_SIZE - 2 + 2 * len(nodes),
            VERSION,
            SyntaxType.UINT16_LIST,
            NEIGHBORHOOD,
            sender,
            seconds,
            millis,
            x,
            y,
            z,
        )
        out.append(head + struct.pack(f">{len(nodes)}H", *nodes))
    return out


def polyline_packet(
    frame: Frame, semantic: int, points: Any, head: dict[str, Any]
) -> CoordinatesList2Packet | CoordinatesList3Packet:
    """A coordinates list of ENU `points` (m): 2-D where every point is at z = 0 in units."""
    units = frame.to_units(np.asarray(points, dtype=np.float64).reshape(-1, 3))
    if units[:, 2].any():
        triples = tuple(map(tuple, units.tolist()))
        return CoordinatesList3Packet(semantic_type=semantic, points=triples, **head)
    pairs = tuple((p[0], p[1]) for p in units.tolist())
    return CoordinatesList2Packet(semantic_type=semantic, points=pairs, **head)


def trajectory_packet(
    frame: Frame, semantic: int, path: Any, durations: Any, head: dict[str, Any]
) -> TrajectoryPacket2 | TrajectoryPacket3:
    """A trajectory along ENU `path` (m), `durations` (s) per leg: 2-D where every point is at
    z = 0 in units."""
    points = frame.to_units(np.asarray(path, dtype=np.float64))
    legs = tuple(int(d) for d in durations)
    if points[:, 2].any():
        triples = tuple(map(tuple, points.tolist()))
        return TrajectoryPacket3(semantic_type=semantic, points=triples, durations=legs, **head)
    pairs = tuple((p[0], p[1]) for p in points.tolist())
    return TrajectoryPacket2(semantic_type=semantic, points=pairs, durations=legs, **head)


def quantised(values: Any, number_type: str) -> list[Any]:
    """Values in a list syntax's number type (`DTYPES` names): integers rounded half to even
    and clipped to the type's range; floats as they are."""
    dtype = np.dtype(number_type)
    array = np.asarray(values, dtype=np.float64)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        array = np.clip(np.rint(array), info.min, info.max)
    out: list[Any] = array.astype(dtype).tolist()
    return out


SIM_FRAME = Frame.of()  # the simulator's nodes: 1 unit = 1 m
READINGS = ("uint8", DATA)  # the simulator's temperature readings: whole degC, one byte


def network_packets(reports: Reports, frame: Frame = SIM_FRAME) -> list[bytes]:
    """The simulator's reports (`model.Reports`, world units) as SpyGlass packets, in the
    order the model gives them: neighbourhoods, readings, trajectories, bounding box."""
    times = np.full(len(reports.ids), reports.time)
    heads = packet_heads(frame, reports.ids, times, reports.positions)
    rows, neighbors = reports.neighborhoods
    out = neighborhood_packets(heads[rows], neighbors)
    rows, readings = reports.readings
    number_type, semantic = READINGS
    values = quantised(readings, number_type)
    out += [
        encode(_data_packet(semantic, (value,), number_type, head))
        for head, value in zip(_head_fields(heads[rows]), values, strict=True)
    ]
    for trajectory in reports.trajectories:
        (head,) = _head_fields(heads[[trajectory.reporter]])
        path, legs = trajectory.path, trajectory.durations
        out.append(encode(trajectory_packet(frame, TRAJECTORY, path, legs, head)))
    if reports.box is not None:
        (head,) = _head_fields(heads[[-1]])
        out.append(encode(polyline_packet(frame, COORDINATES, reports.box, head)))
    return out
