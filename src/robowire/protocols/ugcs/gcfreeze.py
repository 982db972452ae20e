"""Keeping large UgCS registrations out of the garbage collector's full collections.

Used by both sides' services (the UCS source once a connection registered many devices, the
VSM runner for its own registrations).
"""

from __future__ import annotations

import gc

FREEZE_AFTER = 100
"""Registrations are big and live long (a 1,000-vehicle fleet's are about half a million
Python objects), and every full garbage collection scans them all: a 60-80 ms pause, the
whole tail of the telemetry lag (bench_ugcs). Once a connection has this many devices, a
read that registered more ends with `gc.freeze()`: what exists then is left out of later
collections (freed when no longer referenced, except what is in a reference cycle: `thaw`
undoes the freeze when the connection ends)."""


class _Freezer:
    thawed = False  # a `thaw` happened since the last `freeze`


def freeze() -> None:
    """`gc.freeze()` what exists now (see FREEZE_AFTER). After a `thaw`, one full collection
    first: what the ended connection or simulator left in reference cycles is freed, not
    frozen again (one pause a reconnection, not one a registration)."""
    if _Freezer.thawed:
        _Freezer.thawed = False
        gc.collect()
    gc.freeze()


def thaw() -> None:
    """Undo `freeze` when what was frozen for a connection or a simulator ends: the cycle
    collector never looks at frozen objects, so a frozen registration that is part of a
    reference cycle (a session and its devices, a simulator and its server) would otherwise
    stay in memory for good once unused, one fleet per reconnection. Back in the oldest
    generation they are freed by the next full collection once unreachable; the next large
    registration freezes what is still alive again."""
    if gc.get_freeze_count():
        gc.unfreeze()
        _Freezer.thawed = True
