"""SpyGlass packets -> world-model updates.

What becomes what:
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
  along the trajectory starting at the packet's time; `advance(world, now)` moves it on.

Frame: SpyGlass coordinates are unitless int16s. By default 1 unit = 1 metre with x East,
y North, z Up (ENU); `scale` (metres per unit, per axis) and `offset` (metres, added after
scaling) change that, like SpyGlass's own "metrics" settings. Payload coordinates (polylines,
trajectories) are converted the same way as header positions, so that they share one frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.errors import ConfigError
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    CoordinatesList2Packet,
    CoordinatesList3Packet,
    DataPacket,
    NeighborhoodPacket,
    NodeLinkPacket,
    Packet,
    SemanticProfile,
    StdPacket,
    TrajectoryPacket2,
    TrajectoryPacket3,
    VariableListPacket,
)
from robowire.protocols.spyglass.session import PacketReceived, profile_option
from robowire.units import COUNT
from robowire.world import SourceTable, World
from robowire.world.model import ATTRIBUTES, LINKS

NODE_KIND = "sensor_node"
OBJECT_KIND = "object"
FloatArray = npt.NDArray[np.float64]


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
    """Writes SpyGlass packets of one source into a `World` (see module docstring)."""

    def __init__(
        self,
        source: str,
        *,
        profile: SemanticProfile = DEFAULT_PROFILE,
        scale: float | Sequence[float] = 1.0,
        offset: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> None:
        self.source = source
        self.profile = profile
        self.scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,)).copy()
        self.offset = np.asarray(offset, dtype=np.float64).reshape(3)
        self._motions: dict[tuple[int, int], _Motion] = {}
        self._clock_offset = 0.0  # source time - receive time, from the latest packet
        self._node_slots: dict[int, int] = {}
        self._table: SourceTable | None = None

    @classmethod
    def from_options(cls, source: str, options: Mapping[str, str]) -> SpyglassAdapter:
        """From URL options: `scale` ("0.1" or "sx,sy,sz" metres per unit), `offset`
        ("x,y,z" metres), `profile` (see `SemanticProfile.parse`). Others are ignored."""
        try:
            scale = [float(v) for v in options.get("scale", "1").split(",")]
            offset = [float(v) for v in options.get("offset", "0,0,0").split(",")]
            if len(scale) not in (1, 3) or len(offset) != 3:
                raise ValueError("scale takes 1 or 3 numbers, offset 3")
        except ValueError as exc:
            raise ConfigError(f"spyglass: bad scale/offset option: {exc}") from None
        return cls(source, profile=profile_option(options), scale=scale, offset=offset)

    def to_enu(self, units: Any) -> FloatArray:
        """SpyGlass units (..., 3) -> ENU metres."""
        return np.asarray(units, dtype=np.float64) * self.scale + self.offset

    def _slot(self, table: SourceTable, sender: int) -> int:
        if table is not self._table:
            self._table, self._node_slots = table, {}
        slot = self._node_slots.get(sender)
        if slot is None:
            slot = self._node_slots[sender] = table.slot(str(sender), NODE_KIND)
        return slot

    def apply(self, world: World, packets: Sequence[Packet], receive_time: float) -> None:
        """Write a batch of packets received at `receive_time` (Unix seconds): one world update
        per set of changed fields (nodes that sent the same kinds of packet share one), plus
        one per trajectory object."""
        if not packets:
            return
        table = world.table(self.source)
        slots = np.fromiter((self._slot(table, p.sender) for p in packets), np.intp, len(packets))
        heads = np.array([(p.x, p.y, p.z, p.seconds, p.milliseconds) for p in packets], np.float64)
        times = heads[:, 3] + heads[:, 4] / 1000.0
        positions = self.to_enu(heads[:, :3])
        self._clock_offset = float(times[-1]) - receive_time
        changed_by_slot: dict[int, set[str]] = {}
        for i, packet in enumerate(packets):
            slot = int(slots[i])
            changed = changed_by_slot.setdefault(slot, set())
            match packet:
                case NeighborhoodPacket():
                    own = packet.sender
                    table.links[slot] = tuple(
                        str(n) for n in dict.fromkeys(packet.neighbors) if n != own
                    )
                    changed.add(LINKS)
                case DataPacket() | VariableListPacket():
                    self._data(table, slot, packet.semantic_type, packet.values, changed)
                case StdPacket():
                    table.attributes[slot][f"raw.{packet.semantic_type}"] = packet.payload.hex()
                    changed.add(ATTRIBUTES)
                case NodeLinkPacket():
                    link = {"to": str(packet.destination), "values": list(packet.values)}
                    table.attributes[slot][f"link.{packet.semantic_type}"] = link
                    changed.add(ATTRIBUTES)
                case CoordinatesList2Packet() | CoordinatesList3Packet():
                    points = np.zeros((len(packet.points), 3))
                    if packet.points:
                        points[:, : len(packet.points[0])] = packet.points
                    polyline = np.round(self.to_enu(points), 6).tolist()
                    table.attributes[slot][f"polyline.{packet.semantic_type}"] = polyline
                    changed.add(ATTRIBUTES)
                case TrajectoryPacket2() | TrajectoryPacket3():
                    self._start_motion(world, packet, float(times[i]), receive_time)
        # Last packet of each node wins: keep only the last index per slot.
        _, first_from_end = np.unique(slots[::-1], return_index=True)
        last = len(slots) - 1 - first_from_end
        groups: dict[frozenset[str], list[int]] = {}
        for i in last.tolist():
            groups.setdefault(frozenset(changed_by_slot[int(slots[i])]), []).append(i)
        for fields, rows in groups.items():
            index = np.array(rows, dtype=np.intp)
            world.update(
                self.source,
                slots[index],
                receive_time=receive_time,
                source_time=times[index],
                position=positions[index],
                changed=fields,
            )

    def apply_events(self, world: World, events: Iterable[object], receive_time: float) -> int:
        """Apply the packets of a session's events (PacketReceived); returns how many."""
        packets = [e.packet for e in events if isinstance(e, PacketReceived)]
        self.apply(world, packets, receive_time)
        return len(packets)

    def _data(
        self,
        table: SourceTable,
        slot: int,
        semantic: int,
        values: Iterable[float],
        changed: set[str],
    ) -> None:
        rule = self.profile.rule(semantic)
        name = (rule.name if rule else None) or f"data.{semantic}"
        values = list(values)
        if values:
            table.column(name, rule.unit if rule else COUNT)[slot] = float(values[0])
            changed.add(name)
        table.attributes[slot][name] = values
        changed.add(ATTRIBUTES)

    def _start_motion(
        self,
        world: World,
        packet: TrajectoryPacket2 | TrajectoryPacket3,
        start: float,
        receive_time: float,
    ) -> None:
        points = np.zeros((len(packet.points), 3))
        points[:, : len(packet.points[0])] = packet.points
        points = self.to_enu(points)
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
            },
        )

    def advance(self, world: World, now: float) -> int:
        """Move every trajectory object to where it is at `now` (Unix seconds, the receive
        clock); returns how many objects were written. Objects stay at their last point."""
        if not self._motions:
            return 0
        source_now = now + self._clock_offset
        motions = list(self._motions.values())
        located = [_locate(m, source_now) for m in motions]
        world.update(
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
