"""UgCS adapters: the world -> VSM telemetry direction (`WorldVehicles`, the serve sink's), and
the UCS -> world direction (the listen source's, below it).

World -> VSM: every world device becomes a UgCS vehicle of one `VsmSession`. Position from the
device's geodetic column (degrees -> radians on the wire) or, without one, from its ENU position
and a configurable origin (pymap3d `enu2geodetic`); heading from its orientation (ENU yaw,
counter-clockwise from east -> UgCS heading, clockwise from north, 0..2pi); ground speed,
course and vertical speed from its velocity; any world telemetry column whose name is a UgCS
field name (`main_voltage`, `remaining_power_level`, ...) as it is. Devices new in one update
are registered together as one `DeviceGroup`; values are written as columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pymap3d

from robowire.protocols.ugcs import model
from robowire.protocols.ugcs.session_vsm import VsmSession
from robowire.protocols.ugcs.vehicle import vehicle_spec
from robowire.world import LogEvent, Update, World
from robowire.world.table import SourceTable

__all__ = ["DEFAULT_ORIGIN", "WorldVehicles", "heading_of_quaternions"]

DEFAULT_ORIGIN = (56.9496, 24.1052, 10.0)
"""Where ENU devices are placed without `?origin=` (lat deg, lon deg, alt m): the simulator's."""

FloatArray = npt.NDArray[np.float64]
_FIELD_NAMES = frozenset(model.FIELD_NAMES)


def heading_of_quaternions(q: FloatArray) -> FloatArray:
    """UgCS headings (radians clockwise from north, 0..2pi) of ENU orientations (w, x, y, z)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))  # from east, CCW
    return np.mod(math.pi / 2 - yaw, math.tau)


class WorldVehicles:
    """World devices -> vehicles of `session` (see the module docstring)."""

    def __init__(
        self,
        session: VsmSession,
        *,
        origin: tuple[float, float, float] = DEFAULT_ORIGIN,
        name: str = "robowire",
    ) -> None:
        self.session = session
        self.origin = origin
        self.name = name
        # per source: slot -> device group index and row (-1: not registered yet)
        self._group: dict[str, npt.NDArray[np.intp]] = {}
        self._row: dict[str, npt.NDArray[np.intp]] = {}

    def vehicles(self) -> int:
        return sum(len(g) for g in self.session.groups)

    def write(self, world: World, items: Sequence[Update | LogEvent], wall_ms: int) -> None:
        for item in items:
            if isinstance(item, Update) and len(item.slots):
                table = world.tables.get(item.source)
                if table is not None:
                    self._update(table, item, wall_ms)

    def _slots(self, table: SourceTable, slots: npt.NDArray[np.intp], wall_ms: int) -> None:
        """Register the slots seen for the first time, as one group."""
        source = table.source
        groups = self._group.get(source, np.zeros(0, dtype=np.intp))
        top = int(slots.max()) + 1
        if top > len(groups):
            grown = np.full(max(top, 2 * len(groups)), -1, dtype=np.intp)
            grown[: len(groups)] = groups
            rows = np.full(len(grown), -1, dtype=np.intp)
            rows[: len(groups)] = self._row.get(source, np.zeros(0, dtype=np.intp))
            self._group[source], self._row[source] = grown, rows
        groups, rows = self._group[source], self._row[source]
        new = np.unique(slots[groups[slots] < 0])
        if not len(new):
            return
        specs = [
            vehicle_spec(
                f"{source}/{table.ids[s]}",
                name=table.names[s] or table.ids[s],
                commands=(),
                autopilot_type="robowire",
                port_name=source,
                camera=False,
                gimbal=False,
            )
            for s in new.tolist()
        ]
        self.session.register_group(specs, wall_ms)
        index = len(self.session.groups) - 1
        groups[new] = index
        rows[new] = np.arange(len(new))
        group = self.session.groups[index]
        n = len(new)
        group.update(
            {
                "gps_fix": np.full(n, 2.0),  # GPS_FIX_TYPE_3D: the world's positions are fixes
                "downlink_present": np.ones(n),
                "uplink_present": np.ones(n),
            },
            wall_ms,
        )

    def _update(self, table: SourceTable, update: Update, wall_ms: int) -> None:
        slots = update.slots
        self._slots(table, slots, wall_ms)
        groups = self._group[table.source][slots]
        rows = self._row[table.source][slots]
        columns = self._columns(table, slots, update.fields)
        if not columns:
            return
        for index in np.unique(groups).tolist():
            mine = groups == index
            self.session.groups[index].update(
                {k: v[mine] for k, v in columns.items()}, wall_ms, rows=rows[mine]
            )

    def _columns(
        self, table: SourceTable, slots: npt.NDArray[np.intp], fields: frozenset[str]
    ) -> dict[str, FloatArray]:
        out: dict[str, FloatArray] = {}
        if "geodetic" in fields or "position" in fields:
            geo = table.geodetic[slots]
            lat, lon, alt = geo[:, 0].copy(), geo[:, 1].copy(), geo[:, 2].copy()
            missing = np.isnan(lat) | np.isnan(lon)
            if missing.any():
                enu = table.position[slots][missing]
                la, lo, al = pymap3d.enu2geodetic(
                    enu[:, 0], enu[:, 1], enu[:, 2], *self.origin, deg=True
                )
                lat[missing], lon[missing] = la, lo
                alt[missing] = al
            out["latitude"] = np.radians(lat)
            out["longitude"] = np.radians(lon)
            out["altitude_amsl"] = alt
            out["altitude_raw"] = alt - self.origin[2]
        if "orientation" in fields:
            heading = heading_of_quaternions(table.orientation[slots])
            out["heading"] = np.where(table.has_orientation[slots], heading, np.nan)
        if "velocity" in fields:
            v = table.velocity[slots]
            out["ground_speed"] = np.hypot(v[:, 0], v[:, 1])
            out["vertical_speed"] = v[:, 2].copy()
            out["course"] = np.mod(np.arctan2(v[:, 0], v[:, 1]), math.tau)
        for name in fields & _FIELD_NAMES:
            column = table.telemetry.get(name)
            if column is not None:
                out[name] = column[slots]
        return out
