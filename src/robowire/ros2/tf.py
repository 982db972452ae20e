"""The TF tree `listen ros2://` builds from /tf and /tf_static: every frame's pose in one frame.

Each transform says where a child frame is in its parent (tf2's `TransformStamped`). The tree
keeps the newest transform of each child (static ones too: /tf_static comes once, and stays),
and composes each frame's pose in the reference frame (`world`, or `?frame=`): along the
parent chain when the frame is below it, through the inverse of the reference's own pose when
both hang from a common root (`map -> odom`, `map -> base_link` with `?frame=odom`).

What cannot be composed is kept apart, and named: frames on a parent cycle (or below one)
in `cyclic`, frames whose tree does not hold the reference frame in `unrooted`, transforms
tf2 itself would refuse (a non-finite value, a quaternion that is not unit within 1%) in
`refused`. Frames leave those sets once a later transform gives them a path.

All of it is columns: one row per frame, composed a tree level at a time (a mocap system's
1,000 bodies under `world` are one level), and the levels are found again only when a frame
is new or changes parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire.quaternions import multiply, rotate
from robowire.ros2.decode import Decoded

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]
ROW_CACHE = 512  # name tuples whose rows are kept (two per /tf layout: children, parents)
UNIT_TOLERANCE = 0.01  # tf2 refuses a rotation whose norm is further from 1 than this
_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def compose(
    t1: FloatArray, q1: FloatArray, t2: FloatArray, q2: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Poses 2 expressed in frames at poses 1: (t1 + q1 t2, q1 q2)."""
    return t1 + rotate(q1, t2), multiply(q1, q2)


def invert(t: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray]:
    conjugate = q * np.array([1.0, -1.0, -1.0, -1.0])
    return -rotate(conjugate, t), conjugate


@dataclass(frozen=True, slots=True)
class Poses:
    """Frames' poses in the reference frame: row i is the frame `names[rows[i]]`."""

    names: Sequence[str]  # every frame's name, by its row in the tree
    position: FloatArray  # (n, 3)
    orientation: FloatArray  # (n, 4) w x y z
    stamps: FloatArray  # (n,) each frame's own transform's stamp
    rows: IndexArray  # (n,) the frames' rows in the tree (stable: a frame keeps its row)

    @property
    def frames(self) -> tuple[str, ...]:
        """The frames' names (built when asked: a caller that knows the rows needs none)."""
        return tuple(self.names[i] for i in self.rows)


class TfTree:
    """Transforms in, poses in `reference` out (see the module docstring)."""

    def __init__(self, reference: str = "world", capacity: int = 64) -> None:
        self.reference = reference
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.parent = np.full(capacity, -1, dtype=np.intp)
        self.translation = np.zeros((capacity, 3))
        self.rotation = np.tile(_IDENTITY, (capacity, 1))
        self.stamps = np.full(capacity, np.nan)
        self.changed = np.zeros(capacity, dtype=bool)  # moved since the last `poses`
        self.cyclic: set[str] = set()
        self.unrooted: set[str] = set()
        self.refused: set[str] = set()
        self._levels: list[IndexArray] | None = None  # below the roots, depth 1, 2, ...
        self._poses: tuple[FloatArray, FloatArray] | None = None  # `_composed`, while valid
        self._top = np.zeros(0, dtype=np.intp)  # each frame's tree root (-1: on a cycle)
        self._rows: dict[int, tuple[tuple[str, ...], IndexArray]] = {}  # `rows`, by tuple

    def __len__(self) -> int:
        return len(self.names)

    def rows(self, names: tuple[str, ...]) -> IndexArray:
        """The rows of frames (new ones added). A /tf publisher names the same frames each
        time, and the decoder hands back the same tuple for them: looked up once a tuple."""
        known = self._rows.get(id(names))
        if known is not None and known[0] is names:
            return known[1]
        rows = np.fromiter((self._row(name) for name in names), dtype=np.intp, count=len(names))
        if len(self._rows) >= ROW_CACHE:
            self._rows.clear()
        self._rows[id(names)] = (names, rows)  # (the tuple held: its id stays its own)
        return rows

    def _row(self, name: str) -> int:
        row = self.index.get(name)
        if row is None:
            row = self.index[name] = len(self.names)
            self.names.append(name)
            if row >= len(self.parent):
                self._grow(2 * len(self.parent))
            self._levels = None
        return row

    def _grow(self, size: int) -> None:
        def grown(column: np.ndarray, fill: object) -> np.ndarray:
            out = np.empty((size, *column.shape[1:]), dtype=column.dtype)
            out[...] = fill
            out[: len(column)] = column
            return out

        self.parent = grown(self.parent, -1)
        self.translation = grown(self.translation, 0.0)
        self.rotation = grown(self.rotation, _IDENTITY)
        self.stamps = grown(self.stamps, np.nan)
        self.changed = grown(self.changed, False)

    def take(self, transforms: Decoded) -> None:
        """A TFMessage's (or a TransformStamped's) transforms, newest last."""
        if not len(transforms):
            return
        assert transforms.position is not None and transforms.orientation is not None
        children = self.rows(transforms.children)
        parents = self.rows(transforms.frames)
        translation, rotation = transforms.position, transforms.orientation
        norm = np.sqrt((rotation * rotation).sum(axis=1))
        good = (
            np.isfinite(translation).all(axis=1)
            & (np.abs(norm - 1.0) <= UNIT_TOLERANCE)
            & (children != parents)
        )
        if not good.all():
            self.refused.update(transforms.children[i] for i in np.flatnonzero(~good))
            children, parents = children[good], parents[good]
            translation, rotation, norm = translation[good], rotation[good], norm[good]
        if (self.parent[children] != parents).any():
            self._levels = None
        self.parent[children] = parents
        self.translation[children] = translation
        self.rotation[children] = rotation / norm[:, None]
        self.stamps[children] = transforms.stamps if good.all() else transforms.stamps[good]
        self.changed[children] = True
        self._poses = None
        if self.refused:  # a good transform now: no longer refused
            self.refused.difference_update(self.names[i] for i in children)

    def _structure(self) -> list[IndexArray]:
        """The frames below the roots, level by level; names the frames with no path."""
        if self._levels is not None:
            return self._levels
        n = len(self.names)
        parent = self.parent[:n]
        depth = np.where(parent < 0, 0, -1)
        top = np.where(parent < 0, np.arange(n), -1)
        levels = []
        level = 0
        while True:
            placed = depth == level
            at = np.flatnonzero((depth < 0) & placed[np.maximum(parent, 0)] & (parent >= 0))
            if not len(at):
                break
            depth[at] = level = level + 1
            top[at] = top[parent[at]]
            levels.append(at)
        self._levels, self._top = levels, top
        self.cyclic = {self.names[i] for i in np.flatnonzero(depth < 0)}
        anchor = self.index.get(self.reference)
        reference_top = top[anchor] if anchor is not None else -2
        self.unrooted = {
            self.names[i]
            for i in np.flatnonzero((top >= 0) & (top != reference_top) & (parent >= 0))
        }
        return levels

    def poses(self) -> Poses:
        """The frames that moved since the last call (or whose parents did), with a path to
        the reference frame, in it."""
        n = len(self.names)
        levels = self._structure()
        changed = self.changed[:n].copy()
        self.changed[:n] = False
        parent = self.parent[:n]
        for at in levels:  # a parent's move moves its children
            changed[at] |= changed[parent[at]]
        position, orientation = self._composed(levels)
        anchor = self.index.get(self.reference)
        top = self._top
        if anchor is None or top[anchor] < 0:
            return Poses(
                self.names, np.zeros((0, 3)), np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.intp)
            )
        tree = top == top[anchor]
        if changed[anchor]:  # the reference moved in its tree: every frame of it did
            changed |= tree
        rows = np.flatnonzero(changed & tree & (parent >= 0) & (np.arange(n) != anchor))
        t, q = position[rows], orientation[rows]
        if parent[anchor] >= 0:  # the reference hangs below a root: through its inverse
            inverse = invert(position[anchor : anchor + 1], orientation[anchor : anchor + 1])
            t, q = compose(
                np.repeat(inverse[0], len(rows), 0), np.repeat(inverse[1], len(rows), 0), t, q
            )
        return Poses(self.names, t, q, self.stamps[rows], rows)

    def _composed(self, levels: list[IndexArray]) -> tuple[FloatArray, FloatArray]:
        """Every frame's pose in its tree's root (roots and frames on cycles: identity); kept
        until a transform comes (pose topics stamped in a frame ask for it per sample)."""
        if self._poses is not None:
            return self._poses
        n = len(self.names)
        position = np.zeros((n, 3))
        orientation = np.tile(_IDENTITY, (n, 1))
        parent = self.parent[:n]
        if levels:  # the first level hangs from roots, at identity: its own transforms
            first = levels[0]
            position[first], orientation[first] = self.translation[first], self.rotation[first]
        for at in levels[1:]:
            up = parent[at]
            position[at], orientation[at] = compose(
                position[up], orientation[up], self.translation[at], self.rotation[at]
            )
        self._poses = (position, orientation)
        return position, orientation

    def in_reference(self, frames: tuple[str, ...]) -> tuple[npt.NDArray[np.bool_], Poses]:
        """Where frames are in the reference frame (for poses stamped in them): which have a
        path, and their poses (identity for the reference itself and for "")."""
        levels = self._structure()
        position, orientation = self._composed(levels)
        anchor = self.index.get(self.reference)
        n = len(frames)
        found = np.zeros(n, dtype=bool)
        t = np.zeros((n, 3))
        q = np.tile(_IDENTITY, (n, 1))
        if anchor is not None and self._top[anchor] >= 0:
            inverse = invert(position[anchor : anchor + 1], orientation[anchor : anchor + 1])
            for i, frame in enumerate(frames):
                row = self.index.get(frame)
                if row is not None and self._top[row] == self._top[anchor]:
                    found[i] = True
                    t[i : i + 1], q[i : i + 1] = compose(
                        *inverse, position[row : row + 1], orientation[row : row + 1]
                    )
        for i, frame in enumerate(frames):
            if frame in ("", self.reference):
                found[i] = True
                t[i], q[i] = 0.0, _IDENTITY
        return found, Poses(frames, t, q, np.full(n, np.nan), np.arange(n))
