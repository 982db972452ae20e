"""Rotations as unit quaternions (w, x, y, z), the world's order, on numpy rows: the one
Hamilton product and vector rotation every layer uses (the viewer's gimbals, per-sink
projections, TF composition, the light-show simulator)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["multiply", "rotate"]

F = TypeVar("F", bound=np.floating)


def multiply(a: npt.NDArray[F], b: npt.NDArray[F]) -> npt.NDArray[F]:
    """Hamilton products a * b, rows of (w, x, y, z) broadcast against each other, in the
    rows' own float type (float32 rows stay float32)."""
    aw, ax, ay, az = (a[..., i] for i in range(4))
    bw, bx, by, bz = (b[..., i] for i in range(4))
    product: npt.NDArray[F] = np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )
    return product


def rotate(q: npt.NDArray[np.floating], v: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """Vectors v (n, 3) rotated by unit quaternions q (n, 4), in float64."""
    w = q[:, :1].astype(np.float64)
    u = q[:, 1:].astype(np.float64)
    twice = 2.0 * np.cross(u, v)
    return np.asarray(v + w * twice + np.cross(u, twice), dtype=np.float64)
