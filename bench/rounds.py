"""The "vs peer" figures' rounds: each is the median of `ROUNDS` side-by-side runs (ours and
the peer's measured one after the other, the ratio taken per run), kept with its spread.

This machine is shared (2 cores, other work on them): one run's ratio moves by as much as a
target's margin, the median of three does much less, and the spread says how much it moved.
A module returns `figures(name, ratios)`: `name` (the median), `name_low`, `name_high`; the
table (bench/table.py) prints the "vs peer" cell as `median [low-high] (target)`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

ROUNDS = 3


def figures(name: str, ratios: Sequence[float]) -> dict[str, float]:
    """The median of `ratios` as `name`, their least and greatest as `name_low`/`name_high`."""
    if not ratios:
        raise ValueError("no rounds")
    return {
        name: float(statistics.median(ratios)),
        f"{name}_low": float(min(ratios)),
        f"{name}_high": float(max(ratios)),
    }


def text(ratios: Sequence[float]) -> str:
    """ "2.57x (2.41-2.80 over 3 runs)" for a module's own lines."""
    return (
        f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f} over "
        f"{len(ratios)} runs)"
    )


def side_by_side(ours: Callable[[], float], theirs: Callable[[], float]) -> list[float]:
    """`ROUNDS` ratios ours()/theirs(), each pair measured one right after the other (the
    peer first: neither is always the one measured right after a quiet spell)."""
    ratios = []
    for _ in range(ROUNDS):
        peer = theirs()
        ratios.append(ours() / peer)
    return ratios
