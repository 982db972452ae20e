"""VRSP's typed swarm description (what a VRSP_DEF carries) and one DATA frame as columns.

INTERFACE STUB (written before the package, so the codec and the show simulator can be built
at the same time). The codec owns encoding/decoding these; the simulator (`model.py`) produces
them; the adapter turns `Swarm` into world columns. Change names here only with both sides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray


class DefType(enum.Enum):
    LIGHT = "Light"
    PYRO = "Pyro"
    LASER = "Laser"


class MountType(enum.Enum):
    STATIC = "Static"  # nothing on the wire; the direction is in the definition
    GIMBAL_2DOF = "2DOF"  # a float16 quaternion (w, x, y, z) follows the payload's data
    GIMBAL_3DOF = "3DOF"


@dataclass(frozen=True, slots=True)
class Quaternion:
    w: float = 1.0
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0


@dataclass(frozen=True, slots=True)
class Cue:
    id: int  # 1-based; 0 on the wire means "nothing firing" (our profile)
    vdl: str = ""  # Finale3D Visual Descriptive Language: an opaque product description
    mount_direction: Quaternion = Quaternion()


@dataclass(frozen=True, slots=True)
class Payload:
    """One entry of `PayloadDefinitions`. Light/Laser: `color` set means a fixed colour and an
    intensity byte on the wire, else R, G, B. Light: `light_type` "Spotlight" (with
    `spot_angle` degrees) or point light. Pyro: `cues`."""

    def_type: DefType
    mount: MountType = MountType.STATIC
    lumens: float | None = None
    color: tuple[int, int, int] | None = None
    light_type: str | None = None
    spot_angle: float | None = None
    cues: tuple[Cue, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)  # keys we do not know, kept


@dataclass(frozen=True, slots=True)
class DeviceDefinition:
    definition_id: int
    model: str = ""
    lumens: float | None = None  # the built-in light's maximum
    payloads: tuple[Payload, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Swarm:
    """One frame of DATA as columns: row i is device `ids[i]`. Wire frame: left-handed, Y up,
    x = East, y = Up, z = North, metres from the DEF's root.

    Optional per-record parts are masks over the rows (`has_color`, `has_heading`,
    `has_orientation`); values in rows without them are undefined (zeros).

    Payload columns hold, per row, the state of that device's payloads in its definition's
    `payloads` order, slot k = k-th payload: `light` (n, K, 3) uint8 RGB (fixed-colour
    payloads: the intensity in channel 0), `cue` (n, K) uint8 (0 = nothing firing),
    `cue_ms` (n, K) uint16 ms since trigger, `gimbal` (n, K, 4) float32 w,x,y,z. K is the
    largest payload count of any definition (0 when none has payloads).
    """

    ids: NDArray[np.uint16]  # (n,)
    position: NDArray[np.float32]  # (n, 3)
    has_color: NDArray[np.bool_]  # (n,)
    color: NDArray[np.uint8]  # (n, 3) R, G, B of the built-in light
    has_heading: NDArray[np.bool_]  # (n,)
    heading: NDArray[np.float32]  # (n,) degrees, 0 = north (+z), clockwise from above
    has_orientation: NDArray[np.bool_]  # (n,)
    orientation: NDArray[np.float32]  # (n, 4) w, x, y, z
    light: NDArray[np.uint8]  # (n, K, 3)
    cue: NDArray[np.uint8]  # (n, K)
    cue_ms: NDArray[np.uint16]  # (n, K)
    gimbal: NDArray[np.float32]  # (n, K, 4)
