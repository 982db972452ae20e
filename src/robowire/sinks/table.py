"""The live terminal table of devices (rich), refreshed a few times a second."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from robowire.service import Service, Sink
from robowire.world import Device, LogEvent, Update, World

MAX_ROWS = 30
# (header, justification, (min width, max width)): positions stay readable on 80 columns
COLUMNS = (
    ("source", "left", (8, 24)),
    ("device", "left", (6, 16)),
    ("kind", "left", (4, 12)),
    ("x m", "right", (7, 9)),
    ("y m", "right", (7, 9)),
    ("z m", "right", (7, 9)),
    ("links", "right", (5, 5)),
    ("telemetry", "left", (9, 40)),
    ("age s", "right", (5, 6)),
)


def _fmt(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def _row_order(key: tuple[str, str]) -> tuple[str, int, str]:
    source, number = key
    return (source, int(number) if number.isdecimal() else -1, number)


def _fair_share(world: World, rows: int) -> list[Device]:
    """At most `rows` devices, every source getting its turn (a 1000-node network must not
    hide the three trackers), ordered so that rows stay put and a moving value is easy to
    follow. Only the rows shown become device views."""
    queues = [
        iter(sorted(((source, device) for device in table.ids), key=_row_order))
        for source, table in list(world.tables.items())
    ]
    shown: list[tuple[str, str]] = []
    while queues and len(shown) < rows:
        for queue in list(queues):
            turn = next(queue, None)
            if turn is None:
                queues.remove(queue)
            elif len(shown) < rows:
                shown.append(turn)
    return [world.device(*key) for key in sorted(shown, key=_row_order)]


def device_table(world: World, services: Iterable[Service] = (), max_rows: int = MAX_ROWS) -> Group:
    """A table of the devices (each source gets its share of `max_rows`), and a line of
    counters per service."""
    table = Table(expand=False, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify, width in COLUMNS:
        table.add_column(
            name,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=True,
            min_width=width[0],
            max_width=width[1],
            overflow="ellipsis",
        )
    shown = _fair_share(world, max_rows)
    total = len(world)
    now = time.time()
    for device in shown:
        x, y, z = device.position or (math.nan, math.nan, math.nan)
        telemetry = ", ".join(
            f"{k}={v:.4g}{'' if u in ('1', '') else ' ' + u}"
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
    if total > max_rows:
        lines.append(Text(f"… and {total - max_rows} more devices"))
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
        self.max_rate = refresh_hz  # redraw at this rate whether or not anything changed
        self.console = console or Console()

    async def run(self, world: World) -> None:
        self._live = Live(
            device_table(world, self.services),
            console=self.console,
            refresh_per_second=self.refresh_hz,
            transient=False,
        )
        with self._live:
            await super().run(world)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        self._live.update(device_table(world, self.services))
        return True
