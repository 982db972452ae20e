"""The live terminal table of devices (rich), refreshed a few times a second."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from robowire.service import Service, Sink
from robowire.world import Device, World

MAX_ROWS = 30


def _fmt(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:8.2f}"


def device_table(world: World, services: Iterable[Service] = (), max_rows: int = MAX_ROWS) -> Group:
    """A table of the most recently updated devices, and a line of per-service counters."""
    table = Table(expand=False, header_style="bold")
    for name, justify in (
        ("source", "left"),
        ("device", "left"),
        ("kind", "left"),
        ("x m", "right"),
        ("y m", "right"),
        ("z m", "right"),
        ("links", "right"),
        ("telemetry", "left"),
        ("age s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    devices: list[Device] = sorted(world.devices(), key=lambda d: -(d.receive_time or 0.0))
    now = time.time()
    for device in devices[:max_rows]:
        x, y, z = device.position or (math.nan, math.nan, math.nan)
        telemetry = ", ".join(
            f"{k}={v:g}{'' if u in ('1', '') else ' ' + u}"
            for k, (v, u) in list(device.telemetry.items())[:3]
        )
        age = "" if device.receive_time is None else f"{max(0.0, now - device.receive_time):.1f}"
        table.add_row(
            device.source,
            device.device_id,
            device.kind,
            _fmt(x),
            _fmt(y),
            _fmt(z),
            str(len(device.links)),
            telemetry,
            age,
        )
    lines: list[Table | Text] = [table]
    if len(devices) > max_rows:
        lines.append(Text(f"… and {len(devices) - max_rows} more devices"))
    for service in services:
        s = service.stats
        if s.messages_in or s.dropped:
            lines.append(
                Text(
                    f"{service.name}: {s.messages_in} messages in, {s.dropped} dropped", style="dim"
                )
            )
    return Group(*lines)


class TableSink(Sink):
    """Shows `device_table` live until the run ends."""

    def __init__(
        self,
        services: Iterable[Service] = (),
        refresh_hz: float = 4.0,
        console: Console | None = None,
    ) -> None:
        super().__init__("table")
        self.services = list(services)
        self.refresh_hz = refresh_hz
        self.console = console or Console()

    async def run(self, world: World) -> None:
        with Live(
            device_table(world, self.services),
            console=self.console,
            refresh_per_second=self.refresh_hz,
            transient=False,
        ) as live:
            self.ready.set()
            try:
                while True:
                    await asyncio.sleep(1.0 / self.refresh_hz)
                    live.update(device_table(world, self.services))
            finally:
                live.update(device_table(world, self.services))
