"""What each service of a running gateway is doing, as plain data (`Gateway.status()`).

The viewer's `status` message is built from it, once a second; `robowire status` (issue 13)
will print it. Nothing here reads a socket: it is the counters the templates keep, read.

* `state`: a source is `connected` (its connection is up, or its socket bound), `waiting`
  (not up yet, or reconnecting), `failed` (its task ended with an error) or `finished` (a file
  read to its end); a sink or simulator is `listening` (bound), `waiting`, `failed` or
  `finished`; a simulator that sends (`announce` "sending to") is `connected` once it sends.
* `messages`: a source's messages in; other services' messages out.
* `rate`: messages per second between this call and an earlier one at least
  `RATE_WINDOW` seconds before it (0.0 on the first call).
* `errors`: a source's packets that did not decode or broke the protocol's rules (dropped
  and counted by the `Source` template); other services' `stats.extra["errors"]` (the
  viewer counts browser messages it ignored there).
* `dropped`: a sink's updates lost to falling behind (the subscription's drops).
* `devices`: how many devices the service's own world table holds (sources).
* `clock_offset`: a source's sender clock minus ours, in seconds (the smallest network delay
  included; see `robowire.timebase.ClockOffset`), to the millisecond; null when unknown (no
  stamped message yet, a protocol without stamps, or not a source).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robowire.service import Service
    from robowire.world import World

RATE_WINDOW = 0.5  # seconds: a rate is measured over at least this long


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceStatus:
    """One service, as the viewer's `status` message shows it."""

    name: str
    role: str
    state: str
    address: str | None
    messages: int
    rate: float
    dropped: int
    errors: int
    last_drop: str | None
    devices: int
    clock_offset: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _Mark:
    time: float
    count: int
    rate: float = 0.0


class RateMeter:
    """Message rates per service from counter readings (`rate(key, count, now)`)."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._marks: dict[int, _Mark] = {}

    def rate(self, key: int, count: int, now: float) -> float:
        mark = self._marks.get(key)
        if mark is None:
            self._marks[key] = _Mark(now, count)
            return 0.0
        elapsed = now - mark.time
        if elapsed >= self.window:
            mark.rate = max(0.0, (count - mark.count) / elapsed)
            mark.time, mark.count = now, count
        return mark.rate


def service_status(
    service: Service, state: str, world: World, meter: RateMeter, now: float
) -> ServiceStatus:
    """The status of one service whose `state` the gateway worked out."""
    from robowire.service import Source

    stats = service.stats
    is_source = isinstance(service, Source)
    messages = stats.messages_in if is_source else stats.messages_out
    table = world.tables.get(service.name)
    address = service.address
    return ServiceStatus(
        name=service.name,
        role=service.role,
        state=state,
        address=f"{address[0]}:{address[1]}" if address is not None else None,
        messages=messages,
        rate=round(meter.rate(id(service), messages, now), 1),
        dropped=0 if is_source else stats.dropped,
        errors=stats.dropped if is_source else stats.extra.get("errors", 0),
        last_drop=stats.last_drop_reason or None,
        devices=len(table) if table is not None else 0,
        clock_offset=_rounded(service.time.offset.offset) if isinstance(service, Source) else None,
    )


def _rounded(offset: float) -> float | None:
    return None if offset != offset else round(offset, 3)  # NaN: not known
