"""What each service of a running gateway is doing, as plain data (`Gateway.status()`).

The viewer's `status` message is built from it, once a second, and `GET /status` on the
viewer's port, or on the small `StatusServer` a gateway command starts with `--status-port`,
answers it as JSON (`status_message`); `robowire status` prints it. The counters themselves are
the ones the templates keep, read; nothing but the `StatusServer` reads a socket here.

* `state`: a source is `connected` (its connection is up; a UDP source: something arrived in
  the last `Source.silence` seconds; a listening one: a peer is connected), `waiting` (not
  up yet, reconnecting, or a UDP peer silent), `failed` (its task ended with an error) or
  `finished` (a file read to its end); a sink or simulator is `listening` (bound),
  `waiting`, `failed` or `finished`; a simulator that sends (`announce` "sending to") is
  `connected` once it sends.
* `messages`: a source's messages in; other services' messages out.
* `rate`: messages per second between this call and an earlier one at least
  `RATE_WINDOW` seconds before it (0.0 on the first call).
* `errors`: a source's packets that did not decode or broke the protocol's rules (dropped
  and counted by the `Source` template); other services' `stats.extra["errors"]` (the
  viewer counts browser messages it ignored there).
* `dropped`: a sink's updates lost to falling behind (the subscription's drops), or not sent
  to a peer too far behind (see docs/operations.md).
* `shed`: a source's state reports shed by the overload policy (a newer report of the same
  device came while the gateway was behind; see `robowire.transport.budget`); a sink's
  reports it did not send because a newer one of the same had come before it could
  (`stats.extra["shed"]`: a SpyGlass relay's superseded packets).
* `refused`: HTTP requests a server answered with 403 (a Host or Origin of another site, no
  token where one is needed; see `robowire.access`).
* `lost`, `duplicated`, `reordered`: a source's messages lost, duplicated or reordered on
  the wire, counted exactly from the protocol's sequence numbers where it has them (the XRP
  robot's statuses, VRSP frames: `robowire.sequence`; `Source.wire_counts()`; VRPN's UDP
  datagrams dropped as copies or late, by their messages' `seq`, no `lost`), 0 where it has
  none (TCP loses nothing; UgCS and SpyGlass carry no sequence numbers).
* `reconnected`: a source's connections after its first, and its peer's restarts seen in
  what it sent (a rebooted XRP robot, a VRSP sender's new instance).
* `devices`: how many devices the service's own world table holds (sources).
* `worker`: the worker process that runs the service (`robowire.workers`), None for the
  gateway's own: a gateway shows each worker's sources and sinks (and their `shed`) as the
  worker last said them on the bus, after the worker's own row (`Remote`).
* `clock_offset`: a source's sender clock minus ours, in seconds (the smallest network delay
  included; see `robowire.timebase.ClockOffset`), to the millisecond; null when unknown (no
  stamped message yet, a protocol without stamps, or not a source).
* `clock_rate`: how many seconds the sender's clock runs a second of ours (1.0; -1.0 for one
  running backwards; `ClockOffset.rate`), null until a few seconds of stamps. Outside 1 ± 0.5
  `?time=corrected` gives receive times.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol, runtime_checkable

from robowire.access import Gate
from robowire.service import Service, Source, Status
from robowire.transport.tcp import listen_error
from robowire.world import World

log = logging.getLogger("robowire")

RATE_WINDOW = 0.5  # seconds: a rate is measured over at least this long
POLL_SECONDS = 1.0  # a status endpoint reads the counters this often, so rates are ready
MAX_REQUEST = 8 << 10  # bytes of an HTTP request head the status endpoint reads, at most
REQUEST_SECONDS = 5.0  # a client that sends no whole request head in this time is dropped


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
    refused: int = 0
    shed: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    reconnected: int = 0
    worker: str | None = None
    clock_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FIELDS = frozenset(f.name for f in fields(ServiceStatus))


@runtime_checkable
class Remote(Protocol):
    """A service that runs others elsewhere (a worker process) and says their status too."""

    def remote_status(self) -> Sequence[ServiceStatus]: ...

    def speaking(self) -> bool:
        """Whether it is up: `connected` in the status, else `waiting`."""
        ...


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
    stats = service.stats
    is_source = isinstance(service, Source)
    messages = stats.messages_in if is_source else stats.messages_out
    table = world.tables.get(service.name)
    address = service.address
    wire = service.wire_counts() if isinstance(service, Source) else {}
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
        refused=stats.extra.get("refused", 0),
        shed=_shed(service),
        lost=wire.get("lost", 0),
        duplicated=wire.get("duplicated", 0),
        reordered=wire.get("reordered", 0),
        reconnected=_reconnected(service),
        clock_rate=_clock_rate(service),
    )


def _clock_rate(service: Service) -> float | None:
    rate = service.time.offset.rate if isinstance(service, Source) else None
    return None if rate is None else round(rate, 3)


def _reconnected(service: Service) -> int:
    if not isinstance(service, Source):
        return 0
    return max(0, service.connections - 1) + service.restarts


def status_message(statuses: Sequence[Status]) -> dict[str, Any]:
    """What `GET /status` answers (and the viewer's `status` message): every service."""
    return {
        "type": "status",
        "time": time.time(),
        "services": [s.to_json() for s in statuses],
    }


def http_response(code: int, reason: str, body: bytes, content_type: str) -> bytes:
    """One whole HTTP/1.1 response that closes the connection."""
    head = (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nX-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class StatusServer(Service):
    """`--status-port P`: a small HTTP endpoint of the running gateway, `GET /status` answered
    with `status_message(gateway.status())` as JSON (what the viewer's port also answers).

    It reads the counters once a second while it runs, so the rates are measured by the time
    `robowire status` asks. A request head longer than `MAX_REQUEST` bytes, or not complete in
    `REQUEST_SECONDS`, closes that connection; a request its `gate` refuses is a 403 (the same
    check as the viewer's; the CLI sets its `access`); anything but `GET /status` is a 404.
    """

    role = "status"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(f"status@{host}:{port}")
        self.host, self.port = host, port
        self.requests = 0
        self.gate = Gate(self, served_as=host)

    @property
    def url(self) -> str | None:
        if self.address is None:
            return None
        return f"http://{self.address[0]}:{self.address[1]}/status"

    def listening(self, address: tuple[str, int]) -> None:
        super().listening(address)
        self.name = f"status@{self.address[0]}:{self.address[1]}" if self.address else self.name

    def message(self) -> dict[str, Any]:
        statuses = self.gateway.status() if self.gateway is not None else []
        return status_message(statuses)

    async def run(self, world: World) -> None:
        try:
            server = await asyncio.start_server(
                self._client, self.host, self.port, limit=MAX_REQUEST
            )
        except OSError as exc:
            raise listen_error(self.host, self.port, exc) from None
        try:
            name = server.sockets[0].getsockname()
            self.listening((str(name[0]), int(name[1])))
            while True:
                if self.gateway is not None:
                    self.gateway.status()  # keeps the rates measured between requests
                await asyncio.sleep(POLL_SECONDS)
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
            writer.write(self.answer(head))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a client that sent no request, or too much: closed
        finally:
            writer.close()

    def answer(self, head: bytes) -> bytes:
        """The response to one request head."""
        if len(head) > MAX_REQUEST:
            return http_response(431, "Request Header Fields Too Large", b"", "text/plain")
        first, *fields = head.decode("latin-1").split("\r\n")
        line = first.split()
        headers: dict[str, list[str]] = {"host": [], "origin": []}
        for text in fields:
            name, _, value = text.partition(":")
            headers.get(name.strip().lower(), []).append(value.strip())
        if len(line) == 3:
            refused = self.gate.check(line[1], headers["host"], headers["origin"])
            if refused is not None:
                code, text = refused
                return http_response(code, "Forbidden", text.encode(), "text/plain; charset=utf-8")
        if len(line) != 3 or line[0] != "GET":
            return http_response(405, "Method Not Allowed", b"GET only\n", "text/plain")
        path = line[1].split("?", 1)[0]
        if path not in ("/status", "/status/"):
            return http_response(404, "Not Found", b"not found\n", "text/plain")
        self.requests += 1
        self.stats.messages_out = self.requests
        body = json.dumps(self.message(), separators=(",", ":")).encode()
        return http_response(200, "OK", body, "application/json")


def _shed(service: Service) -> int:
    if not isinstance(service, Source):
        return int(service.stats.extra.get("shed", 0))
    return 0 if service.budget is None else service.budget.shed


def _rounded(offset: float) -> float | None:
    return None if offset != offset else round(offset, 3)  # NaN: not known
