"""Simulators on a background loop, as `robowire sim` runs them, for the library's tests."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from robowire.background import LoopThread
from robowire.gateway import Gateway, open_sim
from robowire.service import SimOptions

ROOT = Path(__file__).resolve().parents[2]
VRPN_PEERS = Path(os.environ.get("ROBOWIRE_VRPN_PEERS", ROOT.parent / "shared" / "peers" / "vrpn"))
"""The mainline VRPN binaries (`vrpn_server`, `vrpn_print_devices`): ../shared/peers/vrpn from
the checkout, or $ROBOWIRE_VRPN_PEERS."""


@contextmanager
def simulator(protocol: str, **options: object) -> Iterator[tuple[str, int]]:
    """Run `robowire sim PROTOCOL` (SimOptions fields as keywords, port 0 by default) until
    the block ends; yields the address it listens on (or sends to)."""
    thread = LoopThread("test-sim")
    settings = {"port": 0, **options}
    gateway = Gateway()

    async def start() -> tuple[str, int]:
        sim = open_sim(protocol, SimOptions(**settings))  # type: ignore[arg-type]
        gateway.add(sim)
        run = asyncio.create_task(gateway.run())
        ready = asyncio.ensure_future(sim.ready.wait())
        await asyncio.wait({run, ready}, return_when=asyncio.FIRST_COMPLETED)
        if run.done():
            run.result()
        assert sim.address is not None
        start.run = run  # type: ignore[attr-defined]
        return sim.address

    try:
        yield thread.run(start(), timeout=30)
    finally:
        thread.call_soon(gateway.stop)

        async def ended() -> None:
            await asyncio.wait([start.run])  # type: ignore[attr-defined]

        thread.run(ended(), timeout=30)
        thread.close()
