"""Simulators on a background loop, as `robowire sim` runs them, for the library's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from robowire.background import Running
from robowire.gateway import open_sim
from robowire.service import SimOptions

ROOT = Path(__file__).resolve().parents[2]
VRPN_PEERS = Path(os.environ.get("ROBOWIRE_VRPN_PEERS", ROOT.parent / "shared" / "peers" / "vrpn"))
"""The mainline VRPN binaries (`vrpn_server`, `vrpn_print_devices`): ../shared/peers/vrpn from
the checkout, or $ROBOWIRE_VRPN_PEERS."""


@contextmanager
def simulator(protocol: str, **options: object) -> Iterator[tuple[str, int]]:
    """Run `robowire sim PROTOCOL` (SimOptions fields as keywords, port 0 by default) until
    the block ends; yields the address it listens on (or sends to)."""
    settings = {"port": 0, **options}
    with Running(lambda: [open_sim(protocol, SimOptions(**settings))]) as running:  # type: ignore[arg-type]
        assert running.address is not None
        yield running.address
