"""The live terminal table of devices (drawn by rich's `Live`), refreshed a few times a second."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from rich.console import Console
from rich.live import Live
from rich.text import Text

from robowire.service import Service, Sink
from robowire.status import RateMeter
from robowire.timebase import monotonic
from robowire.world import Device, LogEvent, Update, World

MAX_ROWS = 30
GAP = 2  # spaces between columns
REFRESH_HZ = 4.0  # redraws a second
TABLE_PACE = 0.02  # seconds the loop of `listen`'s table rests each turn (`Runner.pace`): it
# reads its sockets 50 times a second, in batches, not once per datagram (30,000 VRPN
# messages/s cost 11% of a core read as they came, 3% so); under the loop-lag probe's
# threshold (`robowire.transport.budget.LATE` / 2), so the pace alone never reads as overload
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


def _fit(cell: str, width: int, justify: str) -> str:
    if len(cell) > width:
        cell = cell[: width - 1] + "…"
    return cell.rjust(width) if justify == "right" else cell.ljust(width)


def _widths(rows: list[tuple[str, ...]], room: int | None) -> list[int]:
    """Each column as wide as its widest cell (its header included), within its bounds; if
    that is wider than `room`, the widest columns give way first, down to their minimum."""
    widths = [
        min(hi, max(lo, *(len(row[i]) for row in rows)))
        for i, (_, _, (lo, hi)) in enumerate(COLUMNS)
    ]
    if room is not None:
        over = sum(widths) + GAP * (len(widths) - 1) - room
        while over > 0:
            i = max(range(len(widths)), key=lambda i: widths[i] - COLUMNS[i][2][0])
            if widths[i] <= COLUMNS[i][2][0]:
                break
            widths[i] -= 1
            over -= 1
    return widths


def device_table(
    world: World,
    services: Iterable[Service] = (),
    max_rows: int = MAX_ROWS,
    width: int | None = None,
    rate: Callable[[Service], float] | None = None,
) -> Text:
    """A table of the devices (each source gets its share of `max_rows`), and a line of
    counters per service (with `rate`, its messages per second too), at most `width` columns
    wide where it fits.

    Laid out here as plain lines of text (one style per line): rich's own `Table` took 8 ms
    to draw ten rows, a third of a core for a live table that refreshes a few times a
    second; this is drawn in a tenth of a millisecond."""
    now = time.time()
    rows: list[tuple[str, ...]] = [tuple(name for name, _, _ in COLUMNS)]
    for device in _fair_share(world, max_rows):
        x, y, z = device.position or (math.nan, math.nan, math.nan)
        telemetry = ", ".join(
            f"{k}={v:.4g}{'' if u in ('1', '') else ' ' + u}"
            for k, (v, u) in list(device.telemetry.items())[:3]
        )
        age = "" if device.receive_time is None else f"{max(0.0, now - device.receive_time):.1f}"
        rows.append(
            (
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
        )
    widths = _widths(rows, width)
    gap = " " * GAP
    lines = [
        gap.join(_fit(cell, w, c[1]) for cell, w, c in zip(row, widths, COLUMNS, strict=True))
        for row in rows
    ]
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append(lines[0].rstrip() + "\n", style="bold")
    text.append("─" * (sum(widths) + GAP * (len(widths) - 1)) + "\n")
    for line in lines[1:]:
        text.append(line.rstrip() + "\n")
    total = len(world)
    if total > max_rows:
        text.append(f"… and {total - max_rows} more devices\n")
    for service in services:
        s = service.stats
        if s.messages_in or s.dropped:
            said = f"{service.name}: {s.messages_in} messages in, {s.dropped} dropped"
            if rate is not None:
                said += f", {rate(service):,.0f}/s"
            text.append(said + "\n", style="dim")
    text.rstrip()
    return text


class TableSink(Sink):
    """Shows `device_table` live until the run ends."""

    def __init__(
        self,
        services: Iterable[Service] = (),
        refresh_hz: float = REFRESH_HZ,
        console: Console | None = None,
    ) -> None:
        super().__init__("table")
        self.services = list(services)
        self.refresh_hz = refresh_hz
        self.max_rate = refresh_hz  # redraw at this rate whether or not anything changed
        self.console = console or Console()
        self._rates = RateMeter(window=1.0)

    async def run(self, world: World) -> None:
        # drawn here, at each pull (`max_rate`), not by a thread of rich's of its own
        self._live = Live(self._table(world), console=self.console, auto_refresh=False)
        with self._live:
            await super().run(world)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        self._live.update(self._table(world), refresh=True)
        return True

    def _table(self, world: World) -> Text:
        return device_table(world, self.services, width=self.console.width, rate=self._rate)

    def _rate(self, service: Service) -> float:
        """A service's messages per second, over the last second or so of draws."""
        return self._rates.rate(id(service), service.stats.messages_in, monotonic())
