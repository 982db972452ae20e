"""Simulators on a background loop, as `robowire sim` runs them, for the library's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from robowire.background import Running
from robowire.gateway import open_sim
from robowire.service import SimOptions


@contextmanager
def simulator(protocol: str, **options: object) -> Iterator[tuple[str, int]]:
    """Run `robowire sim PROTOCOL` (SimOptions fields as keywords, port 0 by default) until
    the block ends; yields the address it listens on (or sends to)."""
    settings = {"port": 0, **options}
    with Running(lambda: [open_sim(protocol, SimOptions(**settings))]) as running:  # type: ignore[arg-type]
        assert running.address is not None
        yield running.address
