"""`robowire.publish`: be any protocol's server or sender for devices your code sets.

```python
import robowire

with robowire.publish("vrpn://127.0.0.1:3883") as pub:
    pub.set("Tracker0/0", position=(1.0, 2.0, 0.5), orientation=(1.0, 0.0, 0.0, 0.0))
```

A `Publisher` is the protocol's sink (`robowire serve URL`) fed by a world source of your own
whose names are that protocol's own (`SourceTable.protocol` is the sink's protocol), so the
sink sends them unchanged (`robowire.world.identity`): `"Tracker0/0"` is sensor 0 of tracker
`Tracker0` for a VRPN client, `"7"` is drone 7 of a VRSP show, a UgCS vehicle's name is its
serial. Writes are handed to the sink's event loop on a background thread; `set_many` writes
whole numpy columns at once (a 10,000-drone show is one call per frame).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire import protocols
from robowire.addresses import parse_endpoint
from robowire.background import Running
from robowire.endpoints import Endpoint
from robowire.gateway import open_sink
from robowire.status import ServiceStatus

__all__ = ["Publisher", "publish"]

SOURCE = "python"
"""The world source a publisher's devices belong to (what the sink's status and logs show)."""

LEVELS = ("info", "warning", "error")
"""The levels `Publisher.log` takes (VRPN's text severities)."""

TelemetryValues = Mapping[str, float | tuple[float, str]]
"""Telemetry by field: a value (unit "1"), or (value, unit)."""


def _row(values: Sequence[float] | npt.ArrayLike | None, n: int, what: str) -> Any:
    if values is None:
        return None
    row = np.asarray(values, dtype=np.float64).reshape(-1)
    if row.shape != (n,):
        raise ValueError(f"{what} must have {n} numbers, not {row.size}")
    return row[None, :]


def _columns(values: npt.ArrayLike | None, n: int, k: int, what: str) -> Any:
    if values is None:
        return None
    array = np.array(values, dtype=np.float64)  # a copy: the caller may reuse its array
    if array.shape != (n, k):
        raise ValueError(f"{what} must be shaped ({n}, {k}), not {array.shape}")
    return array


class Publisher:
    """A protocol server or sender for the devices `set` and `set_many` write (`publish`)."""

    def __init__(self, url: str, *, source: str = SOURCE) -> None:
        self.endpoint: Endpoint = parse_endpoint(url)
        self.source = source
        protocol = self.endpoint.protocol
        self.protocol = protocol if protocol in protocols.names() else None
        # the kind a device gets when `set` names none: what the protocol's source calls it
        self.kind = protocols.get(protocol).kind if self.protocol else "device"
        self._ids: npt.NDArray[Any] | None = None
        self._names: tuple[str, ...] = ()
        self._slot_names: tuple[str, ...] | None = None
        self._slots: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)
        self._running = Running(lambda: [open_sink(self.endpoint)], "robowire-publish")
        self.sink = self._running.services[0]
        self.gateway = self._running.gateway
        self.gateway.world.table(source).protocol = self.protocol
        self._thread = self._running.thread

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the sink listens (or sends to): the port it got when the URL said 0."""
        return self._running.address

    def set(
        self,
        name: str,
        *,
        position: Sequence[float] | None = None,
        orientation: Sequence[float] | None = None,
        velocity: Sequence[float] | None = None,
        geodetic: Sequence[float] | None = None,
        telemetry: TelemetryValues | None = None,
        kind: str | None = None,
        time: float | None = None,
    ) -> None:
        """Set one device by its name on the wire: position (x, y, z) ENU metres,
        orientation (w, x, y, z), velocity m/s, geodetic (lat deg, lon deg, alt m),
        telemetry by field. `time` is when it happened (Unix seconds; now by default)."""
        columns = {
            "position": _row(position, 3, "position"),
            "orientation": _row(orientation, 4, "orientation"),
            "velocity": _row(velocity, 3, "velocity"),
            "geodetic": _row(geodetic, 3, "geodetic"),
        }
        fields = _telemetry(telemetry or {})
        self._thread.call_soon(self._set, str(name), kind or self.kind, time, columns, fields)

    def _set(
        self,
        name: str,
        kind: str,
        stamp: float | None,
        columns: dict[str, Any],
        fields: dict[str, tuple[Any, str]],
    ) -> None:
        world = self.gateway.world
        slot = world.table(self.source).slot(name, kind)
        now = time.time()
        world.update(
            self.source,
            np.array([slot], dtype=np.intp),
            receive_time=now,
            source_time=now if stamp is None else stamp,
            telemetry=fields,
            **columns,
        )

    def set_many(
        self,
        ids: Sequence[str | int] | npt.ArrayLike,
        *,
        positions: npt.ArrayLike | None = None,
        orientations: npt.ArrayLike | None = None,
        velocities: npt.ArrayLike | None = None,
        geodetic: npt.ArrayLike | None = None,
        colors: npt.ArrayLike | None = None,
        telemetry: Mapping[str, tuple[npt.ArrayLike, str]] | None = None,
        kind: str | None = None,
        time: float | None = None,
    ) -> None:
        """Set many devices at once: `ids` (n,) names or numbers, `positions` (n, 3),
        `orientations` (n, 4), `velocities` (n, 3), `geodetic` (n, 3), `colors` (n, 3) RGB
        0..255 (telemetry `led_red/green/blue`, what VRSP sends as the LED colour), and
        `telemetry` columns as (values (n,), unit). Vectorised: calling it again with the same
        ids costs no per-device work."""
        names = self._names_of(ids)
        n = len(names)
        columns = {
            "position": _columns(positions, n, 3, "positions"),
            "orientation": _columns(orientations, n, 4, "orientations"),
            "velocity": _columns(velocities, n, 3, "velocities"),
            "geodetic": _columns(geodetic, n, 3, "geodetic"),
        }
        fields: dict[str, tuple[Any, str]] = {}
        for key, (values, unit) in (telemetry or {}).items():
            column = np.array(values, dtype=np.float64).reshape(-1)
            if column.shape != (n,):
                raise ValueError(f"telemetry {key!r} must have {n} values, not {column.size}")
            fields[key] = (column, unit)
        if colors is not None:
            rgb = _columns(colors, n, 3, "colors")
            for i, key in enumerate(("led_red", "led_green", "led_blue")):
                fields[key] = (rgb[:, i], "1")
        self._thread.call_soon(self._set_many, names, kind or self.kind, time, columns, fields)

    def _names_of(self, ids: Sequence[str | int] | npt.ArrayLike) -> tuple[str, ...]:
        array = np.asarray(ids)
        last = self._ids
        if last is not None and array.shape == last.shape and bool(np.all(array == last)):
            return self._names
        self._ids = array.copy()
        self._names = tuple(str(x) for x in array.reshape(-1).tolist())
        return self._names

    def _set_many(
        self,
        names: tuple[str, ...],
        kind: str,
        stamp: float | None,
        columns: dict[str, Any],
        fields: dict[str, tuple[Any, str]],
    ) -> None:
        if names is not self._slot_names:
            self._slots = self.gateway.world.table(self.source).slots(names, kind)
            self._slot_names = names
        now = time.time()
        self.gateway.world.update(
            self.source,
            self._slots,
            receive_time=now,
            source_time=now if stamp is None else stamp,
            telemetry=fields,
            **columns,
        )

    def log(self, name: str, text: str, level: str = "info") -> None:
        """Send text from device `name`: a VRPN text message of that sender (`level` "info",
        "warning" or "error"); the other protocols' sinks log it or leave it."""
        if level not in LEVELS:
            raise ValueError(f"level must be {', '.join(LEVELS)}, not {level!r}")
        self._thread.call_soon(self._log, str(name), text, level)

    def _log(self, name: str, text: str, level: str) -> None:
        self.gateway.world.log(self.source, name, text, time=time.time(), level=level)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every write so far is in the world (the sink sends it next)."""
        self._thread.call(lambda: None, timeout=timeout)

    def status(self) -> list[ServiceStatus]:
        """What the sink is doing: state, messages out, drops."""
        return self._running.status()

    def close(self) -> None:
        """Stop the server (its clients see the connection end) (idempotent)."""
        self._running.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _telemetry(values: TelemetryValues) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    for key, value in values.items():
        number, unit = value if isinstance(value, tuple) else (value, "1")
        out[key] = (np.array([float(number)]), unit)
    return out


def publish(url: str, *, source: str = SOURCE) -> Publisher:
    """Serve (or send) protocol `url` for the devices you set, e.g.
    `robowire.publish("vrpn://127.0.0.1:3883")`, `"vrsp://127.0.0.1:9742"` (a sender),
    `"ugcs://127.0.0.1:5556"` (a VSM), `"spyglass://127.0.0.1:7870"`, `"xrp://127.0.0.1:3540"`;
    port 0 picks a free one (`Publisher.address` says which). Raises the CLI's one-line error
    when the URL is wrong or the port is taken."""
    return Publisher(url, source=source)
