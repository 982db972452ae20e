"""Control from the viewer: commands to the sources that can carry them, with their statuses.

Off unless the gateway was started with `--allow-control`; then the viewer server builds one
`Controller` over the gateway's services and calls only `catalog()` (what each source can be
told, for the browser's buttons and forms) and `run()` (one command, as a stream of statuses
ending in a final one).

A source that can be commanded implements `Controllable` (XRP: drive/enable/disable/stop;
UgCS: every command its VSM registered). This module holds nothing protocol-specific: it finds
the source, the device and the command, checks the parameters against the command's spec and
passes the command on; every problem found before that is a `refused` status with a one-line
reason (naming the parameter for a bad value), and a command that ends without saying how
is `failed`.

    controller = Controller(lambda: gateway.services)
    controller.catalog()   # {"xrp@127.0.0.1:3540": [{"name": "drive", "label": "Drive", ...}]}
    async for status in controller.run("xrp@127.0.0.1:3540", "xrp", "drive",
                                       {"left": 0.5, "right": 0.5}):
        print(status.state, status.message)      # sent ..., ok ...

Parameter types: `number` (int or float, finite, within `minimum`..`maximum` where given),
`string` (one of `choices` where given), `bool`, and `waypoints` (a non-empty list of at most
`MAX_WAYPOINTS` [latitude deg, longitude deg, altitude m] triples).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from robowire.errors import RobowireError

log = logging.getLogger("robowire.control")

SENT = "sent"
IN_PROGRESS = "in_progress"
OK = "ok"
FAILED = "failed"
TIMEOUT = "timeout"
REFUSED = "refused"
FINAL_STATES = frozenset({OK, FAILED, TIMEOUT, REFUSED})
"""A command's last status has one of these states; `sent` and `in_progress` come before."""

PARAM_TYPES = frozenset({"number", "string", "bool", "waypoints"})
MAX_WAYPOINTS = 1000


@dataclass(frozen=True, slots=True)
class CommandStatus:
    """One step of a command, as the viewer's `command_status` message carries it."""

    state: str
    message: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamSpec:
    """One parameter of a command: `type` is number, string, bool or waypoints; `default`
    is what the command uses when the parameter is left out (None: the source's own)."""

    name: str
    type: str
    unit: str = ""
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    required: bool = False

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name}: no type {self.type!r}")

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "unit": self.unit,
            "default": self.default,
        }
        if self.minimum is not None:
            out["min"] = self.minimum
        if self.maximum is not None:
            out["max"] = self.maximum
        if self.choices:
            out["choices"] = list(self.choices)
        if self.required:
            out["required"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """A command a source takes: its `name` on the wire, a `label` for a button, its params."""

    name: str
    label: str
    params: tuple[ParamSpec, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "params": [p.as_json() for p in self.params],
        }


@runtime_checkable
class Controllable(Protocol):
    """A source that takes commands (what `Controller` looks for among the services)."""

    name: str

    def command_specs(self) -> Sequence[CommandSpec]:
        """Every command any of this source's devices takes now (for the catalog)."""
        ...

    def device_commands(self, device: str) -> Sequence[CommandSpec] | None:
        """The commands device `device` (its world id) takes; None: no such device."""
        ...

    def run_command(
        self, device: str, command: CommandSpec, params: Mapping[str, Any]
    ) -> AsyncIterator[CommandStatus]:
        """Carry out `command` (one of `device_commands(device)`) with checked `params`:
        statuses, the last one final."""
        ...


class ParamError(ValueError):
    """A parameter value the command's spec does not allow (the message names it)."""


def _number(spec: ParamSpec, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParamError(f"parameter {spec.name!r} must be a number, not {_short(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf
    if not math.isfinite(number):
        raise ParamError(f"parameter {spec.name!r} must be a finite number")
    if spec.minimum is not None and number < spec.minimum:
        raise ParamError(f"parameter {spec.name!r} must be >= {spec.minimum:g}, not {number:g}")
    if spec.maximum is not None and number > spec.maximum:
        raise ParamError(f"parameter {spec.name!r} must be <= {spec.maximum:g}, not {number:g}")
    return number


def _short(value: Any) -> str:
    """A value for a one-line message (a browser may send anything, of any size)."""
    text = repr(value) if isinstance(value, str | bool | None) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _waypoints(spec: ParamSpec, value: Any) -> list[tuple[float, float, float]]:
    name = spec.name
    if not isinstance(value, list) or not value:
        raise ParamError(f"parameter {name!r} must be a non-empty list of [lat, lon, alt]")
    if len(value) > MAX_WAYPOINTS:
        raise ParamError(f"parameter {name!r}: at most {MAX_WAYPOINTS} waypoints")
    out = []
    for index, point in enumerate(value):
        if (
            not isinstance(point, list | tuple)
            or len(point) != 3
            or not all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                for x in point
            )
        ):
            raise ParamError(f"parameter {name!r}: waypoint {index} must be [lat, lon, alt]")
        lat, lon, alt = (float(x) for x in point)
        if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
            raise ParamError(f"parameter {name!r}: waypoint {index} is not a place on Earth")
        out.append((lat, lon, alt))
    return out


def check_param(spec: ParamSpec, value: Any) -> Any:
    """`value` as `spec` takes it, or ParamError naming the parameter."""
    match spec.type:
        case "number":
            return _number(spec, value)
        case "bool":
            if not isinstance(value, bool):
                raise ParamError(
                    f"parameter {spec.name!r} must be true or false, not {_short(value)}"
                )
            return value
        case "string":
            if not isinstance(value, str):
                raise ParamError(f"parameter {spec.name!r} must be a string, not {_short(value)}")
            if spec.choices and value not in spec.choices:
                choices = ", ".join(spec.choices)
                raise ParamError(
                    f"parameter {spec.name!r} must be one of {choices}, not {_short(value)}"
                )
            return value
        case _:
            return _waypoints(spec, value)


def check_params(command: CommandSpec, params: Any) -> dict[str, Any]:
    """The parameters as the command takes them: each checked, defaults filled in where the
    spec has one; ParamError for an unknown, missing (required) or bad one."""
    if not isinstance(params, Mapping):
        raise ParamError("params must be an object")
    known = {p.name: p for p in command.params}
    unknown = sorted(str(k) for k in params if k not in known)
    if unknown:
        there = ", ".join(known) or "none"
        name = _short(unknown[0])
        raise ParamError(f"{command.name} has no parameter {name} (it has: {there})")
    out: dict[str, Any] = {}
    for spec in command.params:
        value = params.get(spec.name)
        if value is None:
            if spec.required:
                raise ParamError(f"parameter {spec.name!r} is required")
            if spec.default is not None:
                out[spec.name] = spec.default
            continue
        out[spec.name] = check_param(spec, value)
    return out


class Controller:
    """Commands for the controllable sources among `services()` (called at each use, so
    sources added later are found)."""

    def __init__(self, services: Callable[[], Iterable[object]]) -> None:
        self._services = services
        self._last: dict[tuple[str, str], str] = {}  # (source, device) -> last command logged

    def sources(self) -> dict[str, Controllable]:
        """The services that take commands, by name."""
        return {s.name: s for s in self._services() if isinstance(s, Controllable)}

    def catalog(self) -> dict[str, list[dict[str, Any]]]:
        """Source name -> the specs (JSON) of the commands it takes."""
        return {
            name: [spec.as_json() for spec in source.command_specs()]
            for name, source in self.sources().items()
        }

    async def run(
        self, source: str, device: str, command: str, params: dict[str, Any]
    ) -> AsyncIterator[CommandStatus]:
        """Carry out one command: its statuses, the last one final (never an exception for a
        command that cannot be done; cancellation ends it)."""
        sources = self.sources()
        target = sources.get(source)
        if target is None:
            there = ", ".join(sorted(sources)) or "none"
            yield CommandStatus(REFUSED, f"no source {source!r} takes commands (these do: {there})")
            return
        commands = target.device_commands(device)
        if commands is None:
            yield CommandStatus(REFUSED, f"{source} has no device {device!r}")
            return
        spec = next((c for c in commands if c.name == command), None)
        if spec is None:
            there = ", ".join(c.name for c in commands) or "none"
            yield CommandStatus(REFUSED, f"{device} has no command {command!r} (it has: {there})")
            return
        try:
            checked = check_params(spec, params)
        except ParamError as exc:
            yield CommandStatus(REFUSED, f"{command}: {exc}")
            return
        # each command is logged once in a row (a held key sends `drive` ten times a second)
        level = logging.DEBUG if self._last.get((source, device)) == command else logging.INFO
        self._last[(source, device)] = command
        log.log(level, "%s %s: %s %s", source, device, command, checked)
        final = False
        steps = target.run_command(device, spec, checked)
        try:
            async for status in steps:
                yield status
                if status.final:
                    final = True
                    break
        except RobowireError as exc:
            yield CommandStatus(FAILED, f"{command}: {exc}")
            return
        finally:
            close = getattr(steps, "aclose", None)
            if close is not None:
                await close()
        if not final:
            yield CommandStatus(FAILED, f"{command}: ended without a result")
